#!/usr/bin/env bash
# `make fuzz`: 10^5 Hypothesis examples per property over the expression parser, the record
# validator and the strict JSON reader, then schemathesis against the shipped OpenAPI file on
# a live jupyter server. Fails on any crash (an exception other than SpecError) or any 5xx.
#
# FUZZ_EXAMPLES (default 100000) sets the Hypothesis examples per property, and
# SCHEMATHESIS_EXAMPLES (default 200) the schemathesis examples per operation.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$REPO/.venv/bin"
PY="$BIN/python"
EXAMPLES="${FUZZ_EXAMPLES:-100000}"
API_EXAMPLES="${SCHEMATHESIS_EXAMPLES:-200}"
WORK="$(mktemp -d -t gradcheck-fuzz.XXXXXX)"
SERVER_PID=""

cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID"
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

cd "$REPO"
echo "== Hypothesis: $EXAMPLES examples per property (parser and JSON reader beside the validator)"
export HYPOTHESIS_PROFILE=fuzz GRADCHECK_FUZZ_EXAMPLES="$EXAMPLES"
"$PY" -m pytest -q -p no:cacheprovider --timeout=0 tests/hardening/test_fuzz.py -k "not validator" > "$WORK/parser.log" 2>&1 &
PARSER_PID=$!
"$PY" -m pytest -q -p no:cacheprovider --timeout=0 tests/hardening/test_fuzz.py -k validator > "$WORK/validator.log" 2>&1 &
VALIDATOR_PID=$!
status=0
wait "$PARSER_PID" || status=1
wait "$VALIDATOR_PID" || status=1
grep -h -E "^fuzz:|passed|failed" "$WORK/parser.log" "$WORK/validator.log"
if [ "$status" -ne 0 ]; then
    tail -n 60 "$WORK/parser.log" "$WORK/validator.log"
    echo "FAIL: a Hypothesis property failed" >&2
    exit 1
fi
unset HYPOTHESIS_PROFILE GRADCHECK_FUZZ_EXAMPLES

echo "== schemathesis: $API_EXAMPLES examples per operation against a live server"
ROOT="$WORK/root"
mkdir -p "$ROOT/work"
"$PY" -c "import nbformat, sys; nbformat.write(nbformat.v4.new_notebook(), sys.argv[1])" "$ROOT/work/lab1.ipynb"
PORT="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
TOKEN="$("$PY" -c 'import secrets; print(secrets.token_hex(24))')"
export JUPYTER_RUNTIME_DIR="$WORK/runtime" JUPYTER_CONFIG_DIR="$WORK/config" JUPYTER_DATA_DIR="$WORK/data"

cd "$ROOT"
"$BIN/jupyter-server" --no-browser --ip=127.0.0.1 --port="$PORT" --ServerApp.root_dir="$ROOT" \
    --IdentityProvider.token="$TOKEN" --ServerApp.allow_root=True \
    "--ServerApp.jpserver_extensions={'jupyterlab_gradcheck': True}" \
    --GradcheckExtension.workers=2 --GradcheckExtension.timeout=30 > "$WORK/server.log" 2>&1 &
SERVER_PID=$!
cd "$REPO"

"$PY" - "$PORT" "$TOKEN" <<'PYTHON'
import json, sys, time, urllib.request
port, token = sys.argv[1], sys.argv[2]
deadline = time.monotonic() + 120
while True:
    try:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/gradcheck/status",
                                         headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(request, timeout=5) as response:
            if json.loads(response.read())["pool"]["state"] == "ready":
                break
    except OSError:
        pass
    if time.monotonic() > deadline:
        sys.exit("the server did not become ready within 120 s")
    time.sleep(0.5)
PYTHON

set +e
"$BIN/schemathesis" run jupyterlab_gradcheck/server/openapi.json \
    --url "http://127.0.0.1:$PORT/gradcheck" -H "Authorization: token $TOKEN" \
    --checks not_a_server_error --max-examples "$API_EXAMPLES" --workers 2 \
    --request-timeout 60 --generation-database none --no-color \
    --report junit --report-junit-path "$WORK/schemathesis.xml" | tee "$WORK/schemathesis.log"
API_STATUS=${PIPESTATUS[0]}
set -e

# The server logs every answer as "... ServerApp] STATUS METHOD /path ...".
FIVE_XX="$(grep -c -E '\] 5[0-9][0-9] (GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) ' "$WORK/server.log" || true)"
ANSWERS="$(grep -c -E '\] [1-5][0-9][0-9] (GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) ' "$WORK/server.log" || true)"
CASES="$(grep -E '^ *[0-9]+ generated' "$WORK/schemathesis.log" | tail -n 1 | sed 's/^ *//')"
echo "schemathesis test cases: ${CASES:-?}; errors logged by the server: $ANSWERS (4xx and 5xx), of them 5xx: $FIVE_XX"
if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "FAIL: the server died during the run" >&2
    tail -n 40 "$WORK/server.log" >&2
    exit 1
fi
if [ "$API_STATUS" -ne 0 ] || [ "$FIVE_XX" != "0" ]; then
    grep -E " 5[0-9][0-9] (GET|POST) " "$WORK/server.log" | head -n 20 >&2 || true
    echo "FAIL: schemathesis found a server error (exit $API_STATUS)" >&2
    exit 1
fi
echo "OK: 0 crashes, 0 responses of 5xx"
