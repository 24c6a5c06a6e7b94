#!/usr/bin/env bash
# The Python package's thread tests on a sanitizer build's libbrisk.so: Python itself is not
# instrumented, so the sanitizer's runtime is preloaded (address: leaks not checked, Python
# keeps its objects to the end; thread: races inside brisk are reported).
#   sanitized.sh address|thread BUILD_DIR SOURCE_DIR C_COMPILER
set -eu
kind=$1 build=$2 src=$3 cc=$4
py=/usr/bin/python3
"$py" -c "import pytest, numpy" 2>/dev/null || { echo "SKIP: needs python3-pytest and python3-numpy"; exit 77; }
case $kind in
  address) rt=$("$cc" -print-file-name=libasan.so); export ASAN_OPTIONS=detect_leaks=0 ;;
  thread) rt=$("$cc" -print-file-name=libtsan.so); export TSAN_OPTIONS="halt_on_error=1 report_signal_unsafe=0" ;;
esac
[ -e "$rt" ] || { echo "SKIP: no $rt"; exit 77; }
export BRISK_LIBRARY="$build/libbrisk.so" BRISK_BIN="$build/brisk" PYTHONPATH="$src/python" OMP_NUM_THREADS=2
mkdir -p "$build/python_tests"
cd "$build"
LD_PRELOAD="$rt" "$py" -m pytest -q -p no:cacheprovider --basetemp "$build/python_tests/san$$" "$src/python/tests/test_threads.py"
