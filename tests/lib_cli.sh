# Shared by the tests/cli_*.sh scripts (sourced; not a test itself): counters, and
# expect RC PATTERN -- command...: the command exits RC and its output
# (stdout and stderr) contains PATTERN.
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
expect() {
    rc=$1 pat=$2
    shift 3
    out=$("$@" 2>&1)
    got=$?
    if [ "$got" -ne "$rc" ]; then bad "$* exited $got, expected $rc: $out"; return; fi
    if ! printf '%s' "$out" | grep -q -- "$pat"; then bad "$*: output lacks '$pat': $out"; return; fi
    ok
}
# finish NAME: the summary line tests/run.sh reads, and the exit status.
finish() {
    echo "$1: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
