#!/usr/bin/env bash
# The prebuilt extension, as a user without Node gets it: build the wheel from the
# lab extension already built in labextension/, pip install it into a fresh virtual
# environment with no Node on PATH, and check that Jupyter finds both halves enabled.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python}
WORK=$(mktemp -d -t gradcheck-wheel.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

fail() { echo "check-wheel: FAIL: $*" >&2; exit 1; }
plain() { sed 's/\x1b\[[0-9;]*m//g'; }

[ -f labextension/static/style.js ] || fail "labextension/ is not built: run 'jlpm build:prod' (or 'make setup')"

# 1. The wheel. The build hook skips the Node build because labextension/ exists.
quiet() { "$@" >"$WORK/log" 2>&1 || { cat "$WORK/log" >&2; fail "$* failed"; }; }
quiet "$PY" -m pip wheel --no-deps --no-build-isolation -w "$WORK/dist" .
WHEEL=$(ls "$WORK"/dist/jupyterlab_gradcheck-*.whl)
echo "check-wheel: built $(basename "$WHEEL")"
"$PY" - "$WHEEL" <<'PYEOF' || fail "the wheel does not carry the prebuilt extension and the server config"
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
need = ["share/jupyter/labextensions/jupyterlab-gradcheck/package.json",
        "share/jupyter/labextensions/jupyterlab-gradcheck/static/style.js",
        "share/jupyter/labextensions/jupyterlab-gradcheck/schemas/jupyterlab-gradcheck/plugin.json",
        "share/jupyter/labextensions/jupyterlab-gradcheck/install.json",
        "etc/jupyter/jupyter_server_config.d/jupyterlab_gradcheck.json",
        "jupyterlab_gradcheck/locale/es_ES/LC_MESSAGES/jupyterlab_gradcheck.json",
        # the Python surfaces' Spanish catalog, where gettext reads it (core/i18n.py)
        "jupyterlab_gradcheck/locale/es/LC_MESSAGES/jupyterlab_gradcheck.mo"]
missing = [n for n in need if not any(x.endswith(n) for x in names)]
sys.exit(f"missing from the wheel: {missing}" if missing else 0)
PYEOF

# 2. A fresh environment. torch is pinned to the release this project was tested with,
#    so pip does not resolve a different (and much larger) build.
python3 -m venv "$WORK/venv"
VBIN="$WORK/venv/bin"
TORCH=$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')
quiet "$VBIN/python" -m pip install --disable-pip-version-check "$WHEEL" jupyterlab "torch==$TORCH"
echo "check-wheel: installed it with its dependencies into a fresh environment"

# 3. Jupyter, with only that environment on PATH (no Node) and no user configuration.
bare() { env PATH="$VBIN" JUPYTER_CONFIG_DIR="$WORK/config" JUPYTER_DATA_DIR="$WORK/data" "$@"; }
if bare "$VBIN/python" -c 'import shutil, sys; sys.exit(shutil.which("node") is None)'; then
    fail "node is still on PATH"
fi

LAB=$(bare jupyter labextension list 2>&1 | plain)
echo "$LAB" | grep -E "jupyterlab-gradcheck v[0-9][^ ]* +enabled +OK" \
    || { echo "$LAB" >&2; fail "jupyter labextension list does not show jupyterlab-gradcheck enabled OK"; }
[ -f "$WORK/venv/share/jupyter/labextensions/jupyterlab-gradcheck/package.json" ] \
    || fail "the lab extension is not installed in the fresh environment"

SERVER=$(bare jupyter server extension list 2>&1 | plain)
echo "$SERVER" | grep -E "jupyterlab_gradcheck +enabled" \
    || { echo "$SERVER" >&2; fail "jupyter server extension list does not show jupyterlab_gradcheck enabled"; }
echo "$SERVER" | grep -E "jupyterlab_gradcheck +[0-9][^ ]* +OK" \
    || { echo "$SERVER" >&2; fail "the jupyterlab_gradcheck server extension does not load"; }
# 4. The side panel's Spanish catalog, found the way JupyterLab finds an extension's own
#    translations: the jupyterlab.locale entry point, then locale/es_ES/LC_MESSAGES/<name>.json.
bare "$VBIN/python" - <<'PYEOF' || fail "jupyterlab_server does not find the Spanish catalog of jupyterlab_gradcheck"
import sys
from jupyterlab_server.translation_utils import get_installed_packages_locale
found, message = get_installed_packages_locale("es_ES")
catalog = found.get("jupyterlab_gradcheck")
if not catalog:
    sys.exit(f"no es_ES catalog for jupyterlab_gradcheck ({message or 'no message'})")
if catalog[""].get("domain") != "jupyterlab_gradcheck" or catalog.get("Run") != ["Ejecutar"]:
    sys.exit("the es_ES catalog found is not the side panel's")
PYEOF
echo "check-wheel: jupyterlab_server finds the Spanish catalog through the jupyterlab.locale entry point"
echo "check-wheel: OK (installed without Node; lab and server extensions enabled; Spanish catalog found)"
