"""Test hook: the worker running sample 2 of OpInfo 'add' through aten::add.out is
killed (SIGKILL) just before the kernel call, as a segfaulting kernel would die."""

import os
import signal


def before_call(case):
    if case.kernel == "aten::add.out" and case.opinfo == "add" and case.sample == 2:
        os.kill(os.getpid(), signal.SIGKILL)
