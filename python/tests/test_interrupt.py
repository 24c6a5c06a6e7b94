"""Ctrl-C in Python: brisk.train and Session.train_* stop after the step in progress with a
checkpoint, then raise KeyboardInterrupt (on 0e9846d it landed in the ctypes log callback,
Python printed "Exception ignored" and training ran to its end). Each case runs in a child
process that gets a real SIGINT while brisk is calling back."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

CHILD_TRAIN = r'''
import sys, brisk
cfg = {"model": {"type": "mlp", "inputs": 64, "hidden": [256, 256], "outputs": 3},
       "data": {"train": sys.argv[1]}, "train": {"batch_size": 32, "epochs": 1000, "out_dir": sys.argv[2],
       "log_every": 1, "checkpoint_epochs": 0}, "speed": {"threads": 1}}
def log(level, msg):
    if msg.startswith("epoch"):
        print("PROGRESS", flush=True)
try:
    brisk.train(cfg, progress=False, log=log)
    print("FINISHED", flush=True)
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
'''

CHILD_SESSION = r'''
import sys, numpy as np, brisk
cfg = {"model": {"type": "mlp", "inputs": 8, "hidden": [256, 256], "outputs": 2, "task": "regress"},
       "data": {"validation_fraction": 0}, "train": {"batch_size": 16, "log_every": 1, "out_dir": sys.argv[2]},
       "speed": {"threads": 1, "prefetch": 0}}
def log(level, msg):
    if msg.startswith("epoch"):
        print("PROGRESS", flush=True)
s = brisk.Session(cfg, log=log)
x = np.random.rand(512, 8); s.push(x, x[:, :2])
try:
    s.train_epochs(100000)
    print("FINISHED", flush=True)
except KeyboardInterrupt:
    print("INTERRUPTED %d" % s.query("steps"), flush=True)
s.train_steps(3)
print("TRAINED AGAIN %d" % s.query("steps"), flush=True)
'''


def interrupt(script, args):
    """Runs script, sends SIGINT once it reports progress, returns (stdout lines, stderr)."""
    p = subprocess.Popen([sys.executable, "-c", script] + [str(a) for a in args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    seen = 0
    lines = []
    deadline = time.time() + 120
    while time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
        if line.startswith("PROGRESS"):
            seen += 1
            if seen == 3:
                p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    lines += out.split()
    return [l for l in lines if not l.startswith("PROGRESS")], err, p.returncode


def test_ctrl_c_stops_brisk_train(tabular, tmp_path):
    lines, err, rc = interrupt(CHILD_TRAIN, [tabular, tmp_path / "run"])
    assert "INTERRUPTED" in lines, (lines, err)
    assert "Exception ignored" not in err, err
    assert (tmp_path / "run" / "last.safetensors").exists()
    with open(tmp_path / "run" / "metrics.jsonl") as f:
        end = [r for r in map(json.loads, f) if r.get("event") == "run_end"][-1]
    assert end["stopped_by_signal"] != 0 and end["steps"] < 1000 * 28


def test_ctrl_c_stops_a_session_call(tmp_path):
    lines, err, rc = interrupt(CHILD_SESSION, ["-", tmp_path / "run"])
    assert rc == 0, err
    assert "Exception ignored" not in err, err
    stopped = [l for l in " ".join(lines).split("INTERRUPTED ")[1:]]
    assert stopped, (lines, err)
    steps = int(stopped[0].split()[0])
    assert 0 < steps < 100000 * 32
    assert "AGAIN %d" % (steps + 3) in " ".join(lines), lines
    assert (tmp_path / "run" / "last.safetensors").exists()
