"""The onnx backend-test adapter: onnx.backend.base.Backend over OnnxRunner (the model goes in as its bytes, so the
runner's own protobuf reader is what reads it)."""
from __future__ import annotations
from typing import Any
import ml_dtypes
from onnx.backend.base import Backend, BackendRep
from tinygrad import Tensor, dtypes
from tinygrad.nn.onnx import OnnxRunner

_NP = {dtypes.bfloat16: ml_dtypes.bfloat16, dtypes.fp8e4m3: ml_dtypes.float8_e4m3fn, dtypes.fp8e5m2: ml_dtypes.float8_e5m2}

def to_numpy(v: Any) -> Any:
  """A runner value as the backend suite compares it: arrays of the ONNX dtype, lists for sequences, None."""
  if v is None: return None
  if isinstance(v, list): return [to_numpy(x) for x in v]
  assert isinstance(v, Tensor), type(v)
  arr = v.numpy()
  return arr.astype(_NP[v.dtype]) if v.dtype in _NP else arr

class TinygradRep(BackendRep):
  def __init__(self, runner: OnnxRunner): self.runner = runner
  def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
    if isinstance(inputs, dict): feeds = inputs
    else:
      names = [v.name for v in self.runner.inputs]
      feeds = dict(zip(names, inputs if isinstance(inputs, (list, tuple)) else [inputs]))
    outs = self.runner(feeds)
    return tuple(to_numpy(o) for o in outs.values())

class TinygradBackend(Backend):
  @classmethod
  def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> TinygradRep:
    return TinygradRep(OnnxRunner(model.SerializeToString()))
  @classmethod
  def supports_device(cls, device: str) -> bool: return device == "CPU"
  @classmethod
  def run_node(cls, node: Any, inputs: Any, device: str = "CPU", outputs_info: Any = None, **kwargs: Any) -> Any:
    raise NotImplementedError("the suite runs whole models; run_node is not used")
