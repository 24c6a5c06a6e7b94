#!/bin/sh
# brisk train's event file against TensorBoard's own reader (tensorboard_check.py); also:
# log.tensorboard false writes none, and --overwrite removes the previous run's.
# Exits 77 (ctest SKIP) when /usr/bin/python3, numpy or tensorboard is missing, unless
# BRISK_REQUIRE_PYTHON_TESTS=1.
#   usage: tensorboard.sh BRISK PYDEPS_DIR WORK_DIR
set -eu
brisk=$1
pydeps=$2
work=$3
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
skip() {
    echo "SKIP: $1"
    if [ "${BRISK_REQUIRE_PYTHON_TESTS:-0}" = 1 ]; then exit 1; fi
    exit 77
}
[ -x "$py" ] || skip "$py not found"
PYTHONPATH="$pydeps${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH
"$py" -c "import numpy" 2>/dev/null || skip "numpy not importable by $py (apt-get install python3-numpy)"
"$py" -c "from tensorboard.backend.event_processing import event_accumulator" 2>/dev/null ||
    skip "tensorboard not importable (run tools/install-python-deps.sh $pydeps)"

rm -rf "$work"
mkdir -p "$work"
cd "$work"
"$brisk" synth tabular tab.npz --samples 640 >/dev/null
cat > tb.json <<'J'
{"model": {"type": "mlp", "inputs": 64, "hidden": [16], "outputs": 3},
 "data": {"train": "tab.npz", "validation_fraction": 0.2},
 "train": {"batch_size": 32, "epochs": 3, "log_every": 3, "out_dir": "run"},
 "log": {"histogram_every": 4}}
J
"$brisk" train tb.json >train.log 2>&1 || { cat train.log; exit 1; }
"$py" "$here/tensorboard_check.py" run
# A second run replacing the first leaves one event file: the new run's.
"$brisk" train tb.json --overwrite >train2.log 2>&1 || { cat train2.log; exit 1; }
n=$(ls run | grep -c '^events\.out\.tfevents\.')
[ "$n" = 1 ] || { echo "FAIL: $n event files after --overwrite, expected 1"; ls run; exit 1; }
"$py" "$here/tensorboard_check.py" run
# log.tensorboard false: no event file.
"$brisk" train tb.json --overwrite --set log.tensorboard=false >train3.log 2>&1 || { cat train3.log; exit 1; }
if ls run | grep -q '^events\.out\.tfevents\.'; then echo "FAIL: log.tensorboard false wrote an event file"; exit 1; fi
echo "tensorboard event files: ok"
cd / && rm -rf "$work"
