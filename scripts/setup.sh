#!/bin/sh
# Installs what brigade needs on a fresh Debian machine and builds it.
# Run as root (or with sudo available).
set -eu
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
pkgs="build-essential pkg-config libjansson-dev libpcre2-dev libmicrohttpd-dev git"
# clang builds the fuzzer and checks the code is warning-free with both compilers.
pkgs="$pkgs clang libclang-rt-dev"
# The test oracle comes from npm; keep an existing Node.js installation.
command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
# The server tests drive brigade serve with curl.
pkgs="$pkgs curl"
# The chat-template tests render the real templates with Python's jinja2.
python3 -c 'import jinja2' 2>/dev/null || /usr/bin/python3 -c 'import jinja2' 2>/dev/null ||
    pkgs="$pkgs python3-jinja2"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing$missing" >&2
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
make -j"$(nproc)"
