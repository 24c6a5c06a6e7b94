#!/usr/bin/env bash
# tools/gpu/compare_grads.py, the GPU suite's step-1 gradient check: two CPU runs whose GEMMs
# sum in another order pass at 1e-4, a clipped run against an unclipped one fails with the
# clip factor as its best scale and nothing left after it, a baseline widens the bound by its
# own distance only, and bad inputs exit 2. Runs with the
# python3 found (numpy or not: the tool takes either path).
#   compare_grads.sh BRISK_BINARY WORKDIR SOURCE_DIR
set -u
. "$(dirname "$0")/expect_tool.sh" compare_grads "$@"
"$brisk" synth tabular data/tabular.npz --samples 2048 >/dev/null || exit 1
one() { local out=$1; shift; "$brisk" train "$src/examples/tabular.json" --device cpu --max-steps 1 --quiet --out "$out" "$@" || exit 1; }
one own --set speed.cpu_gemm=own
one blas --set speed.cpu_gemm=blas
one clipped --clip-norm 0.01
one sgd --set optim.type=sgd
expect 0 '^PASS relative L2 error [0-9.e-]+ over 8 tensors .*after the best scale 1' own blas
expect 0 '^PASS relative L2 error 0 ' own/last.safetensors own
expect 1 '^FAIL relative L2 error .*after the best scale [0-9.]+: [0-9.e-]+; 0 of [0-9]+ elements' clipped own
# the clip factor is the whole difference: nothing but rounding after the best scale
$cmp clipped own | grep -qE 'after the best scale [0-9.]+: [0-9.]+e-0[5-9]' && echo "ok   clip is a scale" ||
  { echo "FAIL: the clip factor is not seen as a scale: $($cmp clipped own)"; fails=$((fails + 1)); }
# a baseline widens the bound to 4x its own distance from the reference, and no further
expect 0 "^PASS relative L2 error [0-9.e-]+ .*the model's own spread [0-9.e-]+: bound" clipped own --baseline own
expect 1 "^FAIL relative L2 error .*the model's own spread 0: bound 0.0001" clipped own --baseline clipped
expect 2 '^FAIL .*nothing.safetensors: No such file' clipped own --baseline nothing.safetensors
expect 2 '^FAIL usage' clipped own --baseline own --spread-factor x
expect 2 '^FAIL .*no optim.exp_avg' sgd own
expect 2 '^FAIL .*nothing.safetensors: No such file' own nothing.safetensors
head -c 4 own/last.safetensors > short.safetensors
expect 2 '^FAIL .*not a safetensors file' own short.safetensors
expect 2 '^FAIL usage' own
[ $fails = 0 ] && echo "compare_grads: all passed" || { echo "compare_grads: $fails failed"; exit 1; }
