#!/bin/bash
#SBATCH --nodes=1
#SBATCH --ntasks=2
#SBATCH --cpus-per-task=8
#SBATCH --mem=65536M
#SBATCH --gres=gpu:2
#SBATCH --time=12:00:00
#SBATCH --partition=gpu,gpu-long
#SBATCH --account=chem
#SBATCH --qos=normal
#SBATCH --constraint=a100&ib
#SBATCH --job-name=vqp-0123456789abcdef
#SBATCH --comment=vq-pack:0123456789abcdef
#SBATCH --output=/cluster/logs/sweep/0123456789abcdef-%j.out
# vq packed allocation 0123456789abcdef: 2 tasks. Generated; do not edit.
set -u
umask 077
W=/cluster/work/sweep/0123456789abcdef
mkdir -p "$W/0/_vq" "$W/1/_vq"
# slot 0: g0
base64 -d >"$W/0/_vq/stdin" <<'VQ_STDIN_END'
eyJzZWVkIjogN30K
VQ_STDIN_END
# slot 1: g1
: >"$W/1/_vq/stdin"
(
  srun --exclusive --exact --nodes=1 --ntasks=1 --cpus-per-task=8 --mem=32768M --gres=gpu:1 --job-name=vqp-0123456789abcdef-0 --chdir=/cluster/work/sweep/0123456789abcdef/0 --output=/cluster/logs/sweep/0123456789abcdef-%j-0.out /usr/bin/apptainer exec --nv /cluster/images/chem.sif train --seed 7 <"$W/0/_vq/stdin"
  echo $? >"$W/0/_vq/exit-code.tmp" && mv -f "$W/0/_vq/exit-code.tmp" "$W/0/_vq/exit-code"
) &
(
  srun --exclusive --exact --nodes=1 --ntasks=1 --cpus-per-task=8 --mem=32768M --gres=gpu:1 --job-name=vqp-0123456789abcdef-1 --chdir=/cluster/work/sweep/0123456789abcdef/1 --output=/cluster/logs/sweep/0123456789abcdef-%j-1.out /usr/bin/apptainer exec --nv /cluster/images/chem.sif train <"$W/1/_vq/stdin"
  echo $? >"$W/1/_vq/exit-code.tmp" && mv -f "$W/1/_vq/exit-code.tmp" "$W/1/_vq/exit-code"
) &
wait
status=0
for slot in 0 1; do
  [ "$(cat "$W/$slot/_vq/exit-code" 2>/dev/null)" = 0 ] || status=1
done
exit "$status"
