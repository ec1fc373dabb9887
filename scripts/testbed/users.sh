#!/usr/bin/env bash
# Create the testbed's accounts and the client key they all accept (idempotent; root).
#
#   vqtest            the SSH user of the tests and the Slurm user
#   vqnoisy           like vqtest, but its .bashrc, .profile and .bash_logout print to both
#                     stdout and stderr (the SSH runner must still return byte-exact output)
#   vqbench           like vqtest, used only by the lanes benchmark (bench/bench_lanes.py), so
#                     per-user Slurm RPC counters isolate its traffic
#   vqa, vqb          two ordinary users (own primary groups)
#   vqadm             member of the group vq-admins
#   vqteam1, vqteam2  two users sharing the primary group vq-team
#   vqmu01 … vqmu50   fifty plain accounts (own primary groups, no home, no login shell)
#                     for the multi-user start-up benchmark's 50 users × 200 specs
#
# Every account gets `usermod -p '*'`: sshd runs with UsePAM no and then refuses a locked
# ('!') account even for key authentication.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
require_root

mkdir -p "$TB/ssh"
chmod 755 "$TB" "$TB/ssh"
key=$TB/ssh/client_ed25519
[ -r "$key" ] || ssh-keygen -q -t ed25519 -N '' -C vq-testbed-client -f "$key"

ensure_group() { getent group "$1" >/dev/null || groupadd "$1"; }

# ensure_user NAME [useradd options...]
ensure_user() {
  local name=$1
  shift
  if ! id -u "$name" >/dev/null 2>&1; then
    useradd -m -s /bin/bash "$@" "$name"
    log "created user $name"
  fi
  if [ "$(getent shadow "$name" | cut -d: -f2)" != '*' ]; then usermod -p '*' "$name"; fi
  local home
  home=$(getent passwd "$name" | cut -d: -f6)
  install -d -m 700 -o "$name" -g "$(id -gn "$name")" "$home/.ssh"
  if ! cmp -s "$key.pub" "$home/.ssh/authorized_keys" 2>/dev/null; then
    install -m 600 -o "$name" -g "$(id -gn "$name")" "$key.pub" "$home/.ssh/authorized_keys"
  fi
}

ensure_group vq-admins
ensure_group vq-team
ensure_user "$TB_USER"
ensure_user "$TB_NOISY_USER"
ensure_user "$TB_BENCH_USER"
ensure_user vqa
ensure_user vqb
ensure_user vqadm
id -nG vqadm | tr ' ' '\n' | grep -qx vq-admins || usermod -a -G vq-admins vqadm
ensure_user vqteam1 -g vq-team
ensure_user vqteam2 -g vq-team

# The multi-user benchmark's accounts: a passwd entry and a primary group is all they need.
for i in $(seq -w 1 50); do
  id -u "vqmu$i" >/dev/null 2>&1 || useradd -M -U -s /usr/sbin/nologin "vqmu$i"
done

# The noisy user's shell start-up and logout files write to both streams, one line without
# a trailing newline, so output framing cannot rely on line starts.
noisy_home=$(getent passwd "$TB_NOISY_USER" | cut -d: -f6)
for rc in .bashrc .profile .bash_logout; do
  want="echo 'noise: $rc on stdout'; echo 'noise: $rc on stderr' >&2; printf 'noise: $rc no newline'; printf 'noise: $rc no newline' >&2"
  if [ "$(cat "$noisy_home/$rc" 2>/dev/null)" != "$want" ]; then
    printf '%s\n' "$want" >"$noisy_home/$rc"
    chown "$TB_NOISY_USER:" "$noisy_home/$rc"
  fi
done
