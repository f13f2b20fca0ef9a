"""How the commands print: tables (rich's on a terminal, plain text when piped or
too narrow), JSON, a progress bar on a terminal's stderr, and the quiet import of
etops and of schema look-ups that log. Imports etops.bench.inputs (its quiet) only."""

from __future__ import annotations

import contextlib
import json
import sys


def is_tty(stream=None) -> bool:
    stream = stream or sys.stdout
    return hasattr(stream, "isatty") and stream.isatty()


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def emit_json(data) -> int:
    json.dump(data, sys.stdout, indent=1, default=str)
    sys.stdout.write("\n")
    return 0


def plain_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


def fits_terminal(plain: str) -> bool:
    """Whether a rich table of this plain text's width fits the terminal (a squeezed
    table wraps every cell: plain text reads better then)."""
    width = max((len(line) for line in plain.splitlines()), default=0)
    return console().width >= width + 3 * plain.splitlines()[0].count("  ") // 2 + 4


def print_table(headers, rows, title=None, caption=None) -> None:
    if is_tty() and fits_terminal(plain_table(headers, rows)):
        from rich.markup import escape
        from rich.table import Table

        t = Table(title=title, caption=caption, header_style="bold")
        for h in headers:
            t.add_column(h, overflow="fold")
        for r in rows:
            t.add_row(*[escape(c) for c in r])
        console().print(t)
    else:
        if title:
            print(title)
        print(plain_table(headers, rows))
        if caption:
            print(caption)


@contextlib.contextmanager
def quiet(debug: bool):
    """Schema look-ups import modules that log and warn (torchao); hide that."""
    if debug:
        yield
        return
    from ..bench import inputs

    with inputs.quiet():
        yield


@contextlib.contextmanager
def progress_bar(label: str):
    """A rich progress bar on a terminal's stderr; yields update(done, total, text)."""
    if not is_tty(sys.stderr):
        yield lambda done, total, text: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("[bold]" + label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=console(stderr=True), transient=True) as progress:
        task = progress.add_task("", total=None)

        def update(done, total, text):
            progress.update(task, completed=done, total=total, description=str(text))

        yield update


def quiet_etops(debug: bool):
    with quiet(debug):
        import etops
    return etops
