"""A first ``etops dev`` on a fresh cache streams its first failing case before
discovery (etops.dev.early: the float32 tasks of the OpInfos named after the file's
operators, run on the edit first, recorded while the edit builds), not after it; the
round's report is the one a round without the early pass gives (the same cases,
findings and exit code)."""

from __future__ import annotations

import json
import subprocess
import sys

import minicheckout
from minicheckout import first_line_with

CPU = "kernels/portable/cpu"

#: one `etops dev` in a fresh process on an empty cache, the OpInfos narrowed to a
#: few (a quick discovery); marks where discovery begins and ends in its output;
#: `early` False: the round without the early pass
SCRIPT = """
import json, os, sys
os.environ["ETOPS_CACHE_DIR"] = {cache!r}
from etops.conformance import opinfos, sweep
opinfos._OPS = {{k: v for k, v in opinfos.opinfos().items() if k in ("mul", "add", "abs")}}
discover = sweep.discover
def marked(*args, **kwargs):
    print("PHASE: discovery begins", flush=True)
    try:
        return discover(*args, **kwargs)
    finally:
        print("PHASE: discovery ends", flush=True)
sweep.discover = marked
if not {early!r}:
    from etops.dev import early
    early.needed = lambda discovered: False
else:  # the edit's build waits (60 s at most) for the early cases to be recorded meanwhile
    import time
    from etops.checkout import install
    from etops.dev import judge
    build = install.build_target
    def watched(*args, **kwargs):
        install.build_target = build
        deadline = time.monotonic() + 60
        while not judge.RECORDER.recordings and time.monotonic() < deadline:
            time.sleep(0.05)
        print(f"PHASE: the edit built; {{len(judge.RECORDER.recordings)}} recordings made meanwhile", flush=True)
        return build(*args, **kwargs)
    install.build_target = watched
from etops.cli import main
code = main(["dev", {kernel!r}, "--no-timing", "--no-gtest", "--budget", "0", "--json", {out!r}])
print("RESULT " + json.dumps({{"code": code}}), flush=True)
"""


def _dev(kernel, cache, out, early: bool) -> tuple[int, list[str]]:
    script = SCRIPT.format(cache=str(cache), early=early, kernel=str(kernel), out=str(out))
    # from a folder of its own: the checkout's `executorch` folder would shadow the wheel
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=1200, cwd=str(out.parent))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    return json.loads(next(line for line in lines if line.startswith("RESULT "))[len("RESULT "):])["code"], lines


def test_a_first_run_streams_its_first_failing_case_before_discovery_and_reports_the_same(tmp_path):
    repo = minicheckout.git_checkout(tmp_path)
    kernel = repo / CPU / "op_mul.cpp"
    kernel.write_text(minicheckout.MUL.replace(*minicheckout.BASE_WRONG).replace(*minicheckout.EDIT_WRONG))
    work = tmp_path / "work"
    work.mkdir()
    code, lines = _dev(kernel, tmp_path / "cache-early", work / "early.json", early=True)
    found = first_line_with(lines, "found on the edit: mul.out float32 mismatch")
    assert found < first_line_with(lines, "PHASE: discovery begins") < first_line_with(lines, "PHASE: discovery ends"), lines[:40]
    assert lines.count(lines[found]) == 1, "the judge streams no case line the early pass streamed"
    built = lines[first_line_with(lines, "PHASE: the edit built")]
    assert not built.endswith("; 0 recordings made meanwhile"), "the early cases were not recorded while the edit built"

    plain_code, plain_lines = _dev(kernel, tmp_path / "cache-plain", work / "plain.json", early=False)
    assert first_line_with(plain_lines, "PHASE: discovery ends") < first_line_with(plain_lines, "found on the edit: mul.out float32")
    assert code == plain_code == 1
    first, plain = (json.loads((work / f"{n}.json").read_text())["files"][0] for n in ("early", "plain"))
    for key in ("cases", "base_cases", "layout_cases", "left_out"):
        assert first.get(key) == plain.get(key), key
    assert [(f["category"], f["in_base"], f["gating"], f["cases"]) for f in first["findings"]] == \
        [(f["category"], f["in_base"], f["gating"], f["cases"]) for f in plain["findings"]]
    assert any(f["gating"] for f in first["findings"])
