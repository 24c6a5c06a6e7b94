#!/usr/bin/env bash
# brisk train under mpirun -np 2 (CPU, MPI), one part per MODE:
#   equal   2 ranks of batch B = 1 process of batch 2B (losses over 50 steps, final weights),
#           for tabular and diffusion; --deterministic 2-rank runs bit-identical; ZeRO-1
#           (--shard-optimizer) = the replicated optimizer
#   resume  a 2-rank checkpoint continued by 1 process, and the reverse, = 1 process throughout
#   fault   one rank stopped (SIGSTOP) mid-run: the other fails within dist.timeout_s naming
#           it, writes the last completed step's checkpoint, and that checkpoint resumes; an
#           error on one rank ends the job, labelled with the rank; a rank stuck before MPI_Init
#           is reported after dist.timeout_s by the others
#   signal  SIGUSR1 to rank 1 only: both ranks stop after the same step, checkpoint, exit 75
#   launcher SIGUSR1 and SIGTERM to mpirun itself, with steps of seconds: the step in progress cut
#           short on both ranks, the checkpoint of the step before written; exit 75 (USR1), 1 (TERM)
#   shard   data.shard_files: each rank loads half the rows (npz, csv), an epoch covers every row
#           once across the ranks (BRISK_DEBUG_SAMPLES), it converges, resuming on 1 rank refused;
#           --dist-plan 2 states the plan the 2-rank run's summary reports
#   overlap the all-reduce overlapped with backward (dist.overlap on) = after it (off), bit for
#           bit: tabular with dropout and small buckets, diffusion with accumulation
# usage: train_mpi.sh MODE BRISK WEIGHTS_DIFF WORKDIR SOURCE_DIR MPIRUN...
set -u
mode=$1 brisk=$2 wdiff=$3 work=$4 src=$5
shift 5
mpirun=("$@")
py=${PYTHON:-python3}
command -v "$py" >/dev/null || { echo "SKIP: no $py (tools/gpu/compare_losses.py)"; exit 77; }
cmp_losses() { "$py" "$src/tools/gpu/compare_losses.py" "$@"; }
# The CPU's GEMM kernel by the compiled rule, not timed per shape: 2 ranks x B and 1 x 2B run
# GEMMs of different shapes, and the timed choice (cached per shape in cpu-gemm-choice.txt) can
# give them kernels that sum in another order, 3e-4 apart after 50 steps on some builds, where
# the comparisons below hold 1e-5
export BRISK_CPU_GEMM=fixed
rm -rf "$work" && mkdir -p "$work/data" && cd "$work" || exit 1
fails=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
# check LABEL COMMAND...: the command's one-line verdict, pass or fail
check() { local label=$1 out; shift; if out=$("$@" 2>&1); then ok "$label: $out"; else fail "$label: $out"; fi; }
tab="$src/examples/tabular.json" dif="$src/examples/diffusion.json"
one() { "$brisk" train "$@" --device cpu --threads 1 --log-every 1 --quiet; }
two() { "${mpirun[@]}" "$brisk" train "$@" --device cpu --threads 1 --log-every 1 --quiet; }
# the rank-1 process of the 2-rank run writing into run directory $1
rank1_pid() {
  local p
  for p in $(pgrep -f "brisk train .*--out $1( |$)"); do
    tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && { echo "$p"; return; }
  done
}

case $mode in
equal)
  "$brisk" synth tabular data/tabular.npz --samples 8192 >/dev/null || exit 1
  "$brisk" synth diffusion data/diffusion.npz --samples 2000 >/dev/null || exit 1
  # tabular without dropout, and diffusion: 1e-5. Tabular with its dropout 0.1 stays within
  # 1e-4: the masks are the same (random ops number a rank's slice as the global batch's), but
  # AdamW's normalised update amplifies the ~1e-7 rounding of the gradients that dropout
  # leaves near zero (measured: 3e-5 at step 50).
  nd="--set model.dropout=0"
  one "$tab" --max-steps 50 --batch-size 256 --out t1 $nd && two "$tab" --max-steps 50 --batch-size 128 --out t2 $nd || exit 1
  check "tabular: 2 ranks x 128 = 1 x 256, losses" cmp_losses t1 t2 --rtol 1e-5 --steps 50
  check "tabular: final weights and moments" "$wdiff" t1/last.safetensors t2/last.safetensors 1e-5
  one "$tab" --max-steps 50 --batch-size 256 --out d1 && two "$tab" --max-steps 50 --batch-size 128 --out d2 || exit 1
  check "tabular with dropout: losses" cmp_losses d1 d2 --rtol 1e-4 --steps 50
  one "$dif" --max-steps 50 --batch-size 32 --out f1 && two "$dif" --max-steps 50 --batch-size 16 --out f2 || exit 1
  check "diffusion: 2 ranks x 16 = 1 x 32, losses" cmp_losses f1 f2 --rtol 1e-5 --steps 50
  check "diffusion: final weights and moments" "$wdiff" f1/last.safetensors f2/last.safetensors 1e-5
  two "$dif" --max-steps 20 --batch-size 16 --out g1 --deterministic && two "$dif" --max-steps 20 --batch-size 16 --out g2 --deterministic || exit 1
  check "diffusion --deterministic, two 2-rank runs: losses" cmp_losses g1 g2 --exact --steps 20
  check "diffusion --deterministic, two 2-rank runs: weights" "$wdiff" g1/last.safetensors g2/last.safetensors 0
  two "$tab" --max-steps 20 --batch-size 128 --out z1 && two "$tab" --max-steps 20 --batch-size 128 --out z2 --shard-optimizer || exit 1
  check "ZeRO-1 = replicated: losses" cmp_losses z1 z2 --exact --steps 20
  check "ZeRO-1 = replicated: weights and moments" "$wdiff" z1/last.safetensors z2/last.safetensors 0
  # both resumed to step 30, each from its own checkpoint (the sharded run's was gathered on
  # rank 0; resuming, each rank takes its shard of the moments back)
  two "$tab" --max-steps 30 --batch-size 128 --out z2 --shard-optimizer --resume auto || exit 1
  two "$tab" --max-steps 30 --batch-size 128 --out z1 --resume auto || exit 1
  check "ZeRO-1 resumed = replicated resumed: losses" cmp_losses z1 z2 --exact --steps 30
  check "ZeRO-1 resumed: weights and moments" "$wdiff" z1/last.safetensors z2/last.safetensors 0
  # with clipping the global norm is summed per shard, then over ranks: equal to rounding
  two "$tab" --max-steps 20 --batch-size 128 --out c1 --clip-norm 1 && two "$tab" --max-steps 20 --batch-size 128 --out c2 --clip-norm 1 --shard-optimizer || exit 1
  check "ZeRO-1 with clipping: losses" cmp_losses c1 c2 --rtol 1e-5 --steps 20
  ;;
resume)
  "$brisk" synth tabular data/tabular.npz --samples 8192 >/dev/null || exit 1
  c=(--set model.dropout=0)
  # 40 steps cross the epoch end at step 28 (7373 training samples, global batch 256)
  one "$tab" "${c[@]}" --max-steps 40 --batch-size 256 --out a || exit 1
  two "$tab" "${c[@]}" --max-steps 20 --batch-size 128 --out b || exit 1
  "$brisk" train "$tab" "${c[@]}" --device cpu --threads 1 --log-every 1 --max-steps 40 --batch-size 256 --out b \
    --resume auto >b.log 2>&1 || { cat b.log; exit 1; }
  check "2 ranks -> 1 process: losses" cmp_losses a b --rtol 1e-5 --steps 40
  grep -q "written by 2 ranks, continued by 1: the sampler continues at sample 5120" b.log \
    && ok "2 -> 1: the report maps the sampler position" || fail "2 -> 1: no mapping line in: $(grep resume b.log)"
  one "$tab" "${c[@]}" --max-steps 20 --batch-size 256 --out r || exit 1
  "${mpirun[@]}" "$brisk" train "$tab" "${c[@]}" --device cpu --threads 1 --log-every 1 --max-steps 40 --batch-size 128 \
    --out r --resume auto >r.log 2>&1 || { cat r.log; exit 1; }
  check "1 process -> 2 ranks: losses" cmp_losses a r --rtol 1e-5 --steps 40
  check "1 process -> 2 ranks: final weights" "$wdiff" a/last.safetensors r/last.safetensors 1e-5
  grep -q "written by 1 rank, continued by 2" r.log && ok "1 -> 2: mapped" || fail "1 -> 2: no mapping line"
  ;;
fault)
  "$brisk" synth tabular data/tabular.npz --samples 8192 >/dev/null || exit 1
  "${mpirun[@]}" "$brisk" train "$tab" --device cpu --threads 1 --quiet --max-steps 100000000 --checkpoint-every 20 \
    --dist-timeout 3 --batch-size 128 --out k >k.log 2>&1 &
  job=$!
  for _ in $(seq 200); do [ -e k/last.safetensors ] && break; sleep 0.1; done
  pid=$(rank1_pid k)
  [ -n "$pid" ] || { kill "$job"; cat k.log; echo "FAIL: no rank 1 process"; exit 1; }
  t0=$(date +%s)
  kill -STOP "$pid"
  wait "$job"; rc=$?
  dt=$(($(date +%s) - t0))
  [ "$rc" != 0 ] && [ "$dt" -le 20 ] && ok "the job failed (exit $rc) ${dt}s after rank 1 stopped (timeout 3 s)" \
    || fail "exit $rc after ${dt}s"
  grep -qE "did not complete within dist.timeout_s = 3 s: rank\(s\) that died or hang: 1( \(it entered[^)]*\))?;" k.log \
    && ok "the message names rank 1: $(grep -m1 'dist.timeout_s' k.log)" || { fail "no message naming rank 1"; cat k.log; }
  grep -q "rank 0 wrote the checkpoint of step" k.log && ok "rank 0 checkpointed the last completed step" \
    || fail "no last checkpoint"
  "$brisk" info k/last.safetensors | grep -q "checksum verified" && ok "the last checkpoint is intact" \
    || fail "the last checkpoint does not verify"
  "$brisk" train "$tab" --device cpu --threads 1 --quiet --batch-size 256 --out k --resume auto --max-steps \
    $(($(grep -o 'checkpoint of step [0-9]*' k.log | grep -o '[0-9]*$') + 2)) >k2.log 2>&1 \
    && ok "it resumes in one process" || { fail "resume failed"; cat k2.log; }
  pkill -KILL -f "brisk train .*--out k( |$)" 2>/dev/null # nothing of the job may outlive the test
  # an error on one rank only (rank 0 refuses the run directory of a previous run): the job
  # ends at once instead of leaving rank 1 waiting for its collective timeout
  t0=$(date +%s)
  "${mpirun[@]}" "$brisk" train "$tab" --device cpu --threads 1 --quiet --max-steps 100000 --out k >k3.log 2>&1; rc=$?
  dt=$(($(date +%s) - t0))
  [ "$rc" != 0 ] && [ "$dt" -le 15 ] && grep -q "k holds a previous run" k3.log \
    && ok "an error on rank 0 alone ends the job (exit $rc, ${dt}s)" || { fail "exit $rc after ${dt}s"; cat k3.log; }
  # an error on rank 1 alone (its data file a FIFO) is labelled with its rank: the ranks share one stderr
  mkfifo fifo.npz
  "${mpirun[@]}" sh -c 'x=; [ "$OMPI_COMM_WORLD_RANK" = 1 ] && x=--set=data.train=fifo.npz; exec "$0" "$@" $x' "$brisk" \
    train "$tab" --device cpu --threads 1 --quiet --max-steps 5 --out k6 >k6.log 2>&1; rc=$?
  [ "$rc" != 0 ] && grep -q "^brisk: rank 1: field 'x': fifo.npz: not a regular file" k6.log \
    && ok "rank 1's error is labelled: $(grep -m1 '^brisk: rank 1' k6.log)" || { fail "rank 1's error: exit $rc"; cat k6.log; }
  "${mpirun[@]}" sh -c 'x=; [ "$OMPI_COMM_WORLD_RANK" = 1 ] && x=--set=data.train=fifo.npz; exec "$0" "$@" $x' "$brisk" \
    train "$tab" --device cpu --threads 1 --quiet --log-format json --max-steps 5 --out k6 >k6j.log 2>&1
  grep -q '^{"time": "[^"]*", "level": "error", "rank": 1, "msg": "field .x.: fifo.npz: not a regular file' k6j.log \
    && ok "--log-format json: the record has \"rank\": 1" || { fail "no JSON record with rank 1"; cat k6j.log; }
  # a rank that never starts MPI_Init (stuck before it) holds up the others' MPI_Init, which
  # cannot time out: after dist.timeout_s a deadline beside it says so and the job ends (on main
  # before this test: no output, no end)
  t0=$(date +%s)
  timeout 60 "${mpirun[@]}" sh -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && sleep 100; exec "$0" "$@"' "$brisk" train "$tab" \
    --device cpu --threads 1 --quiet --max-steps 5 --dist-timeout 3 --out k7 >k7.log 2>&1; rc=$?
  dt=$(($(date +%s) - t0))
  [ "$rc" = 1 ] && [ "$dt" -le 30 ] && grep -q "^brisk: rank 0: MPI_Init did not complete within dist.timeout_s = 3 s" k7.log \
    && ! grep -q "rank 1: MPI_Init" k7.log && ok "a rank stuck before MPI_Init: rank 0 says so after ${dt}s, exit $rc" \
    || { fail "a rank stuck before MPI_Init: exit $rc after ${dt}s"; cat k7.log; }
  "${mpirun[@]}" "$brisk" train "$src/examples/pipeline.json" --device cpu --quiet >k4.log 2>&1; rc=$?
  [ "$rc" != 0 ] && grep -q "a pipeline) trains in one process" k4.log && ok "a pipeline on 2 ranks is refused" \
    || { fail "pipeline on 2 ranks: exit $rc"; cat k4.log; }
  ;;
signal)
  "$brisk" synth tabular data/tabular.npz --samples 8192 >/dev/null || exit 1
  "${mpirun[@]}" "$brisk" train "$tab" --device cpu --threads 1 --max-steps 100000000 --log-every 100000 \
    --batch-size 128 --out s >s.log 2>&1 &
  job=$!
  for _ in $(seq 200); do grep -q "^sampler" s.log 2>/dev/null && break; sleep 0.1; done
  sleep 0.5
  pid=$(rank1_pid s)
  [ -n "$pid" ] || { kill "$job"; cat s.log; echo "FAIL: no rank 1 process"; exit 1; }
  kill -USR1 "$pid"
  wait "$job"; rc=$?
  [ "$rc" = 75 ] && ok "exit 75 after SIGUSR1 on rank 1" || { fail "exit $rc (want 75)"; cat s.log; }
  line=$(grep "stopped by a stop signal on another rank after step [0-9]* on every rank" s.log)
  [ -n "$line" ] && ok "$line" || { fail "no agreed stop line"; cat s.log; }
  step=$(echo "$line" | grep -o 'after step [0-9]*' | grep -o '[0-9]*$')
  "$brisk" info s/last.safetensors | grep -qE "^step +${step:-x}$" && ok "the checkpoint holds step $step" \
    || fail "the checkpoint does not hold step $step"
  ;;
launcher)
  # SIGUSR1 and SIGTERM sent to mpirun itself, as a batch script or a user sends them. Open MPI
  # 4.1 forwards SIGUSR1 to every rank at once. SIGTERM it does not forward: it sends the ranks
  # SIGCONT, SIGTERM 1 s later and SIGKILL 1 s after that (odls_base_sigkill_timeout), and
  # exits 1 whatever the ranks return. Steps here take seconds (120 micro-batches of 128): the
  # stop must cut the step in progress short for rank 0 to write the checkpoint of the one
  # before within that second (on main before this test, it finished the step and was killed
  # first: no checkpoint).
  "$brisk" synth tabular data/tabular.npz --samples 65536 >/dev/null || exit 1
  for sig in USR1 TERM; do
    "${mpirun[@]}" "$brisk" train "$tab" --device cpu --threads 1 --max-steps 1000 --log-every 1 --batch-size 128 \
      --set 'model.hidden=[1024,512]' --set train.accumulate=120 --checkpoint-epochs 0 --out $sig >$sig.log 2>&1 &
    job=$!
    for _ in $(seq 600); do grep -q "step 1/" $sig.log 2>/dev/null && break; sleep 0.1; done
    kill -$sig $job
    wait $job; rc=$?
    want=75 why="brisk's status"
    [ $sig = TERM ] && want=1 why="Open MPI's own status after a SIGTERM"
    [ $rc = $want ] && ok "SIG$sig to mpirun: exit $rc ($why)" || { fail "SIG$sig to mpirun: exit $rc, want $want"; cat $sig.log; }
    line=$(grep "stopped by SIG$sig after step [0-9]* on every rank (step [0-9]*, in progress, was cut short and not applied): checkpoint" $sig.log)
    [ -n "$line" ] && ok "SIG$sig: $line" || { fail "SIG$sig: no stop line cutting the step short"; tail -5 $sig.log; }
    step=$(echo "$line" | grep -o 'after step [0-9]*' | grep -o '[0-9]*$')
    info=$("$brisk" info $sig/last.safetensors 2>&1)
    echo "$info" | grep -qE "^step +${step:-x}$" && echo "$info" | grep -q "checksum verified" \
      && ok "SIG$sig: the checkpoint holds step $step, intact" || fail "SIG$sig: the checkpoint does not hold step $step: $info"
    pkill -KILL -f "brisk train .*--out $sig( |$)" 2>/dev/null # nothing of the job may outlive the test
  done
  ;;
overlap)
  "$brisk" synth tabular data/tabular.npz --samples 8192 >/dev/null || exit 1
  "$brisk" synth diffusion data/diffusion.npz --samples 2000 >/dev/null || exit 1
  on="--set dist.overlap=on" off="--set dist.overlap=off"
  # 0.01 MiB buckets: tabular's 0.75 MiB arena in ~80 pieces, most completed mid-backward
  tb=(--max-steps 30 --batch-size 128 --bucket-mb 0.01)
  "${mpirun[@]}" "$brisk" train "$tab" "${tb[@]}" --device cpu --threads 1 --log-every 1 --out o1 $on >o1.log 2>&1 \
    || { cat o1.log; exit 1; }
  grep -q "overlapped with backward" o1.log && ok "dist.overlap on: the log says the all-reduce overlaps backward" \
    || { fail "no 'overlapped with backward' in the log"; grep dist o1.log; }
  two "$tab" "${tb[@]}" --out o2 $off || exit 1
  check "tabular, overlapped = after backward: losses" cmp_losses o1 o2 --exact --steps 30
  check "tabular, overlapped = after backward: weights and moments" "$wdiff" o1/last.safetensors o2/last.safetensors 0
  # accumulation: only the last micro-batch's backward completes the buckets
  da=(--max-steps 20 --batch-size 8 --set train.accumulate=2)
  two "$dif" "${da[@]}" --out a1 $on && two "$dif" "${da[@]}" --out a2 $off || exit 1
  check "diffusion, accumulate 2, overlapped = after backward: losses" cmp_losses a1 a2 --exact --steps 20
  check "diffusion, accumulate 2, overlapped = after backward: weights" "$wdiff" a1/last.safetensors a2/last.safetensors 0
  # ZeRO-1 keeps the reduce-scatter after backward
  "${mpirun[@]}" "$brisk" train "$tab" --max-steps 2 --batch-size 128 --device cpu --threads 1 --out o3 $on \
    --shard-optimizer >o3.log 2>&1 || { cat o3.log; exit 1; }
  grep -q "after backward (ZeRO-1" o3.log && ok "ZeRO-1: the log says the reduce-scatter runs after backward" \
    || { fail "ZeRO-1 log"; grep dist o3.log; }
  # auto: 3 warm-up steps, then 16 overlapped and 16 after backward in turn; every rank keeps the faster
  "${mpirun[@]}" "$brisk" train "$tab" "${tb[@]}" --max-steps 40 --device cpu --threads 1 --log-every 1 --out o4 \
    >o4.log 2>&1 || { cat o4.log; exit 1; }
  grep -q "whichever the first steps time faster" o4.log && [ "$(grep -c "dist.overlap auto: median of 16 steps each" o4.log)" = 1 ] \
    && ok "dist.overlap auto: timed both ways, one decision: $(grep -o 'all-reduce [a-z ]*: [0-9.]* ms overlapped vs [0-9.]* ms' o4.log)" \
    || { fail "dist.overlap auto log"; grep -i "backward" o4.log; }
  two "$tab" "${tb[@]}" --max-steps 40 --out o5 $off || exit 1
  check "tabular, dist.overlap auto = after backward: losses" cmp_losses o4 o5 --exact --steps 40
  check "tabular, dist.overlap auto = after backward: weights and moments" "$wdiff" o4/last.safetensors o5/last.safetensors 0
  ;;
shard)
  "$brisk" synth tabular data/tabular.npz --samples 8192 >/dev/null || exit 1
  sh=(--set data.shard_files=true)
  # one epoch, no validation split: each rank's 4096 rows in 32 batches of 128, dumped
  BRISK_DEBUG_SAMPLES=$work/e "${mpirun[@]}" "$brisk" train "$tab" "${sh[@]}" --set data.validation_fraction=0 \
    --device cpu --threads 1 --epochs 1 --batch-size 128 --out e >e.log 2>&1 || { cat e.log; exit 1; }
  grep -q "shard_files: rank 0 of 2 loaded rows \[0, 4096) of data/tabular.npz: 4096 of 8192 rows, 1064960 bytes" e.log \
    && ok "rank 0 loaded half the rows: $(grep -o 'loaded rows.*bytes' e.log)" || { fail "no shard log line"; grep data e.log; }
  grep -q "^  data              data.shard_files: each rank loaded 4096 of the 8192 rows" e.log \
    && ok "the run summary says the mode and rows" || fail "summary: no data line"
  grep -q "^sampler   data.shard_files: each rank shuffles its own 4096" e.log && ok "the sampler line says the mode" \
    || fail "sampler line: $(grep ^sampler e.log)"
  [ "$(wc -l <e.rank0)" = 4096 ] && [ "$(wc -l <e.rank1)" = 4096 ] && ok "each rank trained on 4096 samples" \
    || fail "samples per rank: $(wc -l e.rank0 e.rank1 | head -2 | tr '\n' ' ')"
  awk '$2 < 0 || $2 >= 4096 { bad++ } END { exit bad > 0 }' e.rank0 && awk '$2 < 4096 || $2 >= 8192 { bad++ } END { exit bad > 0 }' e.rank1 \
    && ok "rank 0 read only rows [0, 4096), rank 1 only [4096, 8192)" || fail "a rank read outside its rows"
  cat e.rank0 e.rank1 | awk '$1 == 0 { seen[$2]++ } END { for (r = 0; r < 8192; r++) if (seen[r] != 1) bad++; exit bad > 0 }' \
    && ok "epoch 1 covered each of the 8192 rows exactly once across the ranks" || fail "an epoch missed or repeated rows"
  cmp -s <(awk '{print $2}' e.rank0 | head -128 | sort -n) <(awk '{print $2 - 4096}' e.rank1 | head -128 | sort -n) \
    && ok "both ranks shuffle with the same seed (first batches: the same local rows)" || fail "the ranks' orders differ"
  # trains: 3 epochs with a split per rank, the validation metrics averaged over the ranks
  "${mpirun[@]}" "$brisk" train "$tab" "${sh[@]}" --device cpu --threads 1 --epochs 3 --batch-size 128 --out w \
    >w.log 2>&1 || { cat w.log; exit 1; }
  l1=$(grep -o "epoch 1 done  train loss [0-9.]*" w.log | grep -o '[0-9.]*$') l3=$(grep -o "epoch 3 done  train loss [0-9.]*" w.log | grep -o '[0-9.]*$')
  acc=$(grep -o "epoch 3 done.*val accuracy [0-9.]*" w.log | grep -o '[0-9.]*$')
  awk -v a="$l1" -v b="$l3" -v c="$acc" 'BEGIN { exit !(b < 0.8 * a && c > 0.7) }' \
    && ok "it converges: train loss $l1 -> $l3, val accuracy $acc (3 classes)" || { fail "no convergence: $l1 -> $l3, $acc"; cat w.log; }
  # --dist-plan 2 states the plan this 2-rank run's summary reports (one computation)
  sum=$(grep -o "gradients [0-9.]* MiB in [0-9]* buckets a step, [0-9.]* MiB moved per rank" w.log)
  pl=$("$brisk" train "$tab" --device cpu --quiet --dist-plan 2 2>&1)
  nb=$(echo "$pl" | grep -o "buckets *[0-9]*" | grep -o "[0-9]*$")
  mib=$(echo "$pl" | grep -o "ring traffic .*(\([0-9.]*\) MiB)" | grep -o "[0-9.]* MiB" | head -1)
  [ -n "$sum" ] && [ -n "$nb" ] && echo "$sum" | grep -q " in $nb buckets a step" \
    && [ "$(printf '%.2f' "${mib% MiB}")" = "$(echo "$sum" | grep -o '[0-9.]* MiB moved' | grep -o '^[0-9.]*')" ] \
    && ok "--dist-plan 2 = the run's summary: $sum" || fail "--dist-plan 2: '$pl' vs the summary '$sum'"
  # resuming: the same world size continues, another is refused, naming why
  "${mpirun[@]}" "$brisk" train "$tab" "${sh[@]}" --device cpu --threads 1 --epochs 4 --batch-size 128 --out w \
    --resume auto >w2.log 2>&1 && grep -q "epoch 4 done" w2.log && ok "2 ranks resume a 2-rank run" || { fail "resume"; cat w2.log; }
  "$brisk" train "$tab" "${sh[@]}" --device cpu --threads 1 --epochs 5 --batch-size 128 --out w --resume auto >w3.log 2>&1
  grep -q "written by 2 ranks with data.shard_files .*continued by 1 rank (where data.shard_files shards nothing)" w3.log \
    && ok "1 process refuses it: $(grep -o 'continued by.*' w3.log)" || { fail "2 -> 1 not refused"; cat w3.log; }
  # without data.shard_files the checkpoint's place (in each rank's own rows) would be read as
  # one in the order over all rows: refused on 2 ranks and on 1 (it used to continue, repeating
  # and skipping rows)
  "${mpirun[@]}" "$brisk" train "$tab" --device cpu --threads 1 --epochs 5 --batch-size 128 --out w --resume auto \
    >w4.log 2>&1; rc=$?
  [ $rc = 1 ] && [ "$(grep -c "written by 2 ranks with data.shard_files .*continued by 2 ranks without data.shard_files" w4.log)" = 2 ] \
    && ok "2 ranks without data.shard_files refuse it, each saying why (exit $rc)" || { fail "2 -> 2 unsharded: exit $rc"; cat w4.log; }
  "$brisk" train "$tab" --device cpu --threads 1 --epochs 5 --batch-size 128 --out w --resume auto >w5.log 2>&1; rc=$?
  [ $rc = 1 ] && grep -q "continued by 1 rank without data.shard_files: it would continue at another place" w5.log \
    && ok "1 process without data.shard_files refuses it" || { fail "2 -> 1 unsharded: exit $rc"; cat w5.log; }
  # and the other way: a 2-rank checkpoint of one order continued with data.shard_files
  two "$tab" --max-steps 5 --batch-size 128 --out u || exit 1
  "${mpirun[@]}" "$brisk" train "$tab" "${sh[@]}" --device cpu --threads 1 --max-steps 10 --batch-size 128 --out u \
    --resume auto >u.log 2>&1; rc=$?
  [ $rc = 1 ] && grep -q "written by 2 ranks without data.shard_files .*continued by 2 with data.shard_files" u.log \
    && ok "an unsharded checkpoint continued with data.shard_files is refused" || { fail "unsharded -> sharded: exit $rc"; cat u.log; }
  # one process: the key changes nothing
  one "$tab" --max-steps 10 --batch-size 128 --out p1 && one "$tab" "${sh[@]}" --max-steps 10 --batch-size 128 --out p2 || exit 1
  check "1 process, data.shard_files on = off: losses" cmp_losses p1 p2 --exact --steps 10
  # CSV, 2001 rows: 1000 a rank, the last row dropped, and said so
  awk 'BEGIN { s = 7; print "a,b,y"; for (i = 0; i < 2001; i++) { s = (s * 69069 + 1) % 4294967296; a = s / 4294967296;
       s = (s * 69069 + 1) % 4294967296; b = s / 4294967296; printf "%.6f,%.6f,%d\n", a, b, (a + b > 1) } }' >data/t.csv
  cat >c.json <<'J'
{"model": {"type": "mlp", "inputs": 2, "hidden": [16], "outputs": 2, "activation": "relu", "task": "classify"},
 "data": {"train": "data/t.csv", "fields": {"x": ["a", "b"], "y": "y"}, "validation_fraction": 0, "shard_files": true},
 "optim": {"type": "adamw", "lr": 1e-2}, "train": {"batch_size": 50, "epochs": 1, "seed": 0}}
J
  BRISK_DEBUG_SAMPLES=$work/c "${mpirun[@]}" "$brisk" train c.json --device cpu --threads 1 --out c >c.log 2>&1 || { cat c.log; exit 1; }
  grep -q "rank 0 of 2 loaded rows \[0, 1000) of data/t.csv: 1000 of 2001 rows.*the last 1 rows" c.log \
    && ok "CSV: rank 0 loaded 1000 of 2001 rows, the last one dropped" || { fail "CSV log"; grep data c.log; }
  cat c.rank0 c.rank1 | awk '{ seen[$2]++ } END { for (r = 0; r < 2000; r++) if (seen[r] != 1) bad++; exit bad > 0 || length(seen) != 2000 }' \
    && ok "CSV: the epoch covered rows 0..1999 exactly once" || fail "CSV: rows missed or repeated"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
[ $fails = 0 ] && echo "PASS $mode" || echo "FAIL $mode: $fails"
[ $fails = 0 ]
