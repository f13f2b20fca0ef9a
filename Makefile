# etops: every command sets up what it needs on a fresh machine.
#   make demo   - venv, install, build, list kernels, run a few against ATen
#   make test   - the lint step and the test suite (what CI runs)
#   make browser - Chromium for the HTML report's browser test (it skips without)
#   make docs   - the documentation site (mkdocs --strict) into build/site
#   make bench  - the benchmarks (benchmarks/README.md)
#   make test-compat - etops built and run against the other verified executorch versions
#   make test-aarch64 - etops built and tested on Linux aarch64 under qemu-user (as root)
#   make dev-aarch64 DEV="FILE [OPTIONS]" - etops dev of FILE on Linux aarch64 under qemu-user (as root)

VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
DEPS   := $(VENV)/.etops-deps
BUILT  := $(VENV)/.etops-built
SOURCES := $(wildcard src/etops/*.py src/etops/*/*.py src/etops/*/*/*.py src/etops/_native/*.c src/etops/_native/*.cpp src/etops/_native/*.h) CMakeLists.txt pyproject.toml

.PHONY: demo test bench install clean test-wheel docs lint browser googletest

$(PY):
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# The exact pin of a tool in pyproject.toml (its docs and lint extras).
PIN     = $(shell grep -o '"$(1)==[^"]*"' pyproject.toml | head -1 | tr -d '"')
# The versions of torch or executorch etops is verified with, newest first, from
# pyproject.toml's [tool.etops] (the one list of them; torch 2.13.0 is the CPU build
# on these machines). The venv gets the first pair, with the build tools.
VERIFIED = $(shell grep '^verified-$(1) *=' pyproject.toml | grep -o '"[^"]*"' | tr -d '"')
TORCH_PIN      := torch==$(firstword $(call VERIFIED,torch))
EXECUTORCH_PIN := executorch==$(firstword $(call VERIFIED,executorch))
COMPAT_EXECUTORCH := $(wordlist 2,99,$(call VERIFIED,executorch))
$(DEPS): $(PY) pyproject.toml Makefile
	$(PIP) install -q $(TORCH_PIN) $(EXECUTORCH_PIN) "scikit-build-core>=0.10" ninja cmake pytest pytest-xdist==3.8.0 numpy rich==15.0.0 matplotlib==3.11.2 hypothesis==6.170.17
	touch $@

# The docs and lint tools, at the exact pins of pyproject.toml's docs and lint extras.
TOOL_PINS := $(foreach name,mkdocs mkdocs-material mkdocstrings mkdocstrings-python mypy,$(call PIN,$(name)))
TOOLS  := $(VENV)/.etops-tools
$(TOOLS): $(DEPS) pyproject.toml
	$(PIP) install -q $(TOOL_PINS)
	touch $@

# Builds against the executorch and torch installed in the venv (no build isolation:
# etops must compile against the very runtime it will load).
$(BUILT): $(DEPS) $(SOURCES)
	$(PIP) install -q --no-build-isolation --no-deps .
	touch $@

install: $(BUILT)

demo: $(BUILT)
	$(PY) examples/demo.py

# The suite on two pytest-xdist workers: each file's tests in one worker, in order, the
# files handed out longest first (tests/file_seconds.py), and each inprocess check file
# in one fresh interpreter (tests/conftest.py, fresh_checks.py).
test: lint $(BUILT)
	$(PY) -m pytest -q -n 2 tests

# Chromium (Debian's package) for the HTML report's browser test
# (tests/conformance/test_conformance_html.py skips, saying so, without it): setup
# belongs here, not in a test. Needs root (or sudo) and apt-get.
browser:
	@command -v chromium > /dev/null || { SUDO=$$(command -v sudo || true); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium > /dev/null; }
	@command -v chromium

# googletest's sources (Debian's googletest package, /usr/src/googletest) for etops gtest
# and its tests (tests/gtest/: they skip, saying so, without them). .ci/run makes it.
googletest:
	@[ -f /usr/src/googletest/googletest/src/gtest-all.cc ] \
	  || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq googletest >/dev/null; } \
	  || echo "googletest could not be installed: the etops gtest tests will skip"

# mypy over src/etops (its configuration is [tool.mypy] in pyproject.toml).
lint: $(TOOLS)
	$(PY) -m mypy

# The documentation site: mkdocs.yml, pages in docs/, the API reference from the
# docstrings; --strict makes a broken link, anchor or reference fail the build.
docs: $(TOOLS)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The wheel travels (tests/packaging/wheel_travel.sh): pip wheel . with build
# isolation, installed into a fresh venv, snippet, etops list, a custom kernel, etops check.
test-wheel:
	tests/packaging/wheel_travel.sh $(abspath build/wheel-travel)

# The other verified executorch versions (pyproject.toml's [tool.etops], e.g. 1.5.0):
# the same travel, built in a fresh venv holding that executorch (--no-build-isolation,
# as a user with their own ExecuTorch builds it), its registry compared kernel by
# kernel with this venv's (built, first verified version).
.PHONY: test-compat
test-compat: $(BUILT)
	mkdir -p build && $(PY) -m etops list --json > $(abspath build/registry-reference.json)
	for version in $(COMPAT_EXECUTORCH); do \
	  ETOPS_REFERENCE_REGISTRY=$(abspath build/registry-reference.json) \
	  tests/packaging/wheel_travel.sh $(abspath build/compat-$$version) $(TORCH_PIN) executorch==$$version || exit 1; done

# Linux aarch64 under qemu-user emulation (docs/aarch64.md; needs root): Debian's
# qemu-user-static, binfmt-support and debootstrap installed here when missing, an
# arm64 Debian root with the aarch64 wheels of the pinned torch and executorch,
# cached under build/aarch64-root-HASH (a hash of tests/aarch64/make_root.sh and the
# pins), etops built in it from this tree and tests/aarch64/lane_*.py run there; the
# same etops check on this venv (x86_64) and there, compared into
# build/aarch64/differences.md (benchmarks/compare_platforms.py).
# aarch64-root: the lane's first half alone (tests/aarch64/root.sh: host tools, the
# cached root, etops of this tree built in it), without this venv: .ci/run starts it
# in the background while the x86_64 suite runs (its debootstrap is one emulated
# process at a time; etops is cross-compiled on this host, tests/aarch64/cross_build.sh).
.PHONY: test-aarch64 aarch64-root
test-aarch64: $(BUILT)
	tests/aarch64/lane.sh $(PY) $(TORCH_PIN) $(EXECUTORCH_PIN)

aarch64-root:
	tests/aarch64/root.sh python3 $(TORCH_PIN) $(EXECUTORCH_PIN) > /dev/null

# etops dev on Linux aarch64 from this x86_64 machine (docs/aarch64.md; needs root):
# make dev-aarch64 DEV="CHECKOUT/kernels/optimized/cpu/op_gelu.cpp --dtype float32"
# runs `etops dev $(DEV)` inside the lane's root (made or reused, etops of this tree
# built in it) with the checkout bind-mounted at its own path (tests/aarch64/dev.sh).
.PHONY: dev-aarch64
dev-aarch64:
	tests/aarch64/dev.sh python3 $(TORCH_PIN) $(EXECUTORCH_PIN) $(DEV)

bench: $(BUILT)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf build dist $(BUILT) src/etops/_native/_core*.so

# The full conformance sweep (every registered kernel: aten on OpInfo samples, the
# other namespaces against their references; worker processes): findings grouped by
# root cause, reports (markdown, JSON, HTML) and reproducers in build/conformance/.
.PHONY: conformance
conformance: $(BUILT)
	$(PY) -m etops.conformance check --isolated --jobs 2 --report-only --report build/conformance/report.md --json build/conformance/report.json --html build/conformance/report.html

# The sweep with the numerics axis (every float32/float64 case also offset, cancelling,
# huge, tiny, long; about four times the sweep's time) and the effective precision of
# every float64 kernel (docs/conformance-findings.md), in build/conformance-numerics/.
.PHONY: conformance-numerics
conformance-numerics: $(BUILT)
	$(PY) -m etops.conformance check --isolated --jobs 2 --numerics-axis --report-only --report-dir build/conformance-numerics \
	  --report build/conformance-numerics/report.md --json build/conformance-numerics/report.json
	$(PY) -m etops.conformance.precision_table build/conformance-numerics/report.json > build/conformance-numerics/float64-precision.md

# Which kernels honour dim orders: the same sweep twice, every dense input laid out
# channels-last (rank 4/5, as programs may give them), then in the reversed dim order
# kept (etops.layout("preserve")); mismatches are kernels that ignore dim orders
# (docs/layouts.md lists them). Reports in build/dim_orders/{channels-last,reversed}/.
.PHONY: conformance-dim-orders
conformance-dim-orders: $(BUILT)
	for mode in channels-last reversed; do \
	  $(PY) -m etops.conformance check --isolated --jobs 2 --report-only --dim-orders $$mode --report-dir build/dim_orders/$$mode \
	    --report build/dim_orders/$$mode/report.md --json build/dim_orders/$$mode/report.json || exit 1; done

# Fuzzing: the long Hypothesis campaign over every callable kernel, in
# isolated worker processes, every call guarded (etops.guard.call: a read or write
# outside a tensor is found at the call; FUZZ_GUARD= runs them unguarded); prints
# kernels fuzzed, cases run, aborts and memory violations found, and writes
# build/fuzz/report.json. FUZZ_BUDGET is in seconds.
FUZZ_BUDGET ?= 1800
FUZZ_EXAMPLES ?= 25
FUZZ_GUARD ?= --guard
.PHONY: fuzz test-asan
fuzz: $(BUILT)
	$(PY) -m etops.fuzz --budget $(FUZZ_BUDGET) --examples $(FUZZ_EXAMPLES) $(FUZZ_GUARD) --report build/fuzz/report.json

# Corruption that shows later: one process per callable kernel running a
# sequence of valid and adversarial cases under glibc's malloc checking, then every
# adversarial class of the kernel (etops/fuzz/classes.py: integer extremes
# and INT_MIN / -1, zero-size dims, wrong-dtype, too-small and overlapping outs, sizes
# that overflow; SEQUENCE_CASES=0 runs the classes only); a sequence that dies is
# bisected to the corrupting call (classified, a Python reproducer), replayed guarded,
# and goes on after it. build/fuzz/sequences.json.
SEQUENCE_CASES ?= 12
.PHONY: fuzz-sequences
fuzz-sequences: $(BUILT)
	$(PY) -m etops.fuzz.sequences --cases $(SEQUENCE_CASES) --jobs 2 --report build/fuzz/sequences.json

# The C extension and bridge built with AddressSanitizer + UndefinedBehaviorSanitizer
# (gcc's runtimes, Debian's libasan/libubsan, installed here when missing) into
# build/asan, next to a copy of the Python package, and the whole test suite run
# under it (on the two pytest-xdist workers, as make test). A Python extension needs the ASan runtime preloaded; detect_leaks=0
# because CPython and torch keep allocations alive at exit on purpose (LeakSanitizer
# would report those, not etops'). Any sanitizer report (in pytest or in the
# subprocesses and fuzz workers it starts) lands in build/asan/reports and fails.
ASAN_DIR := build/asan
test-asan: $(DEPS)
	@gcc -print-file-name=libasan.so | grep -q / && test -e "$$(gcc -print-file-name=libasan.so)" || \
	  { SUDO=$$(command -v sudo || true); $$SUDO apt-get update -q && $$SUDO apt-get install -y -q gcc g++ libasan8 libubsan1; }
	cmake -G Ninja -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DETOPS_SANITIZE=ON -DPython_EXECUTABLE=$(abspath $(PY)) > /dev/null
	cmake --build $(ASAN_DIR)
	rm -rf $(ASAN_DIR)/pkg $(ASAN_DIR)/reports && mkdir -p $(ASAN_DIR)/pkg $(ASAN_DIR)/reports
	cp -r src/etops $(ASAN_DIR)/pkg/ && rm -f $(ASAN_DIR)/pkg/etops/_native/_core*.so && cp $(ASAN_DIR)/_core*.so $(ASAN_DIR)/build_info.py $(ASAN_DIR)/pkg/etops/_native/
	LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	ASAN_OPTIONS=detect_leaks=0:log_path=$(abspath $(ASAN_DIR))/reports/asan \
	UBSAN_OPTIONS=print_stacktrace=1:log_path=$(abspath $(ASAN_DIR))/reports/ubsan \
	PYTHONPATH=$(abspath $(ASAN_DIR))/pkg $(PY) -m pytest -q -n 2 -p no:cacheprovider tests
	@if ls $(ASAN_DIR)/reports/* > /dev/null 2>&1; then echo "sanitizer reports:"; cat $(ASAN_DIR)/reports/*; exit 1; else echo "test-asan: zero sanitizer reports"; fi
