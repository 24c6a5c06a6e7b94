#!/usr/bin/env bash
# The CPU runtime end to end: the device line says how many threads and why, a count above the
# CPUs this process may use warns, the summary counts this run's steps against this run's time
# (also after a resume) with mean throughput, median and p95, progress lines carry an ETA, and
# brisk bench runs its rows interleaved in rounds.
#   runtime.sh BRISK_BINARY WORKDIR
set -u
. "$(dirname "$0")/expect.sh"
brisk=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
unset OMP_NUM_THREADS SLURM_CPUS_PER_TASK OMPI_COMM_WORLD_LOCAL_SIZE MPI_LOCALNRANKS SLURM_JOB_ID SLURM_JOBID
"$brisk" synth tabular tab.npz --samples 640 >/dev/null || { echo "synth failed"; exit 1; }
cat > good.json <<'J'
{"model": {"type": "mlp", "inputs": 64, "hidden": [32], "outputs": 3},
 "data": {"train": "tab.npz", "validation_fraction": 0.2}, "train": {"batch_size": 64, "epochs": 1, "log_every": 4, "out_dir": ""}}
J
# has NAME PATTERN -- command...: the command succeeds and its output matches PATTERN
has() {
  local name=$1 pat=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ $rc -eq 0 ] && printf '%s' "$out" | grep -qE -- "$pat"; then
    pass=$((pass + 1)); echo "ok   $name"
  else
    fail=$((fail + 1)); echo "FAIL $name (exit $rc): $out"
  fi
}

has threads-flag 'cpu: .*, 3 threads \(speed\.threads\)' -- "$brisk" train good.json --threads 3
has threads-omp 'cpu: .*, 1 thread \(OMP_NUM_THREADS\)' -- env OMP_NUM_THREADS=1 "$brisk" train good.json
has threads-slurm 'cpu: .*, 2 threads \(SLURM_CPUS_PER_TASK\)' -- env SLURM_CPUS_PER_TASK=2 "$brisk" train good.json
has threads-default 'cpu: .*, [0-9]+ threads? \(([0-9]+ CPUs usable|affinity mask|cgroup)' -- "$brisk" train good.json
if command -v taskset >/dev/null; then
  has threads-affinity 'cpu: .*, 1 thread \(affinity mask of 1' -- taskset -c 0 "$brisk" train good.json
  has threads-warning 'warning: 4 threads \(speed\.threads\) but this process may use 1 CPU' -- taskset -c 0 "$brisk" train good.json --threads 4
fi
if [ "$(nproc)" = "$(getconf _NPROCESSORS_ONLN)" ] && [ "$(nproc)" -ge 2 ]; then
  has threads-mpi 'shared by 2 ranks on this node \(OMPI_COMM_WORLD_LOCAL_SIZE\)' -- env OMPI_COMM_WORLD_LOCAL_SIZE=2 "$brisk" train good.json
fi

# 512 training samples = 8 steps an epoch
has summary-epoch 'summary   8 steps in [0-9.]+ s \(1 epoch\)$' -- "$brisk" train good.json --threads 2
has summary-speed 'speed +[0-9]+ samples/s over the run; [0-9.]+ ms/step median, [0-9.]+ p95, [0-9.]+ mean' -- "$brisk" train good.json
has progress-eta 'step 4/8 .*elapsed [0-9.]+ s, ETA [0-9.]+ s' -- "$brisk" train good.json
"$brisk" train good.json --out run --quiet >/dev/null 2>&1 || { echo "FAIL a run with --out"; fail=$((fail + 1)); }
has summary-resumed 'summary   16 steps in [0-9.]+ s \(2 epochs\), 24 in all' -- "$brisk" train good.json --out run --resume auto --epochs 3

# brisk bench: rounds, spread and both CPU rows (or the GPU table)
has bench-rounds 'spread' -- "$brisk" bench good.json --steps 20 --rounds 1
expect bench-rounds-zero "--rounds '0': expected a whole number from 1 to 50" -- "$brisk" bench good.json --rounds 0
expect bench-rounds-text "--rounds '2x': expected a whole number from 1 to 50" -- "$brisk" bench good.json --rounds 2x
expect bench-rounds-big "--rounds '51': expected a whole number" -- "$brisk" bench good.json --rounds 51

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
