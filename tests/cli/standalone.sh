#!/usr/bin/env bash
# The repository stands alone: no file in it points outside it. A clone must be enough to
# build, test, benchmark and read the docs, so no tracked file (or new file not ignored) may
# name a sibling folder of the checkout, an absolute path of the machine it was written on,
# or a relative path that climbs above the repository's root from where the file lies (from
# tools/gpu/x.sh, "../.." is the root and "../../.." is outside). The PyTorch reference and the
# workload definitions live in bench/reference/ and bench/WORKLOADS.md.
# First the check is run on a small tree made here that breaks each rule once (each must be
# reported) and on one that breaks none, so that a check that finds nothing cannot pass.
#   standalone.sh SOURCE_DIR WORKDIR
set -u
src=$1 work=$2

# Assembled at run time so that this file does not itself contain what it looks for.
up='..'
forbidden=("$up/shared" "/wo""rk/" "shared/work""loads" "torch""_ref")

# scan DIR: prints "file:line: reason" for each finding; exit 1 when there is one.
scan() (
  cd "$1" || exit 2
  # a git checkout's own root (not a folder inside some other checkout, as a build tree is)
  if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd -P)" ]; then
    # tracked files as they are in the work tree, and new files git does not ignore
    search() { git grep --untracked -I -n "$@" -- . ':!tests/cli/standalone.sh'; }
  else
    search() { grep -r -I -n --exclude-dir=.git --exclude-dir='build*' "$@" . | sed 's|^\./||'; }
  fi
  found=0
  for f in "${forbidden[@]}"; do
    while IFS= read -r hit; do
      echo "${hit%%:*}:$(echo "$hit" | cut -d: -f2): names '$f', outside the repository"
      found=1
    done < <(search -F -e "$f")
  done
  # every run of parent steps ("../..", "/../..") must stay inside the repository from the
  # folder of the file that holds it
  while IFS= read -r hit; do
    file=${hit%%:*} rest=${hit#*:} line=${rest%%:*} match=${rest#*:}
    case $match in *[!./]) match=${match%?} ;; esac # the character after "/..", matched to end it
    ups=$(printf '%s' "$match" | grep -o '\.\.' | wc -l)
    depth=$(printf '%s' "$file" | tr -cd / | wc -c)
    if [ "$ups" -gt "$depth" ]; then
      echo "$file:$line: '$match' climbs $ups folders from a file $depth below the root"
      found=1
    fi
  done < <(search -o -E -e '\.\.(/\.\.)*/|/\.\.(/\.\.)*([^./]|$)')
  exit $found
)

rm -rf "$work" && mkdir -p "$work/bad/docs" "$work/bad/tools/gpu" "$work/good/tools/gpu" || exit 1
printf 'see %s/workloads/WORKLOADS.md\n' "$up/shared" > "$work/bad/README.md"
printf 'data in /wo%s/data\n' "rk" > "$work/bad/docs/data.md"
printf 'import torch%s\n' "_ref" > "$work/bad/check.py"
printf 'cd "$(dirname "$0")/%s/%s/%s"\n' "$up" "$up" "$up" > "$work/bad/tools/gpu/deep.sh"
printf 'the guide: %s/%s/notes.md\n' "$up" "$up" > "$work/bad/docs/guide.md"
printf 'cd "$(dirname "$0")/%s/%s"\nsee bench/WORKLOADS.md, %s/README.md\n' "$up" "$up" "$up" > "$work/good/tools/gpu/ok.sh"
printf 'the guide: %s/README.md\n' "$up" > "$work/good/tools/notes.md"
printf 'src/..., 1e-4..0.02, a...b\n' > "$work/good/README.md"
fails=0
out=$(scan "$work/bad"); rc=$?
for want in "README.md:1: names '$up/shared'" "docs/data.md:1: names '/wo""rk/'" "check.py:1: names 'torch""_ref'" \
            "tools/gpu/deep.sh:1: '/$up/$up/$up' climbs 3 folders from a file 2 below the root" \
            "docs/guide.md:1: '$up/$up/' climbs 2 folders from a file 1 below the root"; do
  if [ $rc = 1 ] && printf '%s\n' "$out" | grep -qF -- "$want"; then echo "ok   caught: $want"
  else echo "FAIL: the check missed: $want (exit $rc)"; printf '%s\n' "$out"; fails=$((fails + 1)); fi
done
if out=$(scan "$work/good"); then echo "ok   a tree that stays inside passes"
else echo "FAIL: the good tree was flagged:"; printf '%s\n' "$out"; fails=$((fails + 1)); fi

if out=$(scan "$src"); then echo "ok   $src points nowhere outside itself"
else echo "FAIL: files in $src point outside the repository:"; printf '%s\n' "$out"; fails=$((fails + 1)); fi
[ -s "$src/bench/WORKLOADS.md" ] && [ -s "$src/bench/reference/models.py" ] ||
  { echo "FAIL: bench/WORKLOADS.md or bench/reference/models.py is missing"; fails=$((fails + 1)); }
[ $fails = 0 ] && echo "standalone: all passed" || { echo "standalone: $fails failed"; exit 1; }
