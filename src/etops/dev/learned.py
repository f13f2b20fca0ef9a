"""What ``etops dev`` keeps on disk for its next process (etops.learned_store:
keyed by torch's, executorch's and etops' versions and etops' sources, verified on
reading, evicted oldest first), so that a warm run in a new process imports,
loads the kernel, replays, judges and times, and works nothing out twice:

- the plan (``cached_plan``): each operator's tasks, per operator set, dtypes,
  generated cases and the wheel's registry (finding them imports every OpInfo);
- the recorded cases (``RECORDINGS``, the judge's Recorder's store: per task,
  dtype, kernels and seed);
- the base's task results (``load_base`` / ``save_base``: judge.BASE_RESULTS' entries
  of one base, keyed by its build's source hash: its file, headers at the base
  commit, flags and etops' build) and its upstream test runs (upstream_tests.BASE_GTEST's,
  and upstream_python.BASE_RUNS': an LLM file's Python tests, ``load_python_tests``,
  with the recording of their kernel calls in a folder of its own, ``replay_folder``);
- torch's answers per argument signature (etops.signature_cache) and the timing's
  OpInfo samples (etops.bench.sampling): ``load_answers`` / ``save_answers``;
- the generated cases per kernel (etops.conformance.generated.kept: made with ATen's
  meta kernels, whose first call imports torch._dynamo): ``prepare_generated`` /
  ``save_generated``.

``counts(recorder)`` says how many of each were read and how many worked out again in this
process. May import the core, etops.conformance, etops.bench and this package's
cases.
"""

from __future__ import annotations

import hashlib

from ..learned_store import Store

#: the recorded cases of OpInfo tasks (etops.conformance.recorded's Recorder store)
RECORDINGS = Store("recording")
PLANS = Store("dev-plan")
BASE_RESULTS = Store("base-results")
BASE_GTEST = Store("base-gtest")
BASE_PYTHON_TESTS = Store("base-python-tests")
ANSWERS = Store("torch-answers")
SAMPLES = Store("timing-samples")
GENERATED = Store("generated-cases")

#: what this process worked out that a store could have held: kind -> count
RECOMPUTED: dict = {}
#: the base keys whose results the store had, and how many entries it had
_BASE_LOADED: dict = {}
_ANSWERS_KNOWN: dict = {"answers": -1, "samples": -1}


def _recomputed(kind: str) -> None:
    RECOMPUTED[kind] = RECOMPUTED.get(kind, 0) + 1


def counts(recorder) -> dict:
    """kind -> {"loaded": read from the store, "recomputed": worked out here} for
    this process (`recorder`: the judge's Recorder, whose recomputed are the tasks
    whose OpInfo ran here)."""
    out = {"recording": {"loaded": recorder.loaded, "recomputed": recorder.recomputed}}
    for kind, store in (("plan", PLANS), ("base-results", BASE_RESULTS), ("base-gtest", BASE_GTEST),
                        ("base-python-tests", BASE_PYTHON_TESTS), ("generated-cases", GENERATED)):
        out[kind] = {"loaded": store.loaded, "recomputed": RECOMPUTED.get(kind, 0)}
    return out


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _plan_key(names, dtypes, generated: bool) -> tuple:
    from .cases import wheel_kmap

    registered = _digest("\n".join(sorted(wheel_kmap().registered)))
    return ("plan", sorted(names), None if dtypes is None else sorted(str(d) for d in dtypes), generated, registered)


def stored_plan(names, dtypes, generated: bool) -> dict | None:
    """cases.plan's answer for these operators, dtypes and `generated` when the store
    has it for the wheel's registry now, else None."""
    found = PLANS.load(_plan_key(names, dtypes, generated))
    return found if isinstance(found, dict) and set(found) == set(names) else None


def cached_plan(names, dtypes, generated: bool, compute):
    """cases.plan's answer for these operators, dtypes and `generated`, from the store
    when it has it for the wheel's registry now (stored_plan), else `compute()` (then stored)."""
    key = _plan_key(names, dtypes, generated)
    found = stored_plan(names, dtypes, generated)
    if found is not None:
        return found
    _recomputed("plan")
    made = compute()
    PLANS.save(key, made)
    return made


def _of_base(key, base_key: str) -> bool:
    """Whether a BASE_RESULTS key belongs to the base `base_key` (its own passes, or a
    variant's: a layout's, a numerics transform's)."""
    head = key[0]
    return head == base_key or (isinstance(head, tuple) and bool(head) and head[0] == base_key)


def load_base(base_key, results: dict) -> None:
    """The store's results of base `base_key` (a build's source hash; any other key,
    such as a built-in base's addresses, is never stored) added to `results`
    (judge.BASE_RESULTS)."""
    if not isinstance(base_key, str) or base_key in _BASE_LOADED:
        return
    found = BASE_RESULTS.load(("base-results", base_key))
    found = found if isinstance(found, dict) and all(_of_base(k, base_key) for k in found) else {}
    for k, v in found.items():
        results.setdefault(k, v)
    _BASE_LOADED[base_key] = len(found)


def save_base(base_key, results: dict) -> None:
    """`results`' (judge.BASE_RESULTS') entries of base `base_key` written to the
    store, when this process added any (counted as recomputed)."""
    if not isinstance(base_key, str):
        return
    mine = {k: v for k, v in results.items() if _of_base(k, base_key)}
    added = len(mine) - _BASE_LOADED.get(base_key, 0)
    if added > 0:
        RECOMPUTED["base-results"] = RECOMPUTED.get("base-results", 0) + added
        if BASE_RESULTS.save(("base-results", base_key), mine):
            _BASE_LOADED[base_key] = len(mine)


def _gtest_key(key) -> tuple:
    """upstream_tests.GtestRun's key ((base key, headers digest), kernel set, test texts) with
    the texts digested; None when the base is no build (never stored)."""
    if key is None:
        return ()
    (base_key, headers), kernel_set, texts = key
    if not isinstance(base_key, str):
        return ()
    return ("base-gtest", base_key, headers, kernel_set, [(name, _digest(text)) for name, text in texts])


def load_gtest(key):
    """The base's upstream test run stored under upstream_tests.GtestRun's `key` (None: no
    key), or None."""
    disk = _gtest_key(key)
    return BASE_GTEST.load(disk) if disk else None


def save_gtest(key, run) -> None:
    """Stores the base's upstream test run `run` under upstream_tests.GtestRun's `key`."""
    disk = _gtest_key(key)
    if disk:
        _recomputed("base-gtest")
        BASE_GTEST.save(disk, run)


def _python_tests_key(key) -> tuple:
    """upstream_python.PythonTestRun's key ((base key, headers digest), kernels, test texts)
    with the texts digested; () when the base is no build (never stored)."""
    if key is None:
        return ()
    (base_key, headers), kernels, texts = key
    if not isinstance(base_key, str):
        return ()
    return ("base-python-tests", base_key, headers, list(kernels), [(name, _digest(text)) for name, text in texts])


def load_python_tests(key):
    """The base's run of an LLM file's upstream Python tests stored under
    upstream_python.PythonTestRun's `key`, or None."""
    disk = _python_tests_key(key)
    return BASE_PYTHON_TESTS.load(disk) if disk else None


def save_python_tests(key, run) -> None:
    """Stores the base's run `run` of the upstream Python tests under PythonTestRun's `key`."""
    disk = _python_tests_key(key)
    if disk:
        _recomputed("base-python-tests")
        BASE_PYTHON_TESTS.save(disk, run)


#: the base's recordings of the upstream Python tests' kernel calls kept at once (each
#: may take up to etops.conformance.llm_replay.limit_bytes())
REPLAYS_KEPT = 2


def replay_folder(key):
    """Where the base's recording of the upstream Python tests' kernel calls
    (etops.conformance.llm_replay) under upstream_python.PythonTestRun's `key` is
    kept: named by the key (the base's build, the headers, the kernels, the test files'
    texts) and the environment (torch's, executorch's and etops' versions and etops'
    sources: learned_store.environment()), so a change of any of them finds no
    recording; None when the base is no build. The recordings used longest ago past
    REPLAYS_KEPT are removed (and any half-written one older than an hour)."""
    import os
    import shutil
    import time

    from ..cache_files import cache_root
    from ..learned_store import canonical, environment

    disk = _python_tests_key(key)
    if not disk:
        return None
    root = cache_root() / "python-replay"
    name = hashlib.sha256(repr((environment(), canonical(disk))).encode()).hexdigest()[:32]
    try:
        folders = [p for p in root.iterdir() if p.is_dir()]
    except OSError:
        folders = []
    for p in folders:
        if p.suffix == ".tmp" and time.time() - p.stat().st_mtime > 3600:
            shutil.rmtree(p, ignore_errors=True)
    done = sorted((p for p in folders if p.suffix != ".tmp" and p.name != name), key=lambda p: p.stat().st_mtime)
    for p in done[:max(0, len(done) - (REPLAYS_KEPT - 1))]:
        shutil.rmtree(p, ignore_errors=True)
    if (root / name).is_dir():
        os.utime(root / name)  # a use
    return root / name


def load_answers() -> None:
    """torch's answers per signature and the timing's OpInfo samples from the store,
    added to this process' (etops.signature_cache, etops.bench.sampling)."""
    from .. import signature_cache
    from ..bench import sampling

    if _ANSWERS_KNOWN["answers"] >= 0:  # read once per process
        return
    answers = ANSWERS.load("signature answers")
    if isinstance(answers, dict):
        signature_cache.keep(answers)
    _ANSWERS_KNOWN["answers"] = signature_cache.changes()
    samples = SAMPLES.load("base samples")
    if isinstance(samples, dict):
        sampling.keep_samples(samples)
    _ANSWERS_KNOWN["samples"] = len(sampling.found_samples())


def save_answers() -> None:
    """Writes what this process added to torch's answers and the timing's samples."""
    from .. import signature_cache
    from ..bench import sampling

    if signature_cache.changes() != _ANSWERS_KNOWN["answers"]:
        if ANSWERS.save("signature answers", signature_cache.entries()):
            _ANSWERS_KNOWN["answers"] = signature_cache.changes()
    samples = sampling.found_samples()
    if len(samples) != _ANSWERS_KNOWN["samples"]:
        if SAMPLES.save("base samples", samples):
            _ANSWERS_KNOWN["samples"] = len(samples)


def prepare_generated(kernel: str, dtype: str) -> int:
    """Every case of `kernel`'s generated task at `dtype` made and kept in this
    process (generated.kept.prepare), the kernel's kept cases read from the store
    first (once per process); how many were made now (counted as recomputed)."""
    from ..conformance.generated import kept

    if not kept.kept(kernel):
        found = GENERATED.load(("generated cases", kernel))
        kept.keep(kernel, found if isinstance(found, dict) else {})
    made = kept.prepare(kernel, dtype)
    if made:
        RECOMPUTED["generated-cases"] = RECOMPUTED.get("generated-cases", 0) + made
    return made


def save_generated() -> int:
    """Writes the kept cases of each kernel that has new ones (generated.kept.changed);
    how many kernels' were written."""
    from ..conformance.generated import kept

    return sum(bool(GENERATED.save(("generated cases", kernel), kept.of_kernel(kernel))) for kernel in sorted(kept.changed()))


def round_end(recorder) -> dict:
    """At the end of a round: what it added to torch's answers and the timing's
    samples written (save_answers); counts(recorder)."""
    save_answers()
    return counts(recorder)


__all__ = ["RECORDINGS", "cached_plan", "stored_plan", "counts", "load_answers", "load_base", "load_gtest", "prepare_generated",
           "round_end", "save_answers", "save_base", "save_generated", "save_gtest"]
