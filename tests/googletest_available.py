"""The one skip marker for tests that build googletest (etops gtest, etops dev's
upstream C++ tests): without googletest's sources on the machine they skip, saying
how to get them (.ci/run installs them with ``make googletest``)."""

from __future__ import annotations

import pytest

from etops.gtest import find_googletest

needs_googletest = pytest.mark.skipif(
    find_googletest(None) is None,
    reason="no googletest on this machine (make googletest, or apt-get install googletest; .ci/run installs it)",
)
