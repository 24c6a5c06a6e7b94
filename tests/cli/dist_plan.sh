#!/usr/bin/env bash
# brisk train --dist-plan N: the gradient all-reduce's plan at N ranks without a process group
# (tabular: 197,891 parameters = 791,564 gradient bytes; a ring sends 2 (N-1)/N of them per
# rank), the bucket count following dist.bucket_mb, and a bad N refused as a usage error.
# dist.train_mpi_shard checks that a 2-rank run's summary states the same plan.
#   dist_plan.sh BRISK_BINARY WORKDIR SOURCE_DIR
set -u
brisk=$1 work=$2 src=$3
rm -rf "$work" && mkdir -p "$work/data" && cd "$work" || exit 1
"$brisk" synth tabular data/tabular.npz --samples 1024 >/dev/null || exit 1 # the trainer is built on its data
fails=0
expect() { if echo "$2" | grep -qE "$3"; then echo "ok   $1"; else echo "FAIL $1: want /$3/ in:"; echo "$2"; fails=$((fails + 1)); fi; }
plan() { "$brisk" train "$src/examples/tabular.json" --device cpu --quiet --dist-plan "$@" 2>&1; }
out=$(plan 4)
expect "gradient bytes" "$out" "gradients +791564 bytes"
expect "ring traffic at 4 ranks: 1.5 x the gradients" "$out" "ring traffic +1187346 bytes"
expect "default buckets of 64 KiB" "$out" "buckets +15 of >= 65536 bytes"
expect "a collective per bucket" "$out" "collectives +15 a step"
out=$(plan 2 --bucket-mb 1)
expect "1 MiB buckets: one bucket" "$out" "buckets +1 of >= 1048576 bytes.*largest 791564 bytes"
expect "ring traffic at 2 ranks: the gradients" "$out" "ring traffic +791564 bytes"
out=$(plan 1)
expect "alone: no collective, no traffic" "$out" "collectives +0 a step.*"
expect "alone: no ring traffic" "$out" "ring traffic +0 bytes"
[ "$(ls)" = data ] && echo "ok   no run directory written" || { echo "FAIL files written: $(ls)"; fails=$((fails + 1)); }
plan 0 >/dev/null; rc=$?
[ $rc = 2 ] && echo "ok   --dist-plan 0 is a usage error" || { echo "FAIL --dist-plan 0: exit $rc"; fails=$((fails + 1)); }
[ $fails = 0 ] && echo PASS || echo "FAIL: $fails"
[ $fails = 0 ]
