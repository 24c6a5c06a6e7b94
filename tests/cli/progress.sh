#!/usr/bin/env bash
# How brisk train reports progress: a live line rewritten with \r on a terminal (run under
# script(1), which gives it a pty), plain lines when stdout is a pipe, --quiet (only the
# summary), and --log-format json (every line of stdout and stderr one JSON object); then
# --quiet and --log-format as every command's options (predict, synth, info, usage errors).
#   progress.sh BRISK_BINARY WORKDIR
set -u
brisk=$1 work=$2
py=/usr/bin/python3
. "$(dirname "$0")/expect.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
"$brisk" synth tabular tab.npz --samples 640 >/dev/null || { echo "synth failed"; exit 1; }
cat > p.json <<'J'
{"model": {"type": "mlp", "inputs": 64, "hidden": [16], "outputs": 3},
 "data": {"train": "tab.npz", "validation_fraction": 0.2},
 "train": {"batch_size": 32, "epochs": 2, "log_every": 4, "out_dir": "run"}}
J

# not a terminal: the plain progress lines, no carriage return
"$brisk" train p.json --overwrite >plain.out 2>plain.err
if grep -qE '^epoch 1  step 4/32  loss [0-9.]+' plain.out && ! grep -q $'\r' plain.out; then ok plain-lines
else bad "plain-lines: $(cat plain.out plain.err)"; fi

# one definition of compute time: on each progress line data + copy + compute is the step time,
# and metrics.jsonl's record of that step has the same data_ms, copy_ms and compute_ms
if [ -x "$py" ] && "$py" - plain.out run/metrics.jsonl <<'P'
import json, re, sys
line = re.compile(r"^epoch \d+  step (\d+)/\d+ .* ([0-9.]+) ms/step \(data ([0-9.]+), copy ([0-9.]+), compute (-?[0-9.]+)\)")
shown = {int(m[1]): [float(v) for v in m.groups()[1:]] for m in map(line.match, open(sys.argv[1])) if m}
recs = {r["step"]: r for r in map(json.loads, open(sys.argv[2])) if "compute_ms" in r}
assert len(shown) == 8 and set(shown) == set(recs), (shown, sorted(recs))
for step, (ms, data, copy, compute) in shown.items():
    r = recs[step]
    assert abs(data + copy + compute - ms) < 0.0025, (step, ms, data, copy, compute)
    for key, v in (("ms_per_step", ms), ("data_ms", data), ("copy_ms", copy), ("compute_ms", compute)):
        assert abs(r[key] - v) < 0.0006, (step, key, r[key], v)
P
then ok compute-split
else bad "compute-split: $(cat plain.out)"; fi

# a terminal: one line rewritten with \r (bar, percentage, steps, epoch, loss, speed, ETA), the
# plain progress lines replaced by it, the other lines and the summary still there
if command -v script >/dev/null; then
  TERM=xterm script -qec "'$brisk' train p.json --overwrite" /dev/null >tty.out 2>&1
  if grep -qE $'\r\\[[#.]+\\] +[0-9]+% step [0-9]+/32 epoch [12]/2 loss [0-9.?]+ [0-9]+ samples/s ETA ' tty.out &&
     grep -qE $'\r\\[#+\\] 100% step 32/32 epoch 2/2' tty.out &&
     ! grep -qE 'epoch 1  step 4/32' tty.out && grep -q 'epoch 2 done  train loss' tty.out && grep -q '^summary ' tty.out; then
    ok tty-bar
  else bad "tty-bar: $(cat -v tty.out)"; fi
  # a pipeline: one bar per model, each under its "pipeline  model i of n" line; no plain lines
  cat > pipe.json <<'J'
{"models": [{"name": "small", "type": "mlp", "inputs": 64, "hidden": [8], "outputs": 3},
            {"name": "wide", "type": "mlp", "inputs": 64, "hidden": [32], "outputs": 3}],
 "data": {"train": "tab.npz", "validation_fraction": 0.2},
 "train": {"batch_size": 32, "epochs": 2, "log_every": 4, "out_dir": "pipe"}}
J
  TERM=xterm script -qec "'$brisk' train pipe.json --overwrite" /dev/null >pipe.out 2>&1
  if [ "$(grep -oE $'\r\\[#+\\] 100% step 32/32 epoch 2/2' pipe.out | wc -l)" -ge 2 ] &&
     ! grep -qE 'epoch 1  step 4/32' pipe.out && grep -q 'pipeline  model 2 of 2: wide' pipe.out &&
     grep -qE '^ *wide ' pipe.out; then
    ok pipeline-tty-bar
  else bad "pipeline-tty-bar: $(cat -v pipe.out)"; fi
else
  echo "skip tty-bar: script(1) not found (util-linux)"
fi

# --quiet: nothing but the summary on stdout, nothing on stderr
"$brisk" train p.json --overwrite --quiet >quiet.out 2>quiet.err
first=$(grep -v '^$' quiet.out | head -1)
if [ ! -s quiet.err ] && [[ $first == summary* ]] && ! grep -qE '^(epoch|device|model|active)' quiet.out &&
   grep -q 'best val loss' quiet.out; then ok quiet
else bad "quiet: $(cat quiet.out quiet.err)"; fi

# --log-format json: every line parses, with time, level and msg; an error too
"$brisk" train p.json --overwrite --log-format json --threads 64 >json.out 2>json.err
"$brisk" train missing.json --log-format json >jsonerr.out 2>jsonerr.err
"$brisk" train p.json --log-format json --frobnicate >jsonusage.out 2>jsonusage.err
if [ -x "$py" ] && "$py" - json.out json.err jsonerr.out jsonerr.err jsonusage.out jsonusage.err <<'P'
import json, sys
recs = {}
for path in sys.argv[1:]:
    recs[path] = [json.loads(line) for line in open(path, encoding="utf-8")]
    for r in recs[path]:
        assert set(r) == {"time", "level", "msg"}, r
        assert r["level"] in ("info", "warning", "error") and r["time"].endswith("Z"), r
        assert (r["level"] == "info") == path.endswith(".out"), (path, r)
msgs = [r["msg"] for r in recs["json.out"]]
assert any(m.startswith("epoch 1  step 4/32") for m in msgs), msgs
assert any(m.startswith("\nsummary") and "best val loss" in m for m in msgs), msgs
assert any("64 threads" in r["msg"] for r in recs["json.err"]), recs["json.err"]
(err,) = recs["jsonerr.err"]
assert err["level"] == "error" and "missing.json" in err["msg"], err
assert not recs["jsonerr.out"]
(err,) = recs["jsonusage.err"]  # a command-line error too
assert err["level"] == "error" and "unknown option '--frobnicate'" in err["msg"], err
P
then ok json-lines
else bad "json-lines: $(cat json.out json.err jsonerr.err)"; fi

# --quiet and --log-format are every command's: predict and synth as JSON records, errors too
"$brisk" synth tabular s.npz --samples 64 --log-format json >synth.out 2>synth.err
"$brisk" synth tabular - --samples 8 --log-format=json >synthpipe.npz 2>synthpipe.err
"$brisk" predict run/best.safetensors --input tab.npz --output pred.npy --log-format json >pred.out 2>pred.err
"$brisk" predict missing.safetensors --input tab.npz --output pred2.npy --log-format json >prederr.out 2>prederr.err
"$brisk" predict --bogus --log-format json >predusage.out 2>predusage.err; prc=$?
"$brisk" info missing.safetensors --log-format json >info.out 2>info.err
"$brisk" frobnicate --log-format json >cmd.out 2>cmd.err
if [ -x "$py" ] && [ $prc = 2 ] && [ -s pred.npy ] && "$py" - synth.out synth.err synthpipe.err pred.out pred.err \
     prederr.out prederr.err predusage.out predusage.err info.out info.err cmd.out cmd.err <<'P'
import json, sys
recs = {}
for path in sys.argv[1:]:
    recs[path] = [json.loads(line) for line in open(path, encoding="utf-8")]
    for r in recs[path]:
        assert set(r) == {"time", "level", "msg"}, r
        assert r["time"].endswith("Z"), r
(r,) = recs["synth.out"]
assert r["level"] == "info" and r["msg"] == "wrote s.npz: 64 tabular samples", r
(r,) = recs["synthpipe.err"]  # data on stdout: the note on stderr
assert r["msg"] == "wrote -: 8 tabular samples", r
assert not recs["synth.err"] and not recs["pred.err"] and not recs["prederr.out"] and not recs["predusage.out"]
(r,) = recs["pred.out"]
assert r["level"] == "info" and r["msg"].startswith("predict   640 rows -> pred.npy [640, 3]"), r
(r,) = recs["prederr.err"]
assert r["level"] == "error" and "missing.safetensors" in r["msg"], r
(r,) = recs["predusage.err"]  # an error before --log-format is reached follows it too
assert r["level"] == "error" and "predict: unknown option '--bogus'" in r["msg"], r
(r,) = recs["info.err"]
assert r["level"] == "error" and "missing.safetensors" in r["msg"], r
(r,) = recs["cmd.err"]  # no command of that name: no usage text around the record
assert r["level"] == "error" and r["msg"] == "unknown command 'frobnicate'" and not recs["cmd.out"], r
P
then ok json-every-command
else bad "json-every-command: $(cat synth.out synth.err pred.out pred.err prederr.err predusage.err)"; fi

# --quiet: synth and predict print nothing; predict to - writes only the array
rm -f pred.npy
"$brisk" synth tabular q.npz --samples 64 --quiet >q1.out 2>q1.err
"$brisk" predict run/best.safetensors --input tab.npz --output pred.npy --quiet >q2.out 2>q2.err
"$brisk" predict run/best.safetensors --input tab.npz --output - --quiet >q3.npy 2>q3.err
"$brisk" info run/best.safetensors --quiet >q4.out 2>q4.err
if [ -s q.npz ] && [ -s pred.npy ] && ! [ -s q1.out ] && ! [ -s q1.err ] && ! [ -s q2.out ] && ! [ -s q2.err ] &&
   ! [ -s q3.err ] && [ "$(head -c 6 q3.npy | tail -c 5)" = NUMPY ] && cmp -s q3.npy pred.npy &&
   grep -q 'parameters:' q4.out && ! [ -s q4.err ]; then
  ok quiet-every-command
else bad "quiet-every-command: $(cat q1.out q1.err q2.out q2.err q3.err q4.err)"; fi

# a bad --log-format value is a command-line error of any command
"$brisk" synth tabular z.npz --log-format yaml >/dev/null 2>fmt.err; frc=$?
if [ $frc = 2 ] && grep -q "synth: --log-format 'yaml': expected text or json" fmt.err && [ ! -e z.npz ]; then ok log-format-value
else bad "log-format-value: rc $frc $(cat fmt.err)"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
