#!/usr/bin/env bash
# examples/slurm/cpu-mpirun.sbatch run as SLURM would run it, without SLURM: the job's
# variables set (SLURM_JOB_ID alone of those Open MPI reads as "inside SLURM", so mpirun
# launches the 2 ranks here), a stand-in scontrol that records its arguments, and SIGUSR1 sent
# to the batch shell as --signal=B:USR1 does. The script must forward it to mpirun, see exit
# status 75 and requeue; the requeued job (the script again) must continue from the checkpoint
# and end with 0, not requeueing. The log must call the launcher mpirun, not srun. Then
# examples/slurm/hostfile-mpirun.sh with a hostfile of this one node.
# usage: sbatch_mpirun.sh BRISK WORKDIR SOURCE_DIR
set -u
brisk=$1 work=$2 src=$3
rm -rf "$work" && mkdir -p "$work/bin" && cd "$work" || exit 1
fails=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
printf '#!/bin/sh\necho "$@" >> %s/scontrol.calls\n' "$work" >bin/scontrol && chmod +x bin/scontrol
"$brisk" synth tabular tab.npz --samples 65536 >/dev/null || exit 1
cat >c.json <<'J'
{"model": {"type": "mlp", "inputs": 64, "hidden": [512, 256], "outputs": 3, "task": "classify"},
 "data": {"train": "tab.npz", "validation_fraction": 0.1},
 "train": {"batch_size": 64, "max_steps": 400, "log_every": 1, "checkpoint_epochs": 0, "seed": 0}}
J
# SLURM_STEP_ID: inside a job, mpirun's ranks inherit it from the step that runs its daemons
job=(env PATH="$work/bin:$PATH" SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_JOB_NAME=t SLURM_SUBMIT_DIR="$work"
  SLURM_NTASKS=2 SLURM_NTASKS_PER_NODE=2 SLURM_CPUS_PER_TASK=1 BRISK_BUILD="$(dirname "$brisk")" CONFIG=c.json
  RUN=run MPIRUN_FLAGS="--allow-run-as-root --oversubscribe" OMPI_MCA_btl_vader_single_copy_mechanism=none
  bash "$src/examples/slurm/cpu-mpirun.sbatch")
"${job[@]}" >first.log 2>&1 & # env execs bash: $! is the batch shell
shell=$!
for _ in $(seq 600); do grep -q "step 20/" first.log 2>/dev/null && break; sleep 0.1; done
kill -USR1 $shell # what --signal=B:USR1@120 does
wait $shell; rc=$?
[ $rc = 75 ] && ok "the batch script exits 75 after SIGUSR1" || { fail "exit $rc"; tail -20 first.log; }
grep -q "requeue 4242" scontrol.calls 2>/dev/null && ok "it requeued the job: scontrol $(cat scontrol.calls)" \
  || fail "no scontrol requeue"
line=$(grep -o "stopped by SIGUSR1 after step [0-9]* on every rank.*written" first.log)
[ -n "$line" ] && ok "$line" || { fail "no stop line"; tail -20 first.log; }
grep -q "dist      rank 0 of 2 (MPI (mpirun))" first.log && ok "the launcher is named mpirun inside the SLURM job" \
  || fail "launcher: $(grep -o 'rank 0 of 2 ([^;]*' first.log)"
step=$(echo "$line" | grep -o 'after step [0-9]*' | grep -o '[0-9]*$')
rm scontrol.calls
"${job[@]}" >second.log 2>&1; rc=$?
[ $rc = 0 ] && grep -q "resume    run/.*: step ${step:-x}," second.log && ok "the requeued job resumed at step $step and ended (exit 0)" \
  || { fail "requeued job: exit $rc"; tail -20 second.log; }
[ ! -e scontrol.calls ] && ok "and did not requeue" || fail "the finished job requeued: $(cat scontrol.calls)"
# examples/slurm/hostfile-mpirun.sh, on this one node: a hostfile of it, 2 ranks of 1 core
echo "localhost slots=2" >hosts
env HOSTS=hosts NODES=1 PER_NODE=2 CORES=1 BRISK_BUILD="$(dirname "$brisk")" CONFIG=c.json RUN=hf \
  MPIRUN_FLAGS="--allow-run-as-root --oversubscribe" bash "$src/examples/slurm/hostfile-mpirun.sh" --max-steps 30 \
  >hostfile.log 2>&1; rc=$?
[ $rc = 0 ] && grep -q "dist      rank 0 of 2 (MPI (mpirun))" hostfile.log && [ -e hf/last.safetensors ] \
  && ok "hostfile-mpirun.sh: 2 ranks trained 30 steps (exit 0)" || { fail "hostfile-mpirun.sh: exit $rc"; tail -20 hostfile.log; }
[ $fails = 0 ] && echo "PASS sbatch" || echo "FAIL sbatch: $fails"
[ $fails = 0 ]
