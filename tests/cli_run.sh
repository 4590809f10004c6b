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
p = json.load(sys.stdin)
assert p["n_ctx"] == 4096 and p["kv_bytes"] == 4096 * 20 * 1024, p
assert p["recurrent_bytes"] == 30 * (3 * 8192 + 32 * 128 * 128) * 4, p
assert sum(p["weights"].values()) == p["weights_bytes"], p
' && ok || bad "fit --json figures: $out"
expect 0 "| 262144 |" -- "$B" fit -m "$T/full.gguf"
# Placement: the 18.2 GiB of weights fit a 24 GiB card whole (the token
# embeddings stay on the host); an 8 GiB card keeps experts on the CPU.
out=$("$B" fit -m "$T/full.gguf" -c 4096 --gpu 8,24 --json)
printf '%s' "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
small, big = d["cells"][0], d["cells"][1]
assert d["gpu_gib"] == 8 and d["placement"] == small["placement"], d
assert big["gpu_gib"] == 24 and big["placement"]["kind"] == "gpu" and big["gpu_bytes"] <= 24 << 30, big
assert small["placement"]["kind"] == "experts-cpu", small
assert 0 < small["placement"]["n_cpu_moe_layers"] <= 40, small
assert small["gpu_bytes"] <= 8 << 30 < small["gpu_bytes"] + 2 * (small["host_bytes"]), small
' && ok || bad "fit placement: $out"
# The catalogue: a model nobody downloaded plans like the file synth writes
# with the same mix (tensor types as llama.cpp's quantizer gives them).
"$B" synth "$T/mix.gguf" --preset qwen3.6-35b-a3b --type q4_k_m --sparse 2>/dev/null
file_bytes=$("$B" info --json "$T/mix.gguf" | python3 -c 'import json,sys; print(json.load(sys.stdin)["weights_bytes"])')
out=$("$B" fit qwen3.6-35b-a3b:Q4_K_M -c 4096 --json)
printf '%s' "$out" | FILE_BYTES="$file_bytes" python3 -c '
import json, os, sys
p = json.load(sys.stdin)
assert p["weights_bytes"] == int(os.environ["FILE_BYTES"]), p
assert p["kv_bytes"] == 4096 * 20 * 1024 and p["recurrent_bytes"] == 30 * (3 * 8192 + 32 * 128 * 128) * 4, p
assert p["placement"]["kind"] == "gpu" and p["gpu_gib"] == 24, p
' && ok || bad "fit catalogue: $out"
# -np 4: the context is shared (KV as for 4096 cells), a recurrent state each
out=$("$B" fit qwen3.6-35b-a3b:Q4_K_M -c 4096 -np 4 --json)
printf '%s' "$out" | python3 -c '
import json, sys
p = json.load(sys.stdin)
assert p["n_seq"] == 4 and p["kv_bytes"] == 4096 * 20 * 1024, p
assert p["recurrent_bytes"] == 4 * 30 * (3 * 8192 + 32 * 128 * 128) * 4, p
' && ok || bad "fit -np: $out"
expect 0 "Qwen3.6-35B-A3B Q4_K_M" -- "$B" fit qwen3.6-35b-a3b:q4_k_m
expect 0 "| Qwen3-235B-A22B |" -- "$B" fit --list
expect 1 "not in the catalogue" -- "$B" fit qwen3.6-35b-a3b:Q3_K_XL
expect 2 "usage" -- "$B" fit
expect 2 "bad or missing value for -ctk" -- "$B" fit -m "$T/full.gguf" -ctk q2_k
# A load reports planned vs allocated bytes; the session allocates from the plan.
out=$("$B" run -m "$M" -p "hi" -n 1 --raw --verbose -c 512 -ctk q8_0 2>&1 >/dev/null)
printf '%s' "$out" | python3 -c '
import re, sys
m = re.search(r"planned ([0-9.]+) MiB, allocated ([0-9.]+) MiB", sys.stdin.read())
assert m and m.group(1) == m.group(2), m
' && ok || bad "run --verbose memory: $out"

finish cli_run
