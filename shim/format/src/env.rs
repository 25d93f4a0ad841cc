//! The numeric `GPUSPY_*` variables, each a period with a stated range, read the same way
//! by the shim (into its frozen config) and by `gpuspy run`. A value never stops the
//! program: `0` turns what it paces off, a period shorter or longer than the range is taken
//! as the nearer bound, and anything that is not a number of at least 0 (`-1`, `NaN`,
//! `10s`) as unset; each of those comes with a warning for the caller to print once. The
//! longest period, a year, keeps every deadline made from one (`now + period`, in
//! nanoseconds or as an `Instant`) far from overflow.

use std::time::Duration;

/// A year in seconds: the longest period of any variable.
const YEAR_S: f64 = 365.0 * 24.0 * 3600.0;

/// The unit a variable's value is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Seconds,
    Milliseconds,
}

impl Unit {
    fn symbol(self) -> &'static str {
        match self {
            Unit::Seconds => "s",
            Unit::Milliseconds => "ms",
        }
    }

    fn seconds(self, value: f64) -> f64 {
        match self {
            Unit::Seconds => value,
            Unit::Milliseconds => value / 1000.0,
        }
    }
}

/// A variable that sets a period, in `unit`, fractions allowed.
#[derive(Debug)]
pub struct Period {
    pub name: &'static str,
    pub unit: Unit,
    /// The period when the variable is unset or empty.
    pub default: f64,
    /// The shortest period.
    pub min: f64,
    /// The longest period.
    pub max: f64,
}

/// Seconds between periodic dumps.
pub const FLUSH_S: Period = Period {
    name: "GPUSPY_FLUSH_S",
    unit: Unit::Seconds,
    default: 10.0,
    min: 0.01,
    max: YEAR_S,
};

/// Seconds a call stays in flight before the watchdog calls it a hang.
pub const HANG_S: Period = Period {
    name: "GPUSPY_HANG_S",
    unit: Unit::Seconds,
    default: 300.0,
    min: 0.01,
    max: YEAR_S,
};

/// Milliseconds between NVML samples.
pub const NVML_MS: Period = Period {
    name: "GPUSPY_NVML_MS",
    unit: Unit::Milliseconds,
    default: 100.0,
    min: 10.0,
    max: YEAR_S * 1000.0,
};

/// What a variable's value sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// None: off (`0`).
    pub period: Option<Duration>,
    /// Why the value was not taken as written, for one line on stderr.
    pub warning: Option<String>,
}

impl Period {
    /// The period the environment sets.
    pub fn from_env(&self) -> Reading {
        let value = std::env::var_os(self.name).map(|v| v.to_string_lossy().into_owned());
        self.parse(value.as_deref())
    }

    /// The period `value` sets (None or empty: unset).
    pub fn parse(&self, value: Option<&str>) -> Reading {
        let Some(text) = value.filter(|v| !v.is_empty()) else {
            return self.reading(self.default, None);
        };
        let unit = self.unit.symbol();
        let (name, shown) = (self.name, text.escape_debug());
        match text.parse::<f64>() {
            Ok(0.0) => Reading {
                period: None,
                warning: None,
            },
            Ok(v) if v < self.min && v > 0.0 => self.reading(
                self.min,
                Some(format!(
                    "{name}={shown} is shorter than the shortest period, {} {unit}: using that",
                    self.min
                )),
            ),
            Ok(v) if v > self.max => self.reading(
                self.max,
                Some(format!(
                    "{name}={shown} is longer than the longest period, {} {unit} (a year): \
                     using that",
                    self.max
                )),
            ),
            Ok(v) if v >= self.min && v <= self.max => self.reading(v, None),
            // Negative, NaN or not a number.
            _ => self.reading(
                self.default,
                Some(format!(
                    "{name}={shown} is neither 0 (off) nor a period in {unit}: using the \
                     default, {} {unit}",
                    self.default
                )),
            ),
        }
    }

    /// `value` is within `min..=max` (a constant's or a checked one), so the conversion
    /// cannot fail.
    fn reading(&self, value: f64, warning: Option<String>) -> Reading {
        let seconds = self.unit.seconds(value.clamp(self.min, self.max));
        Reading {
            period: Some(Duration::from_secs_f64(seconds)),
            warning,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn period(p: &Period, value: &str) -> Option<Duration> {
        p.parse(Some(value)).period
    }

    #[test]
    fn values_within_the_range_are_taken_as_written() {
        for (value, expected) in [
            ("10", Duration::from_secs(10)),
            ("0.25", Duration::from_millis(250)),
            ("0.01", Duration::from_millis(10)),
            ("1e3", Duration::from_secs(1000)),
            ("31536000", Duration::from_secs(31_536_000)),
        ] {
            assert_eq!(
                FLUSH_S.parse(Some(value)),
                Reading {
                    period: Some(expected),
                    warning: None
                },
                "{value}"
            );
        }
        assert_eq!(period(&NVML_MS, "50"), Some(Duration::from_millis(50)));
        assert_eq!(period(&HANG_S, "1.5"), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn unset_empty_and_zero() {
        for p in [&FLUSH_S, &HANG_S, &NVML_MS] {
            let default = Duration::from_secs_f64(p.unit.seconds(p.default));
            for unset in [None, Some("")] {
                assert_eq!(
                    p.parse(unset),
                    Reading {
                        period: Some(default),
                        warning: None
                    },
                    "{}",
                    p.name
                );
            }
            for off in ["0", "0.0", "-0", "0e5"] {
                assert_eq!(
                    p.parse(Some(off)),
                    Reading {
                        period: None,
                        warning: None
                    },
                    "{} {off}",
                    p.name
                );
            }
        }
        assert_eq!(period(&HANG_S, ""), Some(Duration::from_secs(300)));
        assert_eq!(period(&NVML_MS, ""), Some(Duration::from_millis(100)));
    }

    #[test]
    fn too_long_and_infinite_saturate_at_a_year() {
        let year = Duration::from_secs(31_536_000);
        for value in ["1e20", "1e300", "inf", "+infinity", "1e400"] {
            let r = HANG_S.parse(Some(value));
            assert_eq!(r.period, Some(year), "{value}");
            assert_eq!(
                r.warning.as_deref(),
                Some(
                    format!(
                        "GPUSPY_HANG_S={value} is longer than the longest period, \
                         31536000 s (a year): using that"
                    )
                    .as_str()
                )
            );
        }
        assert_eq!(period(&NVML_MS, "1e20"), Some(year));
    }

    #[test]
    fn too_short_saturates_at_the_shortest() {
        let r = FLUSH_S.parse(Some("1e-300"));
        assert_eq!(r.period, Some(Duration::from_millis(10)));
        assert_eq!(
            r.warning.as_deref(),
            Some("GPUSPY_FLUSH_S=1e-300 is shorter than the shortest period, 0.01 s: using that")
        );
        assert_eq!(period(&NVML_MS, "1"), Some(Duration::from_millis(10)));
    }

    #[test]
    fn negative_nan_and_words_are_unset() {
        for value in ["-1", "-inf", "NaN", "nan", "10s", " 5", "ten", "1e20e"] {
            let r = FLUSH_S.parse(Some(value));
            assert_eq!(r.period, Some(Duration::from_secs(10)), "{value}");
            assert_eq!(
                r.warning.as_deref(),
                Some(
                    format!(
                        "GPUSPY_FLUSH_S={} is neither 0 (off) nor a period in s: using the \
                         default, 10 s",
                        value.escape_debug()
                    )
                    .as_str()
                )
            );
        }
        let r = NVML_MS.parse(Some("-5"));
        assert_eq!(r.period, Some(Duration::from_millis(100)));
        assert!(r
            .warning
            .unwrap()
            .ends_with("period in ms: using the default, 100 ms"));
    }

    #[test]
    fn a_warning_is_one_line_without_control_characters() {
        let warning = FLUSH_S.parse(Some("\x1b]0;x\x07\n1")).warning.unwrap();
        assert_eq!(
            warning,
            "GPUSPY_FLUSH_S=\\u{1b}]0;x\\u{7}\\n1 is neither 0 (off) nor a period in s: \
             using the default, 10 s"
        );
    }
}
