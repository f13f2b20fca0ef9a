"""Every ```python block of README.md and docs/*.md runs, so the docs cannot drift
from the code. The blocks of one page share one namespace and run in order, in a
temporary working directory; a block that is not meant to run has a ```text or
```console fence. The code blocks' fences are checked too: an info string this
test does not know would hide a block from it."""

from __future__ import annotations

import linecache
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

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


def _name(path):
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("page", [p for p in PAGES if any(i == RUN for i, _, _ in code_blocks(p))], ids=_name)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
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


def test_every_fence_is_known():
    for page in PAGES:
        for info, line, _ in code_blocks(page):
            assert info == RUN or info in SHOWN, f"{_name(page)}:{line - 1}: unknown fence ```{info}"


def test_the_pages_have_python_to_run():
    """The extraction finds the README snippet and the examples of the manual pages."""
    running = {p.name for p in PAGES if any(i == RUN for i, _, _ in code_blocks(p))}
    assert {"README.md", "index.md", "kernels.md", "edge.md", "delegates.md", "custom-kernels.md"} <= running


def test_code_blocks_parse_fences(tmp_path):
    """code_blocks itself: python and shown blocks in order, line numbers of their first line."""
    page = "text\n```python\nx = 1\n```\n```text\nnot run\n```\n"
    path = tmp_path / "page.md"
    path.write_text(page)
    assert code_blocks(path) == [("python", 3, "x = 1\n"), ("text", 6, "not run\n")]


def test_readme_links_to_pages_that_exist():
    links = re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)\)", (ROOT / "README.md").read_text())
    assert len(links) >= 10
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert not missing, missing
