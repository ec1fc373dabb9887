#!/usr/bin/env bash
# Bring the testbed up (root; idempotent): sshd on 127.0.0.1:$VQ_TESTBED_SSH_PORT, N network
# namespace "hosts" each with its own sshd, a venv with this checkout's vq for the remote
# users, and a single-node Slurm 22.05 (munge, mariadb, slurmdbd, slurmctld, slurmd).
#
# A component that already answers is reused; only processes this script started are
# recorded (in $TB/pids/) and later stopped by down.sh. A component that does not come up
# makes this script exit non-zero naming its log. Knobs: docs/testbed.md.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_root

SLURM=${VQ_TESTBED_SLURM:-1}
SLURMDBD=${VQ_TESTBED_SLURMDBD:-1}
CGROUP=${VQ_TESTBED_SLURM_CGROUP:-auto}
SLURM_CPUS=${VQ_TESTBED_SLURM_CPUS:-}
SLURM_GPUS=${VQ_TESTBED_SLURM_GPUS:-0}
GPU_DIR=$TB/gpu
T0=$(now_ms)
timings=()
lap() { # lap WHAT START_MS
  timings+=("$1 $(($(now_ms) - $2)) ms")
}

# --- packages ---------------------------------------------------------------------------
install_missing() {
  [ "${VQ_TESTBED_NO_INSTALL:-0}" = 1 ] && return 0
  local need=() t
  t=$(now_ms)
  command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
  command -v ssh >/dev/null || need+=(openssh-client)
  command -v ip >/dev/null || need+=(iproute2)
  [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null ||
    need+=(python3-venv)
  if [ "$SLURM" = 1 ]; then
    [ -x /usr/sbin/slurmctld ] || need+=(slurmctld slurm-wlm)
    [ -x /usr/sbin/slurmd ] || need+=(slurmd)
    command -v sbatch >/dev/null || need+=(slurm-client)
    [ -x /usr/sbin/munged ] || need+=(munge)
    # Slurm's own qsub/qstat/qdel wrappers: a Torque lane driven against real Slurm.
    [ -x /usr/bin/qsub ] || need+=(slurm-wlm-torque)
    if [ "$SLURMDBD" = 1 ]; then
      [ -x /usr/sbin/slurmdbd ] || need+=(slurmdbd)
      [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
    fi
  fi
  [ ${#need[@]} -eq 0 ] && return 0
  log "installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" \
    >"$TB/log/apt.log" 2>&1 || die "apt-get install ${need[*]} failed; see $TB/log/apt.log"
  lap "apt-get install" "$t"
}

mkdir -p "$TB/log" "$TB/pids" "$TB/ssh" "$TB/hosts"
chmod 755 "$TB" "$TB/hosts"
install_missing

t=$(now_ms)
"$TB_REPO/scripts/testbed/users.sh"
lap "users" "$t"

# --- ssh: keys, per-host sshd configs, client config ------------------------------------
VENV=$TB_OPT/venv
ssh_hosts=(vq-local)
while read -r h; do ssh_hosts+=("$h"); done < <(netns_hosts)

host_addr() { # NAME -> "ADDR PORT"
  case $1 in
  vq-local) echo "127.0.0.1 $TB_SSH_PORT" ;;
  vq-h*) echo "10.200.${1#vq-h}.2 22" ;;
  esac
}

# write_if_changed FILE MODE: stdin -> FILE when different; returns 0 when it changed.
write_if_changed() {
  local tmp
  tmp=$(mktemp "$1.XXXXXX")
  cat >"$tmp"
  chmod "$2" "$tmp"
  if cmp -s "$tmp" "$1" 2>/dev/null; then
    rm -f "$tmp"
    return 1
  fi
  mv -f "$tmp" "$1"
}

# The fake Torque server (scripts/testbed/torque_fake.py) as qsub/qstat/qdel/qhold/qrls,
# first on the PATH of one namespace host only ($TORQUE_HOST; the others keep Slurm's
# slurm-wlm-torque wrappers in /usr/bin when those are installed).
TORQUE_HOST=${VQ_TESTBED_TORQUE_HOST:-vq-h1}
TORQUE_BIN=$TB_OPT/torque-fake/bin
install_torque_fake() {
  local cmd
  install -d -m 755 "$TB_OPT" "$TB_OPT/torque-fake" "$TORQUE_BIN"
  install -m 755 "$TB_REPO/scripts/testbed/torque_fake.py" "$TB_OPT/torque-fake/torque_fake.py"
  for cmd in qsub qstat qdel qhold qrls; do
    ln -sfn ../torque_fake.py "$TORQUE_BIN/$cmd"
  done
}
install_torque_fake

# The slow-submit fault (scripts/testbed/slow_submit.sh) as sbatch, first on every host's
# PATH: the real sbatch unless a test's scratch directory asks for a delay.
FAULT_BIN=$TB_OPT/faults/bin
install_faults() {
  install -d -m 755 "$TB_OPT/faults" "$FAULT_BIN"
  install -m 755 "$TB_REPO/scripts/testbed/slow_submit.sh" "$TB_OPT/faults/slow_submit.sh"
  ln -sfn ../slow_submit.sh "$FAULT_BIN/sbatch"
}
install_faults

sshd_config() { # NAME ADDR PORT
  local name=$1 addr=$2 port=$3 u home path=$FAULT_BIN:$VENV/bin:/usr/local/bin:/usr/bin:/bin
  [ "$name" = "$TORQUE_HOST" ] && path=$TORQUE_BIN:$path
  cat <<CONF
# Written by scripts/testbed/up.sh: sshd of testbed host $name.
ListenAddress $addr
Port $port
HostKey $TB/ssh/host_${name}_ed25519
PidFile /run/vq-sshd-$name.pid
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AuthorizedKeysFile .ssh/authorized_keys
UsePAM no
UseDNS no
MaxStartups 100:30:200
MaxSessions 50
X11Forwarding no
PrintMotd no
Subsystem sftp /usr/lib/openssh/sftp-server
# The namespace hosts share one filesystem and one set of homes: each host gives every
# user its own vq state and config directories, so each "host" runs its own vq.
SetEnv PATH=$path VQ_TESTBED_HOST=$name
CONF
  for u in "${TB_SSH_USERS[@]}"; do
    home=$TB/hosts/$name/$u
    printf 'Match User %s\n  SetEnv PATH=%s VQ_TESTBED_HOST=%s VQ_STATE_DIR=%s VQ_CONFIG_DIR=%s\n' \
      "$u" "$path" "$name" "$home/state" "$home/config"
  done
}

t=$(now_ms)
for name in "${ssh_hosts[@]}"; do
  [ -r "$TB/ssh/host_${name}_ed25519" ] ||
    ssh-keygen -q -t ed25519 -N '' -C "vq-testbed-$name" -f "$TB/ssh/host_${name}_ed25519"
  for u in "${TB_SSH_USERS[@]}"; do
    install -d -m 755 "$TB/hosts/$name"
    install -d -m 700 -o "$u" -g "$(id -gn "$u")" "$TB/hosts/$name/$u" \
      "$TB/hosts/$name/$u/state" "$TB/hosts/$name/$u/config"
  done
done

# known_hosts and the client config cover every host of this run.
{
  for name in "${ssh_hosts[@]}"; do
    read -r addr port < <(host_addr "$name")
    if [ "$port" = 22 ]; then pattern=$addr; else pattern="[$addr]:$port"; fi
    [ "$name" = vq-local ] && pattern="$pattern,[localhost]:$port"
    printf '%s %s\n' "$pattern" "$(cut -d' ' -f1-2 "$TB/ssh/host_${name}_ed25519.pub")"
  done
} | write_if_changed "$TB/ssh/known_hosts" 644 || true

{
  echo "# Written by scripts/testbed/up.sh. Use: ssh -F $TB/ssh/config vq-local true"
  printf 'Host vq-noisy\n  HostName 127.0.0.1\n  Port %s\n  User %s\n\n' "$TB_SSH_PORT" "$TB_NOISY_USER"
  printf 'Host vq-bench\n  HostName 127.0.0.1\n  Port %s\n  User %s\n\n' "$TB_SSH_PORT" "$TB_BENCH_USER"
  for name in "${ssh_hosts[@]}"; do
    read -r addr port < <(host_addr "$name")
    printf 'Host %s\n  HostName %s\n  Port %s\n\n' "$name" "$addr" "$port"
  done
  cat <<CONF
Host vq-*
  User $TB_USER
  IdentityFile $TB/ssh/client_ed25519
  IdentitiesOnly yes
  StrictHostKeyChecking yes
  UserKnownHostsFile $TB/ssh/known_hosts
  GlobalKnownHostsFile /dev/null
  BatchMode yes
  ConnectTimeout 5
CONF
} | write_if_changed "$TB/ssh/config" 644 || true

# Readiness probe: a real login as the test user (classic KEX: half the cost of the default).
ssh_probe() {
  ssh -F "$TB/ssh/config" -o ConnectTimeout=2 -o KexAlgorithms=curve25519-sha256 "$1" true </dev/null
}

# start_sshd NAME [netns]: reuse a running sshd of this host (SIGHUP when its config
# changed), else start one and record it.
start_sshd() {
  local name=$1 ns=${2:-} conf=$TB/ssh/sshd_config.$1 logf=$TB/log/sshd-$1.log changed=0 pid
  read -r addr port < <(host_addr "$name")
  sshd_config "$name" "$addr" "$port" | write_if_changed "$conf" 644 && changed=1
  install -d -m 755 /run/sshd
  /usr/sbin/sshd -t -f "$conf" 2>>"$logf" || die "sshd config $conf is invalid; see $logf"
  pid=$(pid_from_file "/run/vq-sshd-$name.pid")
  if [ -n "$pid" ] && alive "$pid" && [ "$(cat "/proc/$pid/comm")" = sshd ]; then
    if [ "$changed" = 1 ]; then kill -HUP "$pid" && sleep 0.2; fi
  else
    rm -f "/run/vq-sshd-$name.pid"
    if [ -n "$ns" ]; then
      ip netns exec "$ns" /usr/sbin/sshd -f "$conf" -E "$logf" || die "sshd of $name failed; see $logf"
    else
      /usr/sbin/sshd -f "$conf" -E "$logf" || die "sshd of $name failed; see $logf"
    fi
    wait_until 5 "sshd pidfile of $name" "$logf" test -s "/run/vq-sshd-$name.pid"
    record_pid "sshd-$name" "$(pid_from_file "/run/vq-sshd-$name.pid")"
  fi
  wait_until 10 "sshd of $name ($addr:$port)" "$logf" ssh_probe "$name"
}

start_sshd vq-local
lap "sshd vq-local" "$t"

# --- network namespace hosts ------------------------------------------------------------
ensure_netns() { # NAME
  local name=$1 i=${1#vq-h}
  local host_if=vqh$i-host ns_if=vqh$i-ns
  if ip netns list | awk '{print $1}' | grep -qx "$name" && ! ip netns exec "$name" true 2>/dev/null; then
    # A name left without its namespace (a /run/netns file whose mount is gone): make it again.
    ip netns del "$name" 2>/dev/null || rm -f "/run/netns/$name"
  fi
  ip netns list | awk '{print $1}' | grep -qx "$name" || ip netns add "$name"
  if ip link show "$host_if" >/dev/null 2>&1 && ! ip -n "$name" link show "$ns_if" >/dev/null 2>&1; then
    # A host side whose peer lives on in an earlier namespace of this name (deleted while
    # a process still held it): drop the pair and make it again in this one.
    ip link del "$host_if"
  fi
  if ! ip link show "$host_if" >/dev/null 2>&1; then
    ip link add "$host_if" type veth peer name "$ns_if" netns "$name"
    ip addr add "10.200.$i.1/24" dev "$host_if"
    ip -n "$name" addr add "10.200.$i.2/24" dev "$ns_if"
  fi
  ip link set "$host_if" up
  ip -n "$name" link set lo up
  ip -n "$name" link set "$ns_if" up # heals a partition a test left behind
}

if [ "$(netns_hosts | wc -l)" -gt 0 ]; then
  # Safety net: with a veth taken down on the root side, traffic for 10.200/16 would leave
  # through the default gateway. Keep it inside.
  ip route replace blackhole 10.200.0.0/16
fi
while read -r name; do
  t=$(now_ms)
  ensure_netns "$name"
  start_sshd "$name" "$name"
  lap "netns host $name" "$t"
done < <(netns_hosts)

# --- the remote users' venv (a copy of this checkout, not an editable install) ----------
source_hash() {
  (cd "$TB_REPO" && find src pyproject.toml README.md -type f ! -path '*/__pycache__/*' \
    ! -name '*.pyc' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}
t=$(now_ms)
want_hash=$(source_hash)
# Concurrent runs (several checkouts, several test sessions) build the one shared venv in
# turn: the lock is held from the hash check to the hash stamp, and released on exit.
mkdir -p "$TB_OPT"
exec {venv_lock}>"$TB_OPT/.venv.lock"
flock "$venv_lock"
if [ "$(cat "$VENV/.vq-source-hash" 2>/dev/null)" != "$want_hash" ]; then
  log "building $VENV from $TB_REPO"
  vlog=$TB/log/venv.log
  if [ ! -x "$VENV/bin/python" ]; then
    /usr/bin/python3 -m venv "$VENV" >"$vlog" 2>&1 || die "venv creation failed; see $vlog"
    "$VENV/bin/pip" install -q --upgrade pip hatchling >>"$vlog" 2>&1 ||
      die "pip install hatchling failed; see $vlog"
  fi
  mapfile -t deps < <("$VENV/bin/python" -c \
    'import sys,tomllib;print(*tomllib.load(open(sys.argv[1],"rb"))["project"]["dependencies"],sep="\n")' \
    "$TB_REPO/pyproject.toml")
  "$VENV/bin/pip" install -q "${deps[@]}" >>"$vlog" 2>&1 || die "pip install of vq's dependencies failed; see $vlog"
  "$VENV/bin/pip" install -q --no-build-isolation --no-deps --force-reinstall "$TB_REPO" >>"$vlog" 2>&1 ||
    die "pip install of $TB_REPO failed; see $vlog"
  echo "$want_hash" >"$VENV/.vq-source-hash"
  chmod -R a+rX "$TB_OPT"
  lap "venv (rebuilt)" "$t"
else
  lap "venv (up to date)" "$t"
fi
flock -u "$venv_lock"
exec {venv_lock}>&-

# --- Slurm --------------------------------------------------------------------------------
munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
maria_ok() { mariadb-admin ping >/dev/null 2>&1; }
dbd_ok() { sacctmgr -n -P show cluster >/dev/null 2>&1; }
ctld_ok() { scontrol ping 2>/dev/null | grep -q 'is UP'; }
# slurmctld keeps calling a node idle for SlurmdTimeout after its slurmd died: ask both.
node_ok() {
  pgrep -x slurmd >/dev/null &&
    sinfo -h -n "$NODE" -o %T 2>/dev/null | grep -Eqx 'idle|mixed|allocated|completing'
}

# start_daemon NAME PIDFILE LOGFILE BOUND PROBE -- ARGV...: reuse when PROBE answers,
# else start ARGV detached and record the pid from the daemon's own pidfile.
start_daemon() {
  local name=$1 pidfile=$2 logf=$3 bound=$4 probe=$5
  shift 6
  if "$probe"; then return 0; fi
  # Running but not answering yet (slurmd re-registering after a slurmctld restart):
  # wait for it rather than start a second one that would fail to bind its port.
  local pid
  pid=$(pid_from_file "$pidfile")
  if [ -n "$pid" ] && alive "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]; then
    wait_until "$bound" "$name" "$logf" "$probe"
    return 0
  fi
  rm -f "$pidfile"
  setsid -f "$@" >>"$logf" 2>&1 </dev/null
  wait_until "$bound" "$name" "$logf" "$probe"
  wait_until 5 "$name pidfile" "$logf" test -s "$pidfile"
  record_pid "$name" "$(pid_from_file "$pidfile")"
}

slurm_conf() {
  local node_line mem cg=$1
  node_line=$(slurmd -C | head -n1)
  mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$node_line")
  node_line=$(sed "s/RealMemory=[0-9]*/RealMemory=$((mem * 95 / 100))/; s/^NodeName=[^ ]*/NodeName=$NODE NodeAddr=127.0.0.1/" <<<"$node_line")
  if [ -n "$SLURM_CPUS" ]; then
    node_line=$(sed "s/CPUs=[0-9]*/CPUs=$SLURM_CPUS/; s/CoresPerSocket=[0-9]*/CoresPerSocket=$SLURM_CPUS/; s/ThreadsPerCore=[0-9]*/ThreadsPerCore=1/" <<<"$node_line")
  fi
  if [ "$SLURM_GPUS" -gt 0 ]; then node_line="$node_line Gres=gpu:$SLURM_GPUS"; fi
  cat <<CONF
# Written by scripts/testbed/up.sh
ClusterName=vqtest
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
OverTimeLimit=0
MailProg=/bin/true
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=2
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.txt
CONF
  if [ "$cg" = 1 ]; then
    printf 'ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup\nJobAcctGatherParams=NoOverMemoryKill\n'
  else
    printf 'ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherParams=OverMemoryKill\n'
  fi
  if [ "$SLURMDBD" = 1 ]; then
    printf 'AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=localhost\nAccountingStoragePort=6819\n'
  else
    echo 'AccountingStorageType=accounting_storage/none'
  fi
  if [ -n "$SLURM_CPUS" ]; then echo 'SlurmdParameters=config_overrides'; fi
  if [ "$SLURM_GPUS" -gt 0 ]; then echo 'GresTypes=gpu'; fi
  echo "$node_line State=UNKNOWN"
  echo 'PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP'
}

if [ "$SLURM" = 1 ]; then
  NODE=$(hostname -s)
  case $CGROUP in
  auto) if grep -q ' /sys/fs/cgroup/memory cgroup ' /proc/mounts && [ -w /sys/fs/cgroup/memory ]; then CG=1; else CG=0; fi ;;
  1 | 0) CG=$CGROUP ;;
  *) die "VQ_TESTBED_SLURM_CGROUP must be auto, 1 or 0 (got '$CGROUP')" ;;
  esac
  [[ $SLURM_GPUS =~ ^[0-9]+$ ]] && [ "$SLURM_GPUS" -le 64 ] ||
    die "VQ_TESTBED_SLURM_GPUS must be a whole number from 0 to 64 (got '$SLURM_GPUS')"
  mkdir -p /etc/slurm /var/log/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd
  conf_changed=0
  slurm_conf "$CG" | write_if_changed /etc/slurm/slurm.conf 644 && conf_changed=1
  # Each namespace host's own slurm.conf: the controller and slurmdbd on the root side of
  # its link (10.200.N.1). `ip netns exec` bind-mounts /etc/netns/NAME/slurm over
  # /etc/slurm for what it starts (the host's sshd, hence its logins); an sshd that does
  # not see its copy yet is restarted below (its open sessions keep running).
  while read -r h; do
    install -d -m 755 "/etc/netns/$h" "/etc/netns/$h/slurm"
    sed -e "s/^SlurmctldHost=\([^(]*\)(127\.0\.0\.1)/SlurmctldHost=\1(10.200.${h#vq-h}.1)/" \
      -e "s/^AccountingStorageHost=localhost/AccountingStorageHost=10.200.${h#vq-h}.1/" \
      /etc/slurm/slurm.conf | write_if_changed "/etc/netns/$h/slurm/slurm.conf" 644 || true
  done < <(netns_hosts)
  if [ "$CG" = 1 ]; then
    printf 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nConstrainRAMSpace=yes\nConstrainCores=no\nConstrainSwapSpace=no\nConstrainDevices=no\n' |
      write_if_changed /etc/slurm/cgroup.conf 644 && conf_changed=1
  elif [ -e /etc/slurm/cgroup.conf ]; then
    rm -f /etc/slurm/cgroup.conf
    conf_changed=1
  fi
  if [ "$SLURM_GPUS" -gt 0 ]; then
    fake_gpu_devices "$GPU_DIR" "$SLURM_GPUS"
    gres_conf "$NODE" "$GPU_DIR" "$SLURM_GPUS" | write_if_changed /etc/slurm/gres.conf 644 &&
      conf_changed=1
  elif [ -e /etc/slurm/gres.conf ]; then
    rm -f /etc/slurm/gres.conf
    rm -rf "$GPU_DIR"
    conf_changed=1
  fi

  t=$(now_ms)
  install -d -o munge -g munge -m 755 /run/munge
  if ! munge_ok; then
    runuser -u munge -- /usr/sbin/munged --force 2>>"$TB/log/munged-start.log" ||
      die "munged failed to start; see /var/log/munge/munged.log and $TB/log/munged-start.log"
    wait_until 5 munged /var/log/munge/munged.log munge_ok
    record_pid munged "$(pid_from_file /run/munge/munged.pid)"
  fi
  lap munged "$t"

  if [ "$SLURMDBD" = 1 ]; then
    t=$(now_ms)
    printf '[mysqld]\ninnodb_buffer_pool_size=1024M\ninnodb_log_file_size=64M\ninnodb_lock_wait_timeout=900\n' |
      write_if_changed /etc/mysql/mariadb.conf.d/99-vq-testbed.cnf 644 || true
    install -d -o mysql -g root -m 755 /run/mysqld
    start_daemon mariadbd /run/mysqld/mysqld.pid "$TB/log/mariadbd.log" 30 maria_ok -- \
      /usr/sbin/mariadbd --user=mysql
    mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
      CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'vqtestbed';
      GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';" ||
      die "creating the accounting database failed; see $TB/log/mariadbd.log"
    lap mariadbd "$t"
    t=$(now_ms)
    printf '%s\n' AuthType=auth/munge DbdHost=localhost DbdPort=6819 SlurmUser=root \
      LogFile=/var/log/slurm/slurmdbd.log PidFile=/run/slurmdbd.pid \
      StorageType=accounting_storage/mysql StorageHost=localhost StoragePort=3306 \
      StorageUser=slurm StoragePass=vqtestbed StorageLoc=slurm_acct_db |
      write_if_changed /etc/slurm/slurmdbd.conf 600 || true
    start_daemon slurmdbd /run/slurmdbd.pid /var/log/slurm/slurmdbd.log 30 dbd_ok -- \
      /usr/sbin/slurmdbd -D
    # One query when everything exists already (each sacctmgr call costs ~0.3 s).
    if ! sacctmgr -n -P show assoc format=cluster,account,user | grep -qx "vqtest|vq|$TB_USER"; then
      sacctmgr -n -P show cluster format=cluster | grep -qx vqtest ||
        sacctmgr -i add cluster vqtest >/dev/null
      sacctmgr -n -P show account format=account | grep -qx vq ||
        sacctmgr -i add account vq >/dev/null
      sacctmgr -n -P show user format=user | grep -qx "$TB_USER" ||
        sacctmgr -i add user "$TB_USER" Account=vq >/dev/null
    fi
    lap slurmdbd "$t"
  fi

  if [ "$conf_changed" = 1 ]; then
    # Node definitions need a restart; restart what we started, reconfigure anything else.
    if recorded_alive slurmctld || recorded_alive slurmd; then
      log "slurm.conf changed: restarting slurmctld and slurmd"
      stop_recorded slurmd
      stop_recorded slurmctld
    elif ctld_ok; then
      scontrol reconfigure || true
    fi
  fi
  t=$(now_ms)
  start_daemon slurmctld /run/slurmctld.pid /var/log/slurm/slurmctld.log 30 ctld_ok -- \
    /usr/sbin/slurmctld -D
  lap slurmctld "$t"
  t=$(now_ms)
  if ! node_ok && sinfo -h -n "$NODE" -o %T 2>/dev/null | grep -Eq 'down|drain'; then
    scontrol update nodename="$NODE" state=resume 2>/dev/null || true
  fi
  start_daemon slurmd /run/slurmd.pid /var/log/slurm/slurmd.log 30 node_ok -- \
    /usr/sbin/slurmd -D -N "$NODE"
  lap slurmd "$t"
fi

# A namespace host's sshd started before its /etc/netns copy existed (or changed) reads
# the root side's slurm.conf: start it again.
if [ "$SLURM" = 1 ]; then
  while read -r h; do
    pid=$(pid_from_file "/run/vq-sshd-$h.pid")
    [ -n "$pid" ] && alive "$pid" || continue
    if ! cmp -s "/etc/netns/$h/slurm/slurm.conf" "/proc/$pid/root/etc/slurm/slurm.conf"; then
      log "restarting the sshd of $h so its logins read /etc/netns/$h/slurm"
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
      alive "$pid" && die "the sshd of $h (pid $pid) did not stop"
      start_sshd "$h" "$h"
    fi
  done < <(netns_hosts)
fi

# --- what the tests read --------------------------------------------------------------------
# Slurm counts as up when it answers, also when this run skipped it (VQ_TESTBED_SLURM=0).
slurm_up=0
if command -v scontrol >/dev/null && [ -r /etc/slurm/slurm.conf ] && ctld_ok; then slurm_up=1; fi
NODE=${NODE:-$(hostname -s)}
gpus=0
if [ -r /etc/slurm/gres.conf ]; then gpus=$(find "$GPU_DIR" -maxdepth 1 -name 'gpu*' | wc -l); fi
# The CPU count advertised through VQ_TESTBED_SLURM_CPUS, empty when slurmd's own is used:
# a later run passes both knobs on to keep the running configuration (tests/testbed.py).
cpus=
if grep -qx 'SlurmdParameters=config_overrides' /etc/slurm/slurm.conf 2>/dev/null; then
  cpus=$(sed -n 's/^NodeName=.* CPUs=\([0-9]*\).*/\1/p' /etc/slurm/slurm.conf | head -n1)
fi
env_tmp=$(mktemp "$TB/env.sh.XXXXXX")
cat >"$env_tmp" <<ENV
# Written by scripts/testbed/up.sh; source it.
export VQ_TESTBED=$TB
export VQ_TESTBED_SSH_CONFIG=$TB/ssh/config
export VQ_TESTBED_SSH_KEY=$TB/ssh/client_ed25519
export VQ_TESTBED_KNOWN_HOSTS=$TB/ssh/known_hosts
export VQ_TESTBED_USER=$TB_USER
export VQ_TESTBED_NOISY_USER=$TB_NOISY_USER
export VQ_TESTBED_BENCH_USER=$TB_BENCH_USER
export VQ_TESTBED_HOSTS="${ssh_hosts[*]}"
export VQ_TESTBED_VENV=$VENV
export VQ_TESTBED_SLURM=$slurm_up
export VQ_TESTBED_SLURM_NODE=$NODE
export VQ_TESTBED_SLURM_CPUS=$cpus
export VQ_TESTBED_SLURM_GPUS=$gpus
export VQ_TESTBED_TORQUE_HOST=$TORQUE_HOST
ENV
chmod 644 "$env_tmp"
mv -f "$env_tmp" "$TB/env.sh"

for line in "${timings[@]}"; do log "  $line"; done
log "testbed up in $(($(now_ms) - T0)) ms (hosts: ${ssh_hosts[*]}; slurm: $SLURM); source $TB/env.sh"
