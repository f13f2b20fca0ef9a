"""etops list and etops show know the schemas of executorch.exir's namespaces from
the disk cache (etops.schema_cache) in a new process, without importing
executorch.exir, and list and show the same thing as with a cold cache."""

from __future__ import annotations

import json

from fresh_python import run_python

# a fresh process: `etops list`'s whole output, and whether it imported executorch.exir
LIST = """
import contextlib, io, json, os, sys
os.environ["ETOPS_CACHE_DIR"] = {cache!r}
from etops.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["list", "--json"])
print(json.dumps({{"code": code, "rows": json.loads(out.getvalue()),
                  "exir": any(m.startswith("executorch.exir") for m in sys.modules)}}))
"""


# a fresh process: `etops show NAME`'s output, and whether it imported executorch.exir
SHOW = """
import contextlib, io, json, os, sys
os.environ["ETOPS_CACHE_DIR"] = {cache!r}
from etops.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["show", {name!r}])
print(json.dumps({{"code": code, "text": out.getvalue(),
                  "exir": any(m.startswith("executorch.exir") for m in sys.modules)}}))
"""


def _show(cache, name: str) -> dict:
    done = run_python(SHOW.format(cache=str(cache), name=name))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _list(cache) -> dict:
    done = run_python(LIST.format(cache=str(cache)))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_warm_list_imports_no_exir_and_lists_the_same(tmp_path):
    cold = _list(tmp_path)
    assert cold["code"] == 0 and cold["exir"], "a cold cache imports the namespaces' modules"
    files = list(tmp_path.glob("schemas-*.json"))
    assert len(files) == 1
    recorded = json.loads(files[0].read_text())
    assert "quantized_decomposed::add.out" in recorded and recorded["quantized_decomposed::add.out"].startswith(
        "quantized_decomposed::add.out(")
    assert recorded["executorch_prim::mod.int"] is None, "an operator no package defines is recorded as such"
    warm = _list(tmp_path)
    assert warm["code"] == 0 and not warm["exir"], "a warm cache needs no executorch.exir"
    assert warm["rows"] == cold["rows"]
    assert any(r["name"].startswith("quantized_decomposed::") and r["schema_known"] for r in warm["rows"])


def test_a_warm_show_imports_no_exir_and_shows_the_same(tmp_path):
    """`etops show` of an operator of an exir namespace: a cold cache imports its
    modules (and fills the file), a new process after it shows the same without them."""
    name = "quantized_decomposed::add.out"
    cold = _show(tmp_path, name)
    assert cold["code"] == 0 and cold["exir"], "a cold cache imports the namespace's modules"
    warm = _show(tmp_path, name)
    assert warm["code"] == 0 and not warm["exir"], "a warm cache needs no executorch.exir"
    assert warm["text"] == cold["text"] and "quantized_decomposed::add.out(" in warm["text"]
    aten = _show(tmp_path, "aten::add.out")
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
