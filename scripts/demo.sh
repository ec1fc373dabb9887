#!/usr/bin/env bash
# `make demo`: a daemon on a temporary state root, a handful of real jobs, their states.
set -euo pipefail
cd "$(dirname "$0")/.."
VQ="$PWD/.venv/bin/vq"
PY="$PWD/.venv/bin/python"
demo=$(mktemp -d /tmp/vq-demo.XXXXXX)
export VQ_STATE_DIR="$demo/state" VQ_CONFIG_DIR="$demo/config"
# Run as root (a container): a single-user daemon as root must be asked for explicitly.
if [ "$(id -u)" = 0 ]; then export VQ_ALLOW_ROOT=1; fi
trap '"$VQ" daemon stop >/dev/null 2>&1 || true' EXIT

say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { say "$*"; "$@"; }

say "vq daemon start --max-jobs 4     # state root: $VQ_STATE_DIR"
"$VQ" daemon start --max-jobs 4

mkdir -p "$demo/inputs"
printf 'echo "hello from $(pwd)"; ls; wc -l data.txt\n' > "$demo/inputs/run.sh"
seq 1 1000 > "$demo/inputs/data.txt"
tar -C "$demo/inputs" -czf "$demo/inputs.tar.gz" run.sh data.txt

say "submitting six jobs"
ok=$("$VQ" submit --job-name answer --cpus 1 --mem-mb 200 --wall-time 1m -- "$PY" -c 'print(6 * 7)')
arch=$("$VQ" submit "$demo/inputs.tar.gz" --job-name from-archive -- bash run.sh)
bad=$("$VQ" submit --job-name fails -- sh -c 'echo "reading input..."; echo "error: basis set not found" >&2; exit 3')
hog=$("$VQ" submit --job-name memory-hog --mem-mb 100 -- "$PY" -c 'import time; x = bytearray(400 * 2**20); time.sleep(60)')
slow=$("$VQ" submit --job-name too-slow --wall-time 3s -- sleep 60)
big=$("$VQ" submit --job-name too-big --cpus 4096 -- true 2>/dev/null)
echo "answer=$ok from-archive=$arch fails=$bad memory-hog=$hog too-slow=$slow too-big=$big"

run "$VQ" wait "$ok" "$arch" "$bad" "$hog" "$slow" --timeout 2m || true
run "$VQ" list
run "$VQ" logs "$arch"
run "$VQ" status "$bad"
run "$VQ" status "$hog"
run "$VQ" status "$big"
run "$VQ" events "$slow"
run "$VQ" daemon stop
echo
echo "state root kept for a look around: $VQ_STATE_DIR"
echo "see the same queue in the web console:"
echo "  VQ_STATE_DIR=$VQ_STATE_DIR $VQ web serve   # then open http://127.0.0.1:8477/"
