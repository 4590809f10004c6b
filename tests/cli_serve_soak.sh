#!/bin/sh
# Soak of brigade serve built with AddressSanitizer (make test builds it in
# $(BUILD)-asan): hundreds of mixed requests from concurrent clients, some
# cancelled mid-stream, some malformed, on four slots with a short queue.
# Afterwards the server must be healthy, exit 0 on SIGTERM, and ASan must
# have found no error and no leak.
B=${BRIGADE:-build/brigade}
A=${BRIGADE_ASAN:-$(dirname "$B")-asan/brigade}
SRC=${ORACLE_SRC_DIR:-.oracle/llama.cpp}
HERE=$(cd "$(dirname "$0")" && pwd)
N=${SOAK_REQUESTS:-250}
CLIENTS=${SOAK_CLIENTS:-12}
T=$(mktemp -d)
PID=""
trap '[ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null; rm -rf "$T"' EXIT
. "$HERE/lib_cli.sh"

if [ ! -x "$A" ]; then
    bad "no AddressSanitizer build at $A (make BUILD=... test builds it)"
    finish cli_serve_soak
    exit 1
fi
# The built-in byte vocabulary keeps the output head small: more steps a second.
"$B" synth "$T/m.gguf" --preset tiny-qwen35moe --type q8_0 2>/dev/null || bad "synth"

ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:log_path="$T/asan" \
    "$A" serve -m "$T/m.gguf" --port 0 -np 4 --max-queue 16 -c 2048 -t 1 --metrics \
    --chat-template-file "$SRC/models/templates/Qwen3.5-4B.jinja" >"$T/log" 2>&1 &
PID=$!
URL=""
for i in $(seq 1 500); do
    URL=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$T/log")
    [ -n "$URL" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ] && break
    sleep 0.05
done
[ -n "$URL" ] || bad "the server did not start: $(cat "$T/log")"

out=$(python3 "$HERE/serve_soak.py" "$URL" "$N" "$CLIENTS" 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -eq 0 ] && ok || bad "soak clients saw problems"
# Still healthy, nothing left in a slot, and still answering.
sleep 0.5
c=$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")
[ "$c" = 200 ] && ok || bad "health after the soak: $c"
m=$(curl -s "$URL/metrics")
printf '%s' "$m" | grep -q '^brigade_requests_processing 0' && printf '%s' "$m" | grep -q '^brigade_requests_deferred 0' \
    && ok || bad "slots busy after the soak: $m"
printf '%s\n' "$m" | grep -E '^brigade_(requests_total|tokens_predicted_total|decode_steps_total) '
# A fixed seed, and the end of text counts too: the random model may sample it.
body=$(curl -s "$URL/v1/completions" -d '{"prompt":"After","max_tokens":3,"seed":7}')
printf '%s' "$body" | grep -Eq '"completion_tokens":[1-3]' &&
    printf '%s' "$body" | grep -Eq '"finish_reason":"(length|stop)"' && ok ||
    bad "answer after the soak: $body"
kill -TERM "$PID"
wait "$PID"
rc=$?
PID=""
[ $rc -eq 0 ] && ok || bad "server exited $rc: $(tail -n 5 "$T/log")"
if ls "$T"/asan* >/dev/null 2>&1; then
    bad "AddressSanitizer: $(head -c 3000 "$T"/asan*)"
else
    ok
fi
grep -q "Sanitizer" "$T/log" && bad "sanitizer output: $(grep -A 20 Sanitizer "$T/log" | head -40)" || ok

finish cli_serve_soak
