"""HTML export: a self-contained report with the evidence a grader needs, rendered by a
real headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.report.html_export import to_html
from jupyterlab_gradcheck.core.report.submissions import collect
from jupyterlab_gradcheck.core.run import run_and_record
from support.ledger import JUSTIFICATION, THREE_CHECKS, new_notebook

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]


@pytest.fixture(scope="module")
def report_html(tmp_path_factory) -> str:
    """The HTML export of one student's notebook: three checks (the failing one with its
    step sweep), a justified widening after the failure, and a re-run that now passes."""
    folder = tmp_path_factory.mktemp("html") / "submitted" / "dana" / "ps1"
    notebook = new_notebook(folder / "lab1.ipynb")
    ledger = Ledger.for_notebook(notebook)
    for spec in THREE_CHECKS:
        run_and_record(spec, ledger, sweep=spec["id"] == "cube_wrong")
    ledger.change_tolerance("cube_wrong", rtol=0.9, justification=JUSTIFICATION)
    run_and_record(THREE_CHECKS[2], ledger, sweep=False)
    return to_html(collect([folder.parent.parent]))


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.urls = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]


def test_report_shows_expectation_beside_observation_and_the_history(report_html):
    """Given the report, then each check has an Expectation column beside an Observation
    column with shape, dtype and device; the failure kept is highlighted with its diagnosis;
    the tolerance change shows old and new, the justification and its flags; the chain
    status and the student come first; and the failing check carries its step-sweep SVG."""
    html = report_html
    assert html.startswith("<!DOCTYPE html>")
    assert "dana / ps1 · lab1.ipynb" in html
    assert 'data-chain-ok="true"' in html
    for check in THREE_CHECKS:
        block = html.split(f'data-check-id="{check["id"]}"')[1].split('class="check"')[0]
        assert re.search(r">Expectation</th>.*?>Observation</th>", block), check["id"]
        assert "shape [" in block and "dtype float64" in block and "device cpu" in block
    failing = html.split('data-check-id="cube_wrong"')[1]
    assert 'class="failure-kept" data-seq="6"' in failing
    assert "probable_bug" in failing.split('class="failure-kept"')[1]
    assert JUSTIFICATION.replace("'", "&#x27;") in failing
    assert "rtol=1e-07 atol=1e-10 -&gt; rtol=0.9 atol=1e-10" in failing
    assert "widened, after_failure" in failing
    assert 'data-flag="widened_after_failure"' in html
    assert failing.count("<svg") == 1 and html.count("<svg") == 1


def test_report_is_self_contained(report_html):
    """Given the report, then it has no script, no stylesheet link, no image or frame, and
    no src/href at all: it opens offline and cannot load anything."""
    collector = _Collector()
    collector.feed(report_html)
    assert not {"script", "link", "img", "iframe"} & set(collector.tags)
    assert collector.urls == []


def test_report_escapes_what_the_ledger_holds(tmp_path):
    """Given a justification and an origin holding markup, when exported, then they appear
    escaped as text, never as tags."""
    ledger = Ledger(tmp_path / "x.gradcheck.jsonl")
    run_and_record({**THREE_CHECKS[2], "origin": "<b>bold</b>"}, ledger, sweep=False)
    ledger.change_tolerance("cube_wrong", rtol=0.9, justification="<script>alert(1)</script>")
    html = to_html(collect([ledger.path]))
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>bold</b>" not in html


def _chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={cwd / 'profile'}", *args],
        capture_output=True,
        timeout=120,
        cwd=cwd,
    )


@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (make test-python installs it)")
def test_report_renders_in_headless_chromium(report_html, tmp_path):
    """Given the report written to a file, when headless Chromium loads it, then the DOM it
    builds holds the check tables and the sweep plot, and its screenshot carries far more
    drawing than a blank page's taken the same way."""
    page, blank = tmp_path / "report.html", tmp_path / "blank.html"
    page.write_text(report_html, encoding="utf-8")
    blank.write_text("<!DOCTYPE html><html><body></body></html>", encoding="utf-8")

    dom = _chromium("--dump-dom", page.as_uri(), cwd=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = dom.stdout.decode()
    assert text.count('class="jp-gradcheck-expectation-observation"') == 3
    assert 'class="failure-kept"' in text and "<svg" in text

    sizes = {}
    for name, source in (("report", page), ("blank", blank)):
        shot = tmp_path / f"{name}.png"
        done = _chromium("--window-size=1200,1600", f"--screenshot={shot}", source.as_uri(), cwd=tmp_path)
        assert done.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", done.stderr[-2000:]
        width, height = int.from_bytes(shot.read_bytes()[16:20], "big"), int.from_bytes(shot.read_bytes()[20:24], "big")
        assert (width, height) == (1200, 1600)
        sizes[name] = shot.stat().st_size
    # A blank 1200x1600 page compresses to a few KB; text, tables and a plot cannot.
    assert sizes["report"] > 10 * sizes["blank"], sizes
    shutil.rmtree(tmp_path / "profile", ignore_errors=True)
