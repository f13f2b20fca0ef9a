"""Shared fixtures: the process-wide registry and a fixed seed. Fresh-interpreter
helpers are in fresh_python.py."""

from __future__ import annotations

import pytest
import torch

import etops


@pytest.fixture(scope="session")
def reg():
    return etops.registry()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def pytest_sessionfinish(session, exitstatus):
    """Drops queued interpreters nobody will look at (after -x, say)."""
    from fresh_python import _POOL

    _POOL.shutdown(wait=False, cancel_futures=True)
