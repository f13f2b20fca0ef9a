"""etops.edge.call, on_executorch(), ExecuTorch's own edge ops (dim_order_ops,
executorch_prim symbolic scalars), the lazy import."""

from __future__ import annotations

import operator
import subprocess
import sys
import threading

import pytest
import torch
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.dialects.edge._ops import EdgeOpOverload
from torch.export import Dim

import etops
import etops.edge as edge
from edge_helpers import Lowered, bit_identical

ea = exir_ops.edge.aten


def test_call_functional_edge_op_uses_out_variant():
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    y = edge.call(ea.add.Tensor, a, b, alpha=2)
    torch.testing.assert_close(y, a + 2 * b)
    assert edge.resolve(ea.add.Tensor).kernel_name == "aten::add.out"
    assert edge.kernel_for(ea.add.Tensor) is etops.registry().get_kernel("aten::add.out")


def test_call_convolution_and_multi_out():
    x, w = torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3)
    y = edge.call(ea.convolution.default, x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    torch.testing.assert_close(y, torch.nn.functional.conv2d(x, w))
    values, indices = edge.call(ea.max_pool2d_with_indices.default, x, [2, 2])
    ref_v, ref_i = torch.ops.aten.max_pool2d_with_indices(x, [2, 2])
    assert torch.equal(values, ref_v) and torch.equal(indices, ref_i)
    assert edge.resolve(ea.max_pool2d_with_indices.default).out_names == ("out", "indices")


def test_call_with_given_outs_writes_them():
    a = torch.randn(5)
    out = torch.empty(5)
    result = edge.call(ea.relu.default, a, out=out)
    assert result.data_ptr() == out.data_ptr()
    assert torch.equal(out, torch.relu(a))


def test_call_plain_aten_overload_and_data_dependent_shape():
    x = torch.tensor([0.0, 1.0, 0.0, 2.0])
    nz = edge.call(torch.ops.aten.nonzero.default, x)
    assert torch.equal(nz, torch.nonzero(x))


def test_missing_kernel_names_op_and_out_variant():
    with pytest.raises(etops.KernelNotFoundError) as info:
        edge.call(ea.sort.default, torch.randn(4))
    message = str(info.value)
    assert "aten::sort" in message and "aten::sort.values" in message
    with pytest.raises(etops.KernelNotFoundError, match="aten::bernoulli.p.*no out variant"):
        edge.call(ea.bernoulli.p, torch.rand(3), 0.5)


def test_symbolic_scalar_ops_run_executorch_prim_kernels():
    assert edge.call(operator.add, 2, 3) == 5
    assert edge.resolve(operator.floordiv).kernel_name == "executorch_prim::floordiv.Scalar"
    assert edge.call(operator.floordiv, 7, 2) == 3
    assert edge.call(torch.ops.aten.sym_size.int, torch.zeros(2, 5), 1) == 5


def test_dim_order_op_channels_last():
    x = torch.randn(1, 3, 4, 5)
    y = edge.call(exir_ops.edge.dim_order_ops._to_dim_order_copy.default, x, dtype=torch.float16, dim_order=[0, 2, 3, 1])
    assert y.dtype == torch.float16 and y.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(y, x.half())


def test_on_executorch_is_scoped_and_restores():
    original = EdgeOpOverload.__dict__["__call__"]
    x = torch.randn(3, 4, dtype=torch.float64)
    ea._log_softmax.default(x, 1, False)  # ATen: fine in double
    with edge.on_executorch():
        assert edge.is_on_executorch()
        y = ea.add.Tensor(x.float(), x.float())  # the ExecuTorch kernel
        assert torch.equal(y, x.float() * 2)
        with pytest.raises(etops.KernelError, match="_log_softmax.out"):
            ea._log_softmax.default(x, 1, False)  # ExecuTorch's log_softmax has no double
        with edge.on_executorch():  # nests
            with pytest.raises(etops.KernelError):
                ea._log_softmax.default(x, 1, False)
        with pytest.raises(etops.KernelError):
            ea._log_softmax.default(x, 1, False)
    assert not edge.is_on_executorch()
    assert EdgeOpOverload.__dict__["__call__"] is original
    ea._log_softmax.default(x, 1, False)
    with pytest.raises(ZeroDivisionError):
        with edge.on_executorch():
            1 / 0
    assert EdgeOpOverload.__dict__["__call__"] is original


def test_on_executorch_leaves_other_threads_on_aten():
    x = torch.randn(3, 4, dtype=torch.float64)
    inside, go, done = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def other():
        inside.wait()
        try:
            seen["value"] = ea._log_softmax.default(x, 1, False)
        except Exception as exc:  # noqa: BLE001
            seen["error"] = exc
        done.set()

    t = threading.Thread(target=other)
    t.start()
    with edge.on_executorch():
        inside.set()
        done.wait(30)
        with pytest.raises(etops.KernelError):
            ea._log_softmax.default(x, 1, False)
    t.join()
    assert "error" not in seen, seen
    torch.testing.assert_close(seen["value"], torch.log_softmax(x, 1))


def test_on_executorch_runs_a_graph_module():
    from executorch.exir import to_edge

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    x = torch.randn(2, 4)
    ep = to_edge(torch.export.export(model, (x,))).exported_program()
    module = ep.module()
    with edge.on_executorch():
        y = module(x)
    torch.testing.assert_close(y, model(x))


def test_on_executorch_keeps_tracing_on_aten():
    from executorch.exir import to_edge

    model = torch.nn.Linear(4, 3).eval()
    with edge.on_executorch():  # export traces with fake tensors: ATen keeps doing that
        ep = to_edge(torch.export.export(model, (torch.randn(2, 4),))).exported_program()
    assert ep is not None


class Dynamic(torch.nn.Module):
    def forward(self, x):
        n = x.shape[0]
        return x.flatten(1) * (n // 2 + 1), torch.relu(x.to(memory_format=torch.channels_last))


@pytest.fixture(scope="module")
def dynamic():
    x = torch.randn(4, 3, 2, 2)
    return Lowered(Dynamic(), (x,), dynamic_shapes={"x": {0: Dim("n", min=2, max=8)}})


def test_symbolic_shapes_and_dim_order_ops_bit_exact(dynamic):
    ep = dynamic.edge.exported_program()
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert any("sym_size" in t for t in targets), targets
    assert any("_to_dim_order_copy" in t for t in targets), targets
    pre = {str(n.target) for n in dynamic.executorch.exported_program().graph.nodes if n.op == "call_function"}
    assert any("executorch_prim" in t for t in pre), pre
    bit_identical(edge.run(dynamic.edge, dynamic.inputs, flat=True), dynamic.pte_outputs)
    bit_identical(edge.run(dynamic.executorch, dynamic.inputs, flat=True), dynamic.pte_outputs)
    # another size than the example's, within the bounds
    from executorch.runtime import Runtime

    x = torch.randn(6, 3, 2, 2)
    method = Runtime.get().load_program(dynamic.executorch.buffer).load_method("forward")
    bit_identical(edge.run(dynamic.executorch, x, flat=True), list(method.execute([x])))
    bit_identical(edge.run(dynamic.edge, x, flat=True), list(method.execute([x])))


def test_stage_executorch_from_edge_manager_leaves_it_alone(dynamic):
    before = [str(n.target) for n in dynamic.edge.exported_program().graph.nodes]
    outs = edge.run(dynamic.edge, dynamic.inputs, stage="executorch", flat=True)
    bit_identical(outs, dynamic.pte_outputs)
    assert [str(n.target) for n in dynamic.edge.exported_program().graph.nodes] == before
    with pytest.raises(ValueError, match="stage"):
        edge.run(dynamic.edge, dynamic.inputs, stage="pte")


def test_run_does_not_change_mutated_buffers():
    from executorch.exir import to_edge

    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros(3))

        def forward(self, x):
            self.count.add_(x)
            return self.count * 2

    x = torch.ones(3)
    manager = to_edge(torch.export.export(Counter(), (x,)))
    ep = manager.exported_program()
    state = {k: v.clone() for k, v in ep.state_dict.items()}
    out = edge.run(manager, x)
    torch.testing.assert_close(out, torch.full((3,), 2.0))
    for k, v in ep.state_dict.items():
        assert torch.equal(v, state[k])
    # before emission the mutation is an in-place aten::copy_ kernel
    lowered = __import__("copy").deepcopy(manager).to_executorch()
    pre = lowered.exported_program()
    assert any("copy_" in str(n.target) for n in pre.graph.nodes)
    pre_state = {k: v.clone() for k, v in pre.state_dict.items()}
    torch.testing.assert_close(edge.run(lowered, x), torch.full((3,), 2.0))
    assert edge.compare(lowered, x).ok
    for k, v in pre.state_dict.items():
        assert torch.equal(v, pre_state[k])


def test_any_method_of_a_multi_method_program():
    from executorch.exir import to_edge

    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2).eval()
    x = torch.randn(1, 3)
    manager = to_edge({"forward": torch.export.export(torch.nn.ReLU(), (x,)), "project": torch.export.export(lin, (x,))})
    torch.testing.assert_close(edge.run(manager, x, method="project"), lin(x))
    assert torch.equal(edge.run(manager, x), torch.relu(x))
    report = edge.compare(manager, x, method="project")
    assert report.ok and report.method == "project"


def test_import_etops_does_not_load_edge():
    """``import etops`` leaves etops.edge (and executorch.exir) unloaded; the
    attribute loads it (here in-process: it is loaded already)."""
    assert etops.edge is edge
    code = (
        "import sys, etops\n"
        "assert 'etops.edge' not in sys.modules\n"
        "assert 'executorch.exir' not in sys.modules\n"
        "assert callable(getattr(etops, '__getattr__'))\n"
        "print('ok')\n"
    )
    env_path = str(__import__("pathlib").Path(etops.__file__).resolve().parent.parent)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**__import__("os").environ, "PYTHONPATH": env_path}, timeout=120)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]


class Branchy(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x.sin() * 2, lambda x: x.cos() + 1, (x,))


def test_cond_runs_the_taken_branch_bit_exact():
    from executorch.runtime import Runtime

    x = torch.randn(3, 4)
    lowered = Lowered(Branchy(), (x,))
    method = Runtime.get().load_program(lowered.executorch.buffer).load_method("forward")
    for inp in (x.abs() + 1, -x.abs() - 1):
        expected = list(method.execute([inp]))
        bit_identical(edge.run(lowered.edge, inp, flat=True), expected)
        bit_identical(edge.run(lowered.executorch, inp, flat=True), expected)
    report = edge.compare(lowered.edge, -x.abs() - 1)
    assert report.ok and any(r.op == "aten::cos" for r in report)
