/* Like torchrun's agent: initialises the driver and counts devices, creates no context. */
#include "cuda_min.h"

int main(void) {
    int devices = 0;
    if (cuInit(0)) return 1;
    return cuDeviceGetCount(&devices) ? 2 : 0;
}
