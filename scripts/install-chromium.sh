#!/usr/bin/env bash
# Debian's Chromium at /usr/bin/chromium, installed with apt when it is missing: the browser the
# HTML report test, the UI tests and the hub test drive (Playwright downloads none: PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1).
set -euo pipefail
if [ ! -x /usr/bin/chromium ]; then
    echo "$(basename "$0"): /usr/bin/chromium is missing; installing Debian's chromium"
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    $SUDO apt-get update
    $SUDO apt-get install -y chromium
fi
