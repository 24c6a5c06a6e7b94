#!/usr/bin/env bash
# The layering of src/ (docs/dev/architecture.md): every #include "folder/..." of a file in
# src/F names F itself, a public header (brisk/), or a folder the page lists for F, and
# every folder listed for F sits earlier in the page's table, so no circle can form.
set -uo pipefail
cd "${1:-$(dirname "$0")/../..}"
page=docs/dev/architecture.md
[ -f "$page" ] || { echo "FAIL: $page is missing"; exit 1; }
declare -A allowed pos
n=0
while IFS='|' read -r _ folder _ deps _; do
  f=$(echo "$folder" | tr -d ' `')
  [ -n "$f" ] || continue
  n=$((n + 1))
  pos[$f]=$n
  allowed[$f]=$(echo "$deps" | tr -d ' ' | tr ',' ' ')
done < <(grep -E '^\| `[a-z/]+` \|' "$page")
fail=0
for f in "${!allowed[@]}"; do
  for d in ${allowed[$f]}; do
    [ "$d" = "$f" ] && continue
    if [ -z "${pos[$d]:-}" ]; then echo "FAIL: $page: $f includes '$d', which is not a row"; fail=1
    elif [ "${pos[$d]}" -ge "${pos[$f]}" ]; then echo "FAIL: $page: $f includes $d, listed after it (a circle could form)"; fail=1; fi
  done
done
for dir in src/*/; do
  f=$(basename "$dir")
  [ -n "${pos[$f]:-}" ] || { echo "FAIL: src/$f is not in $page"; fail=1; }
done
while IFS=: read -r file line text; do
  own=$(echo "$file" | cut -d/ -f2)
  inc=$(echo "$text" | sed -E 's/.*#include "([a-z_]+)\/.*/\1/')
  [ "$inc" = brisk ] || [ "$inc" = "$own" ] && continue
  case " ${allowed[$own]:-} " in
    *" $inc "*) ;;
    *) echo "FAIL: $file:$line includes $inc/, which $page does not list for $own"; fail=1 ;;
  esac
done < <(grep -rnE '^\s*#\s*include "[a-z_]+/' src --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh')
[ $fail -eq 0 ] && echo "layers: $n folders, every include of src/ follows $page"
exit $fail
