//! The units every output of gpuspy's shares: durations, bytes and shares, as the text
//! report, the rules' summaries, `check` and `diff` print them, and shares rounded as the
//! report and the rules' evidence hold them.

/// `1.23 ms`-style durations with three significant figures.
pub fn duration(ns: u64) -> String {
    let (value, unit) = match ns {
        0..=999 => return format!("{ns} ns"),
        1_000..=999_999 => (ns as f64 / 1e3, "us"),
        1_000_000..=999_999_999 => (ns as f64 / 1e6, "ms"),
        _ => (ns as f64 / 1e9, "s"),
    };
    let digits = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.digits$} {unit}")
}

/// A share rounded to 0.1 %.
pub fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        (part as f64 / whole as f64 * 1000.0).round() / 1000.0
    }
}

pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A share as `12.3 %` (a space before the sign, as everywhere in gpuspy's output), or `-`
/// where its whole was 0. The text around it names the whole: "of wall", a column headed
/// "of ...", or a table's title (`style` below checks that).
pub fn percent(share: Option<f64>) -> String {
    share.map_or_else(
        || "-".into(),
        |s| format!("{:.1} %", (s * 1000.0).round() / 10.0),
    )
}

/// A share as a whole percent, `11 %`. Halves round away from zero, as `percent` does and
/// as the HTML page's `toFixed` does (`format!("{:.0}")` would round 10.5 to 10): an
/// impact of 0.105 reads 11 % in every view.
pub fn whole_percent(share: f64) -> String {
    format!("{:.0} %", (share * 100.0).round())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_round_away_from_zero_in_every_precision() {
        assert_eq!(whole_percent(0.105), "11 %");
        assert_eq!(whole_percent(0.104), "10 %");
        assert_eq!(percent(Some(0.0125)), "1.3 %");
        assert_eq!(percent(Some(0.573)), "57.3 %");
        assert_eq!(percent(None), "-");
    }
}
