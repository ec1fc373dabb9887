#!/usr/bin/env bash
# Stop what scripts/testbed/up.sh started (root; running it twice is a no-op).
#
# Cancels Slurm jobs, stops only the recorded PIDs (TERM, then KILL after 20 s; each pid's
# /proc/PID/comm is checked first and a zombie counts as stopped), deletes the vq-hN
# namespaces. --purge also wipes Slurm's state, the accounting database, the logs, the
# venv and the blackhole route; users, keys and installed packages are kept.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_root
mkdir -p "$TB/log"
purge=0
case ${1:-} in
--purge) purge=1 ;;
"") ;;
*) die "usage: down.sh [--purge]" ;;
esac

if command -v scancel >/dev/null && [ -r /etc/slurm/slurm.conf ] &&
  scontrol ping 2>/dev/null | grep -q 'is UP'; then
  scancel --full --quiet --user="$TB_USER" 2>/dev/null || true
  scancel --full --quiet --state=PENDING 2>/dev/null || true
  scancel --full --quiet --state=RUNNING 2>/dev/null || true
fi

if [ "$purge" = 1 ] && [ -r /etc/slurm/slurmdbd.conf ] && command -v mariadb >/dev/null; then
  # Drop the DB with SQL (deleting InnoDB files by hand leaves orphans); start mariadbd
  # briefly when it is not running.
  started=0
  if ! mariadb-admin ping >/dev/null 2>&1 && [ -x /usr/sbin/mariadbd ]; then
    install -d -o mysql -g root -m 755 /run/mysqld
    setsid -f /usr/sbin/mariadbd --user=mysql >>"$TB/log/mariadbd.log" 2>&1 </dev/null
    wait_until 30 mariadbd "$TB/log/mariadbd.log" mariadb-admin ping
    record_pid mariadbd "$(pid_from_file /run/mysqld/mysqld.pid)"
    started=1
  fi
  stop_recorded slurmdbd
  mariadb -e 'DROP DATABASE IF EXISTS slurm_acct_db' || log "could not drop slurm_acct_db"
  [ "$started" = 1 ] && log "started mariadbd briefly to drop the accounting database"
fi

for name in slurmd slurmctld slurmdbd mariadbd munged; do stop_recorded "$name"; done
for f in "$TB"/pids/sshd-*.pid; do
  [ -e "$f" ] || continue
  name=$(basename "$f" .pid)
  stop_recorded "$name" 5
done

# Namespaces: their sshd is stopped above; deleting the namespace removes the veth pair.
while read -r ns; do
  [ -n "$ns" ] || continue
  # What still runs inside (remote daemons the tests started over its sshd) would keep the
  # namespace, and its veth pair, alive after the delete.
  inside=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
  if [ -n "$inside" ]; then
    kill -9 $inside 2>/dev/null || true
    log "stopped what still ran inside $ns: $inside"
  fi
  ip netns del "$ns" && log "deleted namespace $ns"
  rm -rf "/etc/netns/$ns/slurm" && rmdir "/etc/netns/$ns" 2>/dev/null || true
done < <(existing_netns_hosts)

if [ "$purge" = 1 ]; then
  ip route del blackhole 10.200.0.0/16 2>/dev/null || true
  rm -rf /var/lib/slurm/slurmctld/* /var/lib/slurm/slurmd/* /var/log/slurm/* \
    "$TB/log" "$TB/hosts" "$TB/env.sh" "$TB_OPT"
  log "purged Slurm state, accounting database, logs, venv and the blackhole route"
fi
log "testbed down"
