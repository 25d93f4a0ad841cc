//! Judgements on kernels that the shim leaves to the CLI (schema 2): names demangled for
//! display, grids judged small against the device's SM count, matmul kernels told by name.
//! Schema 1 dumps carry the shim's own small-grid counts and demangled names; both read
//! the same here.

use gpuspy_format::cap::cut;
use gpuspy_format::gpu::{Activity, Gpu};
use gpuspy_format::hist::bucket_bounds;

/// Itanium names demangled; anything else (C, CUDA C `extern "C"`, a name already
/// demangled) kept as is. A demangled name can be far longer than the mangled one: it is
/// cut as every string read from a dump is (`gpuspy_format::cap`).
pub fn demangle(name: &str) -> String {
    cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|s| s.demangle(&cpp_demangle::DemangleOptions::default()).ok())
        .map_or_else(|| name.to_string(), |d| cut(&d).into_owned())
}

/// Demangles the top kernels' names in place, once, as a dump is read: reports, rules
/// and `diff` (which matches kernels by name across dumps of either schema) see one form.
pub fn demangle_names(gpu: &mut Gpu) {
    for a in gpu.devices.iter_mut().filter_map(|d| d.activity.as_mut()) {
        for k in &mut a.top_kernels {
            k.name = demangle(&k.name);
        }
    }
}

/// Kernels whose grid had fewer blocks than `sms`, and their time: (kernels, ns).
/// A bucket of the grid histogram counts only if it lies wholly below `sms`: the bucket
/// that holds the SM count (on the H200, 128 to 135 blocks) is grids within 1/16 of a full
/// GPU, which leave at most 6 % of it idle.
pub fn small_grid(a: &Activity, sms: u32) -> (u64, u64) {
    if let (Some(kernels), Some(ns)) = (a.small_grid_kernels, a.small_grid_ns) {
        return (kernels, ns);
    }
    a.grid_blocks
        .iter()
        .filter(|g| bucket_bounds(g.bucket as usize).1 <= u64::from(sms))
        .fold((0, 0), |(k, ns), g| (k + g.kernels, ns + g.ns))
}

/// Name parts of matrix-multiply kernels: cuBLAS and cuBLASLt (`gemm`, Hopper's `nvjet`),
/// CUTLASS, tensor-core instruction names (`mma`, `wgmma`, `hmma`, `xmma`), Triton and
/// Inductor matmuls (`matmul`, `_mm_`, `bmm`) and flash attention (`flash`).
const MATMUL_NAME_PARTS: [&str; 8] = [
    "gemm", "nvjet", "cutlass", "mma", "matmul", "_mm_", "bmm", "flash",
];

/// Whether a kernel's name says it multiplies matrices (case-insensitive).
pub fn is_matmul(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    MATMUL_NAME_PARTS.iter().any(|part| name.contains(part))
}

/// The matmul kernels' share of kernel time, from the top kernels (kernels past them
/// count as not matmul); None without kernel time.
pub fn matmul_share(a: &Activity) -> Option<f64> {
    let matmul: u64 = a
        .top_kernels
        .iter()
        .filter(|k| is_matmul(&k.name))
        .map(|k| k.total_ns)
        .sum();
    (a.kernel_ns > 0).then(|| matmul as f64 / a.kernel_ns as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuspy_format::gpu::{GridBlocks, KernelStat};
    use gpuspy_format::hist::bucket_index;

    fn grids(blocks: &[(u64, u64)]) -> Activity {
        Activity {
            grid_blocks: blocks
                .iter()
                .map(|&(b, ns)| GridBlocks {
                    bucket: bucket_index(b) as u32,
                    kernels: 1,
                    ns,
                })
                .collect(),
            ..Activity::default()
        }
    }

    #[test]
    fn small_grids_are_judged_against_the_sm_count() {
        // 4 and 120 blocks are small on 132 SMs; 130 shares the bucket [128, 136) with
        // 132 and is not; 1024 is not.
        let a = grids(&[(4, 10), (120, 20), (130, 40), (1024, 80)]);
        assert_eq!(small_grid(&a, 132), (2, 30));
        assert_eq!(small_grid(&a, 8), (1, 10));
        assert_eq!(small_grid(&a, 2048), (4, 150));
    }

    #[test]
    fn a_schema_1_dump_keeps_the_shims_judgement() {
        let a = Activity {
            small_grid_kernels: Some(7),
            small_grid_ns: Some(700),
            ..grids(&[(4, 10)])
        };
        assert_eq!(small_grid(&a, 132), (7, 700));
    }

    #[test]
    fn names_are_demangled_once_and_plain_names_kept() {
        for (name, shown) in [
            ("_Z6vecAddPfS_S_i", "vecAdd(float*, float*, float*, int)"),
            (
                "vecAdd(float*, float*, float*, int)",
                "vecAdd(float*, float*, float*, int)",
            ),
            (
                "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopB_TNT",
                "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopB_TNT",
            ),
        ] {
            assert_eq!(demangle(name), shown);
        }
    }

    #[test]
    fn a_name_that_demangles_past_the_string_limit_is_cut() {
        use gpuspy_format::cap::{CUT_MARKER, MAX_STRING_BYTES};
        // 2,000 parameters `int*`, each after the first a 2-byte back reference.
        let mangled = format!("_Z1fPi{}", "S_".repeat(1999));
        assert!(mangled.len() < MAX_STRING_BYTES);
        let full = format!("f({})", vec!["int*"; 2000].join(", "));
        assert_eq!(
            demangle(&mangled),
            format!("{}{CUT_MARKER}", &full[..MAX_STRING_BYTES])
        );
    }

    #[test]
    fn matmul_kernels_are_told_by_name() {
        for name in [
            "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopB_TNT",
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1",
            "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(...)",
            "ampere_sgemm_128x64_nn",
            "triton_tem_fused_mm_0",
            "matmul_kernel",
            "void flash::flash_fwd_kernel<...>",
        ] {
            assert!(is_matmul(name), "{name}");
        }
        for name in [
            "void at::native::vectorized_elementwise_kernel<4, ...>",
            "triton_poi_fused_add_0",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            "scale",
        ] {
            assert!(!is_matmul(name), "{name}");
        }
        let a = Activity {
            kernel_ns: 100,
            top_kernels: vec![
                KernelStat {
                    name: "nvjet_sm90_tst".into(),
                    total_ns: 60,
                    ..KernelStat::default()
                },
                KernelStat {
                    name: "elementwise".into(),
                    total_ns: 30,
                    ..KernelStat::default()
                },
            ],
            ..Activity::default()
        };
        assert_eq!(matmul_share(&a), Some(0.6));
    }
}
