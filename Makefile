# The two set-up commands on a fresh machine are `make demo` and `make test`; each creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JOBS ?= 2

.PHONY: demo test test-symbolic test-python test-llvm test-amd-sweep test-spec3 test-shard lint types fuzz-smoke fuzz-nightly fuzz-mutants fuzz-compare bench clean durations \
	test-nv test-onnx onnx-report test-gpu test-semantics-sweep test-deep-chains test-llvm-matmul test-emulate test-emulate-nv test-emulate-amd replay install

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[testing,lint,nv,llvm,fuzz]'
	touch $(STAMP)

# the virtual environment alone (CI jobs that run its tools from more than one checkout)
install: $(STAMP)

demo: $(STAMP)
	SPEC=2 $(PY) examples/mlp.py

# the Tensor tests on the PYTHON reference backend (same results as CPU), on the CPU's LLVM path and on PYTHON emulating
# NV (the CUDA renderer's exact programs, tensor cores included); every tests/tensor kernel rendered as CUDA, compiled
# for sm_90 by NVRTC + ptxas and run on the host against C; then the whole suite at SPEC=2 with the z3 bounds proof on
# (IGNORE_OOB=0), on every core. The AMD sweeps run a slice here (tests/amd, tests/codegen/test_emulate.py).
test: $(STAMP)
	DEV=PYTHON SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider tests/tensor
	$(MAKE) test-llvm
	$(MAKE) test-emulate-nv
	$(MAKE) test-emulate-amd
	$(MAKE) test-amd-sweep
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider -m slow tests/nv/test_sweep.py
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider

# the Tensor tests with every CPU kernel compiled from LLVM IR by llvmlite's JIT (CPU_LLVM=1) instead of C
test-llvm: $(STAMP)
	CPU_LLVM=1 SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider tests/tensor

# matmuls of big odd shapes (1023^3, KBLOCK-blocked batches) through both CPU paths with default heuristics, against
# numpy (the default suite runs the small shapes)
test-llvm-matmul: $(STAMP)
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider -m slow tests/llvm/test_llvm_ir.py

# every kernel tests/tensor compiles, compiled again for gfx942, gfx1100 and gfx1201 and each code object checked
# (in make test; tests/amd holds the quick checks of single kernels)
test-amd-sweep: $(STAMP)
	CPU_LLVM=1 $(PY) -m tests.amd.sweep

# tests/tensor on the PYTHON backend emulating a GPU: the NV (CUDA) or AMD (LLVM) renderer's exact linear programs,
# tensor cores run with the hardware's register layout (both in make test; tests/codegen/test_emulate.py is the quick slice)
test-emulate: test-emulate-nv test-emulate-amd

test-emulate-nv: $(STAMP)
	DEV=PYTHON EMULATE=NV SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider tests/tensor

test-emulate-amd: $(STAMP)
	for a in AMD_GFX1100 AMD_GFX1201 AMD_GFX942; do \
	  DEV=PYTHON EMULATE=$$a SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider tests/tensor || exit 1; \
	done

test-python: $(STAMP)
	DEV=PYTHON SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider tests/tensor

# the slow NV sweeps (the default suite runs a slice of each): the rendered CUDA of every tests/tensor kernel run on the
# host as C++ against the C backend, and tests/tensor on DEV=NV through a fake libcuda that runs host-built kernels
test-nv: $(STAMP)
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider -m slow tests/nv

# the whole ONNX backend suite (node, simple, pytorch-converted, pytorch-operator; the default suite runs a hashed slice),
# then the per-category pass table that docs/onnx.md quotes
test-onnx: $(STAMP)
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider -m slow tests/onnx
onnx-report: $(STAMP)
	$(PY) -m tests.onnx.backend_report --jobs $(JOBS)

# on a GPU host: the NV backend with the host's python3 and numpy (no venv, no pip): the gpu-marked tests (tests/tensor
# on DEV=NV), then bench/gpu_matmul.py against cuBLAS; see tests/nv/run_gpu.py
test-gpu:
	$(PYTHON) tests/nv/run_gpu.py

test-spec3: $(STAMP)
	SPEC=3 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider

# the semantics table against its z3 translation on every input (the default suite samples them)
test-semantics-sweep: $(STAMP)
	$(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider -m slow tests/uop/test_semantics_crosscheck.py

# 10,000-op lazy chains through codegen and the C compiler (the default suite checks them through the scheduler)
test-deep-chains: $(STAMP)
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider -m slow tests/schedule/test_deep_graphs.py

# every symbolic-shape op of tests/tensor/test_symbolic.py at three bindings (the default suite runs a slice at two)
test-symbolic: $(STAMP)
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider -m slow tests/tensor/test_symbolic.py

# one shard of the suite as CI runs it: make test-shard GROUP=1 SPLITS=2
SPLITS ?= 2
GROUP ?= 1
test-shard: $(STAMP)
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -q -p no:cacheprovider --splits $(SPLITS) --group $(GROUP) --durations-path .test_durations

durations: $(STAMP)
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -q -p no:cacheprovider --store-durations --durations-path .test_durations

lint: $(STAMP)
	$(VENV)/bin/ruff check .

types: $(STAMP)
	$(VENV)/bin/mypy tinygrad fuzz
	$(VENV)/bin/mypy --strict --follow-imports=silent spec replay

fuzz-smoke: $(STAMP)
	$(PY) -m fuzz symbolic --seconds 30

# the nightly campaign (.github/workflows/fuzz-nightly.yml): an hour over every backend, its findings reduced, then
# the report (fuzz_out/report.html, report.md); a backend without its toolchain is named in the log
FUZZ_MINUTES ?= 60
fuzz-nightly: $(STAMP)
	$(PY) -m fuzz run --minutes $(FUZZ_MINUTES) --backends cpu,llvm,python,nv,amd --jobs $(JOBS) --out fuzz_out
	$(PY) -m fuzz report fuzz_out

# the mutation score (fuzz/mutants.py) and rules hit guided vs unguided (fuzz/guidance.py); slow: minutes each
fuzz-mutants: $(STAMP)
	$(PY) -m fuzz mutants --seconds 60
fuzz-compare: $(STAMP)
	$(PY) -m fuzz compare --seconds 600

# process replay against main (docs/replay.md): the suite captured on a temporary git worktree of $(REPLAY_BASE) (your
# checkout is not touched), then every schedule and kernel recompiled with the code checked out here and classified;
# the database and the HTML report are in .replay/. REPLAY_ARGS adds diff options (--assert-no-change, --fresh-opts,
# --target NV, ...); REPLAY_TESTS narrows the capture (default: the whole suite)
REPLAY_BASE ?= main
REPLAY_TESTS ?=
REPLAY_ARGS ?=
replay: $(STAMP)
	rm -rf .replay/base .replay/replay.db .replay/replay.db-wal .replay/replay.db-shm && mkdir -p .replay
	git worktree prune && git worktree add --detach .replay/base $(REPLAY_BASE)
	-cd .replay/base && REPLAY_DB=$(CURDIR)/.replay/replay.db $(abspath $(PY)) -m replay capture -- \
		$(abspath $(PY)) -m pytest -n $(JOBS) -q -p no:cacheprovider $(REPLAY_TESTS)
	git worktree remove --force .replay/base
	$(PY) -m replay diff --db .replay/replay.db --html .replay/report.html $(REPLAY_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info
