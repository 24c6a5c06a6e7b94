#!/bin/bash
# brisk train, data parallel over several CPU nodes without a batch system: Open MPI's mpirun
# with a hostfile. The file names each node and how many ranks it takes:
#   node01 slots=8
#   node02 slots=8
# NODES x PER_NODE ranks: --map-by ppr:PER_NODE:node:PE=CORES puts PER_NODE ranks on each node
# with CORES cores apiece, --bind-to core keeps each rank and its OpenMP threads on its own cores,
# and -x hands OMP_NUM_THREADS (= CORES: brisk's thread count) to every rank. The run directory
# must be on a filesystem every node sees (rank 0 writes it; the others read it to resume).
#
# Stop it with `kill -USR1 <mpirun's pid>`: mpirun forwards SIGUSR1 to every rank, which stop at
# the same step with rank 0's checkpoint and exit 75, and so does mpirun. Not SIGTERM or Ctrl-C:
# mpirun kills the ranks 2 s after them and exits 1. Continue with the same command (--resume
# auto), also with another number of nodes.
#   usage: HOSTS=hosts NODES=2 PER_NODE=8 CORES=8 examples/slurm/hostfile-mpirun.sh [brisk train options]
set -uo pipefail
HOSTS=${HOSTS:-hosts}
NODES=${NODES:-2}
PER_NODE=${PER_NODE:-8}
CORES=${CORES:-8}
BRISK_BUILD=${BRISK_BUILD:-build}
CONFIG=${CONFIG:-examples/tabular.json}
RUN=${RUN:-runs/cpu-ddp}
MPIRUN_FLAGS=${MPIRUN_FLAGS:-} # more mpirun options (in a container as root: --allow-run-as-root)
export OMP_NUM_THREADS=$CORES
# shellcheck disable=SC2086 # MPIRUN_FLAGS: words
exec mpirun --hostfile "$HOSTS" -np $((NODES * PER_NODE)) --map-by "ppr:$PER_NODE:node:PE=$CORES" --bind-to core \
  -x OMP_NUM_THREADS $MPIRUN_FLAGS "$BRISK_BUILD/brisk" train "$CONFIG" --device cpu --out "$RUN" --resume auto "$@"
