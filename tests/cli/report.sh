#!/usr/bin/env bash
# The HTML reports end to end. `brisk train` writes RUN/report.html at the end of a run and
# `brisk report RUN` writes it again; a run with NaN losses and a single step still gives a
# page; a damaged line is left out with a warning; missing files give one error naming the file. With SCREENSHOT=1 (the
# cli.report_screenshot test) headless Chromium opens each page and check_report_png.py
# checks that every chart rendered; without Chromium that test is skipped (exit 77).
#   report.sh BRISK WORKDIR SOURCE_DIR [screenshot]
set -u
. "$(dirname "$0")/expect.sh"
brisk=$1 work=$2 src=$3 mode=${4:-}
py=/usr/bin/python3
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ "$mode" = screenshot ] && [ -z "$chromium" ]; then
  echo "skipped: no chromium (Debian package chromium; tools/install-deps.sh --test installs it)"; exit 77
fi
if [ "$mode" = screenshot ] && ! $py -c 'import numpy' 2>/dev/null; then echo "skipped: no numpy for $py"; exit 77; fi
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

# a real run: 4 epochs with validation, a progress line every step
"$brisk" synth tabular tab.npz --samples 512 >/dev/null || { echo "synth failed"; exit 1; }
cat > run.json <<'J'
{"model": {"type": "mlp", "inputs": 64, "hidden": [32], "outputs": 3},
 "data": {"train": "tab.npz", "validation_fraction": 0.25},
 "optim": {"lr": 3e-3, "schedule": {"type": "cosine", "warmup_steps": 4}},
 "train": {"batch_size": 32, "epochs": 4, "log_every": 1, "out_dir": "run"}, "speed": {"threads": 2}}
J
out=$("$brisk" train run.json 2>&1) || { echo "train failed: $out"; exit 1; }
printf '%s\n' "$out" | grep -q "report            run/report.html" && [ -s run/report.html ] && ok train-writes-report ||
  bad "train-writes-report: $(printf '%s\n' "$out" | tail -3)"
grep -q '"event":"run_end"' run/metrics.jsonl && grep -q '"optimizations"' run/metrics.jsonl && ok metrics-records ||
  bad metrics-records
# the time outside the steps, by what it went to: 4 epochs wrote last (and best) each, validated each
printf '%s\n' "$out" | grep -qE "other [0-9.]+ s: checkpoints [0-9.]+ s \(([5-9]|[1-9][0-9]) written\), validation [0-9.]+ s" &&
  grep -qE '"checkpoint_s":[0-9.e-]+,"validation_s":[0-9.e-]+,"checkpoints":([5-9]|[1-9][0-9])' run/metrics.jsonl &&
  ok time-outside-steps || bad "time-outside-steps: $(printf '%s\n' "$out" | grep '  time ')"
rm run/report.html
"$brisk" report run > out.txt 2>&1 && grep -q "run/report.html" out.txt && [ -s run/report.html ] && ok report-command ||
  bad "report-command: $(cat out.txt)"
"$brisk" report run --output other.html >/dev/null 2>&1 && cmp -s other.html run/report.html && ok report-output ||
  bad report-output
# outputs as every brisk command writes them: - is stdout, a device in place, a directory refused
"$brisk" report run --output - > stdout.html 2>/dev/null && head -1 stdout.html | grep -q '<!DOCTYPE html>' &&
  ! grep -q '^report ' stdout.html && ok output-stdout || bad output-stdout
ln -s /dev/null devnull
"$brisk" report run --output devnull >/dev/null 2>&1 && [ -L devnull ] && [ -c /dev/null ] && ok output-device ||
  bad output-device
mkdir -p adir
expect output-directory 'adir: exists and is a directory' -- "$brisk" report run --output adir
grep -q '<script' run/report.html && bad "report has a script" || ok no-script
[ "$(grep -o 'http[s]*://[^"]*' run/report.html | sort -u)" = "http://www.w3.org/2000/svg" ] && ok no-network ||
  bad "no-network: $(grep -o 'http[s]*://[^"]*' run/report.html | sort -u | head -3)"
grep -q '>checkpoints<' run/report.html && grep -q '>validation<' run/report.html && ok time-chart-split ||
  bad time-chart-split
grep -q 'id="optimizations"' run/report.html && grep -q 'class="off">off' run/report.html && ok optimization-table ||
  bad optimization-table

# a run that diverges: stopped by the NaN loss (exit 1), its report written all the same; and
# with train.skip_nan_steps, a run whose every step after the first is skipped (loss null)
sed 's/"lr": 3e-3, "schedule": {"type": "cosine", "warmup_steps": 4}/"type": "sgd", "lr": 1e30/; s/"out_dir": "run"/"out_dir": "diverged"/' run.json > diverged.json
"$brisk" train diverged.json > diverged.txt 2>&1; rc=$?
[ $rc = 1 ] && grep -q "the training loss is NaN" diverged.txt && grep -q "report            diverged/report.html" diverged.txt &&
  [ -s diverged/report.html ] && ok diverged-run-report || bad "diverged-run-report (exit $rc): $(tail -2 diverged.txt)"
"$brisk" train diverged.json --overwrite --set train.skip_nan_steps=1000 > skipped.txt 2>&1 &&
  [ "$(grep -c '"loss": null' diverged/metrics.jsonl)" -gt 10 ] && grep -q 'id="loss"' diverged/report.html &&
  ok skipped-nan-steps-report || bad "skipped-nan-steps-report: $(tail -2 skipped.txt)"

# a pipeline: the comparison page, each model's report linked and written
cat > pipe.json <<'J'
{"models": [{"name": "small", "type": "mlp", "inputs": 64, "hidden": [8], "outputs": 3},
            {"name": "wide", "type": "mlp", "inputs": 64, "hidden": [64, 64], "outputs": 3}],
 "data": {"train": "tab.npz", "validation_fraction": 0.25},
 "train": {"batch_size": 32, "epochs": 2, "log_every": 2, "out_dir": "pipe"}, "speed": {"threads": 2}}
J
"$brisk" train pipe.json --quiet >/dev/null 2>&1 && [ -s pipe/report.html ] && [ -s pipe/small/report.html ] &&
  [ -s pipe/wide/report.html ] && grep -q 'href="wide/report.html"' pipe/report.html && ok pipeline-report ||
  bad pipeline-report

# brisk bench: the ablation table as a page (CPU rows here)
"$brisk" bench run.json --steps 20 --rounds 1 --report bench.html > bench.txt 2>&1 && grep -q "report    bench.html" bench.txt &&
  grep -q 'id="ms_per_step"' bench.html && grep -q "CPU, 1 thread" bench.html && ok bench-report ||
  bad "bench-report: $(tail -3 bench.txt)"

# every loss NaN, a single step (hand-written, as a diverged GPU run leaves it)
mkdir -p nan
cat > nan/metrics.jsonl <<'J'
{"event":"run_start","time":"2026-11-27T10:00:00Z","step":0,"optimizations":[{"name":"loader prefetch","state":"off","detail":"speed.prefetch is 0"}]}
{"step": 1, "epoch": 0, "loss": null, "lr": 0.001, "ms_per_step": 4.5, "data_ms": 1.5, "copy_ms": 0, "samples_per_s": 7000, "mem_mib": 3}
{"epoch": 1, "step": 1, "train_loss": null, "val_loss": null}
{"event":"run_end","steps":1,"steps_run":1,"wall_s":0.02,"data_wait_s":0.0015,"copy_s":0,"compute_s":0.003,"samples_per_s":7000,"ms_per_step_median":4.5,"final_loss":null,"best_val_loss":null,"params":99,"arena_bytes":1048576,"state_bytes":4096,"total_bytes":1052672,"device_mem_used":2097152}
J
"$brisk" report nan >/dev/null 2>&1 && grep -q "no finite loss logged" nan/report.html && ok nan-single-step ||
  bad nan-single-step
# a GPU run's memory (device_mem_used, mem_mib per progress line): the device's bars too
grep -q "device in use, highest logged" nan/report.html && grep -q "3 MiB" nan/report.html && ok device-memory ||
  bad device-memory

# a damaged line (cut by a failed write) is left out with a warning naming it; the rest is read
mkdir -p bad && printf '{"step": 1, "loss": 1}\n{"step": 2, "lo\n{"step": 3, "loss": 1}\n' > bad/metrics.jsonl
out=$("$brisk" report bad 2>&1) && printf '%s' "$out" | grep -q 'bad/metrics.jsonl: 1 damaged line left out of the report (the first, line 2: not a JSON object' &&
  grep -q '1 damaged line of metrics.jsonl is left out' bad/report.html && ok damaged-line || bad "damaged-line: $out"
# missing files: one error naming the file and what to do
mkdir -p empty
expect missing-metrics 'empty/metrics.jsonl: cannot open it .*--out empty' -- "$brisk" report empty
expect missing-dir 'nowhere: no such directory' -- "$brisk" report nowhere
expect pipeline-dir 'pipe: no metrics.jsonl, but its folders hold runs .*brisk report pipe/(small|wide)' -- "$brisk" report pipe
expect no-argument 'a run directory is required' -- "$brisk" report

if [ "$mode" = screenshot ]; then
  shot() { # shot PAGE PNG: Chromium's screenshot of the page at 1200 x 2400
    timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
      --user-data-dir="$work/chromium-profile" --screenshot="$2" --window-size=1200,2400 "file://$work/$1" \
      >chromium.log 2>&1 && [ -s "$2" ]
  }
  shot run/report.html run.png && $py "$src/tests/cli/check_report_png.py" run/report.html run.png && ok screenshot-run ||
    bad "screenshot-run: $(tail -3 chromium.log)"
  shot pipe/report.html pipe.png && $py "$src/tests/cli/check_report_png.py" pipe/report.html pipe.png &&
    ok screenshot-pipeline || bad "screenshot-pipeline: $(tail -3 chromium.log)"
  shot bench.html bench.png && $py "$src/tests/cli/check_report_png.py" bench.html bench.png &&
    ok screenshot-bench || bad "screenshot-bench: $(tail -3 chromium.log)"
  shot diverged/report.html diverged.png &&
    $py "$src/tests/cli/check_report_png.py" diverged/report.html diverged.png --min 20 && ok screenshot-diverged ||
    bad "screenshot-diverged: $(tail -3 chromium.log)"
  shot nan/report.html nan.png && $py "$src/tests/cli/check_report_png.py" nan/report.html nan.png --min 20 --blank loss &&
    ok screenshot-nan || bad "screenshot-nan: $(tail -3 chromium.log)"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
