"""What NVML says about GPU 0's NVLink (pynvml): the fields gpuspy reads, for checking the
dump's `facts.nvlink` against `nvidia-smi nvlink -s`."""
import pynvml as n

n.nvmlInit()
h = n.nvmlDeviceGetHandleByIndex(0)
active = []
for link in range(n.NVML_NVLINK_MAX_LINKS):
    try:
        if n.nvmlDeviceGetNvLinkState(h, link):
            active.append(link)
    except n.NVMLError as e:
        print(f"link {link}: {e}")
        break
print("active links", len(active))
print("version of link 0", n.nvmlDeviceGetNvLinkVersion(h, 0))
for field, scope in [(90, 0), (91, 0), (164, 0), (164, 17)]:
    v = n.nvmlDeviceGetFieldValues(h, [(field, scope)])[0]
    print(f"field {field} scope {scope}: return {v.nvmlReturn} type {v.valueType} value {v.value.ullVal if v.nvmlReturn == 0 else '-'}")
print("power limit enforced", n.nvmlDeviceGetEnforcedPowerLimit(h), "default", n.nvmlDeviceGetPowerManagementDefaultLimit(h))
