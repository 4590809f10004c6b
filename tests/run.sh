#!/bin/sh
# Runs each test program or script given, sums their "N passed, N failed"
# lines, and fails if any test failed, crashed, or reported nothing. Each
# test's wall time is printed after it, and the longest at the end (what a
# slow CI run spends its time on).
passed=0 failed=0 status=0 times=""
for t in "$@"; do
    [ -e "$t" ] || continue
    echo "== $t"
    start=$(date +%s)
    case "$t" in
        *.sh) out=$(sh "$t" 2>&1) ;;
        *) out=$("$t" 2>&1) ;;
    esac
    rc=$?
    secs=$(($(date +%s) - start))
    times="$times$secs $t
"
    printf '%s\n' "$out"
    echo "-- $t: $secs s"
    line=$(printf '%s\n' "$out" | grep -E '[0-9]+ passed, [0-9]+ failed' | tail -n 1)
    if [ -z "$line" ]; then
        echo "!! $t reported no results (exit $rc)"
        failed=$((failed + 1)); status=1; continue
    fi
    p=$(printf '%s' "$line" | sed -E 's/(^|.*[^0-9])([0-9]+) passed.*/\2/')
    f=$(printf '%s' "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
    passed=$((passed + p)); failed=$((failed + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "!! $t exited $rc"; failed=$((failed + 1))
    fi
    [ "$rc" -ne 0 ] && status=1
done
echo "longest:"
printf '%s' "$times" | sort -rn | head -n 8 | sed 's/^\([0-9]*\) \(.*\)/  \1 s  \2/'
echo "total: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$status" -eq 0 ]
