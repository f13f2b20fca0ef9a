"""Test hook: the worker running OpInfo 'add' through aten::add.out dies (SIGKILL)
while making sample 2's expected value, before its kernel call: outside every
kernel call, as ATen crashing on an input would."""

import os
import signal


def reference(case, expected):
    if case.kernel == "aten::add.out" and case.opinfo == "add" and case.sample == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return expected
