#!/usr/bin/env bash
# Unpacks Debian packages into .deps/ at the repository root (git ignores it), for a GPU machine
# whose image has no apt and lacks a library brisk builds with (cJSON):
#   tools/gpu/pack-debs.sh libcjson-dev libcjson1     # then copy .deps with the working tree
# tools/gpu-session.sh finds .deps/usr there and builds and runs with it; by hand:
#   cmake -S . -B build -DCMAKE_PREFIX_PATH=$PWD/.deps/usr
#   export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Only the packages named are unpacked, not their dependencies: name each one needed.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: tools/gpu/pack-debs.sh PACKAGE..." >&2; exit 2; }
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# apt-get download runs as the _apt user where it can; that user cannot write a private mktemp folder
(cd "$work" && apt-get -o APT::Sandbox::User=root download "$@" >/dev/null)
mkdir -p .deps
for deb in "$work"/*.deb; do dpkg -x "$deb" .deps; done
# The packages' absolute symlinks (libfoo.so -> /usr/lib/.../libfoo.so.1) would leave .deps on
# the other machine: make each relative to where it lies.
find .deps -type l | while read -r link; do
  target=$(readlink "$link")
  case "$target" in
    /*) ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" ".deps$target")" "$link" ;;
  esac
done
find .deps -name "*.a" -delete # building and running need the shared libraries only
du -sh .deps | awk '{print "unpacked " $1 " into .deps"}'
