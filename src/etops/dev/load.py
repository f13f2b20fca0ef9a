"""``etops.dev.load``: the name the reproducers of ``etops dev`` import
(``from etops.dev.load import load_all``); ``--load`` itself is
etops.checkout.load. Imports that module only."""

from __future__ import annotations

from ..checkout.load import from_environment, load, load_all, load_for_command, unload_all

__all__ = ["from_environment", "load", "load_all", "load_for_command", "unload_all"]
