#!/usr/bin/env bash
# A virtual environment with PySCF for the chemist's campaign test (h2-scan), idempotent.
# Built from Debian's /usr/bin/python3 and made world-readable, so the testbed's hosts
# (another user) can run it. Usage: scripts/install-pyscf.sh [DIR]
set -euo pipefail
dir=${1:-/opt/vq-testbed/pyscf-venv}
if [ -x "$dir/bin/python" ] && "$dir/bin/python" -c 'import pyscf' 2>/dev/null; then
  exit 0
fi
/usr/bin/python3 -m venv "$dir"
"$dir/bin/python" -m pip install -q --disable-pip-version-check 'pyscf>=2.3'
chmod -R a+rX "$dir"
"$dir/bin/python" -c 'import pyscf; print("pyscf", pyscf.__version__, "in", "'"$dir"'")'
