#!/usr/bin/env bash
# Galata UI tests of the side panel: a real JupyterLab (with this project installed in
# the active environment) driven through the system Chromium. Works from a clean clone:
# it installs Chromium if it is missing and the ui-tests packages from their lock file.
set -euo pipefail
cd "$(dirname "$0")/.."

export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

bash scripts/install-chromium.sh

if ! jupyter labextension list 2>&1 | grep -q "jupyterlab-gradcheck.*enabled.*OK"; then
    echo "ui-tests: the jupyterlab-gradcheck lab extension is not installed in this environment" >&2
    echo "ui-tests: run 'make setup' first" >&2
    exit 2
fi

cd ui-tests
jlpm install
jlpm playwright test "$@"
