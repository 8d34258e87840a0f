"""A protobuf wire-format reader for the ONNX messages, and the model it describes (graphs, nodes, attributes, tensors).

The file is untrusted: every length is checked against the bytes that remain, nesting is bounded, an element count must
be backed by bytes in the file, and external data must sit inside the model's folder. Any defect is an OnnxError naming
the file, the field path (`ModelProto.graph.node[3].attribute[0].t.raw_data`) and the rule broken. Nothing in the file
is executed and nothing but numpy decodes it."""
from __future__ import annotations
import os, struct
from dataclasses import dataclass, field
from typing import Any
import numpy as np

class OnnxError(ValueError):
  """A model that cannot be read or run faithfully; the message names the file or node, the op and opset where known."""

# ---- the schema: message -> field number -> (name, kind, repeated) ----
# kinds: int (varint, two's complement int64), uint (varint uint64), f32, f64, str, bytes, or a message name

F = tuple[str, str, bool]
SCHEMA: dict[str, dict[int, F]] = {
  "ModelProto": {1: ("ir_version", "int", False), 8: ("opset_import", "OperatorSetIdProto", True),
                 2: ("producer_name", "str", False), 3: ("producer_version", "str", False), 4: ("domain", "str", False),
                 5: ("model_version", "int", False), 6: ("doc_string", "str", False), 7: ("graph", "GraphProto", False),
                 14: ("metadata_props", "StringStringEntryProto", True), 25: ("functions", "FunctionProto", True)},
  "OperatorSetIdProto": {1: ("domain", "str", False), 2: ("version", "int", False)},
  "StringStringEntryProto": {1: ("key", "str", False), 2: ("value", "str", False)},
  "GraphProto": {1: ("node", "NodeProto", True), 2: ("name", "str", False), 5: ("initializer", "TensorProto", True),
                 15: ("sparse_initializer", "SparseTensorProto", True), 10: ("doc_string", "str", False),
                 11: ("input", "ValueInfoProto", True), 12: ("output", "ValueInfoProto", True),
                 13: ("value_info", "ValueInfoProto", True)},
  "NodeProto": {1: ("input", "str", True), 2: ("output", "str", True), 3: ("name", "str", False),
                4: ("op_type", "str", False), 7: ("domain", "str", False), 8: ("overload", "str", False),
                5: ("attribute", "AttributeProto", True), 6: ("doc_string", "str", False)},
  "AttributeProto": {1: ("name", "str", False), 21: ("ref_attr_name", "str", False), 13: ("doc_string", "str", False),
                     20: ("type", "int", False), 2: ("f", "f32", False), 3: ("i", "int", False),
                     4: ("s", "bytes", False),
                     5: ("t", "TensorProto", False), 6: ("g", "GraphProto", False),
                     22: ("sparse_tensor", "SparseTensorProto", False), 14: ("tp", "TypeProto", False),
                     7: ("floats", "f32", True), 8: ("ints", "int", True), 9: ("strings", "bytes", True),
                     10: ("tensors", "TensorProto", True), 11: ("graphs", "GraphProto", True),
                     23: ("sparse_tensors", "SparseTensorProto", True), 15: ("type_protos", "TypeProto", True)},
  "ValueInfoProto": {1: ("name", "str", False), 2: ("type", "TypeProto", False), 3: ("doc_string", "str", False)},
  "TypeProto": {1: ("tensor_type", "TypeProto.Tensor", False), 4: ("sequence_type", "TypeProto.Sequence", False),
                5: ("map_type", "TypeProto.Map", False), 9: ("optional_type", "TypeProto.Optional", False),
                8: ("sparse_tensor_type", "TypeProto.Tensor", False), 6: ("denotation", "str", False)},
  "TypeProto.Tensor": {1: ("elem_type", "int", False), 2: ("shape", "TensorShapeProto", False)},
  "TypeProto.Sequence": {1: ("elem_type", "TypeProto", False)},
  "TypeProto.Optional": {1: ("elem_type", "TypeProto", False)},
  "TypeProto.Map": {1: ("key_type", "int", False), 2: ("value_type", "TypeProto", False)},
  "TensorShapeProto": {1: ("dim", "TensorShapeProto.Dimension", True)},
  "TensorShapeProto.Dimension": {1: ("dim_value", "int", False), 2: ("dim_param", "str", False),
                                 3: ("denotation", "str", False)},
  "TensorProto": {1: ("dims", "int", True), 2: ("data_type", "int", False),
                  3: ("segment", "TensorProto.Segment", False),
                  4: ("float_data", "f32", True), 5: ("int32_data", "int", True), 6: ("string_data", "bytes", True),
                  7: ("int64_data", "int", True), 8: ("name", "str", False), 12: ("doc_string", "str", False),
                  9: ("raw_data", "bytes", False), 13: ("external_data", "StringStringEntryProto", True),
                  14: ("data_location", "int", False), 10: ("double_data", "f64", True),
                  11: ("uint64_data", "uint", True)},
  "TensorProto.Segment": {1: ("begin", "int", False), 2: ("end", "int", False)},
  "SparseTensorProto": {1: ("values", "TensorProto", False), 2: ("indices", "TensorProto", False),
                        3: ("dims", "int", True)},
  "FunctionProto": {1: ("name", "str", False), 4: ("input", "str", True), 5: ("output", "str", True),
                    6: ("attribute", "str", True), 11: ("attribute_proto", "AttributeProto", True),
                    7: ("node", "NodeProto", True), 8: ("doc_string", "str", False),
                    9: ("opset_import", "OperatorSetIdProto", True), 10: ("domain", "str", False),
                    13: ("overload", "str", False)},
}
_NUMERIC = {"int": 0, "uint": 0, "f32": 5, "f64": 1}  # kind -> the wire type of one unpacked element
MAX_DEPTH = 64  # nesting of messages (a graph in an attribute of a node of a graph ...): Python's stack stays safe

class Msg:
  """A decoded message: attributes are its fields (defaults for absent ones), `_type` its message name, `_present` the
  names of the fields the bytes set."""
  def __init__(self, mtype: str):
    self._type, self._present = mtype, set[str]()
    for name, kind, rep in SCHEMA[mtype].values():
      setattr(self, name, [] if rep else None if kind in SCHEMA else b"" if kind == "bytes" else "" if kind == "str"
              else 0.0 if kind in ("f32", "f64") else 0)
  def has(self, name: str) -> bool: return name in self._present
  # NOTE: the fields are set in __init__ from SCHEMA; this only tells mypy that they exist
  def __getattr__(self, name: str) -> Any: raise AttributeError(f"{self._type} has no field {name!r}")
  def __repr__(self) -> str: return f"<{self._type} {sorted(self._present)}>"

class _Reader:
  def __init__(self, src: str): self.src = src
  def fail(self, path: tuple, what: str) -> OnnxError: return OnnxError(f"{self.src}: {_fmt_path(path)}: {what}")
  def varint(self, buf: memoryview, pos: int, end: int, path: tuple) -> tuple[int, int]:
    ret, shift = 0, 0
    while True:
      if pos >= end: raise self.fail(path, "a varint runs past the end of its message (truncated file?)")
      b = buf[pos]
      pos += 1
      ret |= (b & 0x7f) << shift
      if not b & 0x80: return ret, pos
      shift += 7
      if shift >= 70: raise self.fail(path, "a varint is longer than 10 bytes")
  def message(self, mtype: str, buf: memoryview, pos: int, end: int, path: tuple, depth: int) -> Msg:
    if depth > MAX_DEPTH: raise self.fail(path, f"messages nest deeper than {MAX_DEPTH} levels")
    schema, msg = SCHEMA[mtype], Msg(mtype)
    while pos < end:
      key, pos = self.varint(buf, pos, end, path)
      fno, wt = key >> 3, key & 7
      if fno == 0: raise self.fail(path, "field number 0 is not valid protobuf")
      spec = schema.get(fno)
      fpath = path + ((spec[0] if spec else f"<field {fno}>"),)
      val: Any
      if wt == 0: val, pos = self.varint(buf, pos, end, fpath)
      elif wt == 1 or wt == 5:
        n = 8 if wt == 1 else 4
        if pos + n > end: raise self.fail(fpath, f"a fixed{n*8} value runs past the end of its message")
        val, pos = bytes(buf[pos:pos + n]), pos + n
      elif wt == 2:
        ln, pos = self.varint(buf, pos, end, fpath)
        if ln > end - pos:
          raise self.fail(fpath, f"length {ln} runs past the end of its message ({end - pos} bytes left)")
        val, pos = (pos, pos + ln), pos + ln
      else: raise self.fail(fpath, f"wire type {wt} (groups or invalid) is not used by ONNX")
      if spec is None: continue  # NOTE: unknown fields (newer ONNX versions) are skipped, their bounds checked above
      self.store(msg, spec, wt, val, buf, fpath, depth)
    return msg
  def store(self, msg: Msg, spec: F, wt: int, val: Any, buf: memoryview, path: tuple, depth: int) -> None:
    name, kind, rep = spec
    msg._present.add(name)
    if kind in _NUMERIC:
      if rep and wt == 2: vals = self.packed(kind, buf, val[0], val[1], path)
      elif wt != _NUMERIC[kind]: raise self.fail(path, f"wire type {wt} for a {kind} field")
      else: vals = [_scalar(kind, val)]
      if rep: getattr(msg, name).extend(vals)
      else: setattr(msg, name, vals[-1])
      return
    if wt != 2: raise self.fail(path, f"wire type {wt} for a length-delimited ({kind}) field")
    s, e = val
    if kind == "bytes": v: Any = buf[s:e]
    elif kind == "str":
      try: v = str(buf[s:e], "utf-8")
      except UnicodeDecodeError as ex: raise self.fail(path, f"a string that is not UTF-8 ({ex.reason})") from None
    else:
      idx = len(getattr(msg, name)) if rep else None
      v = self.message(kind, buf, s, e, path[:-1] + ((path[-1], idx),) if rep else path, depth + 1)
    if rep: getattr(msg, name).append(v)
    else: setattr(msg, name, v)
  def packed(self, kind: str, buf: memoryview, s: int, e: int, path: tuple) -> list:
    if kind in ("f32", "f64"):
      n = 4 if kind == "f32" else 8
      if (e - s) % n: raise self.fail(path, f"packed {kind} data of {e - s} bytes is not a multiple of {n}")
      return np.frombuffer(buf[s:e], dtype="<f4" if n == 4 else "<f8").tolist()
    out, pos = [], s
    while pos < e:
      v, pos = self.varint(buf, pos, e, path)
      out.append(_scalar(kind, v))
    return out

def _scalar(kind: str, v: Any) -> Any:
  if kind == "int": return v - (1 << 64) if v >= 1 << 63 else v
  if kind == "uint": return v & ((1 << 64) - 1)
  if kind == "f32": return struct.unpack("<f", v)[0]
  return struct.unpack("<d", v)[0]

def _fmt_path(path: tuple) -> str:
  return ".".join(p if isinstance(p, str) else f"{p[0]}[{p[1]}]" for p in path)

def parse_message(data: bytes | memoryview, mtype: str = "ModelProto", src: str = "<bytes>") -> Msg:
  """Decode one message of `mtype` from protobuf bytes (OnnxError on any defect)."""
  buf = memoryview(data).cast("B") if not isinstance(data, memoryview) else data.cast("B")
  return _Reader(src).message(mtype, buf, 0, len(buf), (mtype,), 0)

# ---- dtypes ----

# onnx TensorProto.DataType -> (name, numpy dtype of one stored element, typed field that holds it when not raw)
ONNX_TYPES: dict[int, tuple[str, str, str]] = {
  1: ("FLOAT", "<f4", "float_data"), 2: ("UINT8", "u1", "int32_data"), 3: ("INT8", "i1", "int32_data"),
  4: ("UINT16", "<u2", "int32_data"), 5: ("INT16", "<i2", "int32_data"), 6: ("INT32", "<i4", "int32_data"),
  7: ("INT64", "<i8", "int64_data"), 8: ("STRING", "O", "string_data"), 9: ("BOOL", "?", "int32_data"),
  10: ("FLOAT16", "<f2", "int32_data"), 11: ("DOUBLE", "<f8", "double_data"), 12: ("UINT32", "<u4", "uint64_data"),
  13: ("UINT64", "<u8", "uint64_data"), 14: ("COMPLEX64", "<c8", "float_data"),
  15: ("COMPLEX128", "<c16", "double_data"),
  16: ("BFLOAT16", "<u2", "int32_data"), 17: ("FLOAT8E4M3FN", "u1", "int32_data"),
  18: ("FLOAT8E4M3FNUZ", "u1", "int32_data"), 19: ("FLOAT8E5M2", "u1", "int32_data"),
  20: ("FLOAT8E5M2FNUZ", "u1", "int32_data"), 21: ("UINT4", "u1", "int32_data"), 22: ("INT4", "u1", "int32_data"),
  23: ("FLOAT4E2M1", "u1", "int32_data"), 24: ("FLOAT8E8M0", "u1", "int32_data"), 25: ("UINT2", "u1", "int32_data"),
  26: ("INT2", "u1", "int32_data"), 27: ("FLOAT6E2M3", "u1", "int32_data"), 28: ("FLOAT6E3M2", "u1", "int32_data"),
}
_SUBBYTE = {21: 4, 22: 4, 23: 4, 25: 2, 26: 2}  # packed several to a byte, low bits first

def type_name(code: int) -> str: return ONNX_TYPES[code][0] if code in ONNX_TYPES else f"<data type {code}>"

# ---- the model ----

@dataclass
class ValueInfo:
  name: str
  kind: str                       # tensor, sequence, optional, map, sparse, or "" when the file gives no type
  elem: int = 0                   # onnx data type code of the tensor (or of the sequence's/optional's tensor)
  shape: tuple[int | str | None, ...] | None = None  # ints, named dims (str), unknown dims (None); None: rank unknown

@dataclass
class Node:
  op: str
  domain: str
  inputs: list[str]
  outputs: list[str]
  name: str
  attrs: dict[str, Any]
  # attribute -> the calling node's attribute it refers to (inside functions)
  refs: dict[str, str] = field(default_factory=dict)
  def label(self) -> str: return f"node {self.name!r} ({self.domain + '.' if self.domain else ''}{self.op})"

@dataclass
class Graph:
  name: str
  nodes: list[Node]
  initializers: dict[str, Msg]
  inputs: list[ValueInfo]
  outputs: list[ValueInfo]
  sparse_initializers: dict[str, Msg] = field(default_factory=dict)

@dataclass
class Function:
  name: str
  domain: str
  inputs: list[str]
  outputs: list[str]
  attr_names: list[str]
  attr_defaults: dict[str, Any]
  nodes: list[Node]
  opsets: dict[str, int]

@dataclass
class Model:
  ir_version: int
  opsets: dict[str, int]
  graph: Graph
  functions: dict[tuple[str, str], Function]
  src: str
  base_dir: str | None
  producer: str = ""

def _domain(d: str) -> str: return "" if d == "ai.onnx" else d

def value_info(v: Msg) -> ValueInfo:
  t = v.type
  if t is None: return ValueInfo(v.name, "")
  for kind, f in (("tensor", "tensor_type"), ("sparse", "sparse_tensor_type")):
    if t.has(f):
      tt = getattr(t, f)
      shape = None if tt.shape is None else tuple(d.dim_value if d.has("dim_value") else d.dim_param or None
                                                  for d in tt.shape.dim)
      return ValueInfo(v.name, kind, tt.elem_type, shape)
  for kind, f in (("sequence", "sequence_type"), ("optional", "optional_type")):
    if t.has(f):
      inner = getattr(t, f).elem_type
      sub = value_info(_wrap(v.name, inner)) if inner is not None else ValueInfo(v.name, "")
      return ValueInfo(v.name, kind if sub.kind == "tensor" else f"{kind}({sub.kind})", sub.elem, sub.shape)
  return ValueInfo(v.name, "map" if t.has("map_type") else "")

def _wrap(name: str, t: Msg) -> Msg:
  m = Msg("ValueInfoProto")
  setattr(m, "name", name)
  setattr(m, "type", t)
  return m

ATTR_FIELDS = {1: "f", 2: "i", 3: "s", 4: "t", 5: "g", 6: "floats", 7: "ints", 8: "strings", 9: "tensors", 10: "graphs",
               11: "sparse_tensor", 12: "sparse_tensors", 13: "tp", 14: "type_protos"}

def attr_value(a: Msg, where: str) -> Any:
  atype = a.type
  if atype == 0:
    # NOTE: files from IR version 1 leave the type out: take the one field that is set
    set_fields = [k for k, f in ATTR_FIELDS.items() if a.has(f)]
    if len(set_fields) != 1: raise OnnxError(f"{where}: attribute {a.name!r} has no type and {len(set_fields)} values")
    atype = set_fields[0]
  if atype not in ATTR_FIELDS: raise OnnxError(f"{where}: attribute {a.name!r} has an unknown type {atype}")
  v = getattr(a, ATTR_FIELDS[atype])
  if atype == 3: return _text(v)
  if atype == 8: return [_text(s) for s in v]
  if atype == 5: return graph(v, f"{where} attribute {a.name!r}")
  if atype == 10: return [graph(g, f"{where} attribute {a.name!r}") for g in v]
  if atype in (6, 7): return list(v)
  return v

def _text(b: memoryview | bytes) -> str | bytes:
  try: return str(b, "utf-8")
  except UnicodeDecodeError: return bytes(b)

def node(n: Msg, idx: int, where: str) -> Node:
  nm = n.name or f"#{idx}"
  label = f"{where} node {nm!r} ({n.op_type})"
  if not n.op_type: raise OnnxError(f"{label}: the node has no op_type")
  attrs: dict[str, Any] = {}
  refs: dict[str, str] = {}
  for a in n.attribute:
    if not a.name: raise OnnxError(f"{label}: an attribute without a name")
    if a.name in attrs or a.name in refs: raise OnnxError(f"{label}: attribute {a.name!r} is given twice")
    if a.ref_attr_name: refs[a.name] = a.ref_attr_name
    else: attrs[a.name] = attr_value(a, label)
  return Node(n.op_type, _domain(n.domain), list(n.input), list(n.output), nm, attrs, refs)

def graph(g: Msg | None, where: str) -> Graph:
  if g is None: raise OnnxError(f"{where}: no graph")
  inits: dict[str, Msg] = {}
  for t in g.initializer:
    if not t.name: raise OnnxError(f"{where}: graph {g.name!r} has an initializer without a name")
    inits[t.name] = t
  sparse = {s.values.name: s for s in g.sparse_initializer if s.values is not None and s.values.name}
  nodes = [node(n, i, f"{where} graph {g.name!r}" if where else f"graph {g.name!r}") for i, n in enumerate(g.node)]
  return Graph(g.name, nodes, inits, [value_info(v) for v in g.input], [value_info(v) for v in g.output], sparse)

def function(f: Msg) -> Function:
  where = f"function {f.domain}.{f.name}"
  defaults = {a.name: attr_value(a, where) for a in f.attribute_proto}
  nodes = [node(n, i, where) for i, n in enumerate(f.node)]
  return Function(f.name, _domain(f.domain), list(f.input), list(f.output), list(f.attribute) + list(defaults),
                  defaults, nodes, {_domain(o.domain): o.version for o in f.opset_import})

def load_model(data: bytes | memoryview, src: str = "<bytes>", base_dir: str | None = None) -> Model:
  m = parse_message(data, "ModelProto", src)
  if m.graph is None: raise OnnxError(f"{src}: ModelProto has no graph (not an ONNX model?)")
  opsets: dict[str, int] = {}
  for o in m.opset_import: opsets[_domain(o.domain)] = o.version
  # NOTE: IR version 1 models carry no opset_import; they mean opset 1 of the default domain
  if "" not in opsets and not m.opset_import: opsets[""] = 1
  try: g = graph(m.graph, "")
  except OnnxError as e: raise OnnxError(f"{src}: {e}") from None
  funcs = {(f.domain, f.name): f for f in (function(x) for x in m.functions)}
  return Model(m.ir_version, opsets, g, funcs, src, base_dir, m.producer_name)

# ---- tensors: bytes of the file -> numpy storage ----

def tensor_to_numpy(t: Msg, base_dir: str | None, where: str) -> tuple[np.ndarray, int]:
  """The stored elements of a TensorProto as numpy (its shape; sub-byte types unpacked to one byte each, 16-bit and
  8-bit floats as their bit patterns), and its onnx data type code."""
  code, dims = t.data_type, tuple(t.dims)
  label = f"{where} tensor {t.name!r}" if t.name else f"{where} tensor"
  if code not in ONNX_TYPES: raise OnnxError(f"{label}: unknown data type {code}")
  if any(d < 0 for d in dims): raise OnnxError(f"{label}: negative dimension in {dims}")
  name, npdt, typed = ONNX_TYPES[code]
  if name == "STRING": raise OnnxError(f"{label}: string tensors are not supported (no string dtype on the device)")
  if t.has("segment"): raise OnnxError(f"{label}: segmented tensors are not supported")
  n = 1
  for d in dims: n *= d
  bits = _SUBBYTE.get(code)
  if t.data_location == 1 or t.external_data: raw: Any = external_bytes(t, base_dir, label)
  elif t.has("raw_data"): raw = t.raw_data
  else: raw = None
  if raw is not None:
    per = np.dtype(npdt).itemsize
    need = (n * bits + 7) // 8 if bits else n * per
    if len(raw) != need: raise OnnxError(f"{label}: {len(raw)} bytes of data for shape {dims} of {name} (needs {need})")
    arr = np.frombuffer(raw, dtype=npdt).copy() if not bits else _unpack_bits(np.frombuffer(raw, np.uint8), bits, n)
  else:
    vals = getattr(t, typed)
    count = (n * bits + 7) // 8 if bits else n
    if code in (14, 15): count = 2 * n
    if len(vals) != count:
      raise OnnxError(f"{label}: {len(vals)} values in {typed} for shape {dims} of {name} (needs {count})")
    arr = _from_typed(code, npdt, vals, bits, n)
  return arr.reshape(dims), code

def _unpack_bits(packed: np.ndarray, bits: int, n: int) -> np.ndarray:
  per = 8 // bits
  out = np.stack([(packed >> (bits * i)) & ((1 << bits) - 1) for i in range(per)], axis=-1).reshape(-1)
  return out[:n].astype(np.uint8)

def _from_typed(code: int, npdt: str, vals: list, bits: int | None, n: int) -> np.ndarray:
  if bits: return _unpack_bits(np.array(vals, dtype=np.int64).astype(np.uint8), bits, n)
  if code in (14, 15): return np.array(vals, dtype="<f4" if code == 14 else "<f8").view(npdt)
  if code == 10: return np.array(vals, dtype=np.int64).astype(np.uint16).view(np.float16)
  if code == 9: return np.array(vals, dtype=np.int64) != 0
  return np.array(vals, dtype=np.int64 if code != 13 else np.uint64).astype(npdt) if code not in (1, 11) \
    else np.array(vals, dtype=npdt)

def external_bytes(t: Msg, base_dir: str | None, label: str) -> bytes:
  info = {e.key: e.value for e in t.external_data}
  loc = info.get("location")
  if not loc: raise OnnxError(f"{label}: external data without a location")
  if base_dir is None: raise OnnxError(f"{label}: external data {loc!r} needs the model's folder (load from a path)")
  if os.path.isabs(loc) or "\\" in loc or "\x00" in loc:
    raise OnnxError(f"{label}: external data location {loc!r} must be a relative path inside the model's folder")
  root = os.path.realpath(base_dir)
  path = os.path.realpath(os.path.join(root, loc))
  if os.path.commonpath([root, path]) != root:
    raise OnnxError(f"{label}: external data location {loc!r} leaves the model's folder {root}")
  if not os.path.isfile(path): raise OnnxError(f"{label}: external data file {loc!r} does not exist in {root}")
  try: off, length = int(info.get("offset", "0")), int(info["length"]) if "length" in info else None
  except ValueError: raise OnnxError(f"{label}: external data offset/length are not integers: {info}") from None
  size = os.path.getsize(path)
  if length is None: length = size - off
  if off < 0 or length < 0 or off + length > size:
    raise OnnxError(f"{label}: external data [{off}, {off}+{length}) is outside {loc!r} ({size} bytes)")
  with open(path, "rb") as f:
    f.seek(off)
    return f.read(length)
