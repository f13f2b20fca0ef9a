"""Shared fixtures: the process-wide registry, a fixed seed, the user's schemas
restored, and the guard that every test module leaves the process-wide state as it
found it (state_guard.py). Fresh-interpreter helpers are in fresh_python.py; the
check files of an ``inprocess`` folder are collected by fresh_checks.py."""

from __future__ import annotations

import pytest
import torch

import etops
from etops import schemas
from fresh_checks import collect_check_file
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


def pytest_configure(config):
    config.addinivalue_line("markers", "xdist_group(name): tests pytest-xdist runs in one worker, in order")


#: files whose tests share files on disk (minicheckout.stable_folder): one xdist group
SHARED_ON_DISK = {"dev/inprocess/check_dev.py": "stable-checkouts", "dev/inprocess/check_checkout.py": "stable-checkouts"}


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``make test``: two workers, ``--dist loadgroup``) each
    file's tests run in one worker in their order, and the files of SHARED_ON_DISK
    that share a folder in one worker too."""
    root = config.rootpath / "tests"
    for item in items:
        relative = str(item.path.relative_to(root)) if item.path.is_relative_to(root) else str(item.path)
        item.add_marker(pytest.mark.xdist_group(SHARED_ON_DISK.get(relative, relative)))


def pytest_sessionfinish(session, exitstatus):
    """Drops queued interpreters nobody will look at (after -x, say)."""
    from fresh_python import _POOL

    _POOL.shutdown(wait=False, cancel_futures=True)
