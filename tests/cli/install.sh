#!/usr/bin/env bash
# make install into a temporary prefix, then a tiny C program built against it both ways -
# pkg-config --cflags --libs brisk, and CMake's find_package(brisk) - links and runs: the
# link line the install gives is the one the build that was made needs (with the CUDA
# runtime and cuBLASLt in a CUDA build).
#   install.sh BUILD_DIR WORKDIR CMAKE_COMMAND C_COMPILER
set -u
build=$1 work=$2 cmake=$3 cc=$4
. "$(dirname "$0")/expect.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
"$cmake" --install "$build" --prefix "$work/prefix" >install.log 2>&1 || { cat install.log; echo "FAIL install"; exit 1; }
for f in bin/brisk include/brisk/brisk.h include/brisk/api.h lib/libbrisk.a lib/pkgconfig/brisk.pc \
         lib/cmake/brisk/briskConfig.cmake lib/cmake/brisk/briskTargets.cmake; do
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
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
