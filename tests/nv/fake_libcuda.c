// A fake CUDA driver (libcuda) for testing the NV runtime on a machine without a GPU: the entry points
// tinygrad/runtime/support/cuda_driver.py declares, with host memory for device memory and host shared objects for
// modules. A "cubin" here is a shared object built by tinygrad/runtime/support/cuda_host.py: cuModuleGetFunction finds
// its launcher tg_launch_<name>, and cuLaunchKernel calls that with the kernel parameters, grid and block.
// Knobs (environment): FAKE_CUDA_DEVICES (GPU count, default 2), FAKE_CUDA_DRIVER (cuDriverGetVersion, default 13000),
// FAKE_CUDA_CC (compute capability as major*10+minor, default 90), FAKE_CUDA_LOG (a file each call appends a line to).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
enum { OK = 0, ERR_INVALID_VALUE = 1, ERR_OUT_OF_MEMORY = 2, ERR_NOT_INITIALIZED = 3, ERR_NO_DEVICE = 100,
       ERR_INVALID_DEVICE = 101, ERR_INVALID_IMAGE = 200, ERR_INVALID_CONTEXT = 201, ERR_NOT_FOUND = 500 };

static int initialized = 0;
static void* current_ctx = 0;

static int env_int(const char* name, int dflt) { const char* v = getenv(name); return v ? atoi(v) : dflt; }
static void logf_(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void logf_(const char* fmt, ...) {
  const char* path = getenv("FAKE_CUDA_LOG");
  if (!path) return;
  FILE* f = fopen(path, "a");
  if (!f) return;
  va_list ap; va_start(ap, fmt); vfprintf(f, fmt, ap); va_end(ap);
  fputc('\n', f); fclose(f);
}

CUresult cuInit(unsigned int flags) {
  (void)flags;
  if (env_int("FAKE_CUDA_DEVICES", 2) == 0) return ERR_NO_DEVICE;
  initialized = 1; return OK;
}
CUresult cuDriverGetVersion(int* v) { *v = env_int("FAKE_CUDA_DRIVER", 13000); return OK; }
CUresult cuDeviceGetCount(int* n) { if (!initialized) return ERR_NOT_INITIALIZED; *n = env_int("FAKE_CUDA_DEVICES", 2); return OK; }
CUresult cuDeviceGet(int* d, int ordinal) {
  if (ordinal < 0 || ordinal >= env_int("FAKE_CUDA_DEVICES", 2)) return ERR_INVALID_DEVICE;
  *d = ordinal; return OK;
}
CUresult cuDeviceGetName(char* name, int len, int d) { snprintf(name, (size_t)len, "Fake GPU %d", d); return OK; }
CUresult cuDeviceGetAttribute(int* v, int attr, int d) {
  (void)d;
  int cc = env_int("FAKE_CUDA_CC", 90);
  if (attr == 75) *v = cc / 10; else if (attr == 76) *v = cc % 10; else if (attr == 16) *v = 132; else if (attr == 8) *v = 49152;
  else *v = 0;
  return OK;
}
CUresult cuDeviceTotalMem_v2(size_t* b, int d) { (void)d; *b = (size_t)80 << 30; return OK; }
CUresult cuDevicePrimaryCtxRetain(void** ctx, int d) { *ctx = (void*)(intptr_t)(0x1000 + d); logf_("retain %d", d); return OK; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return OK; }
CUresult cuCtxSetCurrent(void* ctx) { current_ctx = ctx; return OK; }
CUresult cuCtxSynchronize(void) { return current_ctx ? OK : ERR_INVALID_CONTEXT; }

CUresult cuMemAlloc_v2(uint64_t* p, size_t n) {
  if (!current_ctx) return ERR_INVALID_CONTEXT;
  if (n == 0) return ERR_INVALID_VALUE;
  void* m = aligned_alloc(256, (n + 255) / 256 * 256);
  if (!m) return ERR_OUT_OF_MEMORY;
  memset(m, 0xAB, n);  // NOTE: device memory starts as garbage, not zeros
  *p = (uint64_t)(uintptr_t)m; return OK;
}
CUresult cuMemFree_v2(uint64_t p) { free((void*)(uintptr_t)p); return OK; }
CUresult cuMemcpyHtoD_v2(uint64_t d, const void* s, size_t n) { memcpy((void*)(uintptr_t)d, s, n); return OK; }
CUresult cuMemcpyDtoH_v2(void* d, uint64_t s, size_t n) { memcpy(d, (void*)(uintptr_t)s, n); return OK; }
CUresult cuMemcpyDtoD_v2(uint64_t d, uint64_t s, size_t n) { memmove((void*)(uintptr_t)d, (void*)(uintptr_t)s, n); return OK; }

// a module: the shared object written to a temp file and opened
CUresult cuModuleLoadData(void** mod, const void* image) {
  // NOTE: the image size is not passed (a real cubin is an ELF that knows its size): the host build is an ELF too,
  // whose section header table ends the file: e_shoff + e_shnum * e_shentsize
  const unsigned char* b = (const unsigned char*)image;
  if (memcmp(b, "\x7f" "ELF", 4) != 0) return ERR_INVALID_IMAGE;
  uint64_t shoff; uint16_t shentsize, shnum;
  memcpy(&shoff, b + 0x28, 8); memcpy(&shentsize, b + 0x3A, 2); memcpy(&shnum, b + 0x3C, 2);
  size_t size = (size_t)shoff + (size_t)shentsize * shnum;
  char path[] = "/tmp/fake-cuda-module-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return ERR_INVALID_IMAGE;
  if (write(fd, image, size) != (ssize_t)size) { close(fd); unlink(path); return ERR_INVALID_IMAGE; }
  close(fd);
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  unlink(path);
  if (!h) { logf_("dlopen failed: %s", dlerror()); return ERR_INVALID_IMAGE; }
  *mod = h; logf_("load module"); return OK;
}
CUresult cuModuleUnload(void* mod) { dlclose(mod); return OK; }
CUresult cuModuleGetFunction(void** fn, void* mod, const char* name) {
  char sym[512]; snprintf(sym, sizeof sym, "tg_launch_%s", name);
  void* f = dlsym(mod, sym);
  if (!f) return ERR_NOT_FOUND;
  *fn = f; return OK;
}
CUresult cuFuncGetAttribute(int* v, int attr, void* fn) { (void)attr; (void)fn; *v = 32; return OK; }

typedef void (*launcher_t)(void**, const unsigned*, const unsigned*);
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, void* stream, void** params, void** extra) {
  (void)shmem; (void)stream; (void)extra;
  if (!current_ctx) return ERR_INVALID_CONTEXT;
  if (bx * by * bz > 1024 || by > 1024 || bz > 64 || gy > 65535 || gz > 65535) return ERR_INVALID_VALUE;
  unsigned g[3] = {gx, gy, gz}, l[3] = {bx, by, bz};
  logf_("launch ctx=%ld grid=%u,%u,%u block=%u,%u,%u", (long)(intptr_t)current_ctx, gx, gy, gz, bx, by, bz);
  ((launcher_t)f)(params, g, l);
  return OK;
}

typedef struct { double t; } event_t;
static double now(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; }
CUresult cuEventCreate(void** ev, unsigned flags) { (void)flags; *ev = calloc(1, sizeof(event_t)); return OK; }
CUresult cuEventRecord(void* ev, void* stream) { (void)stream; ((event_t*)ev)->t = now(); return OK; }
CUresult cuEventSynchronize(void* ev) { (void)ev; return OK; }
CUresult cuEventDestroy_v2(void* ev) { free(ev); return OK; }
CUresult cuEventElapsedTime_v2(float* ms, void* a, void* b) { *ms = (float)((((event_t*)b)->t - ((event_t*)a)->t) * 1e3); return OK; }

static const char* names[] = {[0] = "CUDA_SUCCESS", [1] = "CUDA_ERROR_INVALID_VALUE", [2] = "CUDA_ERROR_OUT_OF_MEMORY",
  [3] = "CUDA_ERROR_NOT_INITIALIZED", [100] = "CUDA_ERROR_NO_DEVICE", [101] = "CUDA_ERROR_INVALID_DEVICE",
  [200] = "CUDA_ERROR_INVALID_IMAGE", [201] = "CUDA_ERROR_INVALID_CONTEXT", [500] = "CUDA_ERROR_NOT_FOUND"};
CUresult cuGetErrorName(CUresult e, const char** s) { *s = (e >= 0 && e <= 500 && names[e]) ? names[e] : "CUDA_ERROR_UNKNOWN"; return OK; }
CUresult cuGetErrorString(CUresult e, const char** s) { *s = (e >= 0 && e <= 500 && names[e]) ? "fake driver error" : "unknown"; return OK; }
