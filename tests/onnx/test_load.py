"""Hostile and malformed model files: every defect is an OnnxError naming where it is, never a parser traceback, and
nothing is allocated beyond what the file's bytes justify. Models are built with the onnx package (test-only)."""
import os, struct
import numpy as np
import pytest
from onnx import helper, TensorProto, numpy_helper
from tinygrad.nn.onnx import OnnxRunner, OnnxError, load_model

def _model(nodes, inputs, outputs, inits=(), opset=17, **kw):
  g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
  return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], **kw)

def _add_model(**kw):
  x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
  y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
  w = numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "w")
  return _model([helper.make_node("Add", ["x", "w"], ["y"], name="add0")], [x], [y], [w], **kw)

def test_runs_a_valid_model():
  out = OnnxRunner(_add_model().SerializeToString())({"x": np.array([3.0, 4.0], np.float32)})
  np.testing.assert_array_equal(out["y"].numpy(), [4.0, 6.0])

@pytest.mark.parametrize("cut", [1, 5, 17, -3, -1])
def test_truncated_file_names_the_field(cut):
  data = _add_model().SerializeToString()
  with pytest.raises(OnnxError, match=r"ModelProto"): OnnxRunner(data[:cut] if cut > 0 else data[:len(data) + cut])

def test_length_past_the_end_is_an_error():
  # field 7 (graph), length-delimited, claims 1000 bytes with 2 present
  with pytest.raises(OnnxError, match=r"graph: length 1000 runs past the end"): load_model(b"\x3a\xe8\x07ab")

def test_overlong_varint_is_an_error():
  with pytest.raises(OnnxError, match="longer than 10 bytes"): load_model(b"\x08" + b"\xff" * 11 + b"\x01")

def test_group_wire_type_is_an_error():
  with pytest.raises(OnnxError, match="wire type 3"): load_model(b"\x0b")

def _ld(key: int, payload: bytes) -> bytes:
  n, out = len(payload), bytearray([key])
  while n >= 0x80: out.append(n & 0x7f | 0x80); n >>= 7
  return bytes(out) + bytes([n]) + payload

def test_deep_nesting_is_bounded():
  # graph -> node -> attribute -> graph ... 100 times (300 levels of messages; protobuf itself refuses to build it)
  g = b""
  for _ in range(100): g = _ld(0x0a, _ld(0x2a, _ld(0x32, g)))
  with pytest.raises(OnnxError, match="nest deeper than"): load_model(_ld(0x3a, g))

def test_raw_data_smaller_than_dims_is_an_error_without_allocating():
  m = _add_model()
  t = m.graph.initializer[0]
  del t.dims[:]
  t.dims.extend([1 << 40, 1 << 20])  # 2**60 elements backed by 8 bytes
  with pytest.raises(OnnxError, match=r"tensor 'w': 8 bytes of data for shape"): OnnxRunner(m.SerializeToString())

def test_typed_data_count_mismatch_is_an_error():
  m = _add_model()
  t = m.graph.initializer[0]
  t.ClearField("raw_data")
  t.float_data.extend([1.0])
  with pytest.raises(OnnxError, match=r"1 values in float_data for shape \(2,\)"): OnnxRunner(m.SerializeToString())

def test_string_not_utf8_is_an_error():
  data = bytearray(_add_model().SerializeToString())
  i = data.find(b"add0")
  data[i:i + 4] = b"\xff\xfe\xfd\xfc"
  with pytest.raises(OnnxError, match="not UTF-8"): OnnxRunner(bytes(data))

def test_unknown_op_names_node_op_and_opset():
  x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
  m = _model([helper.make_node("FancyOp", ["x"], ["y"], name="n7")], [x], [x])
  with pytest.raises(OnnxError, match=r"node 'n7' \(FancyOp\): unknown op 'FancyOp' at opset 17"):
    OnnxRunner(m.SerializeToString())

def test_op_below_its_first_opset_names_node_op_and_opset():
  x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
  m = _model([helper.make_node("Gelu", ["x"], ["y"], name="g")], [x], [x], opset=17)
  with pytest.raises(OnnxError, match=r"node 'g' \(Gelu\): op Gelu at opset 17 is not supported"):
    OnnxRunner(m.SerializeToString())

@pytest.mark.parametrize("opset", [0, 29, 1000])
def test_unsupported_opset_is_an_error(opset):
  with pytest.raises(OnnxError, match=f"opset {opset} of the default domain"):
    OnnxRunner(_add_model(opset=opset).SerializeToString())

def test_unknown_domain_is_an_error():
  x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
  g = helper.make_graph([helper.make_node("Foo", ["x"], ["y"], domain="com.example", name="f")], "g", [x], [x])
  m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
  with pytest.raises(OnnxError, match=r"domain 'com.example' \(opset 1\) is not supported"):
    OnnxRunner(m.SerializeToString())

def test_error_while_running_names_the_node():
  x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
  s = numpy_helper.from_array(np.array([7, 5], np.int64), "s")
  m = _model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")], [x], [x], [s])
  with pytest.raises(OnnxError, match=r"node 'rs' \(Reshape\) at opset 17"):
    OnnxRunner(m.SerializeToString())({"x": np.zeros((2, 3), np.float32)})

def test_feed_shape_and_dtype_are_checked():
  r = OnnxRunner(_add_model().SerializeToString())
  with pytest.raises(OnnxError, match="wants shape"): r({"x": np.zeros(3, np.float32)})
  with pytest.raises(OnnxError, match="wants FLOAT"): r({"x": np.zeros(2, np.int32)})
  with pytest.raises(OnnxError, match="not inputs of the model"): r({"x": np.zeros(2, np.float32), "zz": 1})

def _external_model(tmp_path, location, offset=0, length=8):
  m = _add_model()
  t = m.graph.initializer[0]
  t.ClearField("raw_data")
  t.data_location = TensorProto.EXTERNAL
  for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
    e = t.external_data.add()
    e.key, e.value = k, v
  d = tmp_path / "model"
  d.mkdir(exist_ok=True)
  (d / "w.bin").write_bytes(struct.pack("<2f", 5.0, 6.0))
  (d / "m.onnx").write_bytes(m.SerializeToString())
  return d / "m.onnx"

def test_external_data_inside_the_folder_loads(tmp_path):
  out = OnnxRunner(_external_model(tmp_path, "w.bin"))({"x": np.array([1.0, 1.0], np.float32)})
  np.testing.assert_array_equal(out["y"].numpy(), [6.0, 7.0])

@pytest.mark.parametrize("loc", ["../secret.bin", "sub/../../secret.bin", "/etc/passwd"])
def test_external_data_may_not_leave_the_folder(tmp_path, loc):
  (tmp_path / "secret.bin").write_bytes(b"\0" * 8)
  with pytest.raises(OnnxError, match="leaves the model's folder|relative path inside"):
    OnnxRunner(_external_model(tmp_path, loc))

def test_external_data_symlink_out_of_the_folder_is_refused(tmp_path):
  (tmp_path / "secret.bin").write_bytes(b"\0" * 8)
  p = _external_model(tmp_path, "link.bin")
  os.symlink(tmp_path / "secret.bin", p.parent / "link.bin")
  with pytest.raises(OnnxError, match="leaves the model's folder"): OnnxRunner(p)

def test_external_data_past_the_end_of_its_file(tmp_path):
  with pytest.raises(OnnxError, match=r"outside 'w.bin' \(8 bytes\)"): OnnxRunner(_external_model(tmp_path, "w.bin", 4, 8))

def test_external_data_from_bytes_needs_a_folder(tmp_path):
  data = _external_model(tmp_path, "w.bin").read_bytes()
  with pytest.raises(OnnxError, match="needs the model's folder"): OnnxRunner(data)

def test_random_bytes_only_raise_onnx_error():
  rng = np.random.default_rng(0)
  good = _add_model().SerializeToString()
  for i in range(300):
    data = bytearray(good)
    for _ in range(1 + i % 4): data[rng.integers(len(data))] = rng.integers(256)
    try: OnnxRunner(bytes(data))
    except OnnxError: pass
