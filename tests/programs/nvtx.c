/* NVTX as a program sees it, without the NVTX headers: this file does what nvtx3's loader
 * does (c/include/nvtx3/nvtxDetail/nvtxInit.h, nvtxImpl.h): it reads NVTX_INJECTION64_PATH,
 * dlopens it, and calls its InitializeInjectionNvtx2 once per "copy of nvtx3" with that
 * copy's getExportTable, here two copies (like libtorch and libnccl), each with its CORE
 * and CORE2 tables. Then it calls the slots the tool filled (a null slot is a no-op).
 *
 * Work: cuInit and a context, then STEPS steps, an evaluation, STEPS steps. A step is a
 * "step" range (RangePushA, copy 1) around a "forward" range (DomainRangePushEx with a
 * string registered through DomainRegisterStringA, copy 2), 3 launches, a stream sync and
 * 4 ms of host time; a "data" range (RangeStartA/RangeEnd) runs before each step. The
 * evaluation is one "eval" range (DomainRangePushEx, ASCII message, copy 2) of 30 rounds of
 * one launch and 5 ms. One "wide" range (RangePushW) comes last.
 * Prints "injection PATH" (or "injection none") and "loaded 0|1".
 * usage: nvtx STEPS */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wchar.h>
#include "cuda_min.h"

/* Layouts from nvtxTypes.h and nvToolsExt.h. */
typedef void (*Fn)(void);
enum { CORE = 1, CORE2 = 5, SLOTS = 16 }; /* NVTX_CBID_CORE_SIZE == NVTX_CBID_CORE2_SIZE == 16 */
typedef struct {
    size_t struct_size;
    int (*GetModuleFunctionTable)(int module, Fn ***out_table, unsigned *out_size);
} Callbacks;
typedef struct {
    uint16_t version, size;
    uint32_t category;
    int32_t colorType;
    uint32_t color;
    int32_t payloadType, reserved0;
    uint64_t payload;
    int32_t messageType;
    const void *message;
} Attributes;

/* One copy of nvtx3: its slots and, as nvtxGlobals has, an array of pointers to them. */
typedef struct {
    Fn slots[2][SLOTS + 1];
    Fn *tables[2][SLOTS + 1];
    Callbacks callbacks;
} Copy;
static Copy copies[2];

static int get_table(Copy *c, int module, Fn ***out_table, unsigned *out_size) {
    int m = module == CORE ? 0 : module == CORE2 ? 1 : -1;
    if (m < 0) return 0;
    for (int i = 0; i < SLOTS; i++) c->tables[m][i] = &c->slots[m][i];
    *out_table = c->tables[m];
    *out_size = SLOTS;
    return 1;
}
static int get_table0(int m, Fn ***t, unsigned *s) { return get_table(&copies[0], m, t, s); }
static int get_table1(int m, Fn ***t, unsigned *s) { return get_table(&copies[1], m, t, s); }
static const void *export_table0(uint32_t id) {
    copies[0].callbacks = (Callbacks){sizeof(Callbacks), get_table0};
    return id == 1 ? &copies[0].callbacks : NULL;
}
static const void *export_table1(uint32_t id) {
    copies[1].callbacks = (Callbacks){sizeof(Callbacks), get_table1};
    return id == 1 ? &copies[1].callbacks : NULL;
}

/* The slots used, by copy, module and callback id (NVTX_CBID_CORE_*, NVTX_CBID_CORE2_*). */
#define SLOT(copy, module, id) (copies[copy].slots[module == CORE ? 0 : 1][id])
static void push_a(int copy, const char *name) {
    Fn f = SLOT(copy, CORE, 9);
    if (f) ((int (*)(const char *))f)(name);
}
static void push_w(int copy, const wchar_t *name) {
    Fn f = SLOT(copy, CORE, 10);
    if (f) ((int (*)(const wchar_t *))f)(name);
}
static void pop(int copy) {
    Fn f = SLOT(copy, CORE, 11);
    if (f) ((int (*)(void))f)();
}
static uint64_t start_a(int copy, const char *name) {
    Fn f = SLOT(copy, CORE, 5);
    return f ? ((uint64_t (*)(const char *))f)(name) : 0;
}
static void end(int copy, uint64_t id) {
    Fn f = SLOT(copy, CORE, 7);
    if (f) ((void (*)(uint64_t))f)(id);
}
static void domain_push(int copy, int type, const void *message) {
    Attributes a = {3, sizeof(Attributes), 0, 0, 0, 0, 0, 0, type, message};
    Fn f = SLOT(copy, CORE2, 4);
    if (f) ((int (*)(void *, const Attributes *))f)(NULL, &a);
}
static void domain_pop(int copy) {
    Fn f = SLOT(copy, CORE2, 5);
    if (f) ((int (*)(void *))f)(NULL);
}
static const void *register_string(int copy, const char *s) {
    Fn f = SLOT(copy, CORE2, 10);
    return f ? ((const void *(*)(void *, const char *))f)(NULL, s) : NULL;
}

static void sleep_ms(long ms) {
    struct timespec t = {0, ms * 1000000L};
    nanosleep(&t, NULL);
}

static void launch(int n) {
    for (int k = 0; k < n; k++) cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
}

static void steps(int n, const void *forward) {
    for (int i = 0; i < n; i++) {
        /* The name is freed before the range ends: the tool must have copied it. */
        char *data = strdup("data");
        uint64_t id = start_a(0, data);
        free(data);
        end(0, id);
        push_a(0, "step");
        domain_push(1, 3, forward); /* NVTX_MESSAGE_TYPE_REGISTERED */
        launch(3);
        domain_pop(1);
        cuStreamSynchronize(0);
        sleep_ms(4);
        pop(0);
    }
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 40;
    const char *path = getenv("NVTX_INJECTION64_PATH");
    void *ctx;
    printf("injection %s\n", path && *path ? path : "none");
    int loaded = 0;
    void *lib = path && *path ? dlopen(path, RTLD_LAZY) : NULL;
    int (*init)(const void *(*)(uint32_t)) =
        lib ? (int (*)(const void *(*)(uint32_t)))dlsym(lib, "InitializeInjectionNvtx2") : NULL;
    if (init) loaded = init(export_table0) == 1 && init(export_table1) == 1;
    printf("loaded %d\n", loaded);
    fflush(stdout);
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0)) return 1;
    const void *forward = register_string(1, "forward");
    steps(n, forward);
    domain_push(1, 1, "eval"); /* NVTX_MESSAGE_TYPE_ASCII */
    for (int i = 0; i < 30; i++) {
        launch(1);
        sleep_ms(5);
    }
    domain_pop(1);
    steps(n, forward);
    push_w(0, L"wide");
    pop(0);
    return 0;
}
