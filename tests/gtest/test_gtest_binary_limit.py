"""etops.gtest.run.run_binary's `total`: a binary whose every test never returns
costs its total, not its per-run timeout once per test (each hung test ends its
fork, and the tests after it run in a new one)."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from etops.gtest.run import CRASHED, run_binary

#: a stand-in for a test binary (etops_gtest_main, its events as etops' listener
#: writes them): tests T0..T9, each never returns; a filter's exclusions skip the
#: tests that already ran
SPINS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int etops_gtest_main(int argc, char** argv) {
  const char* filter = "";
  for (int i = 0; i < argc; i++) if (strncmp(argv[i], "--gtest_filter=", 15) == 0) filter = argv[i] + 15;
  FILE* events = fopen(getenv("ETOPS_GTEST_EVENTS"), "a");
  for (int t = 0; t < 10; t++) {
    char name[32];
    snprintf(name, sizeof name, "S.T%d", t);
    if (strstr(filter, name)) continue;
    fprintf(events, "{\"event\": \"start\", \"test\": \"%s\"}\n", name);
    fflush(events);
    for (volatile int spin = 1; spin;) {}
  }
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_a_binary_hanging_in_every_test_costs_its_total(tmp_path):
    (tmp_path / "spins.c").write_text(SPINS)
    binary = tmp_path / "spins.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O0", str(tmp_path / "spins.c"), "-o", str(binary)], check=True)
    start = time.monotonic()
    run = run_binary(binary, timeout=60.0, total=1.5)
    took = time.monotonic() - start
    assert took < 30, took  # not 60 s per test
    assert run.tests and all(t.status == CRASHED for t in run.tests)
    assert len(run.tests) < 10 and "the tests after it were not run" in (run.problem or ""), run.problem
    with pytest.raises(ValueError, match="argument 'total'"):
        run_binary(binary, total=0)
