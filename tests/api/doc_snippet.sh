#!/usr/bin/env bash
# The Fortran snippet of examples/README.md is valid Fortran 2008 against the binding: it is
# cut out of the README, wrapped into a program and compiled with -std=f2008.
#   doc_snippet.sh GFORTRAN README MODULE_DIR WORKDIR
set -eu
fc=$1 readme=$2 mod=$3 work=$4
mkdir -p "$work"
src=$work/snippet.f90
{
  printf 'module snippet_config\n  character(len=*), parameter :: config = "{}"\nend module snippet_config\n'
  printf 'program snippet\n  use snippet_config\n'
  awk '/^and in Fortran 2008/ { want = 1; next }
       want && /^```fortran/ { inside = 1; next }
       inside && /^```/ { exit }
       inside { print }' "$readme"
  printf 'end program snippet\n'
} >"$src"
[ "$(wc -l <"$src")" -gt 10 ] || { echo "FAIL: no snippet found in $readme"; exit 1; }
"$fc" -std=f2008 -Wall -Werror -Wno-unused-variable -fsyntax-only -I "$mod" -J "$work" "$src"
echo "ok: the README's Fortran snippet compiles as Fortran 2008"
