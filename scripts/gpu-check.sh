#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one run of at most 9 minutes (GPU_CHECK_SECONDS):
#   1. the CUDA-marked tests (pytest -m cuda, on the files that hold them), among them one per
#      finite-difference path and the second order (tests/core/check/test_paths_on_device.py);
#   2. benchmarks B1-B3 and B11 on cuda (python -m benchmarks --device cuda --only
#      engine,scale,accuracy,device_scale): B11 is the whole check at n = 10^5, 10^6 and 10^7;
#   3. the same checks observed on the CPU and on CUDA, compared within the dtype's tolerance
#      (python -m benchmarks.agreement --devices cpu,cuda);
#   4. B10, PyTorch's custom-Function database, on cuda (python -m benchmarks.bench_function_db --device cuda);
#   5. the OpInfo float32 family on cuda (scripts/gpu_float32_family.py): 0 crashes and 0 failed
#      records without a failure.
# Everything it produces goes to $OUT when that is set, else to benchmarks/gpu/:
# pytest-cuda.log, results.md/json (B1-B3, B11), agreement.md/json, function-db.log, float32.log and
# summary.txt. Without the Jupyter packages (a bare GPU machine has torch, numpy, sympy and pytest)
# step 1 runs the CUDA test files that need none of them, without tests/conftest.py, and names the
# files it left out; steps 2 and 3 need the project installed with its test extra.
# Without a CUDA device it stops at once with exit status 2 and says why; nothing passes silently.
# Exit status: 0 all passed, 1 a step failed or disagreed, 2 no GPU or missing packages.
set -uo pipefail

cd "$(dirname "$0")/.."
PY=${PYTHON:-}
if [ -z "$PY" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
DEST=${OUT:-benchmarks/gpu}
mkdir -p "$DEST"
BUDGET=${GPU_CHECK_SECONDS:-540}
START=$SECONDS
SUMMARY="$DEST/summary.txt"
: > "$SUMMARY"

say() { echo "gpu-check: $*" | tee -a "$SUMMARY"; }
left() { local rest=$(( BUDGET - (SECONDS - START) )); echo $(( rest > 1 ? rest : 1 )); }

# 0. A GPU and the packages the checks import must be there; otherwise fail loudly, now.
if ! "$PY" - <<'EOF' 2>&1 | tee -a "$SUMMARY"
import importlib.util
import sys
missing = [name for name in ("torch", "numpy", "sympy", "pytest") if importlib.util.find_spec(name) is None]
if missing:
    print(f"gpu-check: FAILED: missing Python packages {', '.join(missing)} "
          "(install the project with its test extra: pip install -e '.[test]')")
    sys.exit(2)
import torch
if not torch.cuda.is_available():
    print(f"gpu-check: FAILED: no CUDA device: torch.cuda.is_available() is False "
          f"(torch {torch.__version__}, CUDA build {torch.version.cuda}); nothing was checked")
    sys.exit(2)
print(f"gpu-check: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
EOF
then
    exit 2
fi

FAILED=0

# 1. The CUDA-marked tests. Only the files that hold them are collected, so that a GPU machine needs
#    only the packages those files import (not nbgrader, the hub or the browser of the other suites).
#    Exit 5 means none were collected: reported, not hidden.
CUDA_FILES=$(grep -rl --include='test_*.py' "mark.cuda" tests | sort)
NOCONFTEST=""
if ! "$PY" -c "import pytest_jupyter, nbformat, jupyter_server" 2>/dev/null; then
    # tests/conftest.py loads pytest-jupyter: without it, only the files that import no Jupyter package run
    BARE=$(grep -L -E "^(from|import) .*(jupyter_server|pytest_jupyter|nbformat|jupyterlab_gradcheck\.widget|support\.(ledger|html_tables))" $CUDA_FILES)
    say "no Jupyter packages here: left out $(echo $(comm -23 <(echo "$CUDA_FILES" | tr ' ' '\n' | sort) <(echo "$BARE" | tr ' ' '\n' | sort)))"
    CUDA_FILES=$BARE
    NOCONFTEST="--noconftest"
fi
say "pytest -m cuda on $(echo $CUDA_FILES | wc -w) files (budget $(left) s)"
timeout "$(left)" "$PY" -m pytest -q -p no:cacheprovider $NOCONFTEST -m cuda $CUDA_FILES > "$DEST/pytest-cuda.log" 2>&1
rc=$?
tail -n 3 "$DEST/pytest-cuda.log" | tee -a "$SUMMARY"
case $rc in
    0) say "cuda tests: passed" ;;
    5) say "cuda tests: none collected (no test is marked cuda)"; FAILED=1 ;;
    124) say "cuda tests: FAILED: ran past the budget"; FAILED=1 ;;
    *) say "cuda tests: FAILED (exit $rc), see pytest-cuda.log"; FAILED=1 ;;
esac

# 2. B1-B3 and B11 on cuda: the full sizes, so B2 reaches n = 10^4 and B11 n = 10^7.
say "benchmarks B1-B3, B11 on cuda (budget $(left) s)"
PYTHONUNBUFFERED=1 timeout "$(left)" "$PY" -m benchmarks --device cuda --only engine,scale,accuracy,device_scale --out "$DEST" \
    > "$DEST/benchmarks.log" 2>&1
rc=$?
tail -n 2 "$DEST/benchmarks.log" | tee -a "$SUMMARY"
case $rc in
    0) say "benchmarks: ran (PASS/MISS per figure in results.md)" ;;
    124) say "benchmarks: FAILED: ran past the budget"; FAILED=1 ;;
    *) say "benchmarks: FAILED (exit $rc), see benchmarks.log"; FAILED=1 ;;
esac

# 3. CPU against CUDA, check by check, within the dtype's tolerance.
say "agreement cpu vs cuda (budget $(left) s)"
timeout "$(left)" "$PY" -m benchmarks.agreement --devices cpu,cuda --out "$DEST" > "$DEST/agreement.log" 2>&1
rc=$?
sed -n 3p "$DEST/agreement.log" | tee -a "$SUMMARY"
case $rc in
    0) say "agreement: every observation agrees" ;;
    124) say "agreement: FAILED: ran past the budget"; FAILED=1 ;;
    *) say "agreement: FAILED (exit $rc), see agreement.md and agreement.log"; FAILED=1 ;;
esac

# 4. B10, PyTorch's custom-Function database, on cuda: its table, crashes and failed records without a failure.
say "function db on cuda (budget $(left) s)"
PYTHONUNBUFFERED=1 timeout "$(left)" "$PY" -m benchmarks.bench_function_db --device cuda > "$DEST/function-db.log" 2>&1
rc=$?
grep -E "crashes|without a failure|agrees" "$DEST/function-db.log" | cut -c1-200 | tee -a "$SUMMARY"
case $rc in
    0) say "function db: ran (PASS/MISS per figure in function-db.log)" ;;
    124) say "function db: FAILED: ran past the budget"; FAILED=1 ;;
    *) say "function db: FAILED (exit $rc), see function-db.log"; FAILED=1 ;;
esac

# 5. The OpInfo float32 family on cuda: 0 crashes, 0 failed records without a failure.
SECONDS_F32=$(( $(left) > 30 ? $(left) - 20 : 10 ))
say "opinfo float32 on cuda (budget $SECONDS_F32 s)"
timeout "$(left)" "$PY" scripts/gpu_float32_family.py "$SECONDS_F32" > "$DEST/float32.log" 2>&1
rc=$?
grep -A40 "^opinfo float32 on" "$DEST/float32.log" | tee -a "$SUMMARY"
case $rc in
    0) say "float32 family: 0 crashes, 0 failed records without a failure" ;;
    124) say "float32 family: FAILED: ran past the budget"; FAILED=1 ;;
    *) say "float32 family: FAILED (exit $rc), see float32.log"; FAILED=1 ;;
esac

say "done in $((SECONDS - START)) s; results in $DEST"
exit $FAILED
