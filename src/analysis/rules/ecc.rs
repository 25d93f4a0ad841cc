use super::gpu_data::*;
use crate::analysis::rule::{Finding, Input, Layer, Outcome, Rule, Severity};

/// ECC disabled.
pub struct EccOff;

impl Rule for EccOff {
    fn id(&self) -> &'static str {
        "ecc-off"
    }
    fn layer(&self) -> Layer {
        Layer::Driver
    }
    fn doc(&self) -> &'static str {
        "ECC is disabled on a GPU that supports it: silent memory errors can corrupt results.

Evidence (NVML): the current ECC mode. A correctness risk, not a speed problem, so the
finding is informational.

Fix: `nvidia-smi -e 1` and a reboot of the GPU, unless the operator chose otherwise."
    }
    fn check(&self, input: &Input) -> Outcome {
        let p = input.profile;
        let mut modes = p
            .gpu_devices()
            .filter_map(|(_, d)| d.facts.as_ref()?.ecc_enabled.map(|on| (d.ordinal, on)))
            .peekable();
        if modes.peek().is_none() {
            return Outcome::NoData(NO_FACTS);
        }
        match modes.find(|&(_, on)| !on) {
            Some((ordinal, _)) => Outcome::Found(
                Finding::new(
                    self,
                    0.0,
                    format!("ECC is off on GPU {ordinal}."),
                    "nvidia-smi -e 1, then reset the GPU (if the operator agrees).",
                )
                .evidence("device", ordinal),
            ),
            None => Outcome::Clear,
        }
    }
}

/// ECC errors counted during the run.
pub struct EccErrors;

impl Rule for EccErrors {
    fn id(&self) -> &'static str {
        "ecc-errors"
    }
    fn layer(&self) -> Layer {
        Layer::Driver
    }
    fn doc(&self) -> &'static str {
        "The GPU counted ECC errors during the run: a failing memory part, retired pages or a coming failure.

Evidence (NVML samples): volatile corrected and uncorrected error counts at the first and
the last sample. Uncorrected errors make this a warning whatever the time lost.

Fix: report to the operator; check retired pages and row remapping (`nvidia-smi -q -d ROW_REMAPPER`)."
    }
    fn check(&self, input: &Input) -> Outcome {
        let p = input.profile;
        let mut any = false;
        for (d, t) in telemetries(p) {
            if t.ecc_corrected.is_some() || t.ecc_uncorrected.is_some() {
                any = true;
            }
            let (corrected, uncorrected) = t.new_ecc_errors();
            if corrected + uncorrected > 0 {
                let mut f = Finding::new(
                    self,
                    0.0,
                    format!(
                        "GPU {} counted {corrected} corrected and {uncorrected} uncorrected ECC errors during the run.",
                        d.ordinal
                    ),
                    "Report to the operator; check nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT.",
                )
                .evidence("device", d.ordinal)
                .evidence("corrected", corrected)
                .evidence("uncorrected", uncorrected);
                if uncorrected > 0 {
                    f.severity = Severity::Warning;
                }
                return Outcome::Found(f);
            }
        }
        if any {
            Outcome::Clear
        } else {
            Outcome::NoData(NO_TELEMETRY)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::rules::gpu_data::fixtures::*;

    use gpuspy_format::gpu::Telemetry;

    #[test]
    fn ecc_mode_and_errors() {
        let mut off = h200();
        off.ecc_enabled = Some(false);
        assert_eq!(
            found(check(&EccOff, gpu(off, None, None))).severity,
            Severity::Info
        );
        assert!(matches!(
            check(&EccOff, gpu(h200(), None, None)),
            Outcome::Clear
        ));
        let t = |first: u64, last: u64| Telemetry {
            samples: 2,
            ecc_corrected: Some([3, 3]),
            ecc_uncorrected: Some([first, last]),
            ..Telemetry::default()
        };
        let f = found(check(&EccErrors, gpu(h200(), Some(t(0, 2)), None)));
        assert_eq!(
            (f.severity, f.evidence["uncorrected"].as_u64()),
            (Severity::Warning, Some(2))
        );
        assert!(matches!(
            check(&EccErrors, gpu(h200(), Some(t(1, 1)), None)),
            Outcome::Clear
        ));
    }
}
