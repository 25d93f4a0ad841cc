/* Resolves hooked names through every door and prints what each door handed out, named by
 * dladdr (the wrapper's own symbol name when it is gpuspy's, "-" when nothing or a pointer
 * outside gpuspy). Arguments: "cu:NAME:BASE" for a driver hook (BASE: the name the CUDA
 * runtime asks cuGetProcAddress for) and "nccl:NAME" for an NCCL hook. One line per
 * argument: NAME EXPORTED DLSYM RESOLVER, where for NCCL, which has no resolver, the last
 * column is instead "pNAME" when the library has the `pncclX` alias the wrapper calls. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int (*ProcAddress)(const char *, void **, int, unsigned long long, int *);

/* The symbol name of p if it lies in libgpuspy.so, else "-". */
static const char *wrapper_name(void *p) {
    Dl_info info;
    if (!p || !dladdr(p, &info) || !info.dli_fname || !info.dli_sname) return "-";
    return strstr(info.dli_fname, "libgpuspy") ? info.dli_sname : "-";
}

int main(int argc, char **argv) {
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    void *nccl = dlopen("libnccl.so.2", RTLD_NOW);
    if (!cuda || !nccl) return 1;
    ProcAddress resolver = (ProcAddress)dlsym(cuda, "cuGetProcAddress_v2");
    if (!resolver) return 2;
    for (int i = 1; i < argc; i++) {
        char spec[256];
        snprintf(spec, sizeof spec, "%s", argv[i]);
        char *name = strchr(spec, ':');
        if (!name) return 3;
        *name++ = 0;
        int is_nccl = strcmp(spec, "nccl") == 0;
        char *base = is_nccl ? NULL : strchr(name, ':');
        if (base) *base++ = 0;
        /* Door 1: what a program linked against the library binds to. */
        printf("%s %s", name, wrapper_name(dlsym(RTLD_DEFAULT, name)));
        /* Door 2: a handle-scoped lookup. */
        printf(" %s", wrapper_name(dlsym(is_nccl ? nccl : cuda, name)));
        /* Door 3: every version the runtime may ask for, legacy and per-thread streams. */
        const char *found = "-";
        char alias[260];
        snprintf(alias, sizeof alias, "p%s", name);
        if (is_nccl && dlsym(nccl, alias)) found = alias;
        for (int version = 2000; base && version <= 13000 && found[0] == '-'; version += 10) {
            for (unsigned long long flags = 0; flags <= 2; flags += 2) {
                void *p = NULL;
                int status = 0;
                if (resolver(base, &p, version, flags, &status) == 0 &&
                    strcmp(wrapper_name(p), name) == 0) {
                    found = name;
                    break;
                }
            }
        }
        printf(" %s\n", found);
    }
    return 0;
}
