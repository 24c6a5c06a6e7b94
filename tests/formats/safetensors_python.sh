#!/bin/sh
# safetensors interop with the reference Python package, both directions:
# brisk writes -> safetensors.numpy.load_file reads; Python writes -> brisk reads.
# Exits 77 (ctest SKIP) when /usr/bin/python3, numpy or the package is missing,
# unless BRISK_REQUIRE_PYTHON_TESTS=1, which makes a missing dependency a failure.
#   usage: safetensors_python.sh BRISK_TOOL PYDEPS_DIR WORK_DIR
set -eu
tool=$1
pydeps=$2
work=$3
here=$(dirname "$0")
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
"$py" -c "import safetensors.numpy" 2>/dev/null ||
    skip "python safetensors package not importable (run tools/install-python-deps.sh $pydeps)"
"$py" -c "import safetensors; print('safetensors', safetensors.__version__, 'from', safetensors.__file__)"

rm -rf "$work"
mkdir -p "$work"
"$tool" write "$work"
"$py" "$here/safetensors_python.py" check "$work"
"$py" "$here/safetensors_python.py" write "$work"
"$tool" read "$work"
echo "brisk read python's files: ok"
rm -rf "$work"
