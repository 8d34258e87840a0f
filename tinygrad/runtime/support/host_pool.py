"""A thread pool in C for THREAD launches on the host: workers that spin on a job counter for a while after each job, so
that a launch does not wait for the OS to wake a sleeping thread.

Waking a thread blocked in the kernel costs ~90 us on the 2-core VM this project runs on (docs/perf.md), longer than
many kernels take: with Python's ThreadPoolExecutor a 2816x1024 Q8_0 matrix-vector product was no faster on two
threads than on one. Here a launch publishes (function, arguments, core count) and bumps a generation counter; workers
spinning on it start within a microsecond, take core ids from a shared counter, and the caller runs core ids too. A
worker that sees no job for `SPIN_US` sleeps on a condition variable and is woken by the next launch.

The kernel ABI is the host's (`void name(T* data0, ..., int var0, ..., int core_id)`): every argument is of the
integer class, so on x86-64 System V and AArch64 a call through a pointer typed with that many 64-bit integer
parameters passes them exactly (an int in the low half of its register or stack slot). The C source is generated with
one call site per argument count up to MAX_ARGS; a launch with more arguments is refused (`launch` returns False) and
the caller uses its own pool. After a fork the child starts its own workers (threads do not survive a fork).
"""
from __future__ import annotations
import ctypes, platform
import functools
from typing import Sequence

MAX_ARGS = 128
# NOTE: a worker spins SPIN_US after a job (yielding its core after YIELD_US, so that on a loaded machine it gives way
# to runnable threads), then sleeps: a JIT-captured step's launches come tens of microseconds apart
SPIN_US, YIELD_US = 500, 20

def _source(max_args: int, spin_us: int, yield_us: int) -> str:
  calls = []
  for n in range(1, max_args + 1):
    params = ", ".join(["u64"] * n)
    args = ", ".join(f"a[{i}]" for i in range(n - 1))
    calls.append(f"    case {n}: ((void (*)({params}))fn)({args}{', ' if args else ''}(u64)core); break;")
  body = "\n".join(calls)
  return f"""#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
typedef uint64_t u64;
#define MAX_ARGS {max_args}
#define SPIN_NS ((long long){spin_us} * 1000)
#define YIELD_NS ((long long){yield_us} * 1000)
#if defined(__x86_64__) || defined(__i386__)
#define RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define RELAX() __asm__ __volatile__("yield")
#else
#define RELAX() ((void)0)
#endif

/* NOTE: nargs counts the kernel's arguments without core_id, which is passed last */
static void call(void *fn, int nargs, const u64 *a, int core) {{
  switch (nargs + 1) {{
{body}
    default: abort();
  }}
}}

static struct {{
  void *fn; int nargs; int ncores; u64 args[MAX_ARGS];
  atomic_int next, acks;
  atomic_ullong gen;
  atomic_int sleepers, stop;
}} job;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER, launch_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int nworkers;
static pid_t owner;
static unsigned long long start_gen;  /* the generation before the workers' first job */

static long long now_ns(void) {{
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}}

static void run_cores(void) {{
  int c;
  while ((c = atomic_fetch_add(&job.next, 1)) < job.ncores) call(job.fn, job.nargs, job.args, c);
}}

static void *worker(void *arg) {{
  (void)arg;
  /* NOTE: not the counter's value when this thread starts: a launch may have bumped it already */
  unsigned long long seen = start_gen;
  for (;;) {{
    long long start = now_ns();
    int spins = 0;
    while (atomic_load(&job.gen) == seen) {{
      RELAX();
      if (++spins % 256 != 0) continue;
      long long waited = now_ns() - start;
      if (waited > YIELD_NS) sched_yield();
      if (waited > SPIN_NS) {{
        pthread_mutex_lock(&mu);
        atomic_fetch_add(&job.sleepers, 1);
        while (atomic_load(&job.gen) == seen) pthread_cond_wait(&cv, &mu);
        atomic_fetch_sub(&job.sleepers, 1);
        pthread_mutex_unlock(&mu);
      }}
    }}
    seen = atomic_load(&job.gen);
    if (atomic_load(&job.stop)) return NULL;
    run_cores();
    /* NOTE: every worker acknowledges every job, so none still reads it when the caller returns and writes the next */
    atomic_fetch_add(&job.acks, 1);
  }}
}}

/* the workers (threads - 1 of them; the caller is the last): 0 on success */
int tg_pool_start(int threads) {{
  owner = getpid();
  nworkers = 0;
  pthread_mutex_init(&mu, NULL);
  pthread_mutex_init(&launch_mu, NULL);
  pthread_cond_init(&cv, NULL);
  atomic_store(&job.sleepers, 0);
  atomic_store(&job.stop, 0);
  start_gen = atomic_load(&job.gen);
  for (int i = 0; i < threads - 1; i++) {{
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int err = pthread_create(&t, &attr, worker, NULL);
    pthread_attr_destroy(&attr);
    if (err) return err;
    nworkers++;
  }}
  return 0;
}}

int tg_pool_workers(void) {{ return getpid() == owner ? nworkers : 0; }}

/* run fn(args..., core) for core = 0..ncores-1 on the workers and the calling thread; returns when all are done.
   -1: too many arguments (nothing ran) */
int tg_pool_launch(void *fn, int nargs, const u64 *args, int ncores) {{
  if (nargs + 1 > MAX_ARGS) return -1;
  if (getpid() != owner) {{ int t = nworkers + 1; if (tg_pool_start(t)) return -2; }}
  if (nworkers == 0 || ncores <= 1) {{
    for (int c = 0; c < ncores; c++) call(fn, nargs, args, c);
    return 0;
  }}
  /* NOTE: one job at a time: launches from two threads of the caller's process take turns */
  pthread_mutex_lock(&launch_mu);
  job.fn = fn; job.nargs = nargs; job.ncores = ncores;
  memcpy(job.args, args, sizeof(u64) * (size_t)nargs);
  atomic_store(&job.next, 0);
  atomic_store(&job.acks, 0);
  atomic_fetch_add(&job.gen, 1);
  if (atomic_load(&job.sleepers) > 0) {{
    pthread_mutex_lock(&mu);
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
  }}
  run_cores();
  for (int spins = 1; atomic_load(&job.acks) < nworkers; spins++) {{
    RELAX();
    if (spins % 4096 == 0) sched_yield();
  }}
  pthread_mutex_unlock(&launch_mu);
  return 0;
}}
"""

class HostPool:
  """The C pool with `threads` threads in all (the caller counts as one). `launch(fn_addr, args, cores)` runs the
  kernel at `fn_addr` once per core id; False when it has more arguments than the pool's call sites."""
  def __init__(self, threads: int):
    from tinygrad.runtime.support.compiler_cpu import CCompiler
    from tinygrad.runtime.targets import load_shared
    # NOTE: compiled once per machine (the compile cache keys it by the source) and loaded like a kernel
    self.lib = load_shared(CCompiler(flags=("-O2", "-fPIC", "-shared", "-pthread", "-std=gnu11")).compile_cached(
      _source(MAX_ARGS, SPIN_US, YIELD_US), "host_pool"), "host_pool")
    self.lib.tg_pool_start.argtypes = [ctypes.c_int]
    self.lib.tg_pool_launch.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    if (err := self.lib.tg_pool_start(threads)) != 0:
      raise RuntimeError(f"CPU: could not start the host thread pool's {threads - 1} workers (pthread_create: {err})")
    self.threads = threads
  def launch(self, fn_addr: int, ptrs: Sequence[int], vals: Sequence[int], cores: int) -> bool:
    n = len(ptrs) + len(vals)
    if n + 1 > MAX_ARGS: return False
    args = (ctypes.c_uint64 * max(1, n))(*ptrs, *(v & 0xFFFFFFFF for v in vals))
    if (err := self.lib.tg_pool_launch(fn_addr, n, args, cores)) != 0:
      raise RuntimeError(f"CPU: the host thread pool refused a launch ({err}: "
                         f"{'restarting its workers after a fork failed' if err == -2 else 'too many arguments'})")
    return True

@functools.cache
def host_pool(threads: int) -> HostPool | None:
  """The process's pool of `threads` threads, shared by every CPU device of that thread count (devices launch one at a
  time; pools of their own would spin against each other); None where the platform's ABI is not the one it calls."""
  return HostPool(threads) if supported() and threads > 1 else None

def supported() -> bool:
  """Where the all-integer-arguments call through a 64-bit-parameter pointer is the platform's ABI."""
  return platform.machine() in ("x86_64", "AMD64", "aarch64", "arm64")

__all__ = ["HostPool", "host_pool", "supported", "MAX_ARGS", "SPIN_US", "YIELD_US"]
