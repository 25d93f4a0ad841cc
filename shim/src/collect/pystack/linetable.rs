//! Line numbers from a code object's line table, decoded here rather than with
//! `PyCode_Addr2Line`: the table is a plain byte string the walk can read without the GIL,
//! the decoders run against the layout fixtures of versions no interpreter here provides,
//! and nothing depends on a C-API function staying a pure read in every version.

/// The two line-table formats CPython has had since 3.10.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// 3.10 `co_linetable` (PEP 626): pairs of (byte-offset delta, signed line delta), a
    /// line delta of -128 meaning "no line" (Objects/lnotab_notes.txt, 3.10).
    Pairs310,
    /// 3.11+ `co_linetable`, the location table: one entry per run of code units, with the
    /// line delta in one of five forms (Objects/locations.md).
    Locations311,
}

/// The line of the instruction at `offset` bytes into the code, or None where the table
/// gives it none (or the offset lies outside it).
pub fn line_at(format: Format, table: &[u8], first_line: i64, offset: i64) -> Option<i64> {
    if offset < 0 {
        // Not started yet: CPython reports the definition's line.
        return Some(first_line);
    }
    match format {
        Format::Pairs310 => pairs_310(table, first_line, offset),
        Format::Locations311 => locations_311(table, first_line, offset),
    }
}

fn pairs_310(table: &[u8], first_line: i64, offset: i64) -> Option<i64> {
    let (mut line, mut end) = (first_line, 0i64);
    for pair in table.chunks_exact(2) {
        let &[advance, delta] = pair else { break };
        let start = end;
        end += i64::from(advance);
        let delta = delta as i8;
        let this = (delta != -128).then(|| {
            line += i64::from(delta);
            line
        });
        if (start..end).contains(&offset) {
            return this;
        }
    }
    None
}

fn locations_311(table: &[u8], first_line: i64, offset: i64) -> Option<i64> {
    // Entries cover code units of 2 bytes.
    let unit = offset / 2;
    let (mut line, mut start, mut i) = (first_line, 0i64, 0usize);
    while let Some(&head) = table.get(i) {
        i += 1;
        if head & 0x80 == 0 {
            // Not an entry's first byte: a malformed table.
            return None;
        }
        let code = (head >> 3) & 15;
        let length = i64::from(head & 7) + 1;
        let this = match code {
            15 => None,
            14 | 13 => {
                line += signed_varint(table, &mut i)?;
                if code == 14 {
                    // End line delta, column and end column.
                    (0..3).try_for_each(|_| varint(table, &mut i).map(drop))?;
                }
                Some(line)
            }
            10..=12 => {
                line += i64::from(code - 10);
                i += 2;
                Some(line)
            }
            _ => {
                i += 1;
                Some(line)
            }
        };
        if (start..start + length).contains(&unit) {
            return this;
        }
        start += length;
    }
    None
}

/// Six bits a byte, least significant first, bit 6 set on all but the last.
fn varint(table: &[u8], i: &mut usize) -> Option<u64> {
    let (mut value, mut shift) = (0u64, 0u32);
    loop {
        let byte = *table.get(*i)?;
        *i += 1;
        value |= u64::from(byte & 63).checked_shl(shift)?;
        if byte & 64 == 0 {
            return Some(value);
        }
        shift += 6;
    }
}

fn signed_varint(table: &[u8], i: &mut usize) -> Option<i64> {
    let v = varint(table, i)?;
    let magnitude = (v >> 1) as i64;
    Some(if v & 1 == 1 { -magnitude } else { magnitude })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_310_walk_offsets_and_skip_no_line_entries() {
        // Bytes 0..6 at line 10, 6..8 no line, 8..20 at line 12 (a zero-length pair moves
        // the line by 1 first), 20..22 at line 9.
        let table = [6, 0, 2, 128, 0, 1, 12, 1, 2, 253];
        let at = |offset| line_at(Format::Pairs310, &table, 10, offset);
        assert_eq!(at(0), Some(10));
        assert_eq!(at(5), Some(10));
        assert_eq!(at(6), None);
        assert_eq!(at(8), Some(12));
        assert_eq!(at(19), Some(12));
        assert_eq!(at(20), Some(9));
        assert_eq!(at(22), None);
        assert_eq!(at(-1), Some(10));
    }

    #[test]
    fn locations_311_read_every_form() {
        let table = [
            // Short form (code 0), 1 unit, one column byte: line 5.
            0x80,
            0x00,
            // One-line form, +2 (code 12), 2 units, two column bytes: line 7.
            0x80 | 12 << 3 | 1,
            0x00,
            0x04,
            // No-column form (code 13), 1 unit, svarint -3 (7 = 3 << 1 | 1): line 4.
            0x80 | 13 << 3,
            0x07,
            // Long form (code 14), 3 units, svarint +70 (140 = 0b10_001100: two bytes),
            // then end line, column and end column varints: line 74.
            0x80 | 14 << 3 | 2,
            0x40 | 12,
            2,
            0,
            1,
            2,
            // No location (code 15), 1 unit.
            0x80 | 15 << 3,
            // Short form again: still line 74.
            0x80 | 3 << 3,
            0x10,
        ];
        let at = |unit: i64| line_at(Format::Locations311, &table, 5, unit * 2);
        assert_eq!(
            (0..9).map(at).collect::<Vec<_>>(),
            [
                Some(5),
                Some(7),
                Some(7),
                Some(4),
                Some(74),
                Some(74),
                Some(74),
                None,
                Some(74)
            ]
        );
        assert_eq!(at(9), None);
    }

    #[test]
    fn malformed_tables_give_no_line() {
        assert_eq!(line_at(Format::Locations311, &[0x00], 1, 0), None);
        assert_eq!(
            line_at(Format::Locations311, &[0x80 | 13 << 3, 0x40], 1, 0),
            None
        );
    }
}
