"""The requirements name the range that works and the versions verified (pyproject.toml's
[tool.etops], the one list of them): every verified version satisfies the runtime and
build requirements, torch's requirement is exact (an open one would let pip fetch a
newer, CUDA torch), and the README and the installation page list the verified ones."""

from __future__ import annotations

import pathlib
import re
import tomllib

from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERIFIED = {name: PYPROJECT["tool"]["etops"][f"verified-{name}"] for name in ("torch", "executorch")}


def requirements(kind: str) -> dict[str, Requirement]:
    listed = PYPROJECT["project"]["dependencies"] if kind == "runtime" else PYPROJECT["build-system"]["requires"]
    return {r.name: r for r in map(Requirement, listed)}


def test_every_verified_version_satisfies_the_runtime_and_build_requirements():
    for kind in ("runtime", "build"):
        found = requirements(kind)
        for name, versions in VERIFIED.items():
            assert versions, name
            for version in versions:
                assert found[name].specifier.contains(version), (kind, name, version, str(found[name]))


def test_executorch_is_a_range_within_one_minor_and_torch_is_exact():
    for kind in ("runtime", "build"):
        found = requirements(kind)
        assert str(found["executorch"].specifier) in {"<1.6,>=1.5", ">=1.5,<1.6"}, found["executorch"]
        assert [s.operator for s in found["torch"].specifier] == ["=="], found["torch"]
        assert str(found["torch"].specifier) == f"=={VERIFIED['torch'][0]}", found["torch"]


def test_the_readme_and_the_installation_page_list_the_verified_versions():
    readme = (ROOT / "README.md").read_text()
    installation = readme[readme.index("## Installation"):readme.index("\n## ", readme.index("## Installation") + 1)]
    page = (ROOT / "docs" / "installation.md").read_text()
    for name, versions in VERIFIED.items():
        for text in (installation, page):
            row = re.search(rf"^\| {name} \| (.*)$", text, re.MULTILINE)
            assert row, name
            assert re.findall(r"\b\d+\.\d+\.\d+\b", row.group(1).split("|")[0]) == versions, row.group(0)
