# etops: every command sets up what it needs on a fresh machine.
#   make demo   - venv, install, build, list kernels, run a few against ATen
#   make test   - the test suite (what CI runs)
#   make bench  - the benchmarks (benchmarks/README.md)

VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
DEPS   := $(VENV)/.etops-deps
BUILT  := $(VENV)/.etops-built
SOURCES := $(wildcard src/etops/*.py src/etops/*/*.py src/etops/_native/*.c src/etops/_native/*.cpp src/etops/_native/*.h) CMakeLists.txt pyproject.toml

.PHONY: demo test bench install clean

$(PY):
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# The pinned runtime pair (torch 2.13.0 is the CPU build on these machines) and the build tools.
$(DEPS): $(PY)
	$(PIP) install -q torch==2.13.0 executorch==1.5.1 "scikit-build-core>=0.10" ninja cmake pytest numpy rich==15.0.0 matplotlib==3.11.2
	touch $@

# Builds against the executorch and torch installed in the venv (no build isolation:
# etops must compile against the very runtime it will load).
$(BUILT): $(DEPS) $(SOURCES)
	$(PIP) install -q --no-build-isolation --no-deps .
	touch $@

install: $(BUILT)

demo: $(BUILT)
	$(PY) examples/demo.py

test: $(BUILT)
	$(PY) -m pytest -q tests

bench: $(BUILT)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf build dist $(BUILT) src/etops/_native/_core*.so
