#!/usr/bin/env bash
# Makes sure Debian's chromium is on PATH, for the headless browser test of lineage.html.
# Idempotent and quiet: does nothing when chromium is already there; otherwise installs it with apt-get
# (as root, or through sudo without a password), with no questions asked.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
    exit 0
fi

fail() {
    echo "ensure-chromium: $*" >&2
    echo "ensure-chromium: install it by hand with 'apt-get update && apt-get install -y chromium'" >&2
    exit 1
}

if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    fail "chromium is not on PATH and this user cannot install packages (not root, no passwordless sudo)"
fi
command -v apt-get >/dev/null 2>&1 || fail "chromium is not on PATH and apt-get is not available"

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
echo "ensure-chromium: installing Debian's chromium (apt-get)" >&2
if ! "${as_root[@]}" apt-get update -qq </dev/null >"$log" 2>&1; then
    cat "$log" >&2
    fail "apt-get update failed"
fi
if ! "${as_root[@]}" apt-get install -y -qq --no-install-recommends chromium </dev/null >"$log" 2>&1; then
    cat "$log" >&2
    fail "apt-get install chromium failed"
fi
command -v chromium >/dev/null 2>&1 || fail "apt-get installed chromium but it is still not on PATH"
