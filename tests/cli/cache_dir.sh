#!/usr/bin/env bash
# Where brisk keeps its measured GEMM choices, and where it never writes: under
# BRISK_CACHE_DIR, else $XDG_CACHE_HOME/brisk, else $HOME/.cache/brisk; a missing $HOME (or
# XDG folder) is never created (0e9846d created it), and BRISK_CACHE_DIR=- writes nothing.
#   cache_dir.sh BRISK WORKDIR
set -u
brisk=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/expect.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
"$brisk" synth tabular data.npz --samples 512 >/dev/null || { echo "FAIL synth"; exit 1; }
run() { # run NAME ENV... : one short training run in a clean environment but for ENV
  env -i PATH="$PATH" OMP_NUM_THREADS=1 "${@:2}" "$brisk" train "$here/../../examples/tabular.json" \
    --set data.train=data.npz --set train.epochs=1 --set train.batch_size=64 --out "run-$1" --quiet >"$1.log" 2>&1
}
run absent HOME="$work/no-such-home"
[ ! -e "$work/no-such-home" ] && ok "a missing HOME is not created" || bad "brisk created the missing HOME"
mkdir -p home
run home HOME="$work/home"
[ -s home/.cache/brisk/cpu-gemm-choice.txt ] && ok "HOME/.cache/brisk holds the cache" || bad "no cache under HOME"
run xdg HOME="$work/home2" XDG_CACHE_HOME="$work/xdg"
[ ! -e xdg ] && ok "a missing XDG_CACHE_HOME is not created" || bad "brisk created XDG_CACHE_HOME"
mkdir -p xdg home2
run xdg2 HOME="$work/home2" XDG_CACHE_HOME="$work/xdg"
[ -s xdg/brisk/cpu-gemm-choice.txt ] && [ ! -e home2/.cache ] && ok "XDG_CACHE_HOME/brisk holds it" || bad "XDG_CACHE_HOME"
mkdir -p home3
run off HOME="$work/home3" BRISK_CACHE_DIR=-
[ -z "$(ls -A home3)" ] && [ ! -e "$work/-" ] && ok "BRISK_CACHE_DIR=- writes no cache" || bad "BRISK_CACHE_DIR=- wrote $(ls -A home3)"
for r in absent home xdg xdg2 off; do [ -s "run-$r/last.safetensors" ] || bad "run $r did not train: $(tail -3 $r.log)"; done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
