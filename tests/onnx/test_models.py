"""Models exported by torch.onnx.export in the test (tests/onnx/torch_models.py), run by OnnxRunner against onnxruntime:
a ResNet, a transformer encoder with causal and key-padding masks, a 2-layer LSTM, a UNet-like conv net, and a CNN
quantized to QDQ by onnxruntime's quantizer. Then every kernel of each compiles for sm_90, gfx942 and gfx1100
(COMPILE_ONLY=1), and the PYTHON backend emulating NV gives the CPU's values."""
import fcntl, os
import numpy as np
import pytest
import onnxruntime as ort
from tinygrad import Tensor, TinyJit
from tinygrad.device import Device
from tinygrad.engine import realize
from tinygrad.helpers import Context
from tinygrad.uop import hooks
from tinygrad.nn.onnx import OnnxRunner
from tests.onnx import torch_models as tm

# float32 models: onnxruntime and we sum in different orders
TOL = {"resnet": (1e-4, 1e-5), "encoder": (1e-4, 1e-4), "lstm": (1e-4, 1e-5), "unet": (1e-4, 1e-5), "cnn": (1e-4, 1e-5)}
NAMES = ["resnet", "encoder", "lstm", "unet", "cnn_qdq"]
# NOTE: the LSTM's unrolled steps make it the slowest to schedule: its GPU-target checks run under -m slow (make test-onnx)
GPU_NAMES = [pytest.param(n, marks=pytest.mark.slow) if n == "lstm" else n for n in NAMES]

@pytest.fixture(scope="session")
def model_dir(tmp_path_factory, worker_id):
  # NOTE: exported once per session and shared by the xdist workers (the exporter takes seconds per model)
  return tmp_path_factory.getbasetemp().parent if worker_id != "master" else tmp_path_factory.getbasetemp()

def exported(model_dir, name: str) -> bytes:
  path = model_dir / f"{name}.onnx"
  if name == "cnn_qdq" and not path.exists(): exported(model_dir, "cnn")
  with open(str(path) + ".lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not path.exists():
      data = tm.quantize_qdq((model_dir / "cnn.onnx").read_bytes()) if name == "cnn_qdq" else tm.export(name)
      tmp = path.with_suffix(".tmp")
      tmp.write_bytes(data)
      os.replace(tmp, path)
    return path.read_bytes()

def _ort(model: bytes, feeds: dict) -> list[np.ndarray]:
  return ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)

def _ours(model: bytes, feeds: dict, **kw) -> list[np.ndarray]:
  return [v.numpy() for v in OnnxRunner(model, **kw)(feeds).values()]

@pytest.mark.parametrize("name", ["resnet", "encoder", "lstm", "unet", "cnn"])
def test_exported_model_matches_onnxruntime(model_dir, name):
  model = exported(model_dir, name)
  rtol, atol = TOL[name]
  # the named batch dim binds at run time: two batch sizes through one runner
  runner = OnnxRunner(model)
  assert all(vi.shape[0] == "batch" for vi in runner.inputs)
  for batch in (3, 1):
    feeds = tm.inputs(name, batch, seed=1)
    ref = _ort(model, feeds)
    ours = [v.numpy() for v in runner(feeds).values()]
    assert len(ours) == len(ref)
    for o, r in zip(ours, ref):
      assert o.shape == r.shape and o.dtype == r.dtype
      np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)

def _with_quantized_outputs(model: bytes) -> tuple[bytes, list[str]]:
  """The model with every QuantizeLinear output added to the graph outputs (uint8 activations, int8 weights)."""
  import onnx
  from onnx import helper
  m = onnx.load_from_string(model)
  inits = {t.name for t in m.graph.initializer}
  names = []
  for n in m.graph.node:
    if n.op_type != "QuantizeLinear" or n.input[0] in inits: continue
    zp = next(t for t in m.graph.initializer if t.name == n.input[2])
    m.graph.output.append(helper.make_tensor_value_info(n.output[0], zp.data_type, None))
    names.append(n.output[0])
  return m.SerializeToString(), names

def test_qdq_cnn_quantized_values_match_onnxruntime_within_one(model_dir):
  import onnx, onnx.reference
  model, qnames = _with_quantized_outputs(exported(model_dir, "cnn_qdq"))
  assert len(qnames) >= 4, qnames
  feeds = tm.inputs("cnn", 4, seed=7)
  ours = dict(zip([o.name for o in onnx.load_from_string(model).graph.output], _ours(model, feeds)))
  theirs = dict(zip([o.name for o in onnx.load_from_string(model).graph.output], _ort(model, feeds)))
  ref = dict(zip([o.name for o in onnx.load_from_string(model).graph.output],
                 onnx.reference.ReferenceEvaluator(onnx.load_from_string(model)).run(None, feeds)))
  for q in qnames:
    a, b, r = ours[q].astype(np.int32), theirs[q].astype(np.int32), ref[q].astype(np.int32)
    assert ours[q].dtype == theirs[q].dtype == np.uint8
    # onnxruntime runs the QDQ pairs as integer kernels whose requantization rounds differently: one step apart at most
    assert np.abs(a - b).max() <= 1, (q, np.abs(a - b).max())
    # the reference computes the float convs between DQ and Q in another order: a rounding tie flips rarely
    assert np.abs(a - r).max() <= 1 and (a == r).mean() > 0.99, (q, np.abs(a - r).max(), (a == r).mean())
  out = onnx.load_from_string(model).graph.output[0].name
  np.testing.assert_allclose(ours[out], ref[out], rtol=1e-3, atol=1e-3)

def test_fp16_model_matches_onnxruntime(model_dir):
  import onnx
  from onnx import numpy_helper, TensorProto
  # the exported ResNet with its weights, inputs and outputs in float16
  m = onnx.load_from_string(exported(model_dir, "resnet"))
  for t in m.graph.initializer:
    if t.data_type == TensorProto.FLOAT: t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
  for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
    if vi.type.tensor_type.elem_type == TensorProto.FLOAT: vi.type.tensor_type.elem_type = TensorProto.FLOAT16
  for n in m.graph.node:
    for a in n.attribute:
      if a.name == "to" and a.i == TensorProto.FLOAT: a.i = TensorProto.FLOAT16
  model = m.SerializeToString()
  feeds = {"x": tm.inputs("resnet", 2)["x"].astype(np.float16)}
  ours, ref = _ours(model, feeds)[0], _ort(model, feeds)[0]
  assert ours.dtype == np.float16 and ref.dtype == np.float16
  np.testing.assert_allclose(ours.astype(np.float32), ref.astype(np.float32), rtol=2e-2, atol=2e-2)

def _counting(name: str):
  got: list = []
  fn = hooks.register(name, lambda *a: got.append(a))
  return got, fn

def test_jit_replays_the_model_without_compiling(model_dir):
  model = exported(model_dir, "resnet")
  runner = OnnxRunner(model)
  jit = TinyJit(lambda x: runner({"x": x})["linear"])
  comp = Device[Device.DEFAULT].compiler
  for i in range(4):
    feeds = tm.inputs("resnet", 2, seed=i)
    before = comp.compiles + comp.cache_hits
    out = jit(Tensor(feeds["x"])).numpy()
    if i >= 2: assert comp.compiles + comp.cache_hits == before, f"call {i} compiled a kernel"
    np.testing.assert_allclose(out, _ort(model, feeds)[0], rtol=1e-4, atol=1e-5)
  assert jit.captured is not None and len(jit.captured.launches) > 0

# NOTE: the LSTM's unrolled steps are scheduled again for the capture (30 s here): it runs under -m slow (make test-onnx)
@pytest.mark.parametrize("name", GPU_NAMES)
def test_jit_serves_every_batch_size_with_one_capture(model_dir, name):
  # the named batch dim bound to the runner's variable: the capture at batch 5 replays at 3 and 5, compiling nothing
  model = exported(model_dir, name)
  runner = OnnxRunner(model)
  jit = TinyJit(lambda **kw: list(runner(kw).values()))
  comp = Device[Device.DEFAULT].compiler
  for k, batch in enumerate((3, 5, 3)):
    feeds = tm.inputs(name.split("_")[0], batch, seed=k)
    before = comp.compiles + comp.cache_hits
    outs = jit(**runner.bind(feeds))
    if k: assert comp.compiles + comp.cache_hits == before, f"batch {batch} (call {k}) compiled a kernel"
    if name == "cnn_qdq":
      # onnxruntime requantizes in its own rounding (test_qdq_cnn_quantized_values_match_onnxruntime_within_one)
      import onnx, onnx.reference
      ref = onnx.reference.ReferenceEvaluator(onnx.load_from_string(model)).run(None, feeds)
      rtol, atol = 1e-3, 1e-3
    else: ref, (rtol, atol) = _ort(model, feeds), TOL[name]
    assert len(outs) == len(ref)
    for o, r in zip(outs, ref): np.testing.assert_allclose(o.reshape(r.shape).numpy(), r, rtol=rtol, atol=atol)
  assert jit.captured is not None and runner.concrete_reason is None

def _forget(dev: str) -> None:
  for k in [k for k in Device._opened if k.split(":")[0] == dev]: del Device._opened[k]
  for k in [k for k in realize._runner_cache if k[0].split(":")[0] == dev]: del realize._runner_cache[k]

TARGETS = [("NV", {"NV_ARCH": "sm_90"}), ("AMD", {"AMD_ARCH": "gfx942"}), ("AMD", {"AMD_ARCH": "gfx1100"})]

@pytest.mark.parametrize("name", GPU_NAMES)
@pytest.mark.parametrize("target,arch", TARGETS, ids=["sm_90", "gfx942", "gfx1100"])
def test_every_kernel_compiles_for_the_gpu_targets(model_dir, name, target, arch):
  model = exported(model_dir, name)
  feeds = tm.inputs(name.split("_")[0], 2)
  cpu_kernels: list = []
  fn = hooks.register("compiled", lambda ast, spec, r: cpu_kernels.append(spec.name))
  try: OnnxRunner(model)(feeds)
  finally: hooks.unregister("compiled", fn)
  got: list = []
  fn = hooks.register("compiled", lambda ast, spec, r: got.append((spec.device, spec.name)))
  _forget(target)
  try:
    with Context(COMPILE_ONLY=1, **arch): OnnxRunner(model, device=target)(feeds, realize=True)
  finally:
    hooks.unregister("compiled", fn)
    _forget(target)
  # NOTE: small computations from shapes and constants only (Shape -> Gather -> Concat -> Reshape, a QDQ model's weight
  # DequantizeLinear) run on the CPU by design (docs/onnx.md); every kernel that reads a feed is a target kernel
  on_target = [k for d, k in got if d.split(":")[0] == target]
  on_cpu = [k for d, k in got if d.split(":")[0] == "CPU"]
  assert len(on_target) + len(on_cpu) == len(got) and len(on_target) >= 3, (on_target, on_cpu)

@pytest.mark.parametrize("name", GPU_NAMES)
def test_emulated_nv_gives_the_cpu_values(model_dir, name):
  model = exported(model_dir, name)
  feeds = tm.inputs(name.split("_")[0], 1)
  cpu = _ours(model, feeds)
  with Context(EMULATE="NV"): emu = _ours(model, feeds, device="PYTHON")
  for c, e in zip(cpu, emu): np.testing.assert_allclose(e, c, rtol=1e-5, atol=1e-6)
