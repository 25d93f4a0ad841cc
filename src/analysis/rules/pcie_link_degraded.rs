use super::gpu_data::*;
use crate::analysis::rule::{Finding, Input, Layer, Outcome, Rule};
use crate::units::share;

/// The PCIe link trained below its maximum.
pub struct PcieLinkDegraded;

/// A link's generation and width, now and at most, where one is below its maximum.
pub struct Below {
    pub gen: u32,
    pub gen_max: u32,
    pub width: u32,
    pub width_max: u32,
}

/// Whether `l` runs below its maximum generation or width: this rule's test, also the
/// device warning beside each device in the report (`analyse::device_warnings`).
pub fn below_max(l: &gpuspy_format::gpu::PcieLink) -> Option<Below> {
    let (Some(gen), Some(gen_max), Some(width), Some(width_max)) =
        (l.gen_current, l.gen_max, l.width_current, l.width_max)
    else {
        return None;
    };
    (gen < gen_max || width < width_max).then_some(Below {
        gen,
        gen_max,
        width,
        width_max,
    })
}

impl Rule for PcieLinkDegraded {
    fn id(&self) -> &'static str {
        "pcie-link-degraded"
    }
    fn layer(&self) -> Layer {
        Layer::Driver
    }
    fn doc(&self) -> &'static str {
        "The GPU's PCIe link runs below its maximum generation or width, which caps every host-device copy.

Evidence (NVML, read when gpuspy starts): the current and maximum link generation and
width. Impact: the time CUPTI saw host-device copies take, times the share of bandwidth
the narrower link loses. GPUs may lower the link generation while idle to save power, so
a degraded link with no copies is reported for information only.

Fix: reseat the card or move it to a full x16 slot, check the BIOS PCIe settings and
risers, and make sure the link is not held in a power-saving state."
    }
    fn check(&self, input: &Input) -> Outcome {
        let p = input.profile;
        let mut facts = p
            .gpu_devices()
            .filter_map(|(_, d)| d.facts.as_ref().map(|f| (d, f)))
            .peekable();
        if facts.peek().is_none() {
            return Outcome::NoData(NO_FACTS);
        }
        for (d, f) in facts {
            let l = &f.pcie;
            let Some(Below {
                gen,
                gen_max,
                width,
                width_max,
            }) = below_max(l)
            else {
                continue;
            };
            let full = gpuspy_format::gpu::PcieLink {
                gen_current: Some(gen_max),
                width_current: Some(width_max),
                ..l.clone()
            };
            let lost = match (l.peak_bytes_per_s(), full.peak_bytes_per_s()) {
                (Some(now), Some(max)) if max > 0.0 => 1.0 - now / max,
                _ => 0.0,
            };
            let (copy_ns, span) = d.activity.as_ref().map_or((0, 0), |a| {
                let host = a
                    .copies
                    .iter()
                    .filter(|c| c.kind == "HtoD" || c.kind == "DtoH")
                    .map(|c| c.ns)
                    .sum();
                (host, a.working_span_ns())
            });
            let impact = share(copy_ns, span) * lost;
            return Outcome::Found(
                Finding::new(
                    self,
                    impact,
                    format!(
                        "GPU {} link runs at gen {gen} x{width}, below its gen {gen_max} x{width_max}.",
                        d.ordinal
                    ),
                    "Reseat the card or use a full x16 slot; check BIOS PCIe settings and risers.",
                )
                .evidence("device", d.ordinal)
                .evidence("gen", gen)
                .evidence("gen_max", gen_max)
                .evidence("width", width)
                .evidence("width_max", width_max)
                .evidence("host_copy_ns", copy_ns),
            );
        }
        Outcome::Clear
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::rules::gpu_data::fixtures::*;

    #[test]
    fn a_narrow_link_costs_the_copy_time_it_slows() {
        let mut facts = h200();
        facts.pcie.gen_current = Some(4);
        let mut a = activity(1.0);
        a.copies.push(gpuspy_format::gpu::GpuCopy {
            kind: "HtoD".into(),
            memory: "pinned".into(),
            count: 10,
            bytes: 1 << 30,
            ns: 2 * S,
        });
        let f = found(check(&PcieLinkDegraded, gpu(facts, None, Some(a))));
        // 2 s of copies in a 10 s span, at half the bandwidth: 10 % lost.
        assert!((f.impact - 0.1).abs() < 1e-3, "{}", f.impact);
        assert!(matches!(
            check(&PcieLinkDegraded, gpu(h200(), None, Some(activity(1.0)))),
            Outcome::Clear
        ));
    }
}
