"""A stored value (a tensor of more than 256 elements kept by its hash beside the ledger) in every
HTML view of a check: the record's own HTML, the HTML export and the inline widget show its
shape, dtype, summary and shortened sha256 (the whole hash in a title), never its elements."""

from __future__ import annotations

import math
import re

import torch

from jupyterlab_gradcheck.core.report.html_export import format_value, record_html, to_html, value_html
from jupyterlab_gradcheck.core.report.submissions import collect
from support.ledger import new_notebook
from support.stored_records import as_stored, big_check, ledger_with_stored_check

#: Numbers written out in a view of a 10^5-element check: the summaries' few dozen, never 10^5.
MAX_NUMBERS = 2000


def numbers_in(html: str) -> int:
    return len(re.findall(r"-?\d+\.\d+(?:e-?\d+)?", html))


def written_expectation_check(elements: int) -> dict:
    """A check whose analytical gradient is written as a list of `elements` values, not an expression."""
    spec = big_check(elements, "written_cos")
    spec["analytical_gradient"] = torch.cos(torch.tensor(spec["x"], dtype=torch.float64)).tolist()
    return spec


def test_a_stored_value_shows_dtype_shape_summary_and_a_short_sha():
    """Given the stored form of linspace(-1, 1, 1000),
    when it is shown as HTML and as text,
    then both say float64 [1000], min -1.0 and max 1.0, its first 8 values, and the first 12
    hex digits of its sha256, with the whole hash in the title attribute only."""
    value = as_stored(torch.linspace(-1.0, 1.0, 1000, dtype=torch.float64).tolist())
    sha = value["stored"]["sha256"]
    html = value_html(value)
    assert "float64 [1000], stored: min -1.0 · max 1.0 · mean " in html
    assert "first 8: -1.0, -0.997997997997998, " in html
    assert f'title="sha256 {sha}"' in html and f"sha256 {sha[:12]}…</span>" in html
    assert html.count(sha) == 2  # the data attribute and the title; the text shows 12 digits
    text = format_value(value)
    assert text.startswith("float64 [1000], stored: min -1.0 · max 1.0") and text.endswith(f"sha256 {sha[:12]}…")


def test_the_record_html_of_a_big_check_holds_summaries_not_tensors(tmp_path):
    """Given a 10^5-element check whose expectation was written as a list,
    when its record is rendered,
    then the expectation and every observed gradient show as stored values (summary and
    sha256), the gradient's min is cos(1), and the page writes out fewer than 2000 numbers."""
    _, record = ledger_with_stored_check(new_notebook(tmp_path / "lab1.ipynb"), written_expectation_check(10**5))
    html = record_html(record)
    expected_sha = record["analytical_gradient"]["stored"]["sha256"]
    assert f'data-sha256="{expected_sha}"' in html
    assert html.count('class="jp-gradcheck-stored"') >= 6  # the expectation and five observations
    assert f"float64 [100000], stored: min {math.cos(1.0)!r}" in html
    assert numbers_in(html) < MAX_NUMBERS
    assert len(html) < 64 * 1024  # inline, the same record renders 10^5 numbers


def test_the_html_export_of_a_stored_check_is_small_and_names_each_blob(tmp_path):
    """Given a student's notebook whose ledger holds a 10^5-element check,
    when the folder is exported as HTML,
    then the report shows the stored gradient's summary and its full sha256 in a title, and
    writes out fewer than 2000 numbers."""
    folder = tmp_path / "submitted" / "dana"
    _, record = ledger_with_stored_check(new_notebook(folder / "lab1.ipynb"), big_check(10**5))
    report = to_html(collect([tmp_path / "submitted"]))
    sha = record["observed_gradient"]["stored"]["sha256"]
    assert f'title="sha256 {sha}"' in report
    assert "float64 [100000], stored: min " in report
    assert numbers_in(report) < MAX_NUMBERS
