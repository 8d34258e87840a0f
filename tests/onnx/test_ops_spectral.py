"""DFT, STFT and MelWeightMatrix beyond the backend suite's examples, against numpy's FFT."""
import numpy as np
import onnx
from onnx import TensorProto, helper
import pytest
from tinygrad.nn.onnx import OnnxRunner

def _run(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int = 20) -> np.ndarray:
  ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()]
  g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)])
  m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
  return list(OnnxRunner(m.SerializeToString())(feeds).values())[0].numpy()

@pytest.mark.parametrize("n,length", [(9, None), (10, 7), (6, 15), (5, 8)])
def test_irfft(n, length):
  rng = np.random.default_rng(n)
  spec = np.fft.rfft(rng.standard_normal((3, n)), axis=1) + 0.25j  # imaginary DC/Nyquist parts must be ignored
  x = np.stack([spec.real, spec.imag], -1).astype(np.float32)
  feeds = {"x": x, "axis": np.array(1, np.int64)}
  inputs = ["x", "", "axis"]
  if length is not None: feeds, inputs = {**feeds, "len": np.array(length, np.int64)}, ["x", "len", "axis"]
  got = _run(helper.make_node("DFT", inputs, ["y"], inverse=1, onesided=1), feeds)
  want = np.fft.irfft(spec, n=length if length is not None else 2 * (spec.shape[1] - 1), axis=1)
  np.testing.assert_allclose(got[..., 0], want, rtol=1e-4, atol=1e-5)

@pytest.mark.parametrize("complex_in,onesided", [(False, 1), (True, 0), (False, 0)])
def test_stft(complex_in, onesided):
  rng = np.random.default_rng(3)
  sig = rng.standard_normal((2, 50)) + (1j * rng.standard_normal((2, 50)) if complex_in else 0)
  L, step = 12, 5
  win = np.hanning(L).astype(np.float32)
  x = np.stack([sig.real, sig.imag], -1) if complex_in else sig.real[..., None]
  feeds = {"x": x.astype(np.float32), "step": np.array(step, np.int64), "w": win, "L": np.array(L, np.int64)}
  got = _run(helper.make_node("STFT", ["x", "step", "w", "L"], ["y"], onesided=onesided), feeds, opset=17)
  n = 1 + (50 - L) // step
  frames = np.stack([sig[:, f * step:f * step + L] * win for f in range(n)], 1)
  want = np.fft.fft(frames, axis=-1)[..., :L // 2 + 1 if onesided else L]
  np.testing.assert_allclose(got, np.stack([want.real, want.imag], -1), rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("mels,dft,sr,lo,hi", [(8, 16, 8192, 0.0, 4096.0), (40, 512, 16000, 20.0, 7600.0),
                                               (10, 63, 22050, 300.0, 8000.0)])
def test_melweightmatrix(mels, dft, sr, lo, hi):
  from onnx.reference import ReferenceEvaluator
  feeds = {"m": np.array(mels, np.int32), "d": np.array(dft, np.int32), "s": np.array(sr, np.int32),
           "lo": np.array(lo, np.float32), "hi": np.array(hi, np.float32)}
  node = helper.make_node("MelWeightMatrix", list(feeds), ["y"])
  got = _run(node, feeds, opset=17)
  ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()]
  g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
  want = ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])).run(None, feeds)[0]
  assert got.shape == want.shape == (dft // 2 + 1, mels)
  np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
