#!/bin/bash -eu
# ClusterFuzzLite build: install the project with what the kernel and symbolic levels need (numpy, z3, the LLVM and
# NV toolchains stay out: the targets check on the PYTHON backend by default), then one PyInstaller binary per atheris
# target in $OUT, named after the file (kernel_target, symbolic_target, pyrender_target: the exec-free pyrender reader
# under its memory and time caps and audit hook). The levels import their modules lazily, so the packages are
# collected whole. The reader's target gets its dictionary of the grammar's tokens next to it (<fuzzer>.dict).
pip3 install ".[fuzz]"
for target in fuzz/targets/kernel_target.py fuzz/targets/symbolic_target.py fuzz/targets/pyrender_target.py; do
  compile_python_fuzzer "$target" --collect-submodules=tinygrad --collect-submodules=fuzz --collect-submodules=spec
done
cp fuzz/targets/pyrender.dict "$OUT/pyrender_target.dict"
