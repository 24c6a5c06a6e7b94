#!/usr/bin/env bash
# brisk train under mpirun -np 2 with ranks that disagree, one case per MODE. Each must end
# before any step, on every rank, with exit status 1 (mpirun's), within seconds (not the
# collective timeout), and one error line per rank naming the key, both ranks and both values:
#   seed    --seed 7 on rank 1
#   lr      --lr 0.002 on rank 1
#   data    another data file on rank 1 (the same shape, other values)
#   batch   --batch-size 64 on rank 1; then --batch-size auto under another --memory-limit
#   out     a node-local run directory (each rank in its own working directory, the same --out):
#           rank 0 would resume at step 10, rank 1 start afresh; rank 0's checkpoint untouched
#   model   another model.hidden on rank 1 (it overflowed the gradient buffer; under ASan clean)
# usage: disagree_mpi.sh MODE BRISK WORKDIR SOURCE_DIR MPIRUN...
set -u
mode=$1 brisk=$2 work=$3 src=$4
shift 4
mpirun=("$@")
rm -rf "$work" && mkdir -p "$work/data" && cd "$work" || exit 1
fails=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
tab="$src/examples/tabular.json"
"$brisk" synth tabular data/tabular.npz --samples 4096 >/dev/null || exit 1
common=(--device cpu --threads 1 --quiet --max-steps 20 --dist-timeout 60 --set "data.train=$work/data/tabular.npz")

# pair "RANK 1'S EXTRA ARGUMENTS" ARGS...: brisk train ARGS on both ranks, rank 1 with the extra
# words appended, each rank's output in $work/rank<r>.log (mpirun's own in $mode.log); with
# $RANK_DIRS each rank runs in $RANK_DIRS<rank> (a node-local disk)
pair() {
  local extra=$1
  shift
  local t0=$SECONDS
  rm -f "$work"/rank?.log
  timeout -k 5 100 "${mpirun[@]}" bash -c 'r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}} w=$1 b=$2 x=$3; shift 3
    [ -z "${RANK_DIRS:-}" ] || cd "$RANK_DIRS$r" || exit 3
    [ "$r" = 1 ] || x=
    exec "$b" train "$@" $x >"$w/rank$r.log" 2>&1' rank "$work" "$brisk" "$extra" "$tab" "${common[@]}" "$@" \
    >"$mode.log" 2>&1
  rc=$? dt=$((SECONDS - t0))
}

# expect PATTERN: the run failed at once with exit 1 and each rank printed PATTERN (grep -E) once
expect() {
  local n0 n1
  n0=$(grep -cE "$1" rank0.log) n1=$(grep -cE "$1" rank1.log)
  if [ "$rc" = 1 ] && [ "$dt" -le 50 ] && [ "$n0" = 1 ] && [ "$n1" = 1 ]; then
    ok "$mode: exit 1 after ${dt}s, on both ranks: $(grep -m1 -oE "$1" rank0.log)"
  else
    fail "$mode: exit $rc after ${dt}s; rank 0 said /$1/ $n0 times, rank 1 $n1 times"
    tail -n 5 "$mode.log" rank0.log rank1.log
  fi
}

case $mode in
seed)
  pair "--seed 7" --seed 0 --batch-size 128 --out s
  expect "ranks disagree on train\.seed: rank 0 has 0, rank 1 has 7"
  ;;
lr)
  pair "--lr 0.002" --lr 0.001 --batch-size 128 --out l
  expect "ranks disagree on optim\.lr: rank 0 has 0\.001, rank 1 has 0\.002"
  ;;
data)
  "$brisk" synth tabular data/other.npz --samples 4096 --seed 9 >/dev/null || exit 1
  pair "--set data.train=$work/data/other.npz" --batch-size 128 --out d
  expect "ranks disagree on data\.train field x: rank 0 has f32 \[4096, 64\], crc32 [0-9a-f]{8} of all 1048576 bytes \([^)]*/tabular\.npz\), rank 1 has f32 \[4096, 64\], crc32 [0-9a-f]{8} of all 1048576 bytes \([^)]*/other\.npz\)"
  ;;
batch)
  pair "--batch-size 64" --batch-size 128 --out b
  expect "ranks disagree on train\.batch_size: rank 0 has 128, rank 1 has 64"
  pair "--memory-limit 24MiB" --batch-size auto --memory-limit 1GiB --out b # 3686 and 1444 here
  expect "ranks disagree on train\.batch_size: rank 0 has [0-9]+ \(auto\), rank 1 has [0-9]+ \(auto\)"
  ;;
out)
  mkdir -p n0 n1
  "$brisk" train "$tab" "${common[@]}" --max-steps 10 --batch-size 256 --out n0/run >/dev/null 2>&1 || exit 1
  before=$(cksum <n0/run/last.safetensors)
  RANK_DIRS=$work/n pair "" --batch-size 128 --out run --resume auto
  expect "ranks disagree on the training position: rank 0 has step 10, epoch 1, sample 2560 of its order, 2560 samples seen \(resumed from run/last\.safetensors\), rank 1 has step 0, epoch 1, sample 0 of its order, 0 samples seen \(a new run\)"
  [ "$(cksum <n0/run/last.safetensors)" = "$before" ] && [ ! -e n1/run/last.safetensors ] \
    && ok "out: no checkpoint written or changed" || fail "out: a checkpoint was written"
  ;;
model)
  # a small arena, one bucket: the previous code's all-reduce wrote 17,804 bytes into rank 0's
  # 17,472-byte gradient arena here (ASan), or MPI failed with MPI_ERR_TRUNCATE, by timing
  pair "--set model.hidden=[65]" --batch-size 64 --out m --set "model.hidden=[64]" --set dist.overlap=off
  expect "ranks disagree on model\.hidden: rank 0 has \[64\], rank 1 has \[65\]"
  ! grep -q "AddressSanitizer" "$mode.log" rank0.log rank1.log && ok "model: no sanitizer report" || fail "model: a sanitizer report"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
[ $fails = 0 ] && echo "PASS $mode" || echo "FAIL $mode: $fails"
[ $fails = 0 ]
