#!/usr/bin/env bash
# Data parallel on this machine's CPUs (bench/DIST_NOTES.md): tabular (examples/tabular.json,
# global batch 512) as 1 process x 2 threads against 2 MPI ranks x 1 thread, then the 2-rank
# step time for several gradient bucket sizes. Prints the median ms/step of each (brisk's own
# summary, 300 steps after the run's first) and `uptime` before and after: a shared machine's
# numbers are provisional.
#   bench/dist.sh BUILD_DIR [STEPS]
set -eu
build=$(cd "$1" && pwd) steps=${2:-300}
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
