"""Tensors on several devices (docs/multi.md): devices with an index, Tensor.shard/shard_/to_, ops following the
sharding, reduces over the split axis, autograd, and the errors for bad input. References: numpy, torch."""
import numpy as np
import pytest
import torch
from tinygrad import Tensor, Device
from tinygrad.device import DeviceOpenError
from tinygrad.tensor import ArgumentError
from tinygrad.helpers import Context, GlobalCounters
from tinygrad.schedule.multi import MultiDeviceError, split_bounds

D2, D3 = ("CPU:0", "CPU:1"), ("CPU:0", "CPU:1", "CPU:2")
rng = np.random.default_rng(0)

def data(*shape): return rng.standard_normal(shape).astype(np.float32)

# ---- devices ----

def test_indexed_cpu_devices_are_separate_devices_with_their_own_buffers():
  assert Device.canonicalize("cpu:0") == "CPU" and Device.canonicalize("CPU:02") == "CPU:2"
  a = Tensor([1.0, 2.0], device="CPU:1").realize()
  b = Tensor([1.0, 2.0], device="CPU:2").realize()
  assert a.device == "CPU:1" and b.device == "CPU:2"
  assert Device["CPU:1"] is not Device["CPU:2"] and Device["CPU:1"] is not Device["CPU"]
  np.testing.assert_equal((a.to("CPU:2") + b).numpy(), [2.0, 4.0])

def test_unknown_device_index_is_a_clear_error():
  # NOTE: CPU:9, past the default HOST_DEVICES (8): a CPU:k under it may be open already in this worker (tests that run
  # the C and LLVM paths side by side open CPU:7, 6, 5, ...: tests/llvm_device.py), and an open device is not refused
  with Context(HOST_DEVICES=3):
    with pytest.raises(DeviceOpenError, match=r"CPU:9.*HOST_DEVICES=3"):
      Tensor([1.0]).shard(("CPU:0", "CPU:9"))
  with pytest.raises(DeviceOpenError, match="must be a number"):
    Tensor([1.0], device="CPU:x").realize()

def test_python_devices_with_emulate_run_the_gpu_kernels():
  x = data(6, 5)
  with Context(EMULATE="NV"):
    t = Tensor(x, device="PYTHON").shard(("PYTHON:0", "PYTHON:1"), 0)
    np.testing.assert_allclose((t * 2).sum(1).numpy(), (x * 2).sum(1), rtol=1e-5)
    np.testing.assert_allclose(t.sum(0).numpy(), x.sum(0), rtol=1e-5, atol=1e-6)

# ---- shard ----

@pytest.mark.parametrize("n,size", [(2, 8), (3, 7), (3, 2), (4, 10)])
def test_split_bounds_match_torch_tensor_split(n, size):
  parts = torch.tensor_split(torch.arange(size), n)
  want = []
  for p in parts:
    start = want[-1][1] if want else 0
    want.append((start, start + len(p)))
  assert split_bounds(size, n) == tuple(want)

@pytest.mark.parametrize("devs", [D2, D3])
@pytest.mark.parametrize("shape,axis", [((6, 4), 0), ((7, 5), 0), ((5, 7), 1), ((3, 4, 5), 2), ((2, 3), 0), ((4, 3), None)])
def test_shard_keeps_the_values_and_splits_like_tensor_split(devs, shape, axis):
  x = data(*shape)
  t = Tensor(x).shard(devs, axis)
  assert t.device == tuple(Device.canonicalize(d) for d in devs) and t.shape == shape
  np.testing.assert_equal(t.numpy(), x)
  t.realize()
  shards = t.uop.src
  if axis is None: assert all(s.shape == shape for s in shards)
  else:
    sizes = [len(p) for p in torch.tensor_split(torch.arange(shape[axis]), len(devs))]
    assert [s.shape[axis] for s in shards] == sizes

@pytest.mark.parametrize("devs", [D2, D3])
@pytest.mark.parametrize("axis", [0, 1, None])
def test_elementwise_and_broadcast_follow_the_sharding(devs, axis):
  x, y, z = data(7, 5), data(7, 5), data(1, 5)
  tx, ty = Tensor(x).shard(devs, axis), Tensor(y).shard(devs, axis)
  tz = Tensor(z).shard(devs, None)
  out = ((tx * ty).exp2() - tz).maximum(tx) / 3.0
  np.testing.assert_allclose(out.numpy(), np.maximum(np.exp2(x * y) - z, x) / 3.0, rtol=1e-5, atol=1e-6)
  # operands split differently are brought to one layout
  mixed = Tensor(x).shard(devs, 0) + Tensor(y).shard(devs, 1)
  np.testing.assert_allclose(mixed.numpy(), x + y, rtol=1e-6)

@pytest.mark.parametrize("devs", [D3, pytest.param(D2, marks=pytest.mark.slow)])
@pytest.mark.parametrize("axis", [0, 1, None])
@pytest.mark.parametrize("red", ["sum", "max", "min", "mean", "prod"])
def test_reduces_on_every_axis(devs, axis, red):
  x = data(7, 5) * 0.5 + 1.0
  t = Tensor(x).shard(devs, axis)
  for ax in (0, 1, None):
    got, want = getattr(t, red)(ax).numpy(), getattr(torch.tensor(x), {"max": "amax", "min": "amin"}.get(red, red))
    want = (want() if ax is None and red != "prod" else want(ax) if ax is not None else torch.prod(torch.tensor(x)))
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("devs", [D2, D3])
def test_matmul_data_parallel_and_model_parallel(devs):
  x, w = data(9, 6), data(6, 5)
  want = x @ w
  # batch split, weights replicated
  np.testing.assert_allclose((Tensor(x).shard(devs, 0) @ Tensor(w).shard(devs)).numpy(), want, rtol=1e-5, atol=1e-5)
  # weight split on its output axis: each device computes its columns
  np.testing.assert_allclose((Tensor(x).shard(devs) @ Tensor(w).shard(devs, 1)).numpy(), want, rtol=1e-5, atol=1e-5)
  # the contracted axis split on both: partial sums, allreduced
  np.testing.assert_allclose((Tensor(x).shard(devs, 1) @ Tensor(w).shard(devs, 0)).numpy(), want, rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("devs", [D2, D3])
def test_movement_ops_follow_the_sharding(devs):
  x = data(6, 4, 5)
  t = Tensor(x).shard(devs, 1)
  np.testing.assert_equal(t.permute(2, 0, 1).numpy(), x.transpose(2, 0, 1))
  np.testing.assert_equal(t.flip(1).numpy(), x[:, ::-1])
  np.testing.assert_equal(t[1:5, 1:3].numpy(), x[1:5, 1:3])
  np.testing.assert_equal(t.pad(((0, 0), (1, 2), (0, 0))).numpy(), np.pad(x, ((0, 0), (1, 2), (0, 0))))
  np.testing.assert_equal(t.reshape(6, 20).numpy(), x.reshape(6, 20))
  np.testing.assert_equal(t.reshape(24, 5).numpy(), x.reshape(24, 5))
  np.testing.assert_equal(t[:, :, None].expand(6, 4, 3, 5).numpy(), np.broadcast_to(x[:, :, None], (6, 4, 3, 5)))
  np.testing.assert_equal(t.cat(t, dim=1).numpy(), np.concatenate([x, x], 1))

def test_a_reshape_that_keeps_rows_whole_stays_split_and_one_that_does_not_gathers_with_copies():
  x = data(6, 4)
  t = Tensor(x).shard(D2, 0).realize()
  GlobalCounters.reset()
  kept = t.reshape(2, 3, 4).contiguous().realize()
  assert GlobalCounters.copy_count == 0 and kept.uop.op.name == "MULTI" and kept.uop.arg[:2] == (0, ((0, 1), (1, 2)))
  np.testing.assert_equal(kept.numpy(), x.reshape(2, 3, 4))
  t3 = Tensor(data(5, 2)).shard(D2, 0).realize()  # boundary at element 6 (rows 0..2): a reshape to (2, 5) cuts a row
  GlobalCounters.reset()
  r = t3.reshape(2, 5).contiguous().realize()
  assert r.device == ("CPU", "CPU:1") and GlobalCounters.copy_count == 2  # the allgather: one COPY to each device
  np.testing.assert_equal(r.numpy(), t3.numpy().reshape(2, 5))

def test_autograd_follows_the_sharding():
  x, w = data(8, 5), data(5, 3)
  tx = Tensor(x, requires_grad=True)
  tw = Tensor(w, requires_grad=True)
  out = (tx.shard(D3, 0) @ tw.shard(D3)).relu().sum()
  out.backward()
  px, pw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
  (px @ pw).relu().sum().backward()
  np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(tw.grad.numpy(), pw.grad.numpy(), rtol=1e-5, atol=1e-6)
  # a sharded leaf: its gradient is sharded the same way
  sw = Tensor(w, requires_grad=True).shard_(D3, 1)
  (Tensor(x).shard(D3) @ sw).square().mean().backward()
  pw2 = torch.tensor(w, requires_grad=True)
  (torch.tensor(x) @ pw2).square().mean().backward()
  assert sw.grad.device == sw.device
  np.testing.assert_allclose(sw.grad.numpy(), pw2.grad.numpy(), rtol=1e-5, atol=1e-6)

def test_shard_in_place_and_to_in_place_keep_identity_and_values():
  x = data(6, 3)
  t = Tensor(x).realize()
  same = t.shard_(D2, 0)
  assert same is t and t.device == ("CPU", "CPU:1")
  np.testing.assert_equal(t.numpy(), x)
  t.to_("CPU:2")
  assert t.device == "CPU:2"
  np.testing.assert_equal(t.numpy(), x)
  t.to_(D3)
  assert t.device == tuple(Device.canonicalize(d) for d in D3)
  np.testing.assert_equal(t.numpy(), x)

def test_setitem_on_a_sharded_tensor_writes_each_devices_rows():
  x = np.arange(10, dtype=np.float32)
  t = Tensor(x).shard(D3, 0).realize()
  t[4] = 100.0
  t[1:9:3] = Tensor([-1.0, -2.0, -3.0])
  t[7:] = t[:3]  # reads rows that the write overwrites on another device
  want = x.copy(); want[4] = 100; want[1:9:3] = [-1, -2, -3]; want[7:] = want[:3].copy()
  np.testing.assert_equal(t.numpy(), want)
  assert t.device == tuple(Device.canonicalize(d) for d in D3)

def test_random_like_draws_differ_per_shard():
  t = Tensor.zeros(8, 64).contiguous().shard(D2, 0)
  r = t.rand_like().numpy()
  assert r.shape == (8, 64) and not np.array_equal(r[:4], r[4:]) and ((0 <= r) & (r < 1)).all()
  Tensor.training = True
  try: d = Tensor.ones(8, 64).contiguous().shard(D2, 0).dropout(0.5).numpy()
  finally: Tensor.training = False
  assert set(np.unique(d)) <= {0.0, 2.0} and not np.array_equal(d[:4] == 0, d[4:] == 0)

# ---- bad input ----

def test_bad_input_is_a_clear_error():
  x = Tensor(data(4, 4))
  with pytest.raises(MultiDeviceError, match="non-empty tuple"): x.shard("CPU:1")
  with pytest.raises(MultiDeviceError, match="named twice"): x.shard(("CPU:0", "CPU"))
  with pytest.raises(IndexError): x.shard(D2, 2)
  with pytest.raises(MultiDeviceError, match="0-d"): Tensor(1.0).shard(D2, 0)
  with pytest.raises((MultiDeviceError, ArgumentError), match="different devices"):
    (Tensor(data(4, 4)).shard(D2, 0) + Tensor(data(4, 4)).shard(("CPU:0", "CPU:2"), 0)).realize()
  with pytest.raises((MultiDeviceError, ArgumentError), match="different devices"):
    (Tensor(data(4, 4)).shard(D2, 0) + Tensor(data(4, 4), device="CPU:2")).realize()
  # an assignment through a view whose rows cross devices is refused, not done through a gathered copy
  t = Tensor(np.arange(6, dtype=np.float32)).shard(D2, 0).realize()
  with pytest.raises(MultiDeviceError, match="ASSIGN to a view"):
    t.reshape(3, 2)[1:].assign(Tensor.ones(2, 2).contiguous().shard(D2, 0)).realize()

def test_an_axis_not_divisible_by_the_device_count_gives_uneven_shards():
  x = data(5, 2)
  t = Tensor(x).shard(D3, 0).realize()
  assert [s.shape[0] for s in t.uop.src] == [2, 2, 1]
  # NOTE: float32 sums in another order: an error of a few ulps of the sum of |x|, not of a sum that nearly cancels
  np.testing.assert_allclose(t.sum(0).numpy(), x.sum(0), rtol=1e-6, atol=1e-6)
  e = Tensor(data(2, 3)).shard(D3, 0).realize()  # fewer rows than devices: the last shard is empty
  assert [s.shape[0] for s in e.uop.src] == [1, 1, 0]
  np.testing.assert_allclose((e * 2).sum().numpy(), e.numpy().sum() * 2, rtol=1e-6)

def test_symbolic_sizes_run_replicated_and_on_an_unsplit_axis_and_are_refused_on_the_split_axis():
  from tinygrad import Variable
  x = np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)
  v = Variable("n", 1, 6).bind(2)
  rep, split1, split0 = (Tensor(x).shard(D3, a).realize() for a in (None, 1, 0))
  # replicated: every op runs on each device; read back through a reshape to the bound sizes (a kernel per device)
  np.testing.assert_allclose((rep[:v] * 2).reshape(2, 4).numpy(), x[:2] * 2, rtol=1e-6)
  np.testing.assert_allclose(rep[:v].sum().numpy(), x[:2].sum(), rtol=1e-5)
  # a symbolic slice of an axis that is not split stays on each shard; the sum over the split axis is an allreduce
  np.testing.assert_allclose(split1[:v].sum(1).reshape(2).numpy(), x[:2].sum(1), rtol=1e-5)
  np.testing.assert_allclose(split1[:v].permute(1, 0).sum().numpy(), x[:2].sum(), rtol=1e-5)
  # on the split axis (or any reshape, or any move of data of symbolic size) there are no per-device bounds: refused
  with pytest.raises(MultiDeviceError, match=r"SHRINK \(\(0, n\), \(0, 4\)\) .* split on axis 0"): split0[:v].sum().realize()
  with pytest.raises(MultiDeviceError, match=r"RESHAPE \(1, n, 4\) .* split on axis 1"):
    split1[:v].reshape(1, v, 4).sum().realize()
  with pytest.raises(MultiDeviceError, match=r"gathering a tensor of symbolic shape \(n, 4\)"):
    split1[:v].to("CPU").realize()
  with pytest.raises(MultiDeviceError, match=r"allreduce of partial sums of symbolic shape \(n, 1\)"):
    split1[:v].sum(1, keepdim=True).realize()

def test_a_symbolic_reshape_that_keeps_the_split_axis_runs_per_shard():
  from tinygrad import Variable
  x = np.random.default_rng(3).standard_normal((6, 5, 4)).astype(np.float32)
  q = np.random.default_rng(4).standard_normal((6, 2, 4)).astype(np.float32)
  v = Variable("n", 1, 5).bind(3)
  k, qt = Tensor(x).shard(D3, 0).realize(), Tensor(q).shard(D3, 0).realize()
  # attention's shapes at a bound position: heads split, the rows symbolic; the unsqueeze and the regrouping of the
  # axes after the split axis (a matmul's reshapes) stay on each shard, and so does the result
  s = qt.matmul(k[:, :v].transpose(1, 2)).reshape(6, 2, 1, v).softmax(-1)
  out = s.reshape(6, 2, v).matmul(k[:, :v])
  ref = np.einsum("hqd,hkd->hqk", q, x[:, :3])
  ref = np.exp(ref - ref.max(-1, keepdims=True))
  ref = np.einsum("hqk,hkd->hqd", ref / ref.sum(-1, keepdims=True), x[:, :3])
  assert out.uop.device == tuple(Device.canonicalize(d) for d in D3) and out._layout()[1] == 0
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-6)
  # the split axis regrouped (6 -> 3, 2) at a symbolic size has no per-device bounds: still refused
  with pytest.raises(MultiDeviceError, match=r"RESHAPE \(3, 2, n, 4\) .* split on axis 0"):
    k[:, :v].reshape(3, 2, v, 4).sum().realize()

def test_safe_load_onto_a_set_of_devices_replicates(tmp_path):
  from tinygrad.nn.state import safe_save, safe_load
  x = np.random.default_rng(2).standard_normal((3, 5)).astype(np.float32)
  safe_save({"w": Tensor(x)}, tmp_path / "w.safetensors")
  w = safe_load(tmp_path / "w.safetensors", device=D3)["w"]
  assert w.device == tuple(Device.canonicalize(d) for d in D3)
  from tinygrad.tensor import base_buffer
  m = base_buffer(w.realize().uop)
  assert m is not None and m.arg[0] is None and [s.device for s in m.src] == [Device.canonicalize(d) for d in D3]
  np.testing.assert_equal(w.numpy(), x)

# ---- GPUs, compile-only ----

@pytest.mark.parametrize("backend", ["NV", "AMD"])
def test_compile_only_gpus_compile_every_per_device_kernel_and_plan_the_copies(backend):
  from tinygrad.uop import hooks
  from tinygrad.engine.realize import is_transfer
  from tinygrad.engine.schedule import create_schedule
  from tinygrad.uop.ops import UOp
  devs = tuple(Device.canonicalize(f"{backend}:{i}") for i in range(3))
  with Context(COMPILE_ONLY=1):
    x = Tensor(np.ones((6, 8), np.float32), device=devs[0]).shard(devs, 0)
    w = Tensor(np.ones((8, 4), np.float32), device=devs[0]).shard(devs)
    out = (x @ w).sum(0).relu()
    sched = create_schedule(UOp.sink(out.uop))
    kernel_devs = {si.bufs[0].device for si in sched if not is_transfer(si.ast)}
    transfers = [si for si in sched if is_transfer(si.ast)]
    assert kernel_devs == set(devs)  # every device runs its own kernels
    assert transfers and all(si.bufs[0].device != si.bufs[1].device for si in transfers)
    compiled = []
    fn = hooks.register("compiled", lambda ast, spec, renderer: compiled.append(renderer))
    try: out.realize()
    finally: hooks.unregister("compiled", fn)
    assert compiled, "COMPILE_ONLY compiled no program"
  with Context(COMPILE_ONLY=1, HCQ_VISIBLE_DEVICES="0,1"):
    with pytest.raises(DeviceOpenError, match=f"{backend}:3: unknown device index 3"):
      Tensor([1.0]).shard((f"{backend}:0", f"{backend}:3"))

@pytest.mark.parametrize("backend", ["NV", "AMD"])
def test_compile_only_compiles_each_devices_kernels_for_that_device(backend):
  """COMPILE_ONLY with N GPUs and none here: every kernel of every device's graph (a ring allreduce's adds included)
  is compiled for that device by its own toolchain, and every COPY between devices is planned, not run."""
  from tinygrad.engine.realize import is_transfer, _runner_cache, CompiledRunner
  from tinygrad.engine.schedule import create_schedule
  from tinygrad.helpers import codegen_flags
  from tinygrad.uop.ops import UOp
  devs = tuple(Device.canonicalize(f"{backend}:{i}") for i in range(3))
  with Context(COMPILE_ONLY=1, ALLREDUCE="ring"):
    x = Tensor(np.ones((6, 8), np.float32), device=devs[0]).shard(devs, 1)
    w = Tensor(np.ones((8, 5), np.float32), device=devs[0]).shard(devs, 0)
    out = (x @ w).relu() * 2
    sched = create_schedule(UOp.sink(out.uop))
    kernels = [si for si in sched if not is_transfer(si.ast)]
    transfers = [si for si in sched if is_transfer(si.ast)]
    # 4 COPYs place x's and w's parts on NV:1 and NV:2; the ring moves each of 3 chunks 2 hops to reduce it and 2 to
    # gather it
    assert len(transfers) == 4 + 12 and all(si.bufs[0].device != si.bufs[1].device for si in transfers)
    keys = [(si.bufs[0].device, si.ast, codegen_flags()) for si in kernels]
    for k in keys: _runner_cache.pop(k, None)
    out.realize()
    for si in kernels:
      r = _runner_cache.get((si.bufs[0].device, si.ast, codegen_flags()))
      assert isinstance(r, CompiledRunner) and r.device == si.bufs[0].device and len(r.lib) > 0, si.ast.key.hex()[:8]
    assert {si.bufs[0].device for si in kernels} == set(devs)
    with pytest.raises(Exception, match="COMPILE_ONLY"): out.numpy()
