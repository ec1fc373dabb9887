#!/usr/bin/env bash
# Benchmark dependencies: NumPy in the project's venv (the CPU-affinity benchmark's
# threaded matmul; never a dependency of vq itself) and Debian's task-spooler (the peer
# `make bench` compares vq with). Idempotent: installs nothing when it is already there.
# Prints the path of the tsp binary (Debian names it `tsp`; some builds call it `ts`).
set -euo pipefail

venv_python="${VQ_BENCH_PYTHON:-$(dirname "$0")/../.venv/bin/python}"
if [[ -x "$venv_python" ]] && ! "$venv_python" -c 'import numpy' 2>/dev/null; then
  "$venv_python" -m pip install -q numpy
fi

find_tsp() {
  local name path help
  for name in tsp ts; do
    if path=$(command -v "$name" 2>/dev/null); then
      # `ts` may also be moreutils' timestamp filter: only accept task-spooler's.
      if [[ "$name" == ts ]]; then
        help=$(timeout 5 "$path" -h </dev/null 2>&1 || true)
        grep -qi 'usage: ts \[action\]' <<<"$help" || continue
      fi
      printf '%s\n' "$path"
      return 0
    fi
  done
  return 1
}

if tsp_path=$(find_tsp); then
  echo "task-spooler: $tsp_path"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "error: task-spooler (tsp) is not installed and installing it needs root." >&2
  echo "       run: sudo apt-get install task-spooler   (then re-run make bench)" >&2
  exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: task-spooler (tsp) is missing and apt-get is not available to install it." >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
if ! dpkg-query -W -f='${Status}' task-spooler 2>/dev/null | grep -q 'install ok installed'; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends task-spooler >/dev/null
fi

if tsp_path=$(find_tsp); then
  echo "task-spooler: $tsp_path"
else
  echo "error: task-spooler is installed but neither tsp nor ts is on PATH" >&2
  exit 1
fi
