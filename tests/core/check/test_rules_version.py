"""The numerical rules are named by the version in which they last changed (core/check/record/spec.py): that
version has its own section in CHANGELOG.md, and the package's version (package.json) is never behind it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from jupyterlab_gradcheck.core.check.record.spec import RULES

ROOT = Path(__file__).parents[3]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_the_rules_version_has_a_changelog_section_and_the_package_is_not_behind_it():
    """Given package.json and CHANGELOG.md, when the rules' version is looked up in both, then the changelog has a
    section headed by it that speaks of the rules, and the package's version is that version or a later one: a change
    to the rules ships with a version bump and an entry."""
    package = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))["version"]
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    sections = re.split(r"^## ", changelog, flags=re.M)
    [section] = [s for s in sections if s.startswith(f"[{RULES}]")]
    assert "rules" in section
    assert _version(package) >= _version(RULES) == (0, 4, 0)
