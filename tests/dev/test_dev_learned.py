"""etops.dev.learned: the base's task results and upstream test runs kept per base
(a build's source hash), never for a built-in base (its key is addresses of this
process); the plan kept per operators, dtypes, generated cases and registry."""

from __future__ import annotations

import pytest

from etops.dev import learned


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ETOPS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(learned, "_BASE_LOADED", {})
    monkeypatch.setattr(learned, "RECOMPUTED", {})


def test_the_base_results_are_kept_per_base():
    results = {("abc", True, "aten::add.out", "add", "float32"): "r1",
               (("abc", "transposed", True), True, "aten::add.out", "add", "float32"): "r2",
               ("other", True, "aten::add.out", "add", "float32"): "r3"}
    learned.save_base("abc", results)
    assert learned.RECOMPUTED["base-results"] == 2
    learned._BASE_LOADED.clear()
    later: dict = {}
    learned.load_base("abc", later)
    assert later == {k: v for k, v in results.items() if v != "r3"}
    learned._BASE_LOADED.clear()
    elsewhere: dict = {}
    learned.load_base("abd", elsewhere)  # another base (its file, headers or flags changed)
    assert elsewhere == {}


def test_a_built_in_base_is_never_stored():
    key = (("aten::add.out", 140000000),)
    results = {(key, True, "aten::add.out", "add", "float32"): "r"}
    learned.save_base(key, results)
    later: dict = {}
    learned.load_base(key, later)
    assert later == {} and not learned.RECOMPUTED


def test_the_base_gtest_run_is_kept_per_base_kernel_set_and_test_text():
    key = (("abc", "headers1"), "portable", (("op_add_test.cpp", "TEST(A, B) {}"),))
    assert learned.load_gtest(key) is None
    learned.save_gtest(key, {"run": 1})
    assert learned.load_gtest(key) == {"run": 1}
    assert learned.load_gtest((("abc", "headers1"), "portable", (("op_add_test.cpp", "TEST(A, C) {}"),))) is None
    assert learned.load_gtest((("abc", "headers2"), "portable", key[2])) is None
    assert learned.load_gtest((("abd", "headers1"), "portable", key[2])) is None
    assert learned.load_gtest(None) is None


def test_the_plan_is_kept_per_operators_dtypes_and_generated():
    made = []

    def compute(tasks):
        def run():
            made.append(tasks)
            return {"aten::add.out": tasks}
        return run

    names = ["aten::add.out"]
    assert learned.cached_plan(names, ["float32"], True, compute([1])) == {"aten::add.out": [1]}
    assert learned.cached_plan(names, ["float32"], True, compute([2])) == {"aten::add.out": [1]}
    assert learned.cached_plan(names, ["float64"], True, compute([3])) == {"aten::add.out": [3]}
    assert learned.cached_plan(names, ["float32"], False, compute([4])) == {"aten::add.out": [4]}
    assert made == [[1], [3], [4]]


def test_the_generated_cases_are_kept_per_kernel_and_environment(monkeypatch):
    """A new process reads a kernel's generated cases instead of making them (ATen's
    meta kernels, whose first call imports torch._dynamo); another torch, executorch
    or etops makes them again."""
    from etops import learned_store
    from etops.conformance.generated import kept

    monkeypatch.setattr(kept, "_KEPT", {})
    monkeypatch.setattr(kept, "_CHANGED", set())
    made = learned.prepare_generated("aten::add.out", "float32")
    assert made > 0 and learned.RECOMPUTED["generated-cases"] == made
    assert learned.save_generated() == 1 and learned.save_generated() == 0
    monkeypatch.setattr(kept, "_KEPT", {})  # a new process
    assert learned.prepare_generated("aten::add.out", "float32") == 0
    assert learned.prepare_generated("aten::add.out", "float64") > 0  # another task of the kernel: made, kept with them
    monkeypatch.setattr(kept, "_KEPT", {})
    changed = list(learned_store.environment())
    changed[0] += "-other torch"
    monkeypatch.setattr(learned_store, "_environment", tuple(changed))
    assert learned.prepare_generated("aten::add.out", "float32") == made
