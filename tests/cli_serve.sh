#!/bin/sh
# brigade serve, driven with curl on a free loopback port, on a tiny synthetic
# model with the real Qwen vocabulary and the Qwen3.5 chat template: health
# while loading, every endpoint, streaming, bad input (400, 413, 401), the
# queue (503), prompt caching across turns, batched answers equal to answers
# alone, a client leaving mid-stream, SIGTERM. Then the OpenAI client test
# (tests/serve_openai.mjs) with the official npm package.
B=${BRIGADE:-build/brigade}
SRC=${ORACLE_SRC_DIR:-.oracle/llama.cpp}
V=$SRC/models/ggml-vocab-qwen35.gguf
TMPL=$SRC/models/templates/Qwen3.5-4B.jinja
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
PIDS=""
cleanup() {
    for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
. "$HERE/lib_cli.sh"

"$B" synth "$T/m.gguf" --preset tiny-qwen35moe --type q8_0 --vocab "$V" 2>/dev/null || bad "synth"
M="$T/m.gguf"

# serve NAME ARGS...: starts a server logging to $T/NAME.log, its chat
# template from $SERVE_TMPL (default $TMPL); sets PID and URL.
serve() {
    name=$1
    shift
    "$B" serve -m "$M" --port 0 --chat-template-file "${SERVE_TMPL:-$TMPL}" -t 1 "$@" \
        >"$T/$name.log" 2>&1 &
    PID=$!
    PIDS="$PIDS $PID"
    URL=""
    for i in $(seq 1 200); do
        URL=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$T/$name.log" 2>/dev/null)
        [ -n "$URL" ] && break
        sleep 0.02
    done
    [ -n "$URL" ] || bad "$name: the server did not start: $(cat "$T/$name.log")"
}
# wait_ready: polls /health until 200; HEALTH gets the statuses seen.
wait_ready() {
    HEALTH=""
    for i in $(seq 1 500); do
        c=$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")
        HEALTH="$HEALTH $c"
        [ "$c" = 200 ] && return 0
        sleep 0.01
    done
    bad "not ready: $HEALTH"
}
# stop_server [SIGNAL]: SIGTERM (or the one given), expects exit 0.
stop_server() {
    kill -"${1:-TERM}" "$PID"
    wait "$PID"
    rc=$?
    [ $rc -eq 0 ] && ok || bad "server exited $rc after SIG${1:-TERM}"
}
# request PATH [CURL-ARGS...]: sets CODE and BODY (a GET unless the
# arguments say otherwise).
request() {
    req_url=$URL$1
    shift
    BODY=$(curl -s -w '\n%{http_code}' "$@" "$req_url")
    CODE=$(printf '%s' "$BODY" | tail -n 1)
    BODY=$(printf '%s' "$BODY" | sed '$d')
}
# post PATH JSON: sets CODE and BODY.
post() {
    request "$1" -H 'Content-Type: application/json' -d "$2"
}
# jcheck PYTHON-EXPR: evaluated with j = json of BODY; a failure names it.
jcheck() {
    printf '%s' "$BODY" | python3 -c "import json,sys; j=json.load(sys.stdin); assert $1" 2>/dev/null \
        && ok || bad "$1: $CODE $BODY"
}
# expect_code CODE PATH JSON [PYTHON-EXPR]
expect_code() {
    want=$1 path=$2 json=$3
    post "$path" "$json"
    [ "$CODE" = "$want" ] && ok || bad "$path $json: status $CODE, expected $want: $BODY"
    [ -z "$4" ] || jcheck "$4"
}

# --- one server, two slots: the API -------------------------------------------
# The server listens before it loads; its load reads the chat template,
# here a FIFO that stays without a writer until the checks of the loading
# state are done, so they see it whatever the machine's speed.
mkfifo "$T/tmpl.fifo"
SERVE_TMPL=$T/tmpl.fifo
serve main -np 2 -c 1024 --metrics --alias tiny
SERVE_TMPL=
request /health
[ "$CODE" = 503 ] && ok || bad "/health while loading: status $CODE, expected 503: $BODY"
jcheck 'j["error"]["code"] == 503 and j["error"]["message"] == "Loading model"'
expect_code 503 /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}]}' \
    'j["error"]["type"] == "unavailable_error"'
cat "$TMPL" >"$T/tmpl.fifo"
wait_ready
BODY=$(curl -s "$URL/health")
jcheck 'j["status"] == "ok"'
BODY=$(curl -s "$URL/v1/models")
jcheck 'j["object"] == "list" and j["data"][0]["id"] == "tiny"'

CHAT='{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there"}],"max_tokens":8,"temperature":0}'
expect_code 200 /v1/chat/completions "$CHAT" \
    'j["object"] == "chat.completion" and j["choices"][0]["finish_reason"] == "length" and j["usage"]["completion_tokens"] == 8 and j["timings"]["predicted_n"] == 8 and j["model"] == "tiny"'
FIRST=$BODY
# The same request again: the prompt comes from the slot's cache, the answer is the same.
expect_code 200 /v1/chat/completions "$CHAT" \
    'j["usage"]["prompt_tokens_details"]["cached_tokens"] > 0 and j["timings"]["cache_n"] == j["usage"]["prompt_tokens_details"]["cached_tokens"]'
a=$(printf '%s' "$FIRST" | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["message"]["content"])')
b=$(printf '%s' "$BODY" | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["message"]["content"])')
[ "$a" = "$b" ] && ok || bad "greedy answer differs with a cached prompt: '$a' vs '$b'"
# A second turn extends the first: only the new part is evaluated.
TURN2='{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there"},{"role":"assistant","content":"Hi."},{"role":"user","content":"And now?"}],"max_tokens":4}'
expect_code 200 /v1/chat/completions "$TURN2" \
    'j["usage"]["prompt_tokens_details"]["cached_tokens"] >= 10 and j["timings"]["prompt_n"] < j["usage"]["prompt_tokens"]'

# Streaming: role first, text chunks, finish_reason, usage, [DONE].
out=$(curl -sN "$URL/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}')
printf '%s\n' "$out" | python3 -c '
import json, sys
lines = [l for l in sys.stdin.read().split("\n") if l]
assert lines[-1] == "data: [DONE]", lines[-1]
chunks = [json.loads(l[6:]) for l in lines[:-1]]
assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
assert chunks[-2]["choices"][0]["finish_reason"] == "length" and "timings" in chunks[-2]
assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 5
assert all(c["object"] == "chat.completion.chunk" for c in chunks)
' && ok || bad "chat stream: $out"

# Completions: text, token ids, streaming, stop strings.
expect_code 200 /v1/completions '{"prompt":"Once upon a time","max_tokens":6,"temperature":0}' \
    'j["object"] == "text_completion" and j["usage"]["completion_tokens"] == 6 and isinstance(j["choices"][0]["text"], str)'
expect_code 200 /v1/completions '{"prompt":[9707,1879,11],"max_tokens":3}' 'j["usage"]["prompt_tokens"] == 3'
out=$(curl -sN "$URL/v1/completions" -d '{"prompt":"Once","max_tokens":4,"stream":true}')
printf '%s' "$out" | grep -q '"finish_reason":"length"' && printf '%s' "$out" | tail -n 1 | grep -q '^data: \[DONE\]$' \
    && ok || bad "completion stream: $out"
# A stop string taken from a greedy answer cuts the answer before it.
post /v1/completions '{"prompt":"Once upon a time","max_tokens":12,"temperature":0}'
full=$(printf '%s' "$BODY" | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"][4:8])')
if [ -n "$full" ]; then
    stop=$(printf '%s' "$full" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')
    expect_code 200 /v1/completions "{\"prompt\":\"Once upon a time\",\"max_tokens\":12,\"temperature\":0,\"stop\":[$stop]}" \
        "j['choices'][0]['finish_reason'] == 'stop' and $stop not in j['choices'][0]['text'] and j['usage']['completion_tokens'] < 12"
fi

# Tokenizer endpoints.
expect_code 200 /tokenize '{"content":"Hello world"}' 'j["tokens"] == [9707, 1879]'
expect_code 200 /tokenize '{"content":"Hello","with_pieces":true}' 'j["tokens"][0]["piece"] == "Hello"'
expect_code 200 /detokenize '{"tokens":[9707,1879]}' 'j["content"] == "Hello world"'
expect_code 400 /detokenize '{"tokens":[-1]}' 'j["error"]["type"] == "invalid_request_error"'

# Tools: a conversation with a call and its result renders and answers.
TOOLS='[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]'
expect_code 200 /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"sunny\"}],\"tools\":$TOOLS,\"max_tokens\":3}" \
    'j["choices"][0]["finish_reason"] in ("length", "stop", "tool_calls")'

# response_format json_object: the answer is (the start of) a JSON object.
expect_code 200 /v1/chat/completions '{"messages":[{"role":"user","content":"JSON please"}],"response_format":{"type":"json_object"},"max_tokens":40,"seed":3}' \
    'j["choices"][0]["message"]["content"].lstrip().startswith("{") and (j["choices"][0]["finish_reason"] != "stop" or isinstance(json.loads(j["choices"][0]["message"]["content"]), dict))'

# Metrics.
m=$(curl -s "$URL/metrics")
printf '%s' "$m" | grep -q '^brigade_requests_total [1-9]' && printf '%s' "$m" | grep -q '^brigade_tokens_predicted_total [1-9]' \
    && printf '%s' "$m" | grep -q '^brigade_requests_deferred 0' && ok || bad "metrics: $m"

# --- bad input -----------------------------------------------------------------
E='j["error"]["type"] == "invalid_request_error" and j["error"]["code"] == 400'
expect_code 400 /v1/chat/completions '{"messages": [' "$E"
expect_code 400 /v1/chat/completions '[1,2]' "$E"
expect_code 400 /v1/chat/completions '{"messages":"hi"}' "$E and 'messages' in j['error']['message']"
expect_code 400 /v1/chat/completions '{"messages":[]}' "$E"
expect_code 400 /v1/chat/completions '{"messages":[{"role":"wizard","content":"x"}]}' "$E and 'wizard' in j['error']['message']"
expect_code 400 /v1/chat/completions '{"messages":[{"role":"user","content":5}]}' "$E"
expect_code 400 /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"max_tokens":-1}' "$E and 'max_tokens' in j['error']['message']"
expect_code 400 /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"max_tokens":"ten"}' "$E"
expect_code 400 /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"n":100000}' "$E and 'n' in j['error']['message']"
expect_code 400 /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"top_k":1000000000000}' "$E and 'top_k' in j['error']['message']"
expect_code 400 /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"temperature":NaN}' "$E"
expect_code 400 /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}' "$E and 'temperature' in j['error']['message']"
expect_code 400 /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"temperature":1e309}' "$E"
expect_code 400 /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"top_p":1.5}' "$E"
expect_code 400 /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"stream":"yes"}' "$E"
expect_code 400 /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"stop":[1]}' "$E"
expect_code 400 /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]}' "$E"
expect_code 400 /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}}' "$E"
expect_code 400 /v1/completions '{"prompt":{"a":1}}' "$E"
expect_code 400 /v1/completions '{"prompt":[1,-5]}' "$E"
long=$(python3 -c 'print(" ".join(["word"] * 700))')
expect_code 400 /v1/completions "{\"prompt\":\"$long\"}" \
    'j["error"]["type"] == "exceed_context_size_error" and j["error"]["n_ctx"] == 512 and j["error"]["n_prompt_tokens"] > 512'
expect_code 404 /v1/nothing '{}' 'j["error"]["code"] == 404'
c=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/chat/completions")
[ "$c" = 405 ] && ok || bad "GET on a POST endpoint: $c"
python3 -c 'print("{\"prompt\":\"" + "a" * (9 << 20) + "\"}")' >"$T/big.json"
c=$(curl -s -o "$T/big.out" -w '%{http_code}' "$URL/v1/completions" --data-binary @"$T/big.json")
[ "$c" = 413 ] && grep -q '"error"' "$T/big.out" && ok || bad "9 MiB body: $c $(cat "$T/big.out")"
# Still healthy after all that.
BODY=$(curl -s "$URL/health")
jcheck 'j["status"] == "ok"'

# --- batching: greedy answers with four requests at once equal answers alone ---
for p in one two three four; do
    post /v1/completions "{\"prompt\":\"The $p thing\",\"max_tokens\":10,\"temperature\":0}"
    printf '%s' "$BODY" | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])' >"$T/alone.$p"
done
jobs=""
for p in one two three four; do
    curl -s "$URL/v1/completions" -d "{\"prompt\":\"The $p thing\",\"max_tokens\":10,\"temperature\":0}" >"$T/batch.$p.json" &
    jobs="$jobs $!"
done
wait $jobs
same=0
for p in one two three four; do
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["text"])' "$T/batch.$p.json" >"$T/batch.$p" 2>/dev/null
    cmp -s "$T/alone.$p" "$T/batch.$p" && same=$((same + 1))
done
[ $same -eq 4 ] && ok || bad "batched greedy answers differ from answers alone ($same of 4 equal)"

# --- a client that leaves mid-stream frees its slot ------------------------------
curl -sN --max-time 1 "$URL/v1/completions" -d '{"prompt":"Go on","max_tokens":100000,"stream":true}' >/dev/null 2>&1
sleep 0.5
m=$(curl -s "$URL/metrics")
printf '%s' "$m" | grep -q '^brigade_requests_processing 0' && ok || bad "slot not freed after the client left: $m"
# the same without streaming: the server notices while the answer is being made
curl -s --max-time 1 "$URL/v1/completions" -d '{"prompt":"Go on","max_tokens":100000}' >/dev/null 2>&1
sleep 0.5
m=$(curl -s "$URL/metrics")
printf '%s' "$m" | grep -q '^brigade_requests_processing 0' && ok || bad "slot not freed after a non-streaming client left: $m"
stop_server
grep -q "serve: stopped" "$T/main.log" && ok || bad "no clean stop: $(tail -n 3 "$T/main.log")"

# --- one slot, no queue: 503; SIGTERM mid-stream ends the stream and exits 0 -----
serve busy -np 1 --max-queue 0 -c 4096
wait_ready
curl -sN "$URL/v1/completions" -d '{"prompt":"Tell me","max_tokens":30,"stream":true}' >"$T/long.out" 2>&1 &
LONG=$!
for i in $(seq 1 100); do grep -q '"text"' "$T/long.out" 2>/dev/null && break; sleep 0.05; done
expect_code 503 /v1/completions '{"prompt":"Me too","max_tokens":2}' 'j["error"]["code"] == 503'
stop_server
# The request in flight finishes (within the grace period) before the exit.
wait $LONG
grep -q '"finish_reason":"length"' "$T/long.out" && grep -q '^data: \[DONE\]$' "$T/long.out" \
    && ok || bad "stream not finished at shutdown: $(tail -c 300 "$T/long.out")"

# --- API keys ------------------------------------------------------------------
printf 'other-key\n\nsecret-2\n' >"$T/keys"
serve keys --api-key secret-1 --api-key-file "$T/keys"
wait_ready
c=$(curl -s -o "$T/k.out" -w '%{http_code}' "$URL/v1/models")
[ "$c" = 401 ] && grep -q authentication_error "$T/k.out" && ok || bad "no key: $c"
c=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong' "$URL/v1/models")
[ "$c" = 401 ] && ok || bad "wrong key: $c"
for k in secret-1 secret-2; do
    c=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $k" "$URL/v1/models")
    [ "$c" = 200 ] && ok || bad "key $k: $c"
done
c=$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")
[ "$c" = 200 ] && ok || bad "health needs no key: $c"
c=$(curl -s -o /dev/null -w '%{http_code}' "$URL/metrics" -H 'Authorization: Bearer secret-1')
[ "$c" = 501 ] && ok || bad "metrics without --metrics: $c"

# --- the official OpenAI client (npm), against this server -----------------------
NODE_DIR=${SERVE_NODE_DIR:-$(cd "$(dirname "$B")" && pwd)/serve-node}
OPENAI_VERSION=5.23.2
if [ ! -f "$NODE_DIR/node_modules/openai/package.json" ] ||
    ! grep -q "\"version\": \"$OPENAI_VERSION\"" "$NODE_DIR/node_modules/openai/package.json"; then
    mkdir -p "$NODE_DIR"
    if ! (cd "$NODE_DIR" && npm install --no-audit --no-fund --silent --prefix "$NODE_DIR" \
        "openai@$OPENAI_VERSION" >"$T/npm.log" 2>&1); then
        bad "cannot install the openai npm package $OPENAI_VERSION into $NODE_DIR: $(tail -n 5 "$T/npm.log")"
    fi
fi
if [ ! -f "$NODE_DIR/node_modules/openai/package.json" ]; then
    bad "the openai npm package is not in $NODE_DIR/node_modules: the client test cannot run"
else
    out=$(NODE_PATH="$NODE_DIR/node_modules" BASE_URL="$URL/v1" API_KEY=secret-1 \
        node "$HERE/serve_openai.mjs" 2>&1)
    rc=$?
    printf '%s\n' "$out"
    [ $rc -eq 0 ] && ok || bad "serve_openai.mjs exited $rc"
fi
stop_server INT

# --- qwen3moe (attention only): the cache is cut at any length ---------------------
"$B" synth "$T/m3.gguf" --preset tiny-qwen3moe --type q8_0 --vocab "$V" 2>/dev/null || bad "synth qwen3moe"
M="$T/m3.gguf"
serve q3 -np 2 -c 1024
wait_ready
post /v1/completions '{"prompt":"The same words again and again","max_tokens":6,"temperature":0}'
A=$(printf '%s' "$BODY" | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])')
expect_code 200 /v1/completions '{"prompt":"The same words again and more","max_tokens":6,"temperature":0}' \
    'j["usage"]["prompt_tokens_details"]["cached_tokens"] >= 4'
expect_code 200 /v1/completions '{"prompt":"The same words again and again","max_tokens":6,"temperature":0}' \
    'j["usage"]["prompt_tokens_details"]["cached_tokens"] >= 4'
B2=$(printf '%s' "$BODY" | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])')
[ -n "$A" ] && [ "$A" = "$B2" ] && ok || bad "qwen3moe: greedy answer differs with a cut cache: '$A' vs '$B2'"
stop_server

finish cli_serve
