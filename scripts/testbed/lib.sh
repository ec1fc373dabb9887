# Shared helpers of the testbed scripts (sourced, never run). See docs/testbed.md.
# shellcheck shell=bash

TB=${VQ_TESTBED_DIR:-/var/lib/vq-testbed}
TB_OPT=${VQ_TESTBED_OPT:-/opt/vq-testbed}
TB_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TB_SSH_PORT=${VQ_TESTBED_SSH_PORT:-2222}
TB_USER=${VQ_TESTBED_USER:-vqtest}
TB_NOISY_USER=vqnoisy
# The lanes benchmark's login: nobody else uses it, so the controller's per-user RPC
# counters (sdiag, sacctmgr show stats) hold only the benchmark's own traffic.
TB_BENCH_USER=vqbench
# Every account the testbed creates; all of them accept the testbed's client key.
TB_SSH_USERS=("$TB_USER" "$TB_NOISY_USER" "$TB_BENCH_USER" vqa vqb vqadm vqteam1 vqteam2)

log() { printf '[testbed] %s\n' "$*" >&2; }
die() {
  printf 'testbed: error: %s\n' "$*" >&2
  exit 1
}
now_ms() { date +%s%3N; }

require_root() { [ "$(id -u)" = 0 ] || die "run as root (the testbed starts system daemons)"; }

# alive PID: the process exists and is not a zombie (PID 1 here reaps orphans only every
# ~2 s, and `kill -0` succeeds on a zombie).
alive() {
  local stat state
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  state=${stat##*) }
  state=${state%% *}
  [ "$state" != Z ] && [ "$state" != X ]
}

# record_pid NAME PID: remember a process this testbed started (with its comm, checked
# again before it is ever signalled).
record_pid() {
  local comm
  comm=$(cat "/proc/$2/comm" 2>/dev/null) || die "$1 (pid $2) vanished right after it started"
  mkdir -p "$TB/pids"
  printf '%s %s\n' "$2" "$comm" >"$TB/pids/$1.pid"
}

# recorded_alive NAME: the recorded process still runs and is still the same program.
recorded_alive() {
  local pid comm
  [ -r "$TB/pids/$1.pid" ] || return 1
  read -r pid comm <"$TB/pids/$1.pid" || return 1
  alive "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ]
}

# stop_recorded NAME [BOUND_S]: TERM the recorded process, KILL it after BOUND_S seconds
# (default 20), forget it. Never signals a PID whose comm no longer matches.
stop_recorded() {
  local name=$1 bound=${2:-20} pid comm waited=0
  [ -r "$TB/pids/$name.pid" ] || return 0
  read -r pid comm <"$TB/pids/$name.pid" || true
  if [ -n "${pid:-}" ] && alive "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    while alive "$pid" && [ "$waited" -lt $((bound * 10)) ]; do
      sleep 0.1
      waited=$((waited + 1))
    done
    if alive "$pid"; then
      log "$name (pid $pid) ignored SIGTERM for ${bound}s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      waited=0
      while alive "$pid" && [ "$waited" -lt 50 ]; do
        sleep 0.1
        waited=$((waited + 1))
      done
    fi
    log "stopped $name (pid $pid)"
  fi
  rm -f "$TB/pids/$name.pid"
}

# wait_until BOUND_S WHAT LOGFILE CMD...: poll CMD every 0.1 s; fail naming the log.
wait_until() {
  local bound=$1 what=$2 logfile=$3 i=0
  shift 3
  while ! "$@" >/dev/null 2>&1; do
    i=$((i + 1))
    if [ "$i" -ge $((bound * 10)) ]; then
      die "$what did not come up within ${bound}s; see $logfile"
    fi
    sleep 0.1
  done
}

# pid_from_file FILE: the first number in a daemon's own pidfile (empty when absent).
pid_from_file() {
  if [ -r "$1" ]; then tr -dc '0-9\n' <"$1" | head -n1; fi
}

netns_hosts() {
  local n=${VQ_TESTBED_NETNS_HOSTS:-2} i
  for ((i = 1; i <= n; i++)); do printf 'vq-h%d\n' "$i"; done
}

# The namespace hosts that exist now, whatever the current knob says.
existing_netns_hosts() { ip netns list 2>/dev/null | awk '$1 ~ /^vq-h[0-9]+$/ {print $1}'; }

# --- GPU GRES (VQ_TESTBED_SLURM_GPUS) ---------------------------------------------------
# Slurm 22.05 drops a GPU without device files ("Removing file-less GPU") and then marks a
# node configured with count-only Gres=gpu:N INVAL ("gres/gpu count reported lower than
# configured (0 < N)"). So the node advertises N GPUs backed by N character devices that
# alias /dev/null (major 1, minor 3) under DIR: jobs and steps get whole GPUs, and
# CUDA_VISIBLE_DEVICES, as on a GPU node; nothing can use them as GPUs.

# fake_gpu_devices DIR N: DIR/gpu0..gpu(N-1) are character devices 1,3 and nothing else
# named gpu* is left in DIR (idempotent: existing right nodes are kept).
fake_gpu_devices() {
  local dir=$1 n=$2 i f
  install -d -m 755 "$dir"
  for f in "$dir"/gpu*; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    i=${f##*/gpu}
    if ! [[ $i =~ ^(0|[1-9][0-9]*)$ ]] || [ "$i" -ge "$n" ] || [ "$(stat -c '%F %t,%T' "$f")" != 'character special file 1,3' ]; then
      rm -f "$f"
    fi
  done
  for ((i = 0; i < n; i++)); do [ -e "$dir/gpu$i" ] || mknod -m 666 "$dir/gpu$i" c 1 3; done
}

# gres_conf NODE DIR N: the gres.conf lines for N fake GPUs on NODE.
gres_conf() {
  printf 'AutoDetect=off\nNodeName=%s Name=gpu File=%s/gpu[0-%d]\n' "$1" "$2" "$(($3 - 1))"
}
