#!/bin/bash
# Runs each test program or script given, sums their "N passed, N failed"
# lines, and fails if any test failed, crashed, or reported nothing.
#
# Test programs run TEST_JOBS at a time (default: the CPU count), since the
# longest (the emulated and race-checked kernels) are single-threaded;
# scripts (*.sh: servers, timing-sensitive health checks) run one by one
# after them. Each test's output is printed whole, in the order given, with
# its wall time; the longest times end the report, so a slow CI run shows
# where its time went.
set -u
n_jobs=${TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$n_jobs" -ge 1 ] 2>/dev/null || n_jobs=1
dir=$(mktemp -d "${TMPDIR:-/tmp}/brigade-run-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT

passed=0 failed=0 status=0 times="" next=0 running=0
tests=()
for t in "$@"; do
    [ -e "$t" ] && tests+=("$t")
done

# Test i's output in $dir/i.out, then "rc seconds" in $dir/i.rc.
run_one() {
    local i=$1 t=$2 start rc
    start=$(date +%s)
    case "$t" in
        *.sh) sh "$t" > "$dir/$i.out" 2>&1 ;;
        *) "$t" > "$dir/$i.out" 2>&1 ;;
    esac
    rc=$?
    echo "$rc $(($(date +%s) - start))" > "$dir/$i.tmp" && mv "$dir/$i.tmp" "$dir/$i.rc"
}

# Reports every finished test from $next on, up to the first unfinished.
report() {
    local t rc secs line p f
    while [ "$next" -lt "${#tests[@]}" ] && [ -e "$dir/$next.rc" ]; do
        t=${tests[$next]}
        read -r rc secs < "$dir/$next.rc"
        echo "== $t"
        cat "$dir/$next.out"
        echo "-- $t: $secs s"
        times="$times$secs $t
"
        line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$dir/$next.out" | tail -n 1)
        next=$((next + 1))
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
}

for i in "${!tests[@]}"; do
    t=${tests[$i]}
    case "$t" in
        *.sh) # scripts alone: every program before them has finished
            wait; running=0; report
            run_one "$i" "$t"; report; continue ;;
    esac
    while [ "$running" -ge "$n_jobs" ]; do
        wait -n; running=$((running - 1)); report
    done
    run_one "$i" "$t" &
    running=$((running + 1))
done
wait
report

echo "longest:"
printf '%s' "$times" | sort -rn | head -n 8 | sed 's/^\([0-9]*\) \(.*\)/  \1 s  \2/'
echo "total: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$status" -eq 0 ]
