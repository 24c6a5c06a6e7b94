#!/usr/bin/env bash
# Times every workload of bench/WORKLOADS.md in every PyTorch mode with timed.py and prints one
# JSON line each (a mode that fails or runs past 15 minutes prints an "error" line instead, so
# one broken mode does not hide the others).
#   bench/reference/run_all.sh [--device cuda|cpu] [--small] [--steps N] [workload ...]
# PYTHON names the interpreter (default python3); it needs PyTorch (2.x for the compile modes).
set -u
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
device=cuda small="" steps=50 list=()
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift ;;
    --small) small=--small ;;
    --steps) steps=$2; shift ;;
    *) list+=("$1") ;;
  esac
  shift
done
[ ${#list[@]} -gt 0 ] || list=(diffusion tabular lstm transformer resnet meshgnn)
for w in "${list[@]}"; do
  for mode in eager amp compile amp-compile; do
    line=$(timeout 900 "$py" "$here/timed.py" --workload "$w" --mode "$mode" --device "$device" \
      --steps "$steps" $small 2>/dev/null | tail -1)
    case $line in
      "{"*) echo "$line" ;;
      *) echo "{\"workload\": \"$w\", \"mode\": \"$mode\", \"error\": \"failed or timed out\"}" ;;
    esac
  done
done
