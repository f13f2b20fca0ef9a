"""Every ```python block of README.md and docs/*.md runs, so the docs cannot drift
from the code. The blocks of one page share one namespace and run in order, in a
temporary working directory; a block that is not meant to run has a ```text or
```console fence. The code blocks' fences are checked too: an info string this
test does not know would hide a block from it."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from docs_pages import RUN, SHOWN, code_blocks, run_page
from fresh_python import start_python

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _name(path):
    return str(path.relative_to(ROOT))


RUNNING = [p for p in PAGES if any(i == RUN for i, _, _ in code_blocks(p))]

# The pages run in one fresh interpreter (their examples register kernels, load
# delegates, set layout modes: none of it may leak into the suite's process), each in
# its own namespace and temporary working directory, started at collection so that
# they overlap the other tests. It prints one JSON line per page.
_LAUNCHED = start_python(f"""
    import json, os, pathlib, sys, tempfile, traceback
    sys.path.insert(0, {str(pathlib.Path(__file__).parent)!r})
    from docs_pages import run_page
    for page in {[str(p) for p in RUNNING]!r}:
        os.chdir(tempfile.mkdtemp(prefix="etops-docs-"))
        try:
            run_page(pathlib.Path(page))
            print(json.dumps({{"page": page, "error": None}}), flush=True)
        except BaseException:
            print(json.dumps({{"page": page, "error": traceback.format_exc()}}), flush=True)
""")


def _outcomes():
    done = _LAUNCHED.result()
    found = {}
    for line in done.stdout.splitlines():
        if line.startswith('{"page"'):
            entry = json.loads(line)
            found[entry["page"]] = entry["error"]
    return done, found


@pytest.mark.parametrize("page", RUNNING, ids=_name)
def test_python_blocks_run(page):
    done, found = _outcomes()
    assert str(page) in found, f"the docs interpreter died before this page (exit {done.returncode}): {done.stderr[-6000:]}"
    assert found[str(page)] is None, found[str(page)]


def test_a_failing_block_fails(tmp_path):
    """run_page raises what a block raises, pointing at the page's line."""
    page = tmp_path / "page.md"
    page.write_text("```python\nx = 1\n```\n\ntext\n\n```python\nassert x == 2, 'x'\n```\n")
    with pytest.raises(AssertionError) as raised:
        run_page(page)
    assert raised.traceback[-1].lineno + 1 == 8


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


def test_readme_stays_a_front_page():
    """The README is the front page (install, test, quick start, one section a
    feature); detail goes to the manual in docs/."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move detail to docs/"
    assert "make test" in "\n".join(lines) and "make demo" in "\n".join(lines)


def test_user_pages_cite_no_internal_issue_numbers():
    """A reader has no access to this repository's issue tracker: "issue 29" in a
    user page (README, docs, the package's help texts and messages) means nothing."""
    pages = [*PAGES, *sorted((ROOT / "src" / "etops").rglob("*.py")), 
             *(path for ext in ("c", "h", "cpp", "hpp") for path in sorted((ROOT / "src" / "etops").rglob(f"*.{ext}")))]
    cited = [f"{path.relative_to(ROOT)}:{n}" for path in pages
             for n, line in enumerate(path.read_text().splitlines(), 1) if re.search(r"\b[Ii]ssues? #?\d", line)]
    assert not cited, cited
