"""etops.learned_store: a value saved by one process is read back by the next in the
same environment; a change of torch, executorch, etops' version or sources, or of
the caller's key finds nothing; a corrupt, cut or stale file is never trusted; the
folder keeps under its limit, the files used longest ago evicted first."""

from __future__ import annotations

import os

import pytest
import torch

from etops import learned_store


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("ETOPS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ETOPS_LEARNED_LIMIT_MB", raising=False)
    return learned_store.Store("test-values")


def test_a_value_comes_back_with_its_tensors_and_overloads(store):
    value = {"func": torch.ops.aten.add.out, "t": torch.arange(6.0).reshape(2, 3).t(), "c": torch.ones(2, dtype=torch.complex64).conj()}
    assert store.load(("task", frozenset({"b", "a"}))) is None
    assert store.save(("task", frozenset({"a", "b"})), value)
    back = store.load(("task", frozenset({"b", "a"})))  # a set's order is not part of the key
    assert back["func"] is torch.ops.aten.add.out
    assert back["t"].stride() == value["t"].stride() and torch.equal(back["t"], value["t"])
    assert back["c"].is_conj()
    assert (store.loaded, store.rejected, store.saved) == (1, 0, 1)


@pytest.mark.parametrize("part", range(4))  # torch, executorch, etops' version, etops' sources
def test_each_part_of_the_environment_invalidates(store, monkeypatch, part):
    store.save("k", 1)
    assert store.load("k") == 1
    changed = list(learned_store.environment())
    changed[part] = changed[part] + "-other"
    monkeypatch.setattr(learned_store, "_environment", tuple(changed))
    assert store.load("k") is None
    store.save("k", 2)
    assert store.load("k") == 2


def test_the_callers_key_and_the_kind_invalidate(store):
    store.save(("base", "abc"), 1)
    assert store.load(("base", "abd")) is None
    assert learned_store.Store("other-values").load(("base", "abc")) is None
    assert store.load(("base", "abc")) == 1


def test_a_stale_file_under_the_same_name_is_not_trusted(store):
    """A file whose written key is another one (a hash collision, a file copied
    over) is removed, not read."""
    store.save("a", "value of a")
    os.replace(store.path("a"), store.path("b"))
    assert store.load("b") is None and store.rejected == 1
    assert not store.path("b").exists()


@pytest.mark.parametrize("damage", ["flip", "cut", "garbage", "header"])
def test_a_corrupt_file_is_removed_and_computed_again(store, damage, caplog):
    store.save("k", list(range(1000)))
    path = store.path("k")
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[-10] ^= 0xFF
    elif damage == "cut":
        data = data[: len(data) // 2]
    elif damage == "garbage":
        data = bytearray(b"not a file at all")
    else:
        data[len(b"etops-learned\n")] = ord("x")
    path.write_bytes(bytes(data))
    with caplog.at_level("DEBUG", logger="etops.learned"):
        assert store.load("k") is None
    assert store.rejected == 1 and not path.exists()
    assert any(str(path) in r.getMessage() for r in caplog.records), "the reason is said at debug level"
    store.save("k", [1])
    assert store.load("k") == [1]


def test_a_payload_that_does_not_unpickle_is_not_trusted(store, monkeypatch):
    monkeypatch.setattr(learned_store, "_dumps", lambda value: b"\x80\x05not a pickle")
    store.save("k", 1)
    monkeypatch.undo()
    assert learned_store.Store("test-values").load("k") is None


def test_the_oldest_files_are_evicted_first(store, monkeypatch):
    blob = b"x" * 100_000
    for i in range(5):
        store.save(i, blob)
        os.utime(store.path(i), ns=(i * 10**9, i * 10**9))  # written one after the other
    store.load(0)  # used now: the newest
    monkeypatch.setenv("ETOPS_LEARNED_LIMIT_MB", str(4.5 * 100_000 / (1 << 20)))
    store.save(5, blob)  # over the limit: 1 and 2 go (0 was just used)
    kept = {i for i in range(6) if store.path(i).exists()}
    assert kept == {0, 3, 4, 5}


def test_a_bad_limit_is_named(monkeypatch):
    monkeypatch.setenv("ETOPS_LEARNED_LIMIT_MB", "lots")
    with pytest.raises(ValueError, match="ETOPS_LEARNED_LIMIT_MB"):
        learned_store.limit_bytes()


def test_a_value_that_does_not_pickle_is_not_written(store):
    assert not store.save("k", lambda: 1)
    assert store.load("k") is None and not store.path("k").exists()


def test_tensors_of_every_dtype_come_back_exactly_with_their_views_and_shared_storage(store):
    """Plain tensors are written as raw bytes: complex32 too (torch's own pickling
    refuses it: a recording holding one was worked out again by every process), with
    their strides, offsets, lazy bits, NaN payloads and negative zeros, and two views of
    one storage share it again."""
    base = torch.arange(24.0)
    value = {
        "complex32": torch.ones(3, dtype=torch.complex32) * 2,
        "conj": (torch.arange(4.0) * (1 + 2j)).to(torch.complex64).conj(),
        "neg": torch._neg_view(torch.arange(4.0).to(torch.complex64).conj().imag),
        "view": base[2:].reshape(2, 11).t(), "other view": base[5:9],
        "bits": torch.tensor([float("nan"), -0.0, 1.0], dtype=torch.bfloat16),
        "empty": torch.empty(0, 3, dtype=torch.int16), "zero-dim": torch.tensor(7, dtype=torch.uint8),
        "bool": torch.tensor([True, False]), "float8": torch.ones(2).to(torch.float8_e4m3fn),
    }
    assert store.save("tensors", value)
    back = store.load("tensors")
    for name, t in value.items():
        b = back[name]
        assert (b.dtype, b.shape, b.stride(), b.storage_offset(), b.is_conj(), b.is_neg()) == \
            (t.dtype, t.shape, t.stride(), t.storage_offset(), t.is_conj(), t.is_neg()), name
        assert bytes(b.untyped_storage()) == bytes(t.untyped_storage()), name
    assert back["view"].untyped_storage().data_ptr() == back["other view"].untyped_storage().data_ptr()
    back["view"].untyped_storage().resize_(200)  # an ordinary storage: writable and resizable
    assert torch.equal(back["conj"].resolve_conj(), value["conj"].resolve_conj())
