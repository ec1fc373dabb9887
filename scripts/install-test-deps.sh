#!/usr/bin/env bash
# System packages the test suite needs, installed with apt-get when missing (idempotent).
# strace: the chaos tests use it to stop a process at an exact system call.
# chromium: the web console's browser tests drive Debian's Chromium through Playwright
# (never `playwright install`).
# time: the scheduler script tests run the batch script body under GNU time (/usr/bin/time).
set -euo pipefail
need=()
command -v strace >/dev/null || need+=(strace)
command -v chromium >/dev/null || need+=(chromium)
[ -x /usr/bin/time ] || need+=(time)
# The SSH/Slurm testbed (scripts/testbed/up.sh, docs/testbed.md) runs as root only; its
# packages are not needed otherwise.
if [ "$(id -u)" = 0 ]; then
  [ -x /usr/sbin/sshd ] || need+=(openssh-server)
  command -v ssh >/dev/null || need+=(openssh-client)
  command -v ip >/dev/null || need+=(iproute2)
  /usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
  [ -x /usr/sbin/slurmctld ] || need+=(slurm-wlm slurmctld)
  [ -x /usr/sbin/slurmd ] || need+=(slurmd)
  command -v sbatch >/dev/null || need+=(slurm-client)
  [ -x /usr/sbin/munged ] || need+=(munge)
  [ -x /usr/bin/qsub ] || need+=(slurm-wlm-torque)
  [ -x /usr/sbin/slurmdbd ] || need+=(slurmdbd)
  [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
fi
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "error: the tests need: ${need[*]} (install them, or run as root on Debian)" >&2
  exit 1
fi
echo "installing ${need[*]} ..."
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
