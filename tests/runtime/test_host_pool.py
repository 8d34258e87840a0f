"""The C thread pool for THREAD launches (tinygrad/runtime/support/host_pool.py): every core id runs once, arguments past
the registers arrive, workers that went to sleep wake for the next launch, launches from two threads take turns, a
forked child gets workers of its own, and a kernel with more arguments than the pool's call sites is handed back."""
import ctypes, os, threading, time
import numpy as np
import pytest
from tinygrad.runtime.support import host_pool as hp

pytestmark = pytest.mark.skipif(not hp.supported(), reason="the pool's call convention is x86-64 / AArch64's")

SRC = """
#include <stdint.h>
/* out[core] = core + 1 + v, and a counter of calls per core id */
void ids(int32_t* out, int32_t* calls, int v, int core) { out[core] = core + 1 + v; __atomic_fetch_add(&calls[core], 1, __ATOMIC_RELAXED); }
/* ten pointers and three ints before core_id: seven of the fourteen arguments are on the stack */
void wide(int64_t* o, int64_t* a1, int64_t* a2, int64_t* a3, int64_t* a4, int64_t* a5, int64_t* a6, int64_t* a7,
          int64_t* a8, int64_t* a9, int x, int y, int z, int core) {
  o[core] = a1[0] + a2[0] + a3[0] + a4[0] + a5[0] + a6[0] + a7[0] + a8[0] + a9[0] + (int64_t)x * 1000 + y * 100 + z * 10 + core;
}
"""

@pytest.fixture(scope="module")
def lib():
  from tinygrad.runtime.support.compiler_cpu import CCompiler
  from tinygrad.runtime.targets import load_shared
  return load_shared(CCompiler().compile(SRC), "host_pool_test")

def addr(lib, name): return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value

@pytest.mark.parametrize("threads,cores", [(2, 2), (2, 7), (3, 2), (4, 16), (2, 1)])
def test_every_core_id_runs_once(lib, threads, cores):
  pool = hp.HostPool(threads)
  for v in (0, -5, 2**31 - 1 - cores):
    out, calls = np.zeros(cores, np.int32), np.zeros(cores, np.int32)
    assert pool.launch(addr(lib, "ids"), [out.ctypes.data, calls.ctypes.data], [v], cores)
    np.testing.assert_array_equal(out, np.arange(cores) + 1 + v)
    np.testing.assert_array_equal(calls, 1)

def test_arguments_on_the_stack_and_negative_ints(lib):
  pool = hp.HostPool(2)
  ins = [np.array([10 ** i], np.int64) for i in range(9)]
  o = np.zeros(4, np.int64)
  assert pool.launch(addr(lib, "wide"), [o.ctypes.data] + [a.ctypes.data for a in ins], [7, -3, 2], 4)
  np.testing.assert_array_equal(o, sum(10 ** i for i in range(9)) + 7000 - 300 + 20 + np.arange(4))

def test_sleeping_workers_wake_for_the_next_launch(lib):
  pool = hp.HostPool(2)
  for _ in range(3):
    time.sleep(hp.SPIN_US * 3e-6)  # past the spin: the worker sleeps on its condition variable
    out, calls = np.zeros(8, np.int32), np.zeros(8, np.int32)
    assert pool.launch(addr(lib, "ids"), [out.ctypes.data, calls.ctypes.data], [0], 8)
    np.testing.assert_array_equal(calls, 1)

def test_launches_from_two_threads_take_turns(lib):
  pool, errors = hp.HostPool(2), []
  def run(k):
    for i in range(300):
      out, calls = np.zeros(5, np.int32), np.zeros(5, np.int32)
      pool.launch(addr(lib, "ids"), [out.ctypes.data, calls.ctypes.data], [k * 1000 + i], 5)
      if not ((out == np.arange(5) + 1 + k * 1000 + i).all() and (calls == 1).all()): errors.append((k, i, out, calls))
  ts = [threading.Thread(target=run, args=(k,)) for k in range(2)]
  for t in ts: t.start()
  for t in ts: t.join()
  assert not errors, errors[:3]

def test_a_forked_child_starts_its_own_workers(lib):
  pool = hp.HostPool(2)
  out, calls = np.zeros(4, np.int32), np.zeros(4, np.int32)
  pool.launch(addr(lib, "ids"), [out.ctypes.data, calls.ctypes.data], [0], 4)
  pid = os.fork()
  if pid == 0:
    calls[:] = 0
    ok = pool.launch(addr(lib, "ids"), [out.ctypes.data, calls.ctypes.data], [3], 4)
    os._exit(0 if ok and (out == np.arange(4) + 4).all() and (calls == 1).all() else 3)
  assert os.waitpid(pid, 0)[1] == 0

def test_more_arguments_than_call_sites_are_handed_back(lib):
  pool = hp.HostPool(2)
  assert not pool.launch(addr(lib, "ids"), [0] * hp.MAX_ARGS, [], 2)

def test_cpu_threads_use_the_pool_and_give_numpy_s_answer(monkeypatch):
  from tinygrad import Tensor, Device
  dev = Device["CPU"]
  if dev.threads < 2: pytest.skip("one CPU thread: no THREAD launches")
  used = []
  orig = hp.HostPool.launch
  monkeypatch.setattr(hp.HostPool, "launch", lambda self, *a: used.append(a[-1]) or orig(self, *a))
  a = np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32)
  b = np.random.default_rng(1).standard_normal((512, 384)).astype(np.float32)
  np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=1e-4, atol=1e-3)
  assert used and max(used) > 1
