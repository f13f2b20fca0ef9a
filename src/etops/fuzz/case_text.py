"""A fuzz case as a short Python-ish reproducer line (``describe``): what the fuzz
reports print for a case (the case itself, plain data, is the full reproducer;
etops.fuzz.strategies says what its specs mean). Imports nothing."""

from __future__ import annotations


def describe(case) -> str:
    """A short Python-ish reproducer of a case (the full case is its own reproducer)."""

    def show(spec):
        tag = spec[0]
        if tag == "T":
            _, shape, dtype, layout, _seed, values = spec
            extra = "" if layout == "c" else f", layout={layout!r}"
            extra += "" if values == "normal" else f", values={values!r}"
            return f"T({list(shape)}, {dtype}{extra})"
        if tag == "L":
            return "[" + ", ".join(show(s) for s in spec[1]) + "]"
        if tag == "V":
            return repr(spec[1])
        if tag == "OBJ":
            return "object()"
        if tag == "DICT":
            return "{1: 2}"
        return f"{tag}({spec[1]})"

    parts = [show(v) for _, v in case["args"]]
    parts += [f"{n}={show(v)}" for n, v in case["kwargs"]]
    parts += [f"{n}=<{'/'.join(map(str, o))}>" for n, o in case["outs"].items() if o[0] != "omit"]
    label = f"  # {case['mutation']} on {case['target']}" if case.get("mutation") else ""
    return f"{case['op']}({', '.join(parts)}){label}"
