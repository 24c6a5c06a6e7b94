#!/usr/bin/env bash
# make install into a temporary prefix, then a tiny C program built against it both ways -
# pkg-config --cflags --libs brisk, and CMake's find_package(brisk) - links and runs: the
# link line the install gives is the one the build that was made needs (with the CUDA
# runtime in a CUDA build; cuBLASLt is loaded at run time). Then what a host in another language meets: the
# installed libraries export brisk_* alone (a host defining cpu_matmul links), the shared
# library has a soname, and find_package works in a LANGUAGES CXX project (tests/api/host.cpp:
# OpenMP solver, training thread) and a LANGUAGES Fortran one (the installed binding source).
#   install.sh BUILD_DIR WORKDIR CMAKE_COMMAND C_COMPILER [CXX_COMPILER [Fortran_COMPILER]]
set -u
build=$1 work=$2 cmake=$3 cc=$4 cxx=${5:-} fc=${6:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/expect.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
"$cmake" --install "$build" --prefix "$work/prefix" >install.log 2>&1 || { cat install.log; echo "FAIL install"; exit 1; }
for f in bin/brisk include/brisk/brisk.h include/brisk/api.h lib/libbrisk.a lib/pkgconfig/brisk.pc \
         lib/cmake/brisk/briskConfig.cmake lib/cmake/brisk/briskTargets.cmake share/brisk/fortran/brisk.f90; do
  [ -e "prefix/$f" ] && ok "installed $f" || bad "installed $f"
done
cat > app.c <<'C'
/* Parses a config, builds the model's graph and prints its parameter count. */
#include <stdio.h>
#include "brisk/brisk.h"
int main(void) {
    brisk_config cfg;
    brisk_error err;
    if (brisk_config_parse("{\"model\": {\"type\": \"mlp\", \"inputs\": 4, \"hidden\": [8], \"outputs\": 2}}", "app",
                           NULL, 0, &cfg, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    brisk_system_info si;
    brisk_system_probe(&si);
    printf("brisk %s: config %s parsed, model inputs %lld\n", si.version, cfg.name, (long long)cfg.model.inputs);
    brisk_config_free(&cfg);
    return 0;
}
C
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
flags=$(pkg-config --cflags --libs brisk) && echo "pkg-config: $flags" &&
  "$cc" app.c -o app_pc $flags 2>pc.log && ./app_pc | grep -q "model inputs 4" && ok pkg-config ||
  { cat pc.log; bad pkg-config; }
mkdir -p cm && cat > cm/CMakeLists.txt <<'C'
cmake_minimum_required(VERSION 3.20)
project(app C)
find_package(brisk 0.1 REQUIRED)
add_executable(app ../app.c)
target_link_libraries(app PRIVATE brisk::brisk)
C
"$cmake" -S cm -B cm/build -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$work/prefix" >cm.log 2>&1 &&
  "$cmake" --build cm/build >>cm.log 2>&1 && cm/build/app | grep -q "model inputs 4" && ok find_package ||
  { tail -30 cm.log; bad find_package; }

# only brisk_* is global in what is installed
others=$(nm -g --defined-only prefix/lib/libbrisk.a 2>/dev/null | awk 'NF == 3 {print $3}' | grep -v '^brisk_' | head -5)
[ -z "$others" ] && ok "libbrisk.a defines only brisk_* globally" || bad "libbrisk.a also exports: $others"
so=$(ls prefix/lib/libbrisk.so.*.*.* 2>/dev/null | head -1)
if [ -n "$so" ]; then
  others=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^brisk_' | head -5)
  [ -z "$others" ] && ok "libbrisk.so exports only brisk_*" || bad "libbrisk.so also exports: $others"
  readelf -d "$so" | grep -q 'SONAME.*libbrisk\.so\.[0-9]' && ok "libbrisk.so has a soname" || bad "libbrisk.so soname"
fi

if [ -n "$cxx" ]; then # a C++ host, in a project with no C
  mkdir -p cxx && cat > cxx/CMakeLists.txt <<C
cmake_minimum_required(VERSION 3.20)
project(host LANGUAGES CXX)
find_package(brisk 0.1 REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
add_executable(host $src/tests/api/host.cpp)
target_link_libraries(host PRIVATE brisk::brisk OpenMP::OpenMP_CXX)
C
  "$cmake" -S cxx -B cxx/build -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$work/prefix" >cxx.log 2>&1 &&
    "$cmake" --build cxx/build >>cxx.log 2>&1 && cxx/build/host >>cxx.log 2>&1 && grep -q "^PASS" cxx.log &&
    ok "find_package in a LANGUAGES CXX project: the C++ host links and runs" || { tail -30 cxx.log; bad "C++ host"; }
fi
if [ -n "$fc" ]; then # a Fortran program, in a project with no C, compiling the installed binding
  mkdir -p f && cat > f/app.f90 <<'F'
program app
  use brisk
  implicit none
  type(brisk_session) :: s
  integer :: st
  st = brisk_create(s, '{"model": {"type": "mlp", "inputs": 3, "hidden": [4], "outputs": 1, "task": "regress"}}')
  if (st /= BRISK_OK) stop 1
  st = brisk_destroy(s)
  print '(a)', 'PASS a Fortran host'
end program app
F
  cat > f/CMakeLists.txt <<'C'
cmake_minimum_required(VERSION 3.20)
project(app LANGUAGES Fortran)
find_package(brisk 0.1 REQUIRED)
add_executable(app app.f90 ${brisk_FORTRAN_MODULE_SOURCE})
target_link_libraries(app PRIVATE brisk::brisk)
C
  "$cmake" -S f -B f/build -DCMAKE_Fortran_COMPILER="$fc" -DCMAKE_PREFIX_PATH="$work/prefix" >f.log 2>&1 &&
    "$cmake" --build f/build >>f.log 2>&1 && f/build/app >>f.log 2>&1 && grep -q "^ *PASS" f.log &&
    ok "find_package in a LANGUAGES Fortran project with the installed binding" || { tail -30 f.log; bad "Fortran host"; }
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
