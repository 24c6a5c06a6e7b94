#!/usr/bin/env bash
# A run that does not begin leaves the run directory's record as it was: refused because the
# directory holds a previous run (no --resume, no --overwrite), or because another trainer
# holds it, brisk train rewrites neither report.html nor metrics.jsonl; a run that begins
# (here one resumed) writes its report as ever.
#   refused_run.sh BRISK_BINARY WORKDIR
set -u
. "$(dirname "$0")/expect.sh"
brisk=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
"$brisk" synth tabular tab.npz --samples 512 >/dev/null || { echo "synth failed"; exit 1; }
cat > run.json <<'J'
{"model": {"type": "mlp", "inputs": 64, "hidden": [16], "outputs": 3},
 "data": {"train": "tab.npz", "validation_fraction": 0.25},
 "train": {"batch_size": 32, "epochs": 2, "out_dir": "run"}, "speed": {"threads": 1}}
J
"$brisk" train run.json --quiet >/dev/null && [ -s run/report.html ] || { echo "the first run failed"; exit 1; }
# the previous run's page, marked, so that any rewrite shows
echo '<!-- the previous run -->' >> run/report.html
cp run/report.html report.before && cp run/metrics.jsonl metrics.before
untouched() { # untouched NAME: report.html and metrics.jsonl as they were
  if cmp -s run/report.html report.before && cmp -s run/metrics.jsonl metrics.before; then ok "$1"
  else bad "$1: $(cmp run/report.html report.before 2>&1; cmp run/metrics.jsonl metrics.before 2>&1)"; fi
}

# a previous run there: refused, nothing rewritten, no report line
out=$("$brisk" train run.json 2>&1); rc=$?
[ $rc -eq 1 ] && printf '%s' "$out" | grep -q 'run holds a previous run' && ! printf '%s' "$out" | grep -q 'report ' &&
  ok refused-previous-run || bad "refused-previous-run (exit $rc): $out"
untouched previous-run-untouched

# the directory in use by another trainer (a resumed run, going on): refused, nothing rewritten
"$brisk" train run.json --resume auto --epochs 100000 --quiet >busy.txt 2>&1 &
busy=$!
for _ in $(seq 1 300); do # until the resumed run has begun (its run_start is the second)
  [ "$(grep -c '"event":"run_start"' run/metrics.jsonl)" -ge 2 ] && break
  sleep 0.1
done
grep -c '"event":"run_start"' run/metrics.jsonl | grep -qx 2 || bad "the resumed run did not begin: $(cat busy.txt)"
head -n "$(wc -l < metrics.before)" run/metrics.jsonl | cmp -s - metrics.before || bad "the resumed run rewrote the old lines"
out=$("$brisk" train run.json 2>&1); rc=$?
[ $rc -eq 1 ] && printf '%s' "$out" | grep -q 'in use by another trainer' && ! printf '%s' "$out" | grep -q 'report ' &&
  ok refused-in-use || bad "refused-in-use (exit $rc): $out"
cmp -s run/report.html report.before && ok in-use-report-untouched || bad in-use-report-untouched
kill -TERM $busy
wait $busy; rc=$?
# the resumed run began: stopped by the signal (75), it writes its own report
[ $rc -eq 75 ] && grep -q 'report            run/report.html' busy.txt && ! cmp -s run/report.html report.before &&
  ok begun-run-writes-report || bad "begun-run-writes-report (exit $rc): $(tail -3 busy.txt)"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
