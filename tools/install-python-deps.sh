#!/bin/sh
# Installs the Python packages brisk's interop tests need (`safetensors`; `onnxruntime` for
# the ONNX export test; scikit-build-core with pathspec and a recent packaging for the
# `pip install ./python` test; tensorboard with protobuf and absl-py, the least its event-file
# reader imports, for the event-file test; numpy comes from Debian's python3-numpy) into the folder given as the
# argument, for use through PYTHONPATH. Idempotent: does nothing when they already
# import from there. Uses /usr/bin/python3, the interpreter the tests run.
#   usage: tools/install-python-deps.sh BUILD_DIR/pydeps
set -eu
if [ $# -ne 1 ]; then
    echo "usage: $0 TARGET_DIR" >&2
    exit 2
fi
target=$1
py=/usr/bin/python3
if [ ! -x "$py" ]; then
    echo "$0: $py not found; the Python interop tests will be skipped" >&2
    exit 1
fi
if ! "$py" -c "import numpy" 2>/dev/null; then
    echo "$0: numpy is missing for $py (apt-get install python3-numpy)" >&2
    exit 1
fi
mkdir -p "$target"
if PYTHONPATH="$target" "$py" -c "import safetensors.numpy, onnxruntime, scikit_build_core, pathspec
from tensorboard.backend.event_processing import event_accumulator" 2>/dev/null; then
    echo "$0: safetensors, onnxruntime, scikit-build-core and tensorboard already importable from $target"
    exit 0
fi
# --target keeps the system site-packages untouched; --no-deps since numpy is Debian's.
"$py" -m pip install --quiet --disable-pip-version-check --no-deps --break-system-packages \
    --target "$target" safetensors onnxruntime scikit-build-core pathspec packaging tensorboard protobuf absl-py
PYTHONPATH="$target" "$py" -c "import safetensors, safetensors.numpy, onnxruntime; print('$0: safetensors', safetensors.__version__, 'onnxruntime', onnxruntime.__version__, 'in $target')"
