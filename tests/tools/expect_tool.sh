# Sourced by the tests of tools/gpu/*.py, with the tool's name and the test's arguments:
#   . "$(dirname "$0")/expect_tool.sh" TOOL BRISK_BINARY WORKDIR SOURCE_DIR
# sets brisk, work, src, py and cmp (the tool's command), starts in an empty WORKDIR (exit 77
# without python3), and defines expect EXIT_STATUS OUTPUT_PATTERN ARGS...: runs $cmp ARGS and
# passes when it exits EXIT_STATUS with its one line matching; failures count in fails.
brisk=$2 work=$3 src=$4
py=${PYTHON:-python3}
command -v "$py" >/dev/null || { echo "SKIP: no $py"; exit 77; }
cmp="$py $src/tools/gpu/$1.py"
rm -rf "$work" && mkdir -p "$work/data" && cd "$work" || exit 1
fails=0
expect() {
  local want=$1 pat=$2; shift 2
  local got rc
  got=$($cmp "$@" 2>/dev/null); rc=$?
  if [ $rc != "$want" ] || ! echo "$got" | grep -qE -- "$pat"; then
    echo "FAIL: ${cmp##*/} $* -> exit $rc, '$got' (want exit $want, /$pat/)"; fails=$((fails + 1))
  else echo "ok   $*: $got"; fi
}
