"""``etops dev`` run again in a new process on the same file (the way a pre-commit
hook or a second terminal runs it) reuses what the first process learned, kept on
disk (etops.dev.learned): nothing is worked out again (no OpInfo is imported, no
task recorded, no generated case made, no base task run, the plan read, no meta
kernel asked: torch._dynamo is not imported), and it gives the same verdict.
Both processes stream their first finding before the judge's later phases (the
dim-order axis, then the upstream test and the timing) and before the report."""

from __future__ import annotations

import json
import subprocess
import sys

import minicheckout
from minicheckout import first_line_with

CPU = "kernels/portable/cpu"
OPINFO_MODULE = "torch.testing._internal.common_methods_invocations"

#: one `etops dev` in a fresh process; a cold one narrows the OpInfos to a few (a
#: quick discovery); each marks where the dim-order axis begins in its output
SCRIPT = """
import json, os, sys
os.environ["ETOPS_CACHE_DIR"] = {cache!r}
if {narrow!r}:
    from etops.conformance import opinfos
    opinfos._OPS = {{k: v for k, v in opinfos.opinfos().items() if k in ("mul", "add", "abs")}}
from etops.dev import judge
axis = judge.layout_findings
def marked(*args, **kwargs):
    print("PHASE: the dim-order axis", flush=True)
    return axis(*args, **kwargs)
judge.layout_findings = marked
from etops.cli import main
code = main(["dev", {kernel!r}, "--dtype", "float32", "--no-timing", "--budget", "0", "--json", {out!r}])
print("RESULT " + json.dumps({{"code": code, "opinfos": {module!r} in sys.modules, "dynamo": "torch._dynamo" in sys.modules}}),
      flush=True)
"""


def _dev(kernel, cache, out, narrow: bool) -> tuple[dict, list[str]]:
    script = SCRIPT.format(cache=str(cache), narrow=narrow, kernel=str(kernel), out=str(out), module=OPINFO_MODULE)
    # run from a folder of its own: `python -c` puts the working folder first on sys.path,
    # and the checkout's `executorch` folder would shadow the wheel
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=1200, cwd=str(out.parent))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    result = json.loads(next(line for line in lines if line.startswith("RESULT "))[len("RESULT "):])
    return result, lines


def test_a_warm_run_in_a_new_process_works_nothing_out_again_and_streams_its_findings(tmp_path):
    repo = minicheckout.git_checkout(tmp_path)
    kernel = repo / CPU / "op_mul.cpp"
    kernel.write_text(minicheckout.MUL.replace(*minicheckout.BASE_WRONG).replace(*minicheckout.EDIT_WRONG))
    cache = tmp_path / "cache"
    work = tmp_path / "work"
    work.mkdir()
    cold, cold_lines = _dev(kernel, cache, work / "cold.json", narrow=True)
    warm, warm_lines = _dev(kernel, cache, work / "warm.json", narrow=False)
    first, again = (json.loads((work / f"{n}.json").read_text())["files"][0] for n in ("cold", "warm"))

    assert cold["code"] == warm["code"] == 1
    assert again["cases"] == first["cases"] and again["base_cases"] == first["base_cases"]
    assert again["layout_cases"] == first["layout_cases"]
    def judged(report):  # each finding as the verdict sees it, and the cases behind it
        return [tuple(f[k] for k in ("kernel", "category", "signature", "layout", "cases", "dtypes", "opinfos", "in_base",
                                     "gating", "side")) for f in report["findings"]]

    assert judged(again) == judged(first)
    assert any(f["gating"] for f in again["findings"])
    assert first["learned"]["recording"]["recomputed"] > 0 and first["learned"]["base-results"]["recomputed"] > 0
    learned = again["learned"]
    assert learned["recording"]["recomputed"] == 0 and learned["recording"]["loaded"] > 0, learned
    assert learned["plan"] == {"loaded": 1, "recomputed": 0}, learned
    assert learned["base-results"] == {"loaded": 1, "recomputed": 0}, learned
    assert not warm["opinfos"], "the warm process imported the OpInfos (it worked something out again)"
    assert learned["generated-cases"] == {"loaded": 1, "recomputed": 0}, learned
    assert first["learned"]["generated-cases"]["recomputed"] > 0
    # no meta kernel asked (the generated cases', the refused calls' out shapes and checks are kept)
    assert not warm["dynamo"], "the warm process imported torch._dynamo"
    assert all(f["reproducer"] for f in again["findings"] if f["gating"]), "a finding's inputs, from its recording"

    for lines in (cold_lines, warm_lines):
        found = first_line_with(lines, "found on the edit: mul.out float32 mismatch")
        compared = first_line_with(lines, "contiguous cases: ")
        assert found < compared < first_line_with(lines, "PHASE: the dim-order axis") < first_line_with(lines, str(kernel)), lines[:40]
