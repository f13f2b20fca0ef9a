"""etops' fault handler is chained like a good citizen (docs/reliability.md): whatever
faulthandler and signal.signal install or remove after ``import etops``, a fault
outside kernels reaches the handler in place at that moment or the default action
(the process ends with the signal), a fault inside a kernel is trapped on a warm
signature too, and a user's SIGFPE handler never sees a kernel's trap. Each case
runs in a fresh interpreter under a timeout: before, three of them looped forever."""

from __future__ import annotations

import signal

from custom_helpers import cache, run_fresh  # noqa: F401

#: a kernel writing through a null pointer when x[0] < 0, called twice before so
#: that its signature is warm (no longer re-checks the handlers as a new one does)
WARM_NULL_WRITE = r'''
import torch, etops
SOURCE = """
Tensor& null_write_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  volatile float* null_pointer = nullptr;
  if (x.const_data_ptr<float>()[0] < 0.0f) null_pointer[4] = 1.0f;
  return out;
}
"""
etops.register_kernel("chainlib::null_write.out", SOURCE, function="null_write_out",
                      schema="null_write.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
kernel = etops.registry().get_kernel("chainlib::null_write.out")
out = torch.empty(2)
kernel(torch.ones(2), out=out)
kernel(torch.ones(2), out=out)

def fault_in_kernel():
    try:
        kernel(-torch.ones(2), out=out)
    except etops.KernelCrashed as error:
        print("trapped", error.signal)
'''

#: floor_divide.out on a warm signature, then INT64_MIN // -1 (SIGFPE) on it
WARM_FLOOR_DIVIDE = r'''
import torch, etops
divide = etops.registry().aten.floor_divide.out
out = torch.empty(1, dtype=torch.long)
divide(torch.tensor([5]), torch.tensor([2]), out=out)
divide(torch.tensor([5]), torch.tensor([2]), out=out)

def fault_in_kernel():
    try:
        divide(torch.tensor([-2**63]), torch.tensor([-1]), out=out)
    except etops.KernelCrashed as error:
        print("trapped", error.signal)
'''

#: TIMEOUT seconds: a fresh interpreter imports torch and etops in a few
TIMEOUT = 120


def _run(code: str, cache_path, dies: bool = False):
    return run_fresh(code, cache_path, timeout=TIMEOUT, dies_of_a_fault=dies)


def test_a_fault_outside_kernels_after_faulthandler_enable_and_disable_ends_the_process(cache):
    """faulthandler.disable() restores the handler it found (etops'): a fault outside
    kernels then goes where it went before enable(), the default action, instead of
    to faulthandler's disabled handler, which returned into the fault forever."""
    result = _run("""
        import ctypes, faulthandler
        import etops
        faulthandler.enable()
        faulthandler.disable()
        ctypes.string_at(0)
        print("survived")
    """, cache, dies=True)
    assert result.returncode == -signal.SIGSEGV and "survived" not in result.stdout, result.stderr[-2000:]


def test_many_enables_and_disables_keep_both_behaviours(cache):
    """Every enable() puts a new installation of etops' handler on top; disable()
    brings an older one back: forty rounds neither lose kernel faults nor the
    default action."""
    result = _run(WARM_NULL_WRITE + """
import ctypes, faulthandler
for _ in range(40):
    faulthandler.enable()
    faulthandler.disable()
fault_in_kernel()
ctypes.string_at(0)
print("survived")
""", cache, dies=True)
    assert "trapped SIGSEGV" in result.stdout, result.stderr[-2000:]
    assert result.returncode == -signal.SIGSEGV and "survived" not in result.stdout, result.stderr[-2000:]


def test_a_kernel_fault_after_an_early_faulthandler_is_disabled_is_trapped(cache):
    """faulthandler enabled before etops (python -X faulthandler) and disabled after
    it put back the default action, removing etops' handler: a fault in a warm
    kernel ended the process."""
    result = _run("import faulthandler\nfaulthandler.enable()\n" + WARM_NULL_WRITE + """
faulthandler.disable()
fault_in_kernel()
print("went on")
""", cache)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "trapped SIGSEGV" in result.stdout and "went on" in result.stdout


def test_a_fault_outside_kernels_still_reaches_faulthandler(cache):
    """faulthandler enabled after etops: a kernel's fault is trapped, and a fault
    outside kernels reaches faulthandler (its traceback), then ends the process."""
    result = _run(WARM_NULL_WRITE + """
import ctypes, faulthandler
faulthandler.enable()
fault_in_kernel()
ctypes.string_at(0)
print("survived")
""", cache, dies=True)
    assert "trapped SIGSEGV" in result.stdout and "survived" not in result.stdout, result.stderr[-2000:]
    assert result.returncode == -signal.SIGSEGV
    assert "Fatal Python error: Segmentation fault" in result.stderr, result.stderr[-2000:]


def test_a_python_sigfpe_handler_never_sees_a_kernels_trap(cache):
    """signal.signal(SIGFPE, handler) after a signature is warm: the kernel's trap
    went to Python's handler, which only flags the signal and returns into the
    division forever. The handler still gets a SIGFPE raised outside kernels."""
    result = _run(WARM_FLOOR_DIVIDE + """
import signal
seen = []
signal.signal(signal.SIGFPE, lambda signo, frame: seen.append(signo))
fault_in_kernel()
print("seen by the handler after the trap:", len(seen))
signal.raise_signal(signal.SIGFPE)
print("seen by the handler after raise_signal:", len(seen))
""", cache)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "trapped SIGFPE" in result.stdout
    assert "seen by the handler after the trap: 0" in result.stdout
    assert "seen by the handler after raise_signal: 1" in result.stdout


def test_a_fault_outside_kernels_after_signal_restores_the_default_ends_the_process(cache):
    """signal.signal(SIGFPE, handler) then signal.signal(SIGFPE, SIG_DFL): the kernel's
    trap still works and a SIGFPE outside kernels takes the default action."""
    result = _run(WARM_FLOOR_DIVIDE + """
import signal
signal.signal(signal.SIGFPE, lambda signo, frame: print("python handler"))
signal.signal(signal.SIGFPE, signal.SIG_DFL)
fault_in_kernel()
signal.raise_signal(signal.SIGFPE)
print("survived")
""", cache, dies=True)
    assert "trapped SIGFPE" in result.stdout and "python handler" not in result.stdout, result.stderr[-2000:]
    assert result.returncode == -signal.SIGFPE and "survived" not in result.stdout
