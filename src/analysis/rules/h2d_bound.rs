use super::gpu_data::{measured_link_peak_bytes_per_s, ASSUMED_LINK_BYTES_PER_S};
use crate::analysis::rule::{Finding, Input, Layer, Outcome, Rule};
use crate::units::share;
use gpuspy_format::{Direction, HostKind};

/// Host-to-device copies keep the PCIe link busy.
pub struct H2dBound;

const MIN_LINK_BUSY: f64 = 0.5;

impl Rule for H2dBound {
    fn id(&self) -> &'static str {
        "h2d-bound"
    }
    fn layer(&self) -> Layer {
        Layer::Memory
    }
    fn doc(&self) -> &'static str {
        "Host-to-device copies move so many bytes that the PCIe link is busy for much of the run.

Evidence: bytes copied host-to-device (all host memory kinds) per second of the
steady-state time, against the link's peak one-direction rate from the PCIe generation and
width NVML read (63 GB/s for gen5 x16). The rule fires when the link would be busy half the
time or more. Where NVML did not read the link, the rate is the peak of PCIe gen4 x16
(31.5 GB/s), assumed, and the finding is a heuristic.

Impact: the share of the steady-state time the link is busy with these bytes.

Fix: move fewer bytes. Keep data on the GPU across steps, send compact types (uint8,
bf16) and convert on the GPU, decode and augment on the GPU (DALI, torchvision v2 on CUDA
tensors), and overlap what remains with compute (pinned memory, `non_blocking=True`, a
side stream)."
    }
    fn check(&self, input: &Input) -> Outcome {
        let p = input.profile;
        let steady = p.steady_ns();
        let (calls, bytes) = HostKind::ALL
            .iter()
            .map(|&h| p.copied(Direction::HtoD, h))
            .fold((0, 0), |(n, b), (c, x)| (n + c, b + x));
        let bytes_per_s = bytes as f64 / (steady as f64 / 1e9);
        let measured = measured_link_peak_bytes_per_s(p);
        let link = measured.unwrap_or(ASSUMED_LINK_BYTES_PER_S);
        let busy = (bytes_per_s / link).min(1.0);
        if busy < MIN_LINK_BUSY {
            return Outcome::Clear;
        }
        let busy = share((busy * 1000.0) as u64, 1000);
        let f = Finding::new(
            self,
            busy,
            format!(
                "Host-to-device copies used about {:.0} % of {} {:.0} GB/s link. {calls} copies moved {} at {:.1} GB/s.",
                busy * 100.0,
                if measured.is_some() { "the" } else { "an assumed" },
                link / 1e9,
                crate::units::bytes(bytes),
                bytes_per_s / 1e9
            ),
            "Move fewer bytes: keep data on the GPU, send uint8/bf16 and convert on the GPU, decode on the GPU; overlap the rest (pinned + non_blocking + side stream).",
        )
        .evidence("htod_copies", calls)
        .evidence("htod_bytes", bytes)
        .evidence("htod_gb_per_s", (bytes_per_s / 1e8).round() / 10.0)
        .evidence("link_gb_per_s", (link / 1e8).round() / 10.0);
        Outcome::Found(match measured {
            Some(_) => f,
            None => f.heuristic(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diagnose::synthetic::run;

    #[test]
    fn a_saturated_link_fires() {
        // 25.2 GB in one second, against gen4 x16's 31.5 GB/s.
        let p = run(1.0)
            .copy(Direction::HtoD, HostKind::Pinned, 1000, 25_206_400_000)
            .build();
        let Outcome::Found(f) = H2dBound.check(&Input::new(&p)) else {
            panic!("no finding")
        };
        assert!((f.impact - 0.8).abs() < 0.01);
        assert!(f.heuristic);
        // Sizes in binary units, as in the report's tables; rates in GB/s.
        assert!(
            f.summary
                .ends_with("1000 copies moved 23.5 GiB at 25.2 GB/s."),
            "{}",
            f.summary
        );
    }

    #[test]
    fn the_link_nvml_read_is_the_yardstick() {
        use crate::analysis::rules::gpu_data::fixtures::{gpu, h200};
        // 50.4 GB in one second on a gen5 x16 link (63.0 GB/s): 80 %, measured.
        let p = run(1.0)
            .copy(Direction::HtoD, HostKind::Pinned, 1000, 50_406_400_000)
            .gpu(gpu(h200(), None, None))
            .build();
        let Outcome::Found(f) = H2dBound.check(&Input::new(&p)) else {
            panic!("no finding")
        };
        assert!((f.impact - 0.8).abs() < 0.01, "{}", f.impact);
        assert!(!f.heuristic);
        assert_eq!(f.evidence["link_gb_per_s"], 63.0);
        assert!(
            f.summary
                .starts_with("Host-to-device copies used about 80 % of the 63 GB/s link."),
            "{}",
            f.summary
        );
    }

    #[test]
    fn modest_traffic_does_not() {
        let p = run(1.0)
            .copy(Direction::HtoD, HostKind::Pinned, 1000, 2_000_000_000)
            .copy(Direction::DtoH, HostKind::Pinned, 1000, 20_000_000_000)
            .build();
        assert!(matches!(H2dBound.check(&Input::new(&p)), Outcome::Clear));
    }
}
