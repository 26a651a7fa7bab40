"""The gradient-check notebook, in English and Spanish, executed top to bottom with nbclient.

Each edition is copied into a temporary folder, its outputs and ledger binding cleared (as a
student would receive it), and executed on the CPU by a real kernel. The ledger it writes
beside itself is then read back, verified and replayed with the real `jupyter gradcheck`
command, and exported. Nothing is written into the repository.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from html import escape
from pathlib import Path

import nbformat
import pytest

from jupyterlab_gradcheck.core.ledger.store import KINDS

ROOT = Path(__file__).resolve().parents[2]
JUPYTER = Path(sys.executable).with_name("jupyter")
#: Generous per-cell limit for a shared 2-core machine; a whole edition runs in about 15 s.
CELL_TIMEOUT = 180


def _generator():
    spec = importlib.util.spec_from_file_location("build_notebooks", ROOT / "scripts" / "build_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pytestmark = pytest.mark.slow
GENERATOR = _generator()
EDITIONS = GENERATOR.EDITIONS


def _cleared(notebook):
    """The notebook as a student receives it: no outputs, no binding to a ledger that is not there."""
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    notebook.metadata.pop("gradcheck", None)
    notebook.metadata.pop("widgets", None)
    return notebook


def _jupyter_gradcheck(*args, cwd):
    return subprocess.run([str(JUPYTER), "gradcheck", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def _ledger_entries(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module", params=sorted(EDITIONS))
def executed(request, tmp_path_factory):
    """(edition, executed notebook, its path, its ledger entries, repo listing before) for one edition."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    lang = request.param
    source = EDITIONS[lang]
    examples_before = sorted(p.relative_to(ROOT) for p in (ROOT / "examples").rglob("*"))
    workdir = tmp_path_factory.mktemp(f"notebook-{lang}")
    path = workdir / source.name
    notebook = _cleared(nbformat.read(source, as_version=4))
    nbformat.write(notebook, path)
    client = NotebookClient(
        notebook, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
    )
    try:
        client.execute()
    except CellExecutionError as exc:  # the message names the cell and the traceback
        pytest.fail(f"{source.name}: a cell raised: {exc}")
    nbformat.write(notebook, path)  # saved with its outputs, as nbconvert saves it
    ledger = path.with_name(path.stem + ".gradcheck.jsonl")
    return {
        "lang": lang,
        "notebook": notebook,
        "path": path,
        "ledger": ledger,
        "entries": _ledger_entries(ledger),
        "examples_before": examples_before,
    }


def test_every_cell_runs_without_error_or_stderr(executed):
    """Given an edition, when nbclient runs it top to bottom, then every code cell ran and none
    produced an error or anything on stderr (a warning there would also land in the committed copy)."""
    code_cells = [c for c in executed["notebook"].cells if c.cell_type == "code"]
    assert code_cells and all(c.execution_count is not None for c in code_cells)
    problems = [
        (c.id, o.get("name", o.output_type))
        for c in code_cells
        for o in c.outputs
        if o.output_type == "error" or (o.output_type == "stream" and o.name == "stderr")
    ]
    assert problems == []


#: Words of the check outputs, per edition: the Spanish edition sets its language to Spanish.
OUTPUT_WORDS = {
    "es": (": correcto\n", ">Expectativa</th>", ">Observación</th>", "dispositivo cpu"),
    "en": (": passed\n", ">Expectation</th>", ">Observation</th>", "device cpu"),
}


def test_each_edition_shows_its_checks_in_its_own_language(executed):
    """Given an executed edition (the kernel's locale is English), then its check outputs,
    the summaries and the expectation/observation tables, are in the edition's language and
    carry none of the other's words, while the ledger it wrote keeps the English kinds."""
    outputs = "".join(
        o.get("text", "") + "".join(str(v) for v in (o.get("data") or {}).values())
        for c in executed["notebook"].cells
        if c.cell_type == "code"
        for o in c.outputs
    )
    lang, other = executed["lang"], "en" if executed["lang"] == "es" else "es"
    assert [word for word in OUTPUT_WORDS[lang] if word not in outputs] == []
    assert [word for word in OUTPUT_WORDS[other] if word in outputs] == []
    assert {entry["kind"] for entry in executed["entries"]} <= set(KINDS)


def test_the_ledger_sits_beside_the_notebook_and_the_repo_is_untouched(executed):
    """Given an executed edition, then its ledger is NAME.gradcheck.jsonl beside it, and the
    repository's examples folder is as it was before the run."""
    assert executed["ledger"].is_file()
    assert executed["ledger"].parent == executed["path"].parent
    after = sorted(p.relative_to(ROOT) for p in (ROOT / "examples").rglob("*"))
    assert after == executed["examples_before"]


def test_expectations_are_written_before_anything_is_computed(executed):
    """Given the ledger, then after its genesis entry its first entries are the section-1
    expectations, and every observation points at an earlier expectation of the same check."""
    entries = executed["entries"]
    assert entries[0]["data"]["event"] == "genesis"
    assert [(e["kind"], e["check_id"]) for e in entries[1:3]] == [
        ("expectation", "square"),
        ("expectation", "vector_sum"),
    ]
    kinds = {e["seq"]: (e["kind"], e["check_id"]) for e in entries}
    for entry in entries:
        if entry["kind"] == "observation":
            pointed = entry["data"]["expectation_seq"]
            assert pointed < entry["seq"] and kinds[pointed] == ("expectation", entry["check_id"])


def test_the_seed_record_ran_as_written(executed):
    """Given the course's seed record, then its observation says observed_gradient 6.0, executed
    true, and the expectation it was run against is the 6 written in the record."""
    seed = [e for e in executed["entries"] if e["kind"] == "observation" and e["check_id"].startswith("x*x@")]
    assert len(seed) == 1
    record = seed[0]["data"]["record"]
    assert (record["function"], record["inputs"], record["analytical_gradient"]) == ("x*x", {"x": 3}, 6)
    assert (record["observed_gradient"], record["executed"], record["passed"]) == (6.0, True, True)


def test_deliberate_failures_are_recorded_failures_not_exceptions(executed):
    """Given the ledger, then each deliberate failure is an observation with passed false and the
    expected diagnosis (the run completed), and every other check's observations passed."""
    observations = [e for e in executed["entries"] if e["kind"] == "observation"]
    failed = {e["check_id"]: e for e in observations if e["data"]["passed"] is False}
    assert set(failed) == set(GENERATOR.DELIBERATE_FAILURES)
    for check_id, diagnosis in GENERATOR.DELIBERATE_FAILURES.items():
        data = failed[check_id]["data"]
        assert not data.get("failed_to_run")
        assert data["record"]["executed"] is True
        assert data["record"]["failure"]["diagnosis"] == diagnosis, check_id
    passed = {e["check_id"] for e in observations if e["data"]["passed"] is True}
    assert "square" in passed and "vector_sum" in passed


def test_the_tolerance_change_is_justified_and_sits_between_failure_and_pass(executed):
    """Given the tolerance change of section 4, then it is one entry with a written
    justification, flagged widened after a failure, preceded by the kept failure and followed by
    a passing run of the same check."""
    check_id = GENERATOR.TOLERANCE_CHANGED
    history = [e for e in executed["entries"] if e["check_id"] == check_id]
    kinds = [(e["kind"], e["data"].get("passed")) for e in history]
    assert kinds == [
        ("expectation", None),
        ("observation", False),
        ("tolerance_change", None),
        ("expectation", None),
        ("observation", True),
    ]
    change = history[2]["data"]
    assert change["target"] == "finite_difference"
    assert change["new"] == {"rtol": 1e-6, "atol": 1e-6}
    assert change["widened"] is True and change["after_failure"] is True
    assert "truncation" in change["justification"] or "truncamiento" in change["justification"]


def test_verify_replay_on_the_notebooks_ledger_exits_zero(executed):
    """Given the executed edition saved with its outputs, when `jupyter gradcheck verify NOTEBOOK
    --replay` runs on it, then it exits 0, the notebook binds its ledger through the attestations
    in its outputs (no front end wrote its metadata), and every observation reproduced."""
    done = _jupyter_gradcheck("verify", executed["path"].name, "--replay", "--json", cwd=executed["path"].parent)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)["reports"][0]
    observations = sum(1 for e in executed["entries"] if e["kind"] == "observation")
    assert report["binding"]["ok"] is True and report["binding"]["source"] == "attestations"
    assert report["binding"]["attested"] == observations  # every check run in the notebook is attested
    assert report["entries"] == len(executed["entries"]) - 1  # the genesis entry opens the ledger
    assert report["replay"]["observations"] == observations
    assert report["replay"]["reproduced"] == observations
    assert [f["flag"] for f in report["flags"]] == ["widened_after_failure"]


def test_the_export_lists_the_kept_failures_and_the_justified_change(executed, tmp_path):
    """Given the executed edition, when it is exported to HTML and JSON, then both list every
    deliberate failure as kept, and the tolerance change with its justification."""
    cwd = executed["path"].parent
    report = tmp_path / "report.html"
    done = _jupyter_gradcheck("export", executed["path"].name, "--format", "html", "-o", str(report), cwd=cwd)
    assert done.returncode == 0, done.stderr
    html = report.read_text(encoding="utf-8")
    change = next(e for e in executed["entries"] if e["kind"] == "tolerance_change")
    assert escape(change["data"]["justification"]) in html
    assert 'data-flag="widened_after_failure"' in html
    for check_id in GENERATOR.DELIBERATE_FAILURES:
        failed_seq = next(
            e["seq"]
            for e in executed["entries"]
            if e["check_id"] == check_id and e["kind"] == "observation" and not e["data"]["passed"]
        )
        block = html.split(f'data-check-id="{escape(check_id)}"', 1)[1]
        assert f'class="failure-kept" data-seq="{failed_seq}"' in block.split('class="check"', 1)[0], check_id

    done = _jupyter_gradcheck("export", executed["path"].name, "--format", "json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    checks = json.loads(done.stdout)["submissions"][0]["checks"]
    assert {c for c, h in checks.items() if h["failures_kept"]} == set(GENERATOR.DELIBERATE_FAILURES)
    (changed,) = checks[GENERATOR.TOLERANCE_CHANGED]["tolerance_history"]
    assert changed["justification"] == change["data"]["justification"]


def test_inside_jupyter_server_the_session_names_the_notebook(tmp_path):
    """Given the English edition started the way Jupyter Server starts a notebook's kernel
    (JPY_SESSION_NAME set to the notebook's absolute path) but with the kernel's working folder
    elsewhere, when it runs, then no cell fails and the ledger and report land beside the
    notebook, not in the working folder."""
    from nbclient import NotebookClient

    notebook_dir, elsewhere = tmp_path / "course", tmp_path / "elsewhere"
    notebook_dir.mkdir()
    elsewhere.mkdir()
    path = notebook_dir / EDITIONS["en"].name
    notebook = _cleared(nbformat.read(EDITIONS["en"], as_version=4))
    nbformat.write(notebook, path)
    client = NotebookClient(
        notebook, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(elsewhere)}}
    )
    client.execute(env={**os.environ, "JPY_SESSION_NAME": str(path)})
    assert sorted(p.name for p in notebook_dir.iterdir()) == sorted(
        [path.name, path.stem + ".gradcheck.jsonl", path.stem + ".report.html"]
    )
    assert list(elsewhere.iterdir()) == []


def test_nbconvert_in_place_binds_through_the_outputs_and_a_truncation_is_caught(tmp_path):
    """Given the examples copied to an empty folder and the shipped ledger deleted,
    when the English notebook is executed with `jupyter nbconvert --to notebook --execute
    --inplace` (nbconvert saves its own copy: no front end ever binds it),
    then `verify LEDGER --replay` exits 0 with the binding ok from the outputs' attestations (the
    shipped metadata is reported as an earlier epoch), and after its last entry is cut off the
    same verify exits 1 naming the cell that attests it."""
    import shutil

    folder = tmp_path / "course"
    shutil.copytree(ROOT / "examples", folder)
    notebook = folder / EDITIONS["en"].name
    ledger = notebook.with_name(notebook.stem + ".gradcheck.jsonl")
    ledger.unlink()
    mode = notebook.stat().st_mode & 0o777
    done = subprocess.run(
        [str(JUPYTER), "nbconvert", "--to", "notebook", "--execute", "--inplace", notebook.name],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert notebook.stat().st_mode & 0o777 == mode  # the kernel never rewrote the file
    done = _jupyter_gradcheck("verify", ledger.name, "--replay", "--json", cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)["reports"][0]
    assert report["binding"]["ok"] is True and report["binding"]["source"] == "attestations"
    assert any(w.startswith("new epoch: the notebook's metadata binds an earlier ledger") for w in report["warnings"])
    assert report["replay"]["reproduced"] == report["replay"]["observations"] > 0

    write_lines = ledger.read_bytes().split(b"\n")[:-2]
    ledger.write_bytes(b"".join(line + b"\n" for line in write_lines))
    done = _jupyter_gradcheck("verify", ledger.name, "--replay", cwd=folder)
    assert done.returncode == 1, done.stdout
    assert f"attests entry seq {report['last_seq']}" in done.stdout and "the ledger was truncated" in done.stdout


@pytest.mark.parametrize("lang", sorted(EDITIONS))
def test_committed_notebooks_are_the_generators_and_executed(lang):
    """Given a committed edition, then its cells are exactly what scripts/build_notebooks.py
    builds (so the two editions stay in step), and it was committed executed: every code cell
    has outputs, none is an error, and no machine path appears in them."""
    committed = nbformat.read(EDITIONS[lang], as_version=4)
    assert GENERATOR.sources_of(committed) == GENERATOR.sources_of(GENERATOR.build(lang))
    code_cells = [c for c in committed.cells if c.cell_type == "code"]
    assert all(c.outputs and c.execution_count is not None for c in code_cells)
    assert not [c.id for c in code_cells for o in c.outputs if o.output_type == "error"]
    text = EDITIONS[lang].read_text(encoding="utf-8")
    assert not [word for word in ("/tmp/", "/work/", "/root/", "/home/") if word in text]


def test_both_editions_have_the_same_structure():
    """Given the two editions, then they have the same cells, in the same order, of the same kind."""
    english, spanish = (GENERATOR.sources_of(GENERATOR.build(lang)) for lang in ("en", "es"))
    assert [(i, k) for i, k, _ in english] == [(i, k) for i, k, _ in spanish]
    assert english != spanish  # translated, not copied


@pytest.mark.parametrize("lang", sorted(EDITIONS))
def test_each_committed_notebook_verifies_with_its_binding(lang):
    """Given a committed edition and the ledger committed beside it (as a fresh clone has them),
    when `jupyter gradcheck verify --replay` runs on the notebook in place, then it exits 0 with
    no error, the notebook's binding matches the ledger's head, and every observation
    reproduces."""
    notebook = EDITIONS[lang]
    assert notebook.with_name(notebook.stem + ".gradcheck.jsonl").is_file()
    done = _jupyter_gradcheck("verify", notebook.name, "--replay", "--json", cwd=notebook.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)["reports"][0]
    assert (report["ok"], report["errors"], report["binding"]["ok"]) == (True, [], True)
    assert report["replay"]["reproduced"] == report["replay"]["observations"] > 0


@pytest.mark.parametrize("lang", sorted(EDITIONS))
def test_plain_verify_of_each_committed_notebook_exits_zero(lang):
    """Given a committed edition, when a grader runs plain `jupyter gradcheck verify` on it,
    then it exits 0 and says OK for it."""
    notebook = EDITIONS[lang]
    done = _jupyter_gradcheck("verify", notebook.name, cwd=notebook.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"OK   {notebook.name}"), done.stdout


def test_the_example_report_is_the_committed_ledgers_export():
    """Given docs/example-report.html, then it is the export of the committed English ledger:
    same head hash, and the justification recorded in that ledger appears in it."""
    html = (ROOT / "docs" / "example-report.html").read_text(encoding="utf-8")
    ledger = EDITIONS["en"].with_name(EDITIONS["en"].stem + ".gradcheck.jsonl")
    entries = _ledger_entries(ledger)
    assert entries[-1]["hash"][:16] in html
    change = next(e for e in entries if e["kind"] == "tolerance_change")
    assert escape(change["data"]["justification"]) in html
    assert (ROOT / "docs" / "example-report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_example_report_in_spanish_is_the_same_export():
    """Given docs/example-report.es.html, then it is the Spanish export of the same committed
    ledger: same head hash and justification (records stay English), Spanish headings."""
    html = (ROOT / "docs" / "example-report.es.html").read_text(encoding="utf-8")
    entries = _ledger_entries(EDITIONS["en"].with_name(EDITIONS["en"].stem + ".gradcheck.jsonl"))
    assert entries[-1]["hash"][:16] in html
    change = next(e for e in entries if e["kind"] == "tolerance_change")
    assert escape(change["data"]["justification"]) in html
    assert '<html lang="es">' in html and "<h1>Informe de comprobación de gradientes</h1>" in html
    assert "<b>Fallo conservado</b>" in html and "Gradient check report" not in html
