#!/bin/bash -eu
# ClusterFuzzLite build: install the project with what the kernel and symbolic levels need (numpy, z3, the LLVM and
# NV toolchains stay out: the targets check on the PYTHON backend by default), then one PyInstaller binary per atheris
# target in $OUT, named after the file (kernel_target, symbolic_target, pyrender_target: the exec-free pyrender reader
# under its memory and time caps and audit hook, load_torch_target, ...). The levels import their modules lazily, so
# the packages are collected whole. The reader's target gets its dictionary of the grammar's tokens next to it
# (<fuzzer>.dict).
pip3 install ".[fuzz,llm]"  # llm: jinja2, for the chat-template target
for target in fuzz/targets/kernel_target.py fuzz/targets/symbolic_target.py fuzz/targets/pyrender_target.py; do
  compile_python_fuzzer "$target" --collect-submodules=tinygrad --collect-submodules=fuzz --collect-submodules=spec
done
# the checkpoint readers: the file's bytes go to safe_load, torch_load or gguf_load; each gets its seed files as
# <name>_seed_corpus.zip (ClusterFuzzLite starts from it) and the seeds inside the binary (the driver runs them once
# before arming its audit hook)
for fmt in safetensors torch gguf; do
  compile_python_fuzzer "fuzz/targets/load_${fmt}_target.py" --collect-submodules=tinygrad --collect-submodules=fuzz \
    --add-data "fuzz/targets/seeds/load_${fmt}:fuzz/targets/seeds/load_${fmt}"
  (cd "fuzz/targets/seeds/load_${fmt}" && zip -q -j "$OUT/load_${fmt}_target_seed_corpus.zip" ./*)
done
cp fuzz/targets/pyrender.dict "$OUT/pyrender_target.dict"
# the other untrusted readers: ONNX models (the protobuf reader and the model check) and GGUF chat templates (the
# jinja sandbox); each writes its seeds into an empty corpus directory itself
compile_python_fuzzer fuzz/targets/load_onnx.py --collect-submodules=tinygrad --collect-submodules=fuzz
compile_python_fuzzer fuzz/targets/chat_template_target.py --collect-submodules=tinygrad --collect-submodules=fuzz \
  --collect-submodules=jinja2
