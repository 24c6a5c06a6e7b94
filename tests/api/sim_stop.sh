#!/usr/bin/env bash
# A simulation stopped by SIGTERM mid-training, as a batch system stops a job: every rank gets
# the signal while inside brisk_train_epochs; each train call must return BRISK_STOPPED with a
# checkpoint, all ranks must stop after the same model step and exit 75, and a rerun must
# resume from what they saved.
#   sim_stop.sh WORKDIR RANKS COMMAND...   (COMMAND: sim, or mpirun -np 2 ... sim_mpi)
set -u
work=$1 ranks=$2
shift 2
rm -rf "$work" && mkdir -p "$work"
out=$work/stop.txt
"$@" "$work" stop >"$out" 2>&1 &
pid=$!
fail() { echo "FAIL: $*"; echo "--- output:"; cat "$out"; kill -KILL "$pid" 2>/dev/null; exit 1; }

# every rank announces the long train call it is about to make
for _ in $(seq 600); do
  [ "$(grep -c 'long training' "$out")" -ge "$ranks" ] && break
  kill -0 "$pid" 2>/dev/null || fail "exited before the long training"
  sleep 0.1
done
[ "$(grep -c 'long training' "$out")" -ge "$ranks" ] || fail "no long training after 60 s"
sleep 0.2 # into the call
for r in $(seq 0 $((ranks - 1))); do kill -TERM "$(cat "$work/rank$r.pid")" || fail "cannot signal rank $r"; done
for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "still running 60 s after SIGTERM"
wait "$pid"
rc=$?
cat "$out"
[ "$rc" -eq 75 ] || fail "exit status $rc, expected 75"
for r in $(seq 0 $((ranks - 1))); do
  grep -q "rank $r: BRISK_STOPPED: train_epochs: stopped by SIGTERM after step" "$out" ||
    fail "rank $r: no BRISK_STOPPED from the train call"
  grep -q "rank $r: stopped after model step 240" "$out" || fail "rank $r did not stop after model step 240"
  for f in last.safetensors model.safetensors sim_state.txt; do
    [ -s "$work/rank$r/$f" ] || fail "rank $r: no $f"
  done
done

# the rerun continues from the saved state to the end
out=$work/resume.txt
"$@" "$work" resume >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" -eq 0 ] || fail "the resumed run exited with $rc"
for r in $(seq 0 $((ranks - 1))); do
  grep -q "rank $r: resumed after model step 240" "$out" || fail "rank $r did not resume after step 240"
  grep -q "rank $r: .* train calls" "$out" || fail "rank $r did not finish"
done
echo "ok: $ranks rank(s) stopped after model step 240 with checkpoints, and resumed"
