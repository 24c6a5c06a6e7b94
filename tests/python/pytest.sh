#!/usr/bin/env bash
# Runs pytest files of python/tests on this build's libbrisk.so and brisk command, with the
# package imported from the source tree. Exit 77 (skip) without pytest or NumPy.
#   pytest.sh BUILD_DIR SOURCE_DIR [pytest arguments and python/tests paths...]
set -eu
build=$1 src=$2
shift 2
py=/usr/bin/python3
"$py" -c "import pytest, numpy" 2>/dev/null || { echo "SKIP: needs python3-pytest and python3-numpy"; exit 77; }
export BRISK_LIBRARY="$build/libbrisk.so" BRISK_BIN="$build/brisk"
export PYTHONPATH="$build/pydeps:$src/python${PYTHONPATH:+:$PYTHONPATH}"
export CCACHE_DIR="${CCACHE_DIR:-$build/ccache}" # the install test's compiles
export OMP_NUM_THREADS=2
mkdir -p "$build/python_tests" # pytest creates --basetemp but not its parent
cd "$build"
# a passing run's files go (the ResNet checkpoints alone are 1.5 GB a run); a failing run's stay
tmp="$build/python_tests/$$"
rc=0
"$py" -m pytest -q -rs -p no:cacheprovider --basetemp "$tmp" "$@" || rc=$?
[ $rc -eq 0 ] && rm -rf "$tmp"
exit $rc
