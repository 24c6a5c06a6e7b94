#!/usr/bin/env bash
# Installs what brisk needs on Debian 12, when it is missing (idempotent; root or sudo).
#   tools/install-deps.sh          build + run: compiler, CMake, OpenMP, cJSON, zlib, OpenBLAS,
#                                  libpng and libjpeg-turbo (image data), libnetcdf (weather data),
#                                  OpenMPI (data-parallel training over mpirun/srun; optional:
#                                  without it one process)
#   tools/install-deps.sh --test   also what the tests compare against: NumPy, PyTorch (Debian's
#                                  python3-torch, python3-torchvision), clang's sanitizer runtime, gfortran (the Fortran
#                                  examples), ncgen (netcdf-bin: NetCDF test files written by
#                                  another tool), pytest (the Python package's tests), chromium
#                                  (headless screenshots of the HTML reports), Pillow (python3-pil:
#                                  image files written by another tool), and
#                                  safetensors, onnxruntime and scikit-build-core from PyPI into
#                                  build/pydeps
set -euo pipefail
pkgs=(build-essential cmake libcjson-dev zlib1g-dev libopenblas-dev libpng-dev libjpeg62-turbo-dev libnetcdf-dev libopenmpi-dev openmpi-bin)
if [ "${1:-}" = "--test" ]; then
  pkgs+=(python3 python3-numpy python3-torch python3-torchvision python3-pip python3-pytest clang libclang-rt-14-dev gfortran netcdf-bin chromium python3-pil)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "brisk: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ "${1:-}" = "--test" ] && [ -x tools/install-python-deps.sh ]; then
  tools/install-python-deps.sh "${BUILD:-build}/pydeps" >/dev/null
fi
