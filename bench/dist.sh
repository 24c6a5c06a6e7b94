#!/usr/bin/env bash
# Data parallel on this machine's CPUs (bench/DIST_NOTES.md): tabular (examples/tabular.json,
# global batch 512) as 1 process x 2 threads against 2 MPI ranks x 1 thread, then the 2-rank
# step time for several gradient bucket sizes. Prints the median ms/step of each (brisk's own
# summary, 300 steps after the run's first) and `uptime` before and after: a shared machine's
# numbers are provisional. With `overlap` as third argument: only dist.overlap on against off
# (2 ranks x 1 thread, tabular and diffusion, default buckets and 0.01 MiB), five alternating
# rounds.
#   bench/dist.sh BUILD_DIR [STEPS] [overlap]
set -eu
build=$(cd "$1" && pwd) steps=${2:-300} part=${3:-all}
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
mkdir data && "$build/brisk" synth tabular data/tabular.npz >/dev/null
mpirun=(mpirun -np 2 --allow-run-as-root --oversubscribe --bind-to none)
c=("$src/examples/tabular.json" --device cpu --max-steps "$steps" --log-every 100000 --set train.epochs=1000
   --checkpoint-epochs 0 --keep-checkpoints 0 --overwrite)
med() { grep -o '[0-9.]* ms/step median' | head -1 | cut -d' ' -f1; }
echo "load before: $(uptime)"
if [ "$part" = overlap ]; then
  "$build/brisk" synth diffusion data/diffusion.npz >/dev/null
  d=("$src/examples/diffusion.json" --device cpu --max-steps "$steps" --log-every 100000 --set train.epochs=1000
     --checkpoint-epochs 0 --keep-checkpoints 0 --overwrite --batch-size 16 --threads 1)
  for round in 1 2 3 4 5; do
    for mb in 0.0625 0.01; do
      for ov in on off; do
        a=$("${mpirun[@]}" "$build/brisk" train "${c[@]}" --batch-size 256 --threads 1 --out t --bucket-mb $mb \
          --set dist.overlap=$ov 2>&1 | med)
        b=$("${mpirun[@]}" "$build/brisk" train "${d[@]}" --out f --bucket-mb $mb --set dist.overlap=$ov 2>&1 | med)
        echo "round $round: bucket_mb $mb overlap $ov: tabular ${a} ms/step; diffusion ${b} ms/step"
      done
    done
  done
  echo "load after: $(uptime)"
  exit 0
fi
for round in 1 2 3; do
  a=$("$build/brisk" train "${c[@]}" --batch-size 512 --threads 2 --out one 2>&1 | med)
  b=$("${mpirun[@]}" "$build/brisk" train "${c[@]}" --batch-size 256 --threads 1 --out two 2>&1 | med)
  echo "round $round: 1 process x 2 threads ${a} ms/step; 2 ranks x 1 thread ${b} ms/step (global batch 512)"
done
for mb in 0.0625 0.25 1 4 16; do
  t=$("${mpirun[@]}" "$build/brisk" train "${c[@]}" --batch-size 256 --threads 1 --out b --bucket-mb $mb 2>&1 | med)
  echo "2 ranks, dist.bucket_mb $mb: $t ms/step"
done
echo "load after: $(uptime)"
