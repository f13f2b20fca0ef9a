"""Test hook: a fake reference for sample 1 of OpInfo 'add' (ATen's result + 1), so
the sweep sees a mismatch of exactly 1 there."""


def reference(case, expected):
    if case.kernel == "aten::add.out" and case.opinfo == "add" and case.sample == 1:
        return expected + 1
    return expected
