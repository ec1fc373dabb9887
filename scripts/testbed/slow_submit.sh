#!/bin/sh
# Testbed fault: Slurm's sbatch, slowed down when a test asks for it, as a cluster
# at MaxJobCount is ("temporarily unable to accept job, sleeping and retrying").
# Installed by up.sh as sbatch, first on every testbed host's PATH (the fake Torque server's
# qsub, torque_fake.py, honours the same files). A test writes a
# number of seconds into `.vq-testbed-submit-delay` in its scratch directory; this wrapper
# looks for that file in the directories above the script it submits (its last argument),
# sleeps that long, then runs the real command. Without such a file it only runs the real
# command. Each call that sleeps appends a line to `.vq-testbed-submit-calls` beside it.
name=$(basename -- "$0")
real=/usr/bin/$name
last=
for arg in "$@"; do last=$arg; done
dir=$(dirname -- "${last:-/}")
while [ -n "$dir" ] && [ "$dir" != / ] && [ "$dir" != . ]; do
  if [ -f "$dir/.vq-testbed-submit-delay" ]; then
    echo "$$ $(date +%s.%N) $last" >>"$dir/.vq-testbed-submit-calls"
    sleep "$(cat -- "$dir/.vq-testbed-submit-delay")"
    break
  fi
  dir=$(dirname -- "$dir")
done
exec "$real" "$@"
