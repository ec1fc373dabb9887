#!/usr/bin/env bash
# Create the project virtualenv with a working `venv`/`ensurepip`, installing Debian's
# python3-venv first when the interpreter lacks it (a fresh Debian machine).
set -euo pipefail
python=${1:-python3}
venv=${2:-.venv}
if [ -x "$venv/bin/python" ]; then exit 0; fi
if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing python3-venv (Debian) ..."
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv python3-pip >/dev/null
    python=/usr/bin/python3
  else
    echo "error: $python cannot create virtualenvs; install python3-venv" >&2
    exit 1
  fi
fi
"$python" -m venv "$venv"
