"""etops list and etops show know the schemas of executorch.exir's namespaces from
the disk cache (etops.schema_cache) in a new process (a fork of one fresh
interpreter), without importing executorch.exir, and list and show the same thing
as with a cold cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fresh_python import run_python

#: One fresh interpreter that imported etops' command line only (no executorch.exir,
#: the disk cache not read yet); each run in a new process of its own, a fork of it
#: (etops.child_process.ChildCall): `etops list --json` or `etops show NAME` with the
#: cache in FOLDER, its exit code, its output and whether it imported executorch.exir.
RUNS = """
import contextlib, io, json, os, sys
import torch
from etops.child_process import ChildCall
from etops.cli import main


def run(folder, argv):
    def work():
        os.environ["ETOPS_CACHE_DIR"] = folder
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(argv)
        return {{"code": code, "text": out.getvalue(), "exir": any(m.startswith("executorch.exir") for m in sys.modules)}}
    done = ChildCall(work).result(300)
    return done.value if done.kind == "returned" else f"{{done.kind}}: {{done.ended()}}\\n{{done.error}}"


print("RESULTS " + json.dumps({{name: run(folder, argv) for name, folder, argv in {runs!r}}}))
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """name -> the run's {"code", "text", "exir"}, in this order: a cold list, a warm
    one (the list's folder), a cold show of an exir namespace's operator, a warm one,
    a show of an aten operator (the show's folder)."""
    listed, shown = str(tmp_path_factory.mktemp("list-cache")), str(tmp_path_factory.mktemp("show-cache"))
    order = [("cold list", listed, ["list", "--json"]), ("warm list", listed, ["list", "--json"]),
             ("cold show", shown, ["show", "quantized_decomposed::add.out"]),
             ("warm show", shown, ["show", "quantized_decomposed::add.out"]), ("aten show", shown, ["show", "aten::add.out"])]
    done = run_python(RUNS.format(runs=order), timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULTS ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    results = json.loads(lines[0][len("RESULTS "):])
    for name, result in results.items():
        assert isinstance(result, dict), f"{name}: {result}"
    return {"list folder": listed, **results}


def test_a_warm_list_imports_no_exir_and_lists_the_same(runs):
    tmp_path = Path(runs["list folder"])
    cold = runs["cold list"]
    cold["rows"] = json.loads(cold["text"])
    assert cold["code"] == 0 and cold["exir"], "a cold cache imports the namespaces' modules"
    files = list(tmp_path.glob("schemas-*.json"))
    assert len(files) == 1
    recorded = json.loads(files[0].read_text())
    assert "quantized_decomposed::add.out" in recorded and recorded["quantized_decomposed::add.out"].startswith(
        "quantized_decomposed::add.out(")
    assert recorded["executorch_prim::mod.int"] is None, "an operator no package defines is recorded as such"
    warm = runs["warm list"]
    warm["rows"] = json.loads(warm["text"])
    assert warm["code"] == 0 and not warm["exir"], "a warm cache needs no executorch.exir"
    assert warm["rows"] == cold["rows"]
    assert any(r["name"].startswith("quantized_decomposed::") and r["schema_known"] for r in warm["rows"])


def test_a_warm_show_imports_no_exir_and_shows_the_same(runs):
    """`etops show` of an operator of an exir namespace: a cold cache imports its
    modules (and fills the file), a new process after it shows the same without them."""
    cold = runs["cold show"]
    assert cold["code"] == 0 and cold["exir"], "a cold cache imports the namespace's modules"
    warm = runs["warm show"]
    assert warm["code"] == 0 and not warm["exir"], "a warm cache needs no executorch.exir"
    assert warm["text"] == cold["text"] and "quantized_decomposed::add.out(" in warm["text"]
    aten = runs["aten show"]
    assert aten["code"] == 0 and not aten["exir"], "an aten operator never needs executorch.exir"


def test_a_schema_torch_knows_in_the_process_wins_over_the_file(tmp_path, monkeypatch):
    from etops import schema_cache, schemas

    monkeypatch.setenv("ETOPS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(schema_cache, "_known", None)
    schema_cache._path().parent.mkdir(parents=True, exist_ok=True)
    wrong = "quantized_decomposed::add.out(Tensor a, *, Tensor(a!) out) -> Tensor(a!)"
    schema_cache._path().write_text(json.dumps({"quantized_decomposed::add.out": wrong}))
    schemas.torch_overload("quantized_decomposed::add.out")  # the namespace's modules imported here
    schema, source = schemas.find_schema("quantized_decomposed::add.out")
    assert source == "torch.ops" and str(schema) != wrong
    monkeypatch.setattr(schema_cache, "_known", None)


def test_the_file_is_keyed_by_the_versions(monkeypatch):
    from etops import schema_cache

    first = schema_cache._path()
    monkeypatch.setattr(schema_cache.build_info, "EXECUTORCH_VERSION", "0.0.0-other")
    assert schema_cache._path() != first
