# Sourced by the CLI script tests: expect NAME PATTERN -- command... passes when the command
# exits with status 1 to 3 (an error, not a signal) and its output matches PATTERN; the
# counters pass and fail are the caller's. ok NAME and bad NAME count a check of the caller's own.
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
expect() {
  local name=$1 pat=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ $rc -ge 1 ] && [ $rc -le 3 ] && printf '%s' "$out" | grep -qE -- "$pat"; then
    ok "$name"
  else
    fail=$((fail + 1)); echo "FAIL $name (exit $rc): $out"
  fi
}
