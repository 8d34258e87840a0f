#!/usr/bin/env python3
"""Write the seed corpora of the checkpoint-reader targets (fuzz/targets/seeds/load_<fmt>/): small valid files of each
format, written by the format's own writers (torch.save, gguf.GGUFWriter; safetensors by our safe_save, which torch's
reader checks in tests/nn/test_state.py). Needs the testing extra (torch, gguf); the seeds are committed, so the
targets themselves need neither.

    python fuzz/targets/load_seeds.py"""
from __future__ import annotations
import collections, io, os, sys, zipfile
from typing import Any
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import numpy as np  # noqa: E402

SEEDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")

def _write(fmt: str, name: str, data: bytes) -> None:
  os.makedirs(d := os.path.join(SEEDS, f"load_{fmt}"), exist_ok=True)
  with open(os.path.join(d, name), "wb") as f: f.write(data)

def safetensors_seeds() -> None:
  import tempfile
  from tinygrad import Tensor, dtypes
  from tinygrad.nn.state import safe_save
  sets = {
    "f32_i64_meta": ({"w": Tensor([[1.5, -2.0, 3.0], [0.25, 0.0, -1.0]]), "idx": Tensor([3, 1, 2], dtype=dtypes.int64)},
                     {"format": "pt"}),
    "bf16_bool_u8": ({"h": Tensor([1.0, -0.5], dtype=dtypes.bfloat16), "m": Tensor([True, False, True]),
                      "b": Tensor([0, 255, 7], dtype=dtypes.uint8)}, None),
    "empty_scalar_fp8": ({"e": Tensor.zeros(0, 3), "s": Tensor(2.0), "q": Tensor([0.5, 1.0], dtype=dtypes.fp8e4m3)},
                         None)}
  with tempfile.TemporaryDirectory() as td:
    for name, (tensors, meta) in sets.items():
      safe_save(tensors, fn := os.path.join(td, name), meta)
      with open(fn, "rb") as f: _write("safetensors", f"{name}.safetensors", f.read())

def _torch_bytes(obj: object, **kw: object) -> bytes:
  import torch
  b = io.BytesIO()
  torch.save(obj, b, **kw)  # type: ignore[arg-type]
  return b.getvalue()

def torch_seeds() -> None:
  import torch
  base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
  sd = collections.OrderedDict(w=base, t=base.t()[1:3], e=base[1, ::2], b=torch.tensor([True, False]),
                               h=torch.tensor([1.5, -2.0], dtype=torch.bfloat16), i=torch.tensor([7, -8]),
                               s=torch.tensor(0.5), tied=base)
  _write("torch", "state_dict.pth", _torch_bytes(sd))
  _write("torch", "legacy.pth", _torch_bytes(sd, _use_new_zipfile_serialization=False))
  _write("torch", "nested.pth", _torch_bytes({"model": {"layer.0": torch.ones(2, 2)}, "step": 3, "lr": [0.1, (1, None)],
                                              "p": torch.nn.Parameter(torch.zeros(2))}))
  _write("torch", "u16_f8.pth", _torch_bytes({"u": torch.tensor([1, 2], dtype=torch.uint16),
                                              "f": torch.tensor([0.5, 2.0]).to(torch.float8_e4m3fn)}))
  # the same archive with its entries deflated (torch stores them; a re-zipped checkpoint has them compressed)
  with zipfile.ZipFile(io.BytesIO(_torch_bytes(sd))) as z: members = {n: z.read(n) for n in z.namelist()}
  out = io.BytesIO()
  with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
    for n, data in members.items(): z.writestr(n, data)
  _write("torch", "deflated.pth", out.getvalue())

def gguf_seeds() -> None:
  import tempfile
  import gguf
  from gguf import GGMLQuantizationType as Q
  rng = np.random.default_rng(0)
  with tempfile.TemporaryDirectory() as td:
    files: dict[str, dict[str, Any]] = {
      "f32_f16_meta": {"tok": rng.standard_normal((2, 8)).astype(np.float32), "norm": np.ones(8, np.float16)},
      "q8_0_q4_0": {"q8": (Q.Q8_0, (2, 32)), "q4": (Q.Q4_0, (1, 32))}}
    for name, tensors in files.items():
      w = gguf.GGUFWriter(fn := os.path.join(td, name), "llama")
      w.add_uint32("llama.block_count", 1)
      w.add_float32("llama.rope.freq_base", 10000.0)
      w.add_bool("general.flag", True)
      w.add_array("tokenizer.ggml.tokens", ["<s>", "a", "b"])
      w.add_array("tokenizer.ggml.scores", [0.0, -1.0, -2.0])
      for tname, spec in tensors.items():
        if isinstance(spec, np.ndarray): w.add_tensor(tname, spec)
        else:
          qtype, shape = spec
          raw = gguf.quants.quantize(rng.standard_normal(shape).astype(np.float32), qtype)
          w.add_tensor(tname, raw, raw_dtype=qtype)
      w.write_header_to_file()
      w.write_kv_data_to_file()
      w.write_tensors_to_file()
      w.close()
      with open(fn, "rb") as f: _write("gguf", f"{name}.gguf", f.read())

if __name__ == "__main__":
  safetensors_seeds()
  torch_seeds()
  gguf_seeds()
  for d in sorted(os.listdir(SEEDS)):
    print(d, {n: os.path.getsize(os.path.join(SEEDS, d, n)) for n in sorted(os.listdir(os.path.join(SEEDS, d)))})
