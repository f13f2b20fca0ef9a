"""Shared fixtures: the process-wide registry, a fixed seed, the user's schemas
restored, and the guard that every test module leaves the process-wide state as it
found it (state_guard.py). Fresh-interpreter helpers are in fresh_python.py; the
check files of an ``inprocess`` folder are collected by fresh_checks.py."""

from __future__ import annotations

import pytest
import torch

import etops
from etops import schemas
from file_seconds import file_seconds
from fresh_checks import collect_check_file, start_check_runs, stop_check_runs
from fresh_python import DEFERRED, start_module
from state_guard import process_state, state_changes


@pytest.fixture(scope="session")
def reg():
    return etops.registry()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True, scope="module")
def _module_leaves_state_as_found(request):
    """Fails the module (an error at its last test's teardown) when it changed
    state the next modules read: a test that changes it must restore it (see
    `user_schemas`), or tests pass or fail by the order they run in. The check
    files of an ``inprocess`` folder share their interpreter's state on purpose:
    they run in one of their own (fresh_checks.py)."""
    start_module(request.module.__name__)  # its background work, when deferred (pytest-xdist)
    if request.path.parent.name == "inprocess":
        yield
        return
    before = process_state()
    yield
    changed = state_changes(before, process_state())
    if changed:
        pytest.fail(f"{request.node.nodeid} left process-wide state changed (restore it in a fixture): " + "; ".join(changed),
                    pytrace=False)


@pytest.fixture
def user_schemas(reg, monkeypatch):
    """Lets a test give schemas (``etops.set_schema``, ``get_kernel(name, schema=)``):
    the user's schemas and the registry's cached kernel objects are put back after it."""
    monkeypatch.setattr(schemas, "_user_schemas", dict(schemas._user_schemas))
    monkeypatch.setattr(reg, "_kernels", dict(reg._kernels))
    monkeypatch.setattr(reg, "_namespaces", {})


def pytest_collect_file(file_path, parent):
    """``check_*.py`` files of an ``inprocess`` folder: each test function an item,
    run in a fresh interpreter (fresh_checks.py)."""
    return collect_check_file(file_path, parent)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist (``make test``: two workers) each file's tests run in one
    worker, in their order (a check file's in the one fresh interpreter that runs
    them all, fresh_checks.py), the files handed out in the order collection left
    them (pytest_collection_modifyitems: the longest first), not xdist's default of
    the most tests first."""
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return nodeid.split("::", 1)[0]

    config.option.loadscopereorder = False
    return ByFile(config, log)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist the files come longest first (file_seconds.py: a measured
    run's seconds; the others after them, in collection order), so that no long file
    starts last while the other worker has nothing left to do."""
    if DEFERRED:
        root = config.rootpath
        # stable: the order within a file kept, and of the files not measured
        items.sort(key=lambda item: -file_seconds(item.path, root))


def pytest_collection_finish(session):
    """The selected check files' fresh interpreters start now, in the background
    (under pytest-xdist: when the worker running a check file's items reaches them)."""
    if not DEFERRED:
        start_check_runs(session)


def pytest_sessionfinish(session, exitstatus):
    """Drops queued interpreters nobody will look at (after -x, say)."""
    from fresh_python import _POOL

    _POOL.shutdown(wait=False, cancel_futures=True)
    stop_check_runs()
