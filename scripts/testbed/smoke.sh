#!/usr/bin/env bash
# Check a running testbed end to end (root): every host answers over SSH as the test user
# with its own VQ_STATE_DIR and a working `vq`; with Slurm, a job submitted over SSH ends
# COMPLETED (and one exiting 3 ends FAILED) in sacct. Exit non-zero on the first failure.
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
  ok=$("${S[@]}" vq-local 'cd /tmp && sbatch --parsable --wrap true')
  bad=$("${S[@]}" vq-local 'cd /tmp && sbatch --parsable --wrap "exit 3"')
  for _ in $(seq 1 300); do
    a=$(sacct_state "$ok")
    b=$(sacct_state "$bad")
    [ -n "$a" ] && [ -n "$b" ] && break
    sleep 0.1
  done
  [ "$a" = "COMPLETED|0:0" ] || die "job $ok: sacct says '$a', want COMPLETED|0:0; see /var/log/slurm/"
  [ "$b" = "FAILED|3:0" ] || die "job $bad: sacct says '$b', want FAILED|3:0; see /var/log/slurm/"
  log "ok: slurm jobs $ok ($a) and $bad ($b) over ssh"
fi
log "smoke passed"
