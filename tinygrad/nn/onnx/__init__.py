"""Run ONNX models as Tensor ops: `OnnxRunner(path | bytes | uint8 Tensor)(feeds)` -> {output name: Tensor}.

The protobuf is read here (tinygrad/nn/onnx/proto.py), never by the `onnx` package; ops are in ops.py; the CLI is
`python -m tinygrad.nn.onnx MODEL.onnx`. docs/onnx.md lists what is supported."""
from tinygrad.nn.onnx.proto import OnnxError, load_model
from tinygrad.nn.onnx.call import MIN_OPSET, MAX_OPSET
from tinygrad.nn.onnx.runner import OnnxRunner

__all__ = ["OnnxRunner", "OnnxError", "load_model", "MIN_OPSET", "MAX_OPSET"]
