"""RoiAlign and DeformConv beyond the backend suite's examples, against onnx.reference (an independent NumPy
implementation)."""
import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
import pytest
from tinygrad.nn.onnx import OnnxRunner

def _model(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int) -> onnx.ModelProto:
  ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()]
  g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)])
  return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])

def _both(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int,
          ref: onnx.ModelProto | None = None) -> tuple[np.ndarray, np.ndarray]:
  m = _model(node, feeds, opset)
  got = list(OnnxRunner(m.SerializeToString())(feeds).values())[0].numpy()
  return got, ReferenceEvaluator(ref or m).run(None, feeds)[0]

@pytest.mark.parametrize("opset,mode,ratio,ctm", [(16, "avg", 0, "half_pixel"), (16, "max", 2, "output_half_pixel"),
                                                  (10, "avg", 3, None), (16, "max", 0, "half_pixel")])
def test_roialign(opset, mode, ratio, ctm):
  rng = np.random.default_rng(opset + ratio)
  x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
  # boxes of varied size, some reaching past the image (samples outside [-1, size] weigh nothing)
  rois = np.array([[0, 0, 10, 8], [2.5, 1.2, 4.1, 7.7], [-3, -2, 14, 12], [6, 3, 6.5, 3.2], [1, 1, 30, 20]], np.float32)
  bidx = np.array([0, 1, 1, 0, 1], np.int64)
  attrs = dict(mode=mode, output_height=3, output_width=4, sampling_ratio=ratio, spatial_scale=0.8)
  if ctm is not None: attrs["coordinate_transformation_mode"] = ctm
  feeds = {"x": x, "rois": rois, "b": bidx}
  # RoiAlign-10 has no coordinate_transformation_mode and does not shift (output_half_pixel is "the backward-compatible
  # behavior"); onnx.reference applies the opset-16 default there, so the reference runs the opset-16 spelling
  ref = None if ctm else _model(helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], **attrs,
                                                 coordinate_transformation_mode="output_half_pixel"), feeds, 16)
  got, want = _both(helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], **attrs), feeds, opset, ref)
  assert got.shape == want.shape == (5, 3, 3, 4)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("group,og,stride,dil,pads,with_mask", [(2, 2, 2, 1, [1, 0, 2, 1], True), (1, 4, 1, 2, [0, 0, 0, 0], False),
                                                                (4, 1, 1, 1, [1, 1, 1, 1], True)])
def test_deform_conv(group, og, stride, dil, pads, with_mask):
  rng = np.random.default_rng(group * 10 + og)
  N, C, H, W, OC, k = 2, 4, 7, 8, 8, (3, 2)
  oh = (H + pads[0] + pads[2] - (k[0] - 1) * dil - 1) // stride + 1
  ow = (W + pads[1] + pads[3] - (k[1] - 1) * dil - 1) // stride + 1
  feeds = {"x": rng.standard_normal((N, C, H, W)).astype(np.float32),
           "w": rng.standard_normal((OC, C // group, *k)).astype(np.float32),
           # offsets up to 3 pixels: some samples land between pixels, some past the image
           "off": (rng.standard_normal((N, og * 6 * 2, oh, ow)) * 1.5).astype(np.float32),
           "b": rng.standard_normal(OC).astype(np.float32)}
  if with_mask: feeds["m"] = rng.random((N, og * 6, oh, ow)).astype(np.float32)
  node = helper.make_node("DeformConv", list(feeds), ["y"], group=group, offset_group=og, strides=[stride] * 2,
                          dilations=[dil] * 2, pads=pads, kernel_shape=list(k))
  got, want = _both(node, feeds, 19)
  assert got.shape == want.shape == (N, OC, oh, ow)
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
