"""The code blocks of a markdown page, and running its python blocks: shared by
test_docs_code.py and the fresh interpreters it starts (a module of its own so that
those import no test module)."""

from __future__ import annotations

import linecache
import pathlib
import re

#: Fence info strings a page may use: python runs, the others are shown only.
RUN = "python"
SHOWN = {"", "text", "console", "yaml", "toml", "cpp", "c", "cmake", "json", "markdown"}

_FENCE = re.compile(r"^```(\S*)\s*$")


def code_blocks(path):
    """The page's fenced blocks as (info string, first line number, source), in order."""
    blocks, info, start, body = [], None, 0, []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = _FENCE.match(line)
        if info is None:
            if match:
                info, start, body = match.group(1), number + 1, []
        elif line.rstrip() == "```":
            blocks.append((info, start, "\n".join(body) + "\n"))
            info = None
        else:
            body.append(line)
    assert info is None, f"{path.name}: a code block opened at line {start - 1} is never closed"
    return blocks


def run_page(page: pathlib.Path) -> None:
    """Runs the page's python blocks in order in one namespace (in this process)."""
    namespace = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    for info, line, source in code_blocks(page):
        if info != RUN:
            continue
        filename = f"{page}:{line}"
        # The block's source under its own name, so tracebacks and inspect (torch.export
        # reads the model's source lines) show the page's lines.
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        code = compile("\n" * (line - 1) + source, filename, "exec")
        exec(code, namespace)  # noqa: S102 - running the docs is the point
