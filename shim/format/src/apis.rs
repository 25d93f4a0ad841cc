//! The API families gpuspy records: the base names (`base_name`) of the hooks in
//! shim/src/hot/hooks.rs, sorted. Budgets and other user input naming an API are checked
//! against it. The shim's test `hooks::tests::the_format_crate_lists_every_hooked_family`
//! keeps it equal to the hook list: adding a hook with a new family fails that test until
//! the family is added here.

/// Every API family a dump can hold, sorted.
pub const HOOKED_APIS: &[&str] = &[
    "cuCtxCreate",
    "cuCtxDestroy",
    "cuCtxSynchronize",
    "cuDevicePrimaryCtxRelease",
    "cuDevicePrimaryCtxRetain",
    "cuEventQuery",
    "cuEventRecord",
    "cuEventRecordWithFlags",
    "cuEventSynchronize",
    "cuGetProcAddress",
    "cuGraphInstantiate",
    "cuGraphInstantiateWithFlags",
    "cuGraphInstantiateWithParams",
    "cuGraphLaunch",
    "cuGraphUpload",
    "cuInit",
    "cuLaunch",
    "cuLaunchCooperativeKernel",
    "cuLaunchCooperativeKernelMultiDevice",
    "cuLaunchGrid",
    "cuLaunchGridAsync",
    "cuLaunchHostFunc",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cuLibraryLoadData",
    "cuLibraryLoadFromFile",
    "cuLibraryUnload",
    "cuLinkAddData",
    "cuLinkAddFile",
    "cuLinkComplete",
    "cuLinkCreate",
    "cuLinkDestroy",
    "cuMemAddressFree",
    "cuMemAddressReserve",
    "cuMemAdvise",
    "cuMemAlloc",
    "cuMemAllocAsync",
    "cuMemAllocFromPoolAsync",
    "cuMemAllocHost",
    "cuMemAllocManaged",
    "cuMemAllocPitch",
    "cuMemCreate",
    "cuMemFree",
    "cuMemFreeAsync",
    "cuMemFreeHost",
    "cuMemHostAlloc",
    "cuMemHostRegister",
    "cuMemHostUnregister",
    "cuMemMap",
    "cuMemPoolTrimTo",
    "cuMemPrefetchAsync",
    "cuMemPrefetchBatchAsync",
    "cuMemRelease",
    "cuMemSetAccess",
    "cuMemUnmap",
    "cuMemcpy",
    "cuMemcpy2D",
    "cuMemcpy2DAsync",
    "cuMemcpy2DUnaligned",
    "cuMemcpy3D",
    "cuMemcpy3DAsync",
    "cuMemcpy3DBatchAsync",
    "cuMemcpy3DPeer",
    "cuMemcpy3DPeerAsync",
    "cuMemcpyAsync",
    "cuMemcpyAtoA",
    "cuMemcpyAtoD",
    "cuMemcpyAtoH",
    "cuMemcpyAtoHAsync",
    "cuMemcpyBatchAsync",
    "cuMemcpyDtoA",
    "cuMemcpyDtoD",
    "cuMemcpyDtoDAsync",
    "cuMemcpyDtoH",
    "cuMemcpyDtoHAsync",
    "cuMemcpyHtoA",
    "cuMemcpyHtoAAsync",
    "cuMemcpyHtoD",
    "cuMemcpyHtoDAsync",
    "cuMemcpyPeer",
    "cuMemcpyPeerAsync",
    "cuMemcpyWithAttributesAsync",
    "cuMemsetD16",
    "cuMemsetD16Async",
    "cuMemsetD2D16",
    "cuMemsetD2D16Async",
    "cuMemsetD2D32",
    "cuMemsetD2D32Async",
    "cuMemsetD2D8",
    "cuMemsetD2D8Async",
    "cuMemsetD32",
    "cuMemsetD32Async",
    "cuMemsetD8",
    "cuMemsetD8Async",
    "cuModuleGetFunction",
    "cuModuleLoad",
    "cuModuleLoadData",
    "cuModuleLoadDataEx",
    "cuModuleLoadFatBinary",
    "cuModuleUnload",
    "cuStreamBeginCapture",
    "cuStreamBeginCaptureToGraph",
    "cuStreamEndCapture",
    "cuStreamQuery",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "ncclAllGather",
    "ncclAllReduce",
    "ncclBroadcast",
    "ncclCommAbort",
    "ncclCommDestroy",
    "ncclCommInitRank",
    "ncclCommInitRankConfig",
    "ncclCommSplit",
    "ncclGroupEnd",
    "ncclGroupStart",
    "ncclRecv",
    "ncclReduce",
    "ncclReduceScatter",
    "ncclSend",
];

/// Whether `name` is an API family gpuspy records (a base name, not a variant).
pub fn is_hooked_api(name: &str) -> bool {
    HOOKED_APIS.binary_search(&name).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_unique_base_names() {
        assert!(
            HOOKED_APIS.windows(2).all(|w| w[0] < w[1]),
            "sorted, no duplicates"
        );
        for name in HOOKED_APIS {
            assert_eq!(
                crate::base_name(name),
                *name,
                "{name} is a variant, not a family"
            );
        }
        assert!(is_hooked_api("cuLaunchKernel") && !is_hooked_api("cuLaunchKernel_ptsz"));
    }
}
