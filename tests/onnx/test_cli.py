"""python -m tinygrad.nn.onnx: prints the outputs, runs under --jit, and with --compile-only counts the kernels compiled
for the target."""
import numpy as np
from onnx import helper, TensorProto, numpy_helper
from tinygrad.nn.onnx.__main__ import main

def _model(tmp_path):
  x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
  y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
  w = numpy_helper.from_array(np.array([1.0, 2.0, 3.0], np.float32), "w")
  nodes = [helper.make_node("Mul", ["x", "w"], ["t"]), helper.make_node("Exp", ["t"], ["y"])]
  m = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [w]), opset_imports=[helper.make_opsetid("", 17)])
  p = tmp_path / "m.onnx"
  p.write_bytes(m.SerializeToString())
  return p

def test_cli_prints_the_outputs_of_given_inputs(tmp_path, capsys):
  p = _model(tmp_path)
  np.savez(tmp_path / "in.npz", x=np.array([[0.0, 1.0, -1.0]], np.float32))
  assert main([str(p), "--inputs", str(tmp_path / "in.npz")]) == 0
  out = capsys.readouterr().out
  assert "y: (1, 3) dtypes.float32" in out
  vals = np.array([float(v) for v in out.split("[[")[1].split("]]")[0].split()])
  np.testing.assert_allclose(vals, np.exp([0.0, 2.0, -3.0]), rtol=1e-5)

def test_cli_jit_runs(tmp_path, capsys):
  assert main([str(_model(tmp_path)), "--jit"]) == 0
  assert "y: (1, 3)" in capsys.readouterr().out

def test_cli_compile_only_counts_target_kernels(tmp_path, capsys):
  from tinygrad.device import Device
  from tinygrad.engine import realize
  try: assert main([str(_model(tmp_path)), "--compile-only", "NV"]) == 0
  finally:
    # the NV device was opened under COMPILE_ONLY=1: later tests open their own
    for k in [k for k in Device._opened if k.split(":")[0] == "NV"]: del Device._opened[k]
    for k in [k for k in realize._runner_cache if k[0].split(":")[0] == "NV"]: del realize._runner_cache[k]
  out = capsys.readouterr().out
  assert out.startswith("NV (sm_90): ") and " kernels compiled" in out and not out.startswith("NV (sm_90): 0 ")

def test_cli_reports_a_bad_model(tmp_path, capsys):
  p = tmp_path / "bad.onnx"
  p.write_bytes(b"\x3a\xe8\x07ab")
  assert main([str(p)]) == 1
  assert "runs past the end" in capsys.readouterr().err
