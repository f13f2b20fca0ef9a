"""The timing of ``etops dev`` runs in forked processes (the alongside process, and
in it one process per operator); torch's answers they work out (the timing inputs'
out shapes and checks) come back to the round's process, through both, which keeps
them for its next process (etops.dev.learned): a warm round's timing asks torch's
meta kernels nothing (their first call in a process imports torch._dynamo)."""

from __future__ import annotations

import torch

from etops import out_shapes
from etops.dev import loop
from etops.dev.background import Background
from etops.signature_cache import signature


def test_torchs_answers_of_a_timing_process_come_back_through_the_process_that_forked_it(reg):
    info = reg.aten.add.out._info
    bound = {"self": torch.ones(3, 5, 11), "other": torch.ones(5, 11), "alpha": 2}  # a signature no one asked yet
    key = (out_shapes._operator_key(info), tuple(signature(v) for v in bound.values()))
    assert out_shapes.OUT_SHAPES.get(key) is None

    def one_operator():  # an operator's timing process: its inputs' outs sized by torch
        out_shapes.infer_outs(info, bound)
        return ["row"]

    def alongside():  # the alongside process, forking the operator's
        return loop._rows_apart("aten::add.out", one_operator)

    rows = loop._keep_found(Background(loop._sampled(alongside)).result())
    assert rows == ["row"]
    assert out_shapes.OUT_SHAPES.get(key) == {"out": ((3, 5, 11), torch.float32, (55, 11, 1))}
