//! Text that reaches a terminal: strings from dumps (host names, command lines, kernel,
//! NVTX and call-site names, NVML notes), file names and error messages can hold control
//! characters, which a terminal would obey (`ESC]0;...BEL` sets its title, `ESC[2J` clears
//! it, OSC 52 writes the clipboard) and a newline would break a one-line message. The text
//! outputs (the report, `check` and `diff`, errors and notes on stderr) escape them here,
//! where they are printed; `--json` escapes them as JSON does.

use std::fmt;

/// Displays a string with each control character (C0, newline and tab included, DEL and
/// C1) as an escape, `\x1b`, `\x7f` or `\u{9b}`, and everything else as it is: one line
/// that a terminal only prints.
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    /// Padded to the formatter's width, as a `str` is.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if !self.0.chars().any(char::is_control) {
            return f.pad(self.0);
        }
        let mut escaped = String::with_capacity(self.0.len() + 8);
        write_escaped(&mut escaped, self.0, false)?;
        f.pad(&escaped)
    }
}

/// `items` escaped (`Escaped`) and joined by `sep`.
pub fn join<S: AsRef<str>>(items: &[S], sep: &str) -> String {
    let escaped: Vec<String> = items
        .iter()
        .map(|s| Escaped(s.as_ref()).to_string())
        .collect();
    escaped.join(sep)
}

/// `text` as `Escaped` writes it, except that its newlines stay: for a document of lines.
pub fn lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // Writing to a String cannot fail.
    let _ = write_escaped(&mut out, text, true);
    out
}

fn write_escaped(out: &mut impl fmt::Write, text: &str, keep_newlines: bool) -> fmt::Result {
    let mut plain = 0;
    for (i, c) in text.char_indices() {
        if !c.is_control() || (keep_newlines && c == '\n') {
            continue;
        }
        out.write_str(&text[plain..i])?;
        if c < '\u{80}' {
            write!(out, "\\x{:02x}", u32::from(c))?;
        } else {
            write!(out, "\\u{{{:x}}}", u32::from(c))?;
        }
        plain = i + c.len_utf8();
    }
    out.write_str(&text[plain..])
}

/// Prints `gpuspy: MESSAGE` on stderr as one line, escaped.
pub fn eprint_line(message: impl fmt::Display) {
    eprintln!("gpuspy: {}", Escaped(&message.to_string()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        let hostile = "a\u{1b}]0;title\u{7}b\u{1b}[2J\tc\r\nd\u{7f}e\u{9b}31mf\u{85}g é ☃";
        assert_eq!(
            Escaped(hostile).to_string(),
            "a\\x1b]0;title\\x07b\\x1b[2J\\x09c\\x0d\\x0ad\\x7fe\\u{9b}31mf\\u{85}g é ☃"
        );
        assert_eq!(
            lines(hostile),
            "a\\x1b]0;title\\x07b\\x1b[2J\\x09c\\x0d\nd\\x7fe\\u{9b}31mf\\u{85}g é ☃"
        );
        assert_eq!(Escaped("plain text").to_string(), "plain text");
        assert_eq!(format!("[{:<6}]", Escaped("a\u{1b}")), "[a\\x1b ]");
        assert_eq!(join(&["a\nb", "c"], ", "), "a\\x0ab, c");
        assert_eq!(lines("two\nlines\n"), "two\nlines\n");
    }
}
