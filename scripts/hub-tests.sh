#!/usr/bin/env bash
# The class on JupyterHub (docs/jupyterhub.md): a real hub from examples/jupyterhub_config.py,
# configurable-http-proxy from npm, two students' servers under /user/<name>/, the witness as a
# hub-managed service, and a real Chromium for the side panel's screenshot
# (docs/screenshots/hub-side-panel.png). Works from a clean clone after `make setup`: it installs
# the proxy and the browser driver from hub-tests/package-lock.json, and Chromium if missing.
# Uses ports 18000-18003 on 127.0.0.1 (GRADCHECK_HUB_TEST_PORT moves them).
set -euo pipefail
cd "$(dirname "$0")/.."

export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
PY="${PYTHON:-$(command -v python)}"

bash scripts/install-chromium.sh

if ! "$PY" -c "import jupyterhub, jupyterlab_gradcheck" 2>/dev/null; then
    echo "hub-tests: jupyterhub or jupyterlab_gradcheck is not installed in this environment; run 'make setup' first" >&2
    exit 2
fi

(cd hub-tests && npm ci --no-audit --no-fund --loglevel=error)

# Every process the hub starts runs in this folder (the hub's state, the students' homes): on any
# exit, whatever is still running there is ended by its id.
WORK="$(mktemp -d "${TMPDIR:-/tmp}/gradcheck-hub.XXXXXX")"
cleanup() {
    "$PY" -c "import sys; sys.path.insert(0, 'hub-tests'); from hub import kill_processes_in; from pathlib import Path; kill_processes_in(Path(sys.argv[1]))" "$WORK" || true
    rm -rf "$WORK"
}
trap cleanup EXIT

"$PY" -m pytest hub-tests -q -p no:cacheprovider --basetemp="$WORK/pytest" "$@"
