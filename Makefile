# The two set-up commands on a fresh machine are `make demo` and `make test`; each creates .venv and installs what it needs.
# `make demo` installs the core package only (numpy: ~100 MB); `make test` installs every extra (~2.4 GB: torch, the
# NVIDIA toolchain, llvmlite and zig, z3, atheris); other targets install the extras they use. pip prints what it
# fetches as it goes (no -q): the full install takes a few minutes on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EXTRA := $(VENV)/.installed-
# NOTE: pytest-xdist workers for the suite; CI's machines have 2 cores (`make test JOBS=8` on a bigger one)
JOBS ?= 2

.PHONY: demo test test-symbolic test-python test-llvm test-c test-llm-slow test-amd-sweep test-spec3 test-shard lint types fuzz-smoke fuzz-nightly fuzz-mutants fuzz-compare fuzz-loaders fuzz-parser fuzz-planted bench-llm clean durations \
	test-nv test-onnx onnx-report test-gpu test-semantics-sweep test-deep-chains test-llvm-matmul test-emulate test-emulate-nv test-emulate-amd replay install \
	test-ops-targets test-gpu-sweep chromium viz-docs test-multi replay-models test-models-slow

$(PY):
	$(PYTHON) -m venv $(VENV)

# one extra at a time (make fuzz-smoke installs `fuzz`, make lint `lint`); `core` is the package alone
$(EXTRA)%: pyproject.toml | $(PY)
	@echo "installing tinygrad-harness[$*] into $(VENV)"
	$(PY) -m pip install -e '.[$*]'
	touch $@
$(EXTRA)core: pyproject.toml | $(PY)
	@echo "installing tinygrad-harness (numpy only) into $(VENV)"
	$(PY) -m pip install -e .
	touch $@

# everything the suite needs
$(STAMP): pyproject.toml | $(PY)
	@echo "installing tinygrad-harness with every extra into $(VENV) (~2.4 GB: torch, the NVIDIA toolchain, llvmlite, zig)"
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e '.[testing,lint,nv,llvm,fuzz]'
	touch $(STAMP) $(EXTRA)core $(EXTRA)testing $(EXTRA)lint $(EXTRA)nv $(EXTRA)llvm $(EXTRA)fuzz

# Debian's chromium, which the viewer's browser tests (tests/viz) drive through playwright (never a browser download):
# installed here where make runs as root with apt-get; elsewhere the tests fail and say what to install
chromium:
	@if ! command -v chromium >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing Debian's chromium for tests/viz"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; fi

# bench/llm.py with its llama.cpp column: the bench-llm extra builds llama-cpp-python from source (10-20 minutes on 2
# cores, once; never part of make test). BENCH_LLM_ARGS passes options (--dim 512 --layers 4 for a quick run)
BENCH_LLM_ARGS ?=
bench-llm: $(STAMP) $(EXTRA)bench-llm
	$(PY) bench/llm.py $(BENCH_LLM_ARGS)

# the virtual environment alone (CI jobs that run its tools from more than one checkout)
install: $(STAMP)

demo: $(EXTRA)core
	SPEC=2 $(PY) examples/mlp.py

# the Tensor tests on the PYTHON reference backend (same results as CPU), on the CPU's C path (CPU_LLVM=0; the suite
# runs the default, LLVM, as llvmlite is installed) and on PYTHON emulating NV (the CUDA renderer's exact programs, tensor cores included); the
# pyrender reader fuzzed for 30 s (fuzz-parser);
# then the whole suite at SPEC=2 with the z3 bounds proof on (IGNORE_OOB=0), on $(JOBS) cores (JOBS=2 unless given);
# the checkpoint readers fuzzed for 30 s each (fuzz-loaders). The whole suite holds a slice of each target sweep; the
# sweeps themselves are CI jobs of their own: test-nv (every tests/tensor kernel as CUDA, run against C),
# test-emulate-amd (tests/tensor on each AMD emulation), test-amd-sweep (every tests/tensor kernel for each AMD arch)
test: $(STAMP) chromium
	DEV=PYTHON SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider tests/tensor
	$(MAKE) test-c
	$(MAKE) test-emulate-nv
	$(MAKE) fuzz-parser
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider
	$(MAKE) fuzz-loaders

# the Tensor tests with every CPU kernel compiled from LLVM IR by llvmlite and linked into a shared object (CPU_LLVM=1,
# the fast path for models and the default where llvmlite is installed)
test-llvm: $(STAMP)
	CPU_LLVM=1 SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider tests/tensor

# the Tensor tests with every CPU kernel compiled as C by the system C compiler (CPU_LLVM=0, the default without
# llvmlite; in make test)
test-c: $(STAMP)
	CPU_LLVM=0 SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider tests/tensor

# matmuls of big odd shapes (1023^3, KBLOCK-blocked batches) through both CPU paths with default heuristics, against
# numpy (the default suite runs the small shapes)
test-llvm-matmul: $(STAMP)
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider -m slow tests/llvm/test_llvm_ir.py

# the LLM app's whole-model comparisons with transformers for every weight type, greedy F16/Q8_0, llama-3 RoPE, the CLI
# run and the capacity xfail (docs/llm.md); its kernels on every GPU arch and emulation are in test-models-slow
test-llm-slow: $(STAMP)
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider -m slow tests/apps

# every kernel tests/tensor compiles, compiled again for gfx942, gfx1100 and gfx1201 and each code object checked
# (in make test; tests/amd holds the quick checks of single kernels)
test-amd-sweep: $(STAMP)
	CPU_LLVM=1 $(PY) -m tests.amd.sweep

# tests/tensor on the PYTHON backend emulating a GPU: the NV (CUDA) or AMD (LLVM) renderer's exact linear programs,
# tensor cores run with the hardware's register layout (NV in make test; tests/codegen/test_emulate.py is the quick
# slice of every arch)
test-emulate: test-emulate-nv test-emulate-amd

test-emulate-nv: $(STAMP)
	DEV=PYTHON EMULATE=NV SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider tests/tensor

# every AMD arch, here and in its CI job; make test runs the slice of each in tests/codegen/test_emulate.py and the
# opinfo/zoo emulation tests
AMD_EMULATIONS ?= AMD_GFX1100 AMD_GFX1201 AMD_GFX942
test-emulate-amd: $(STAMP)
	for a in $(AMD_EMULATIONS); do \
	  DEV=PYTHON EMULATE=$$a SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider tests/tensor || exit 1; \
	done

# the OpInfo harness (tests/ops/opinfo, against torch): the (op, dtype) cases the default suite leaves out (it runs every
# op in float32 and a hashed sixth of the rest, and the slow-marked cases of the other tests/ops files), then every case on each emulated GPU (the NV and AMD renderers' exact
# programs on the PYTHON interpreter) and on the CPU's C path (CPU_LLVM=0; the default is LLVM), then every conv2d
# regression shape of issue 31 on
# every arch and emulation (make test runs a slice of each: tests/ops/test_opinfo.py, tests/ops/test_opinfo_targets.py,
# tests/codegen/test_conv_gpu_targets.py)
test-ops-targets: $(STAMP)
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider -m slow tests/ops
	CPU_LLVM=0 SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider -m "slow or not slow" tests/ops/test_opinfo.py
	for a in NV AMD_GFX1100 AMD_GFX1201 AMD_GFX942; do \
	  DEV=PYTHON EMULATE=$$a SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider -m "slow or not slow" \
	    tests/ops/test_opinfo.py || exit 1; \
	done
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider -m slow tests/codegen/test_conv_gpu_targets.py

# random conv/conv_transpose/pool/matmul/reduce/scan programs, forward and backward, each kernel compiled for sm_80/89/90
# and gfx942/1100/1201 with the default heuristics, as COMPILE_ONLY=1 does (tests/codegen/gpu_sweep.py; make test runs
# a slice: tests/codegen/test_gpu_sweep.py)
GPU_SWEEP_PROGRAMS ?= 2000
test-gpu-sweep: $(STAMP)
	$(PY) -m tests.codegen.gpu_sweep --programs $(GPU_SWEEP_PROGRAMS) --jobs $(JOBS)

test-python: $(STAMP)
	DEV=PYTHON SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider tests/tensor

# the slow NV sweeps (the default suite runs a slice of each): every tests/tensor kernel compiled for sm_90 (NVRTC +
# ptxas), the rendered CUDA of every tests/tensor kernel run on the
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

# tests/multi with its slow cases: the tests/tensor sweep over 2 and 3 CPU devices on every axis and replicated, every
# training layout, 300 random shard chains (the default suite runs a slice of each)
test-multi: $(STAMP)
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider -m slow tests/multi

# one shard of the suite as CI runs it: make test-shard GROUP=1 SPLITS=2 [PYTEST_ARGS='-x -k conv'] [JOBS=2]. It names
# every failure and the 25 slowest tests, and stops itself after SHARD_TIMEOUT seconds (below CI's job limit) so a shard
# that runs long still prints where it was
SPLITS ?= 2
GROUP ?= 1
SHARD_TIMEOUT ?= 1500
PYTEST_ARGS ?=
test-shard: $(STAMP) chromium
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider -rfE --durations=25 \
	  --session-timeout $(SHARD_TIMEOUT) --splits $(SPLITS) --group $(GROUP) --durations-path .test_durations $(PYTEST_ARGS)

# refresh .test_durations from a whole run (docs/testing.md): tests that no longer exist are dropped
durations: $(STAMP)
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider --store-durations --clean-durations \
	  --durations-path .test_durations

# the viewer's screenshots in docs/viz/ (docs/viz.md shows them), taken by the browser tests into artifacts/viz/
viz-docs: $(STAMP) chromium
	$(PY) -m pytest -q -p no:cacheprovider tests/viz/test_browser.py
	mkdir -p docs/viz && cp artifacts/viz/*.png docs/viz/

lint: $(EXTRA)lint
	$(VENV)/bin/ruff check .

types: $(STAMP)
	$(VENV)/bin/mypy tinygrad fuzz
	$(VENV)/bin/mypy --strict --follow-imports=silent spec replay

fuzz-smoke: $(EXTRA)fuzz
	$(PY) -m fuzz symbolic --seconds 30

# the pyrender reader (spec.roundtrip.eval_pyrender) under atheris for PARSER_SECONDS on a fresh corpus of printed
# graphs (fuzz/targets/pyrender_target.py: a memory and a time cap, an audit hook on writes, processes and code); any
# finding fails the target, its input kept as crash-<sha1> here. In make test (30 s); the nightly workflow runs longer
PARSER_SECONDS ?= 30
fuzz-parser: $(STAMP)
	d=$$(mktemp -d) && $(PY) fuzz/targets/pyrender_target.py -max_total_time=$(PARSER_SECONDS) -seed=1 \
		-print_final_stats=1 $$d; rc=$$?; rm -rf $$d; exit $$rc

# the nightly campaign (.github/workflows/fuzz-nightly.yml): an hour over every backend, its findings reduced, then
# the report (fuzz_out/report.html, report.md); a backend without its toolchain is named in the log
FUZZ_MINUTES ?= 60
fuzz-nightly: $(STAMP)
	$(PY) -m fuzz run --minutes $(FUZZ_MINUTES) --backends cpu,llvm,python,nv,amd --jobs $(JOBS) --out fuzz_out
	$(PY) -m fuzz report fuzz_out

# the checkpoint readers (safe_load, torch_load, gguf_load) under atheris, FUZZ_LOADER_SECONDS each, in parallel, from
# their seeds (fuzz/targets/load_common.py: what counts as a finding); a finding fails the target, its input and
# traceback in fuzz_out/loaders/. In make test at 30 s; the nightly workflow runs them longer
FUZZ_LOADER_SECONDS ?= 30
fuzz-loaders: $(STAMP)
	$(PY) fuzz/targets/load_common.py --seconds $(FUZZ_LOADER_SECONDS) --out fuzz_out/loaders $(FUZZ_LOADER_ARGS)

# a plain `python -m fuzz run --minutes 2` per level and campaign seed (0, 1, 2) with a bug only that level can show
# planted (tests/fuzz/planted_levels.py): each must be found, and replay with the bug and not without; slow (~40 min)
fuzz-planted: $(STAMP)
	$(PY) -m tests.fuzz.planted_levels --minutes 2 --seeds 0,1,2

# the mutation score (fuzz/measure/mutants.py) and rules hit guided vs unguided (fuzz/measure/guidance.py); slow: minutes each
fuzz-mutants: $(STAMP)
	$(PY) -m fuzz mutants --seconds 60
fuzz-compare: $(STAMP)
	$(PY) -m fuzz compare --seconds 600

# process replay against main (docs/replay.md): the suite captured on a temporary git worktree of $(REPLAY_BASE) (your
# checkout is not touched), then every schedule and kernel recompiled with the code checked out here and classified;
# the database and the HTML report are in .replay/, with VIZ traces of each changed kernel, old (the base's code) and new,
# in .replay/viz/ (the report gives the command that opens each pair). REPLAY_ARGS adds diff options (--assert-no-change, --fresh-opts,
# --target NV, ...); REPLAY_TESTS narrows the capture (default: the whole suite)
REPLAY_BASE ?= main
REPLAY_TESTS ?=
REPLAY_ARGS ?=
replay: $(STAMP)
	rm -rf .replay/base .replay/replay.db .replay/replay.db-wal .replay/replay.db-shm && mkdir -p .replay
	git worktree prune && git worktree add --detach .replay/base $(REPLAY_BASE)
	-cd .replay/base && REPLAY_DB=$(CURDIR)/.replay/replay.db $(abspath $(PY)) -m replay capture -- \
		$(abspath $(PY)) -m pytest -n $(JOBS) -q -p no:cacheprovider $(REPLAY_TESTS)
	$(PY) -m replay diff --db .replay/replay.db --html .replay/report.html --viz .replay/viz --viz-base .replay/base \
		$(REPLAY_ARGS); rc=$$?; git worktree remove --force .replay/base; exit $$rc

# the models under process replay (docs/models.md): every schedule and kernel of `python -m tinygrad.models` (each zoo
# model's forward, backward and one SGD step at the small sizes; run `zoo`) and of the LLM app's jitted prefill chunks
# and decode steps on small random-weight Q8_0 and Q4_0 llama GGUF files (`python -m tests.models.llm_run`; run `llm`)
# and of the torch-exported ONNX models run by OnnxRunner, eager and under TinyJit (`python -m tests.models.onnx_run`;
# run `onnx`) captured on CPU, each kernel also rendered and compiled (compile-only) for NV and AMD; the per-run,
# per-target counts; then a diff of each run against the code checked out (every record must come back unchanged);
# last, every distinct kernel written as a kernel-level fuzz seed (`python -m fuzz run --levels kernel --seeds
# $(MODELS_SEEDS)`, docs/fuzz.md). The database and reports in .replay/models.db, .replay/models.html (zoo),
# .replay/llm.html, .replay/onnx.html; MODELS_REPLAY_ARGS adds diff options (--target NV, ...)
MODELS_DB ?= .replay/models.db
MODELS_SEEDS ?= .replay/model-seeds
MODELS_REPLAY_ARGS ?=
replay-models: $(STAMP)
	mkdir -p .replay && rm -rf $(MODELS_DB) $(MODELS_DB)-wal $(MODELS_DB)-shm $(MODELS_SEEDS)
	$(PY) -m replay capture --db $(MODELS_DB) --targets NV,AMD --run zoo -- $(PY) -m tinygrad.models
	$(PY) -m replay capture --db $(MODELS_DB) --targets NV,AMD --run llm -- $(PY) -m tests.models.llm_run
	$(PY) -m replay capture --db $(MODELS_DB) --targets NV,AMD --run onnx -- $(PY) -m tests.models.onnx_run
	$(PY) -m tests.models.replay_counts $(MODELS_DB)
	$(PY) -m replay diff --db $(MODELS_DB) --against zoo --html .replay/models.html --assert-no-change $(MODELS_REPLAY_ARGS)
	$(PY) -m replay diff --db $(MODELS_DB) --against llm --html .replay/llm.html --assert-no-change $(MODELS_REPLAY_ARGS)
	$(PY) -m replay diff --db $(MODELS_DB) --against onnx --html .replay/onnx.html --assert-no-change $(MODELS_REPLAY_ARGS)
	$(PY) -m fuzz seeds --db $(MODELS_DB) --out $(MODELS_SEEDS)

# the zoo's slow checks (docs/models.md): the optimizer step of every zoo model but GPT-2 against torch, the two-layer
# LSTM LM, BERT's float16 forward, every zoo model's step kernels and the LLM app's prefill and decode kernels (Q8_0,
# Q4_0) compiled for sm_80/89/90 and gfx942/1100/1201, every zoo forward and LLM run under every emulation, and
# nn.LSTM's other configurations
test-models-slow: $(STAMP)
	SPEC=2 IGNORE_OOB=0 $(PY) -m pytest -n $(JOBS) -q -p no:cacheprovider -m slow tests/models \
		tests/nn/test_layers.py -k "zoo or lstm"

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info
