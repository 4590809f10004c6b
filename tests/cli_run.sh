#!/bin/sh
# brigade run and chat as a user meets them, on a synthetic model with a
# real vocabulary: streaming output, timings, limits, errors, the chat loop.
B=${BRIGADE:-build/brigade}
V=${ORACLE_SRC_DIR:-.oracle/llama.cpp}/models/ggml-vocab-qwen35.gguf
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib_cli.sh"

"$B" synth "$T/m.gguf" --preset tiny-qwen35moe --type q8_0 --vocab "$V" 2>/dev/null || bad "synth"
M="$T/m.gguf"
expect 0 "generation:        8 tokens" -- "$B" run -m "$M" -p "Hello there" -n 8 --temp 0
expect 0 "stopped:    limit" -- "$B" run -m "$M" -p "Hello there" -n 8
expect 0 "prompt:" -- "$B" run -m "$M" -p "Once upon a time" -n 4 --raw -t 1
# Greedy is deterministic; a seeded sample too.
a=$("$B" run -m "$M" -p "Hi" -n 12 --temp 0 2>/dev/null); b=$("$B" run -m "$M" -p "Hi" -n 12 --temp 0 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "greedy output differs between runs"
a=$("$B" run -m "$M" -p "Hi" -n 12 --seed 7 2>/dev/null); b=$("$B" run -m "$M" -p "Hi" -n 12 --seed 7 2>/dev/null)
[ "$a" = "$b" ] && ok || bad "seeded output differs between runs"
# Limits and errors.
expect 1 "the context 8" -- "$B" run -m "$M" -p "a prompt that is much longer than eight tokens, surely" -c 8
expect 0 "stopped:    length" -- "$B" run -m "$M" -p "Hi" -c 24 -n 100 --temp 0
expect 2 "unknown option" -- "$B" run -m "$M" -p "Hi" --frobnicate
expect 2 "not a number" -- "$B" run -m "$M" -p "Hi" --temp warm
expect 1 "top_p" -- "$B" run -m "$M" -p "Hi" --top-p 0
expect 2 "unknown cache type" -- "$B" run -m "$M" -p "Hi" -ctk q3_0
expect 0 "generation:" -- "$B" run -m "$M" -p "Hi" -n 4 -ctk q8_0 -ctv q4_0
expect 1 "cannot open" -- "$B" run -m "$T/none.gguf" -p "Hi"
# The chat loop, fed from a pipe.
out=$(printf 'Hello\n/regen\n/clear\nSecond question\n/exit\n' | "$B" chat -m "$M" -n 6 2>&1)
rc=$?
[ $rc -eq 0 ] && ok || bad "chat exited $rc: $out"
printf '%s' "$out" | grep -q "conversation cleared" && ok || bad "chat /clear: $out"

# bench: llama-bench's table, JSON and errors.
expect 0 "| pp8 |" -- "$B" bench -m "$M" -p 8 -n 4 -r 1 -t 1,2
expect 0 "tg4 @ d8" -- "$B" bench -m "$M" -p 0 -n 4 -d 8 -r 1
out=$("$B" bench -m "$M" -p 8 -n 0 -r 2 -o json 2>/dev/null)
printf '%s' "$out" | python3 -c 'import json,sys; r=json.load(sys.stdin); assert r[0]["test"]=="pp8" and r[0]["avg_ts"]>0' \
    && ok || bad "bench -o json: $out"
expect 2 "bad or missing value for -o" -- "$B" bench -m "$M" -o xml
expect 1 "cannot open" -- "$B" bench -m "$T/none.gguf"

# fit: the memory plan; the full Qwen3.6 geometry as a sparse file (no disk).
"$B" synth "$T/full.gguf" --preset qwen3.6-35b-a3b --type q4_k --sparse 2>/dev/null
# 10 attention layers x 2 KV heads x 256 x 2 bytes x (K, V) = 20 KiB a token:
# 80 MiB at 4096; 30 DeltaNet layers x (3 x 8192 + 32 x 128 x 128) floats.
out=$("$B" fit -m "$T/full.gguf" -c 4096 --json)
printf '%s' "$out" | python3 -c '
import json, sys
p = json.load(sys.stdin)["plans"][0]
assert p["kv_bytes"] == 4096 * 20 * 1024, p
assert p["recurrent_bytes"] == 30 * (3 * 8192 + 32 * 128 * 128) * 4, p
' && ok || bad "fit --json figures: $out"
expect 0 "| 262144 |" -- "$B" fit -m "$T/full.gguf"
# Placement: the 18.2 GiB of weights fit a 24 GiB card whole (the token
# embeddings stay on the host); an 8 GiB card keeps experts on the CPU.
out=$("$B" fit -m "$T/full.gguf" -c 4096 --gpu 8,24 --json)
printf '%s' "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
small, big = d["gpus"][0]["cells"][0], d["gpus"][1]["cells"][0]
assert big["placement"] == "gpu" and big["gpu_bytes"] <= 24 << 30, big
assert small["placement"] == "experts-cpu" and 0 < small["n_cpu_moe_layers"] <= 40, small
assert small["gpu_bytes"] <= 8 << 30 < small["gpu_bytes"] + 2 * (small["host_bytes"]), small
' && ok || bad "fit placement: $out"
expect 2 "bad or missing value for -ctk" -- "$B" fit -m "$T/full.gguf" -ctk q2_k

finish cli_run
