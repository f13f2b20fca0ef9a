"""Fixtures of the edge tests."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("executorch.exir")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
