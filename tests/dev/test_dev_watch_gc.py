"""etops dev --watch and the garbage collector: each round ends with what is alive
frozen (later collections skip it), the collection of what the rounds left waits
until the watch idles, and the caller gets an unfrozen collector back."""

from __future__ import annotations

import gc
import importlib

from etops.dev import loop

watching = importlib.import_module("etops.dev.watch")  # the module (etops.dev.watch is also the function)


class _Round:
    exit_code = 0

    def restore(self):
        pass


def test_rounds_end_frozen_and_the_caller_gets_the_collector_back(tmp_path, monkeypatch):
    source = tmp_path / "op_x.cpp"
    source.write_text("// a kernel\n")
    monkeypatch.setattr(watching, "watched_files", lambda files, root=None: set(files))
    monkeypatch.setattr(loop, "dev", lambda files, **options: _Round())
    collected = []
    real_collect = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *a: collected.append(len(seen)) or real_collect(*a))
    monkeypatch.setattr(watching, "SETTLE_AFTER", 0.05)
    seen = []

    def on_round(result):
        seen.append(gc.get_freeze_count())  # what the round before froze
        if len(seen) < 3:
            source.write_text(source.read_text() + "// saved\n")

    try:
        watching.watch(source, on_round, rounds=4, poll=0.01, idle_timeout=0.5)
        assert len(seen) == 3 and seen[1] > 0 and seen[2] > 0  # each round after the first starts frozen
        assert collected == [3]  # one full collection, when the watch idled after the last save
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
