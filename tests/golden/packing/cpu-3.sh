#!/bin/bash
#SBATCH --nodes=1
#SBATCH --ntasks=3
#SBATCH --cpus-per-task=1
#SBATCH --mem=1536M
#SBATCH --time=00:11:00
#SBATCH --partition=normal
#SBATCH --job-name=vqp-0123456789abcdef
#SBATCH --comment=vq-pack:0123456789abcdef
#SBATCH --output=/cluster/logs/sweep/0123456789abcdef-%j.out
# vq packed allocation 0123456789abcdef: 3 tasks. Generated; do not edit.
set -u
umask 077
W=/cluster/work/sweep/0123456789abcdef
mkdir -p "$W/0/_vq" "$W/1/_vq" "$W/2/_vq"
# slot 0: t0
: >"$W/0/_vq/stdin"
# slot 1: t1
base64 -d >"$W/1/_vq/stdin" <<'VQ_STDIN_END'
bGluZSBvbmUKAP8gYmluYXJ5Cg==
VQ_STDIN_END
# slot 2: t2
base64 -d >"$W/2/_vq/stdin" <<'VQ_STDIN_END'
eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eA==
VQ_STDIN_END
(
  srun --exclusive --exact --nodes=1 --ntasks=1 --cpus-per-task=1 --mem=512M --job-name=vqp-0123456789abcdef-0 --chdir=/cluster/work/sweep/0123456789abcdef/0 --output=/cluster/logs/sweep/0123456789abcdef-%j-0.out true <"$W/0/_vq/stdin"
  echo $? >"$W/0/_vq/exit-code.tmp" && mv -f "$W/0/_vq/exit-code.tmp" "$W/0/_vq/exit-code"
) &
(
  srun --exclusive --exact --nodes=1 --ntasks=1 --cpus-per-task=1 --mem=512M --job-name=vqp-0123456789abcdef-1 --chdir=/cluster/work/sweep/0123456789abcdef/1 --output=/cluster/logs/sweep/0123456789abcdef-%j-1.out sh -c 'exit 3' <"$W/1/_vq/stdin"
  echo $? >"$W/1/_vq/exit-code.tmp" && mv -f "$W/1/_vq/exit-code.tmp" "$W/1/_vq/exit-code"
) &
(
  srun --exclusive --exact --nodes=1 --ntasks=1 --cpus-per-task=1 --mem=512M --job-name=vqp-0123456789abcdef-2 --chdir=/cluster/work/sweep/0123456789abcdef/2 --output=/cluster/logs/sweep/0123456789abcdef-%j-2.out python3 'it'"'"'s a $HOME `test`' '--flag=a b' <"$W/2/_vq/stdin"
  echo $? >"$W/2/_vq/exit-code.tmp" && mv -f "$W/2/_vq/exit-code.tmp" "$W/2/_vq/exit-code"
) &
wait
status=0
for slot in 0 1 2; do
  [ "$(cat "$W/$slot/_vq/exit-code" 2>/dev/null)" = 0 ] || status=1
done
exit "$status"
