"""The base's kernels during an ``etops dev`` round: swapped in over the edit for
the base's pass of the judge (``BaseSwap``), and callable next to the edit for the
timing (``callable_base``: registered under a private name, removed after)."""

from __future__ import annotations


class BaseSwap:
    """Overrides each operator with the base's function (`addresses`: operator ->
    function address) on ``install()``; ``restore()`` puts the edit back."""

    def __init__(self, addresses: dict) -> None:
        self.addresses = addresses
        self.applied: list = []

    def install(self) -> None:
        from ..custom import override

        try:
            for name, address in self.addresses.items():
                self.applied.append(override(name, address))
        except BaseException:
            self.restore()
            raise

    def restore(self) -> None:
        for o in reversed(self.applied):
            o.restore()
        self.applied = []


def callable_base(name: str, schema, address: int | None, index: int):
    """The base's function of `name` as a kernel object (a StandIn registered under
    ``etops_previous::``; its ``deregister()`` removes it), None without a base."""
    if not address:
        return None
    from ..custom.registration import callable_function

    return callable_function(name, schema, address, f"base{index}")
