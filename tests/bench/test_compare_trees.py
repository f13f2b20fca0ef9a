"""benchmarks/compare_trees.py: `--kernels all` runs etops check with no kernel
names, `--dev-every-file` runs etops dev over the files dev_every_file.py picks (in
chunks, a fresh cache a tree), and the comparison's summary groups the differences
by report, kernel or file and collapsed path, with counts and one example each."""

from __future__ import annotations

import importlib.util
import json
import pathlib

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "compare_trees.py"
_spec = importlib.util.spec_from_file_location("compare_trees", _PATH)
compare_trees = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_trees)


def _recording_run(calls: list):
    def run(python, site, cache, args, cwd):
        calls.append({"site": site, "cache": cache, "args": args, "cache_empty": not any(cache.iterdir())})
        return 0
    return run


def test_kernels_all_runs_check_with_no_kernel_names_and_a_fresh_cache_per_tree(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(compare_trees, "_run", _recording_run(calls))
    (tmp_path / "before" / "cache").mkdir(parents=True)
    (tmp_path / "before" / "cache" / "old-discovery.json").write_text("{}")
    for name in ("before", "after"):
        assert compare_trees.main(["--before", "/site-a", "--after", "/site-b", "--kernels", "all", "--only", name,
                                   "--work", str(tmp_path)]) == 0
    before, after = calls
    assert before["args"][:2] == ["check", "--json"] and after["args"][:2] == ["check", "--json"]
    assert (before["site"], after["site"]) == ("/site-a", "/site-b")
    assert before["cache"] == tmp_path / "before" / "cache" and after["cache"] == tmp_path / "after" / "cache"
    assert before["cache_empty"] and after["cache_empty"]
    assert json.loads((tmp_path / "before" / "exit_codes.json").read_text()) == {"check": 0}


def test_dev_every_file_runs_dev_every_files_list_in_chunks(tmp_path, monkeypatch):
    checkout = tmp_path / "et"
    for rel in ("kernels/portable/cpu/op_b.cpp", "kernels/portable/cpu/op_a.cpp", "kernels/portable/cpu/helper.cpp",
                "kernels/optimized/cpu/op_c.cpp", "kernels/quantized/cpu/op_d.cpp"):
        (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
        (checkout / rel).write_text("")
    calls: list = []
    monkeypatch.setattr(compare_trees, "_run", _recording_run(calls))
    assert compare_trees.main(["--before", "/site-a", "--after", "/site-b", "--kernels", "", "--dev-every-file",
                               str(checkout), "--dev-chunk", "3", "--only", "after", "--work", str(tmp_path / "w")]) == 0
    files = [[a for a in c["args"] if a.endswith(".cpp")] for c in calls]
    k = str(checkout / "kernels")
    assert files == [[f"{k}/portable/cpu/op_a.cpp", f"{k}/portable/cpu/op_b.cpp", f"{k}/optimized/cpu/op_c.cpp"],
                     [f"{k}/quantized/cpu/op_d.cpp"]]
    assert all(c["args"][0] == "dev" and "--no-timing" in c["args"] and "--no-gtest" in c["args"] for c in calls)
    assert json.loads((tmp_path / "w" / "after" / "exit_codes.json").read_text()) == {"dev/000": 0, "dev/001": 0}


def _case(kernel: str, dtype: str, sample: int, digest: int) -> dict:
    return {"kernel": kernel, "opinfo": "mm", "dtype": dtype, "sample": sample, "call": 0, "status": "mismatch",
            "max_rel_error": float("nan"), "outcome": {"digest": digest}}


def _write(tree: pathlib.Path, codes: dict, mismatches: list, by_dtype: dict) -> None:
    (tree / "check").mkdir(parents=True)
    (tree / "exit_codes.json").write_text(json.dumps(codes))
    report = {"seconds": 1.0, "mismatches": mismatches,
              "kernels": [{"kernel": "aten::mm.out", "by_dtype": {d: {"counts": {"pass": n}} for d, n in by_dtype.items()}}]}
    (tree / "check" / "check.json").write_text(json.dumps(report))


def test_the_summary_groups_differences_by_report_kernel_and_collapsed_path(tmp_path):
    _write(tmp_path / "before", {"check": 1, "dev/000": 0},
           [_case("aten::mm.out", "float32", 1, 10), _case("aten::mm.out", "float64", 2, 20),
            _case("aten::bmm.out", "float32", 1, 30)], {"float32": 5, "float64": 6})
    _write(tmp_path / "after", {"check": 1},
           [_case("aten::mm.out", "float32", 1, 11), _case("aten::mm.out", "float64", 2, 21),
            _case("aten::bmm.out", "float32", 1, 30)], {"float32": 4, "float64": 7})
    notes: list = []
    found = compare_trees.compare(tmp_path, notes)
    # NaN in both is no difference; bmm's case is the same; a chunk only one tree finished is named, not compared
    assert sorted(compare_trees.path_text(p) for p, _, _ in found) == [
        "check.kernels.<aten::mm.out>.by_dtype.float32.counts.pass", "check.kernels.<aten::mm.out>.by_dtype.float64.counts.pass",
        "check.mismatches.<aten::mm.out|mm|float32|1|0>.outcome.digest",
        "check.mismatches.<aten::mm.out|mm|float64|2|0>.outcome.digest"]
    assert notes == ["dev/000: finished by before only, not compared"]
    text = compare_trees.summary(found)
    assert "4 differences, 2 kinds, 2 groups by kernel or file" in text
    assert "       2    1  check.mismatches.<>.outcome.digest" in text
    assert "       2    1  check.kernels.<>.by_dtype.*.counts.pass" in text
    assert "       2  check  aten::mm.out  check.mismatches.<>.outcome.digest" in text
    assert "e.g. check.mismatches.<aten::mm.out|mm|float32|1|0>.outcome.digest: 10 -> 11" in text


def test_written_files_are_grouped_by_folder_and_named_after_their_kernel_or_file():
    check = ("check-files", "findings/018_wrong__sum.IntList_out.py")
    reproducer = ("check-files", "reproducers/mismatch__bmm.out__gen_aten_bmm.out__float16__s15c0.py")
    dev = ("dev-files[003]", "op_abs/findings/000_wrong__abs.out.py")
    case = ("dev[003]", "files", "</work/et/kernels/portable/cpu/op_abs.cpp>", "findings", "<aten::abs.out|mismatch>", "cases")
    assert [compare_trees.where(p) for p in (check, reproducer, dev, case)] == [
        "sum.IntList_out", "bmm.out", "op_abs", "portable/cpu/op_abs.cpp"]
    assert [compare_trees.collapsed(p) for p in (check, reproducer, dev, case, ("exit", "dev/012"))] == [
        "check-files.findings/*", "check-files.reproducers/*", "dev-files.*/findings/*", "dev.files.<>.findings.<>.cases",
        "exit.dev/*"]


def test_findings_renumbered_by_a_finding_before_them_and_reordered_dtypes_are_matched(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, files in ((a, {"000_wrong__mm.out.py": "mm", "001_wrong__mm.out.py": "mm 2"}),
                          (b, {"000_crash__div.out.py": "div", "001_wrong__mm.out.py": "mm", "002_wrong__mm.out.py": "mm 2"})):
        (folder / "findings").mkdir(parents=True)
        for name, text in files.items():
            (folder / "findings" / name).write_text(f"{text} at {folder}/findings/{name}")
    found = compare_trees.differences(compare_trees.written_files(a), compare_trees.written_files(b), ("check-files",))
    assert [(compare_trees.path_text(p), x, y) for p, x, y in found] == [
        ("check-files.findings/N_crash__div.out.py", "<absent>", "div at <RUN>/findings/N_crash__div.out.py")]
    assert compare_trees.where(found[0][0]) == "div.out"
    dtypes = compare_trees.differences({"dtypes": ["float16", "float32", "int8"]}, {"dtypes": ["bool", "float16", "float32"]})
    assert dtypes == [("$.dtypes.members", ["int8"], ["bool"])]


def test_a_step_a_signal_ended_is_named_not_compared(tmp_path):
    _write(tmp_path / "before", {"check": -9}, [], {"float32": 5})
    _write(tmp_path / "after", {"check": 1}, [], {"float32": 4})
    notes: list = []
    assert compare_trees.compare(tmp_path, notes) == []
    assert notes == ["check: killed by a signal in before (signal 9) (the kernel's OOM killer, say), not compared"]
