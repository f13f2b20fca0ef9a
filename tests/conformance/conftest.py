"""The conformance tests' shared sweep: one `etops check` of a few real kernels
with the dim-order axis, its reports (JSON, markdown, HTML) read by the clusters
tests and the HTML report's browser test (a sweep takes tens of seconds: run once
a session)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from etops.conformance import cli

#: unfold_copy.out: aborts on 0-d inputs (etops' direct calls refuse them); constant_pad_nd.out:
#: silently wrong on channels-last inputs, refuses negative pads; clone.out: honours
#: channels-last; add.out: passes; int64 beside float32 gives unsupported cases
SWEEP_KERNELS = ["aten::unfold_copy.out", "aten::constant_pad_nd.out", "aten::clone.out", "aten::add.out"]
SWEEP_DTYPES = "float32,int64"


@dataclass(frozen=True)
class Sweep:
    """The sweep's kernels and reports: its folder, the JSON report read, the
    markdown and HTML files."""

    kernels: tuple[str, ...]
    out: Path
    data: dict
    markdown: Path
    html: Path


@pytest.fixture(scope="session")
def dim_order_sweep(tmp_path_factory) -> Sweep:
    out = tmp_path_factory.mktemp("dim-order-sweep")
    argv = ["check", *SWEEP_KERNELS, "--dtype", SWEEP_DTYPES, "--dim-order-axis", "--no-progress",
            "--json", str(out / "r.json"), "--report", str(out / "r.md"), "--html", str(out / "r.html")]
    assert cli.main(argv + ["--report-only"]) == 0  # the sweep aborts in unfold_copy: 1 without --report-only
    return Sweep(tuple(SWEEP_KERNELS), out, json.loads((out / "r.json").read_text()), out / "r.md", out / "r.html")
