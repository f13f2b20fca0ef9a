"""The HTML report in a real headless browser (Chromium from Debian's packages):
a screenshot whose status cells have their status colour, and the DOM after the
page's script ran (a cell's panel opening with its cases and reproducers).

Chromium is installed by .ci/run; when it is missing here the test installs it
with apt-get, and skips only when that is impossible (not root, no apt-get, or the
install fails)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from etops.conformance import cli
from etops.conformance.html import STATUS_COLOURS, VERDICT_COLOURS

KERNELS = ["aten::unfold_copy.out", "aten::constant_pad_nd.out", "aten::add.out"]
WINDOW = "1400,1000"


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for command in (["apt-get", "install", "-y", "-qq", "chromium"], ["apt-get", "update", "-qq"],
                        ["apt-get", "install", "-y", "-qq", "chromium"]):
            subprocess.run(command, env=env, capture_output=True, timeout=1200)
            path = shutil.which("chromium")
            if path:
                break
    if path is None:
        pytest.skip("chromium is not installed and could not be installed with apt-get")
    return path


def _browser(chromium, profile, *args) -> subprocess.CompletedProcess:
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--force-device-scale-factor=1",
               f"--window-size={WINDOW}", f"--user-data-dir={profile}", *args]
    # the browser is not the code under test: no sanitizer runtime preloaded into it (make test-asan)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
    return subprocess.run(command, capture_output=True, text=True, timeout=180, env=env)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    chromium = _chromium()
    out = tmp_path_factory.mktemp("html")
    assert cli.main(["check", *KERNELS, "--dtype", "float32,int64", "--dim-order-axis", "--no-progress",
                     "--html", str(out / "r.html"), "--report-only"]) == 0
    html = (out / "r.html").read_text()
    assert "http://" not in html and "https://" not in html and "<link" not in html  # self-contained
    return chromium, out, out / "r.html"


def _rgb(hex_colour: str) -> tuple:
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


def _cells(dom: str) -> list[dict]:
    cells = []
    for m in re.finditer(r'<td class="cell"([^>]*)>', dom):
        attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))
        if "data-rect" in attrs:
            cells.append(attrs)
    return cells


def test_screenshot_colours_every_status_cell(page):
    from PIL import Image

    chromium, out, path = page
    dom = _browser(chromium, out / "profile", "--dump-dom", path.as_uri()).stdout
    cells = _cells(dom)
    statuses = {c["data-status"] for c in cells if "data-status" in c}
    verdicts = {c["data-verdict"] for c in cells if "data-verdict" in c}
    assert {"pass", "abort", "unsupported"} <= statuses, statuses
    assert "silently wrong" in verdicts, verdicts
    shot = out / "shot.png"
    proc = _browser(chromium, out / "profile", f"--screenshot={shot}", path.as_uri())
    assert shot.is_file(), proc.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    checked = 0
    for cell in cells:
        left, top, width, height = (int(v) for v in cell["data-rect"].split(","))
        if top + height >= image.height or width < 8:
            continue
        want = _rgb(STATUS_COLOURS[cell["data-status"]] if "data-status" in cell else VERDICT_COLOURS[cell["data-verdict"]])
        got = image.getpixel((left + 3, top + 3))
        assert all(abs(a - b) <= 6 for a, b in zip(got, want)), (cell, got, want)
        checked += 1
    assert checked == len(cells) >= 6


def test_a_cell_opens_its_cases_and_reproducers(page):
    chromium, out, path = page
    dom = _browser(chromium, out / "profile", "--dump-dom", path.as_uri()).stdout
    aborted = next(c for c in _cells(dom) if c.get("data-status") == "abort")
    link = re.search(r'data-kernel="%s" data-dtype="%s"[^>]*><a href="#([\w-]+)"' % (re.escape(aborted["data-kernel"]), aborted["data-dtype"]), dom)
    detail_id = link.group(1)
    assert f'<section class="detail" id="{detail_id}"' in dom  # closed until asked for
    opened = _browser(chromium, out / "profile", "--dump-dom", path.as_uri() + "#" + detail_id).stdout
    section = re.search(r'<section class="detail open" id="%s".*?</section>' % detail_id, opened, re.S)
    assert section, "the panel of the cell did not open"
    text = section.group(0)
    assert "unfold_copy" in text and "Dimension out of range" in text  # its cases, with ExecuTorch's check
    assert 'class="reproducer"' in text and 'etops.as_program("aten::unfold_copy.out")' in text
    assert re.search(r'<body[^>]*data-open="%s"' % detail_id, opened)
