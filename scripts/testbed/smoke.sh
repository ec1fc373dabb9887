#!/usr/bin/env bash
# Check a running testbed end to end (root): every host answers over SSH as the test user
# with its own VQ_STATE_DIR and a working `vq`; with Slurm, jobs submitted over SSH end in
# sacct as COMPLETED (true), FAILED 3 (exit 3), OUT_OF_MEMORY (cgroup mode; FAILED 0:9 in
# linuxproc mode) and CANCELLED (scancel). Exit non-zero on the first failure.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ -r "$TB/env.sh" ] || die "no $TB/env.sh: run scripts/testbed/up.sh first"
. "$TB/env.sh"
S=(ssh -F "$VQ_TESTBED_SSH_CONFIG")
declare -A seen
for host in $VQ_TESTBED_HOSTS; do
  out=$("${S[@]}" "$host" 'printf "%s %s\n" "$VQ_STATE_DIR" "$(vq --version)"') ||
    die "ssh $host failed; see $TB/log/sshd-$host.log"
  state=${out%% *}
  [ -n "$state" ] || die "$host: VQ_STATE_DIR is not set (sshd SetEnv)"
  [ -z "${seen[$state]:-}" ] || die "$host and ${seen[$state]} share VQ_STATE_DIR=$state"
  seen[$state]=$host
  log "ok: $host -> $out"
done
noisy=$("${S[@]}" vq-noisy 'echo quiet' 2>/dev/null)
[[ $noisy == *noise* ]] || die "vq-noisy's shell start-up files do not print (users.sh)"

if [ "${VQ_TESTBED_SLURM:-0}" = 1 ]; then
  # sacct_state ID: the job's final State (empty until it is final and in sacct).
  sacct_state() {
    "${S[@]}" vq-local "sacct -n -X -j $1 --parsable2 -o State,ExitCode" 2>/dev/null |
      grep -E '^(COMPLETED|FAILED|CANCELLED|TIMEOUT|OUT_OF_MEMORY)' || true
  }
  submit() { "${S[@]}" vq-local "cd /tmp && sbatch --parsable $1"; }
  ok=$(submit "--wrap true")
  bad=$(submit "--wrap 'exit 3'")
  oom=$(submit "--mem=100M --wrap '/usr/bin/python3 -c \"b = bytearray(400 << 20); import time; time.sleep(5)\"'")
  long=$(submit "--wrap 'sleep 600'")
  for _ in $(seq 1 100); do
    [ "$("${S[@]}" vq-local "squeue -h -j $long -o %T")" = RUNNING ] && break
    sleep 0.1
  done
  "${S[@]}" vq-local "scancel $long"
  if grep -q '^ProctrackType=proctrack/cgroup' /etc/slurm/slurm.conf; then
    want_oom='OUT_OF_MEMORY|0:125'
  else
    want_oom='FAILED|0:9'
  fi
  for _ in $(seq 1 300); do
    a=$(sacct_state "$ok")
    b=$(sacct_state "$bad")
    c=$(sacct_state "$oom")
    d=$(sacct_state "$long")
    [ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] && [ -n "$d" ] && break
    sleep 0.1
  done
  [ "$a" = "COMPLETED|0:0" ] || die "job $ok: sacct says '$a', want COMPLETED|0:0; see /var/log/slurm/"
  [ "$b" = "FAILED|3:0" ] || die "job $bad: sacct says '$b', want FAILED|3:0; see /var/log/slurm/"
  [ "$c" = "$want_oom" ] || die "job $oom: sacct says '$c', want $want_oom; see /var/log/slurm/"
  [[ $d == CANCELLED* ]] || die "job $long: sacct says '$d', want CANCELLED; see /var/log/slurm/"
  log "ok: slurm jobs over ssh: $ok $a, $bad $b, $oom $c, $long $d"
fi
log "smoke passed"
