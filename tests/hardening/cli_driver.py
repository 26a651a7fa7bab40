"""Run corpus cases through the command line's own `main()`, many in one process.

Starting `jupyter-gradcheck` once per case would spend most of the suite importing torch, so
this driver calls `jupyterlab_gradcheck.cli.app.main(["run", "-", "--ledger", L])` for each
case with standard input and output swapped for buffers built the way the interpreter builds
them (same encoding and error handler). It records, per case, the exit status, what was
written to standard error, whether the engine was entered, whether the ledger's bytes
changed, and whether any marker file appeared. `test_corpus_cli.py` runs it in a subprocess
and asserts on the JSON it prints; a sample of cases also goes through the real script.

Usage: python cli_driver.py LEDGER [CASE_NAME ...]   (no names: every case)
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus  # noqa: E402  (the folder above is put on the path first)


def run_case(case: corpus.Case, ledger: Path, counts: dict, markers: list[Path]) -> dict:
    """One case through main(); what happened, as plain data."""
    from jupyterlab_gradcheck.cli.app import main

    before = ledger.read_bytes()
    entered = dict(counts)
    real_stdin = sys.stdin
    stdin = io.TextIOWrapper(io.BytesIO(case.body), encoding=real_stdin.encoding, errors=real_stdin.errors)
    out, err = io.StringIO(), io.StringIO()
    crash = None
    try:
        sys.stdin = stdin
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(["run", "-", "--ledger", str(ledger)])
            except SystemExit as exc:  # argparse
                code = exc.code
    except BaseException as exc:  # noqa: BLE001 - an escaped exception is the finding
        code = None
        crash = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        err.write(traceback.format_exc()[-2000:])
    finally:
        sys.stdin = real_stdin
    result = {
        "name": case.name,
        "expected": case.expected("cli"),
        "matches": None,  # filled below, once the message is known
        "code": code,
        "stderr": err.getvalue()[-4000:],
        "stdout": out.getvalue()[:400],
        "crash": crash,
        "entered_engine": counts["run_check"] - entered["run_check"],
        "compiled": counts["compile_expression"] - entered["compile_expression"],
        "ledger_changed": ledger.read_bytes() != before,
        "markers": [str(m) for m in markers if m.exists()],
    }
    result["matches"] = case.matches("cli", result["stderr"])
    return result


def main(argv: list[str]) -> int:
    ledger = Path(argv[0])
    wanted = set(argv[1:])
    counts = corpus.count_engine_entries()
    markers = [Path.cwd() / corpus.MARKER, ledger.parent / corpus.MARKER]
    results = []
    for case in corpus.all_cases():
        if wanted and case.name not in wanted:
            continue
        results.append(run_case(case, ledger, counts, markers))
    sys.stdout.write(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
