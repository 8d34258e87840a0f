#!/usr/bin/env python3
"""atheris target, ONNX loader: `python fuzz/targets/load_onnx.py -runs=10000 -rss_limit_mb=2048 -timeout=10 corpus/`.
Each input is a model file's bytes for OnnxRunner (the protobuf reader, the model structure, initializer decoding and
the op check at load). Anything but an OnnxError is a finding (libFuzzer writes the input as crash-<sha1>); memory and
time are capped by libFuzzer's -rss_limit_mb and -timeout. A valid seed model is written to the first corpus directory
when it is empty, so mutations start from real structure."""
import os, sys
# NOTE: run as a script, the repository root is not on sys.path
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

def seed_model() -> bytes:
  """A small valid model written by hand with our own field numbers (the onnx package is not a fuzz dependency)."""
  def ld(key: int, payload: bytes) -> bytes:
    n, out = len(payload), bytearray([key])
    while n >= 0x80: out.append(n & 0x7f | 0x80); n >>= 7
    return bytes(out) + bytes([n]) + payload
  s = lambda key, text: ld(key, text.encode())
  dims = lambda *ds: b"".join(b"\x08" + bytes([d]) for d in ds)
  vi = lambda name: ld(0x0a, name.encode()) + ld(0x12, ld(0x0a, b"\x08\x01" + ld(0x12, ld(0x0a, b"\x08\x02"))))
  init = dims(2) + b"\x10\x01" + s(0x42, "w") + ld(0x4a, b"\x00\x00\x80\x3f\x00\x00\x00\x40")
  node = s(0x0a, "x") + s(0x0a, "w") + s(0x12, "y") + s(0x1a, "add0") + s(0x22, "Add")
  graph = ld(0x0a, node) + s(0x12, "g") + ld(0x2a, init) + ld(0x5a, vi("x")) + ld(0x62, vi("y"))
  return b"\x08\x08" + ld(0x42, b"\x10\x11") + ld(0x3a, graph)

def test_one_input(data: bytes) -> None:
  from tinygrad.nn.onnx import OnnxRunner, OnnxError
  try: OnnxRunner(data)
  except OnnxError: pass

def main(argv: list[str]) -> None:
  import atheris
  dirs = [a for a in argv[1:] if not a.startswith("-")]
  if dirs and os.path.isdir(dirs[0]) and not os.listdir(dirs[0]):
    with open(os.path.join(dirs[0], "seed.onnx"), "wb") as f: f.write(seed_model())
  with atheris.instrument_imports():
    import tinygrad.nn.onnx  # noqa: F401
  atheris.Setup(argv, test_one_input)
  atheris.Fuzz()

if __name__ == "__main__": main(sys.argv)
