#!/bin/sh
# brigade quantize end to end: the mix's types land in the file, the report
# line, bad arguments, and Ctrl+C (SIGINT) leaving no output behind.
. "$(dirname "$0")/lib_cli.sh"
B=${BRIGADE:-build/brigade}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

"$B" synth "$T/bf16.gguf" --preset tiny-qwen35moe --type bf16 2>/dev/null
expect 0 "bits per weight" -- "$B" quantize "$T/bf16.gguf" "$T/q.gguf" Q4_K_M -t 2
# Q4_K_M: the output in Q6_K; this tiny model has 8 experts, so attn_v is Q8_0
out=$("$B" info --json "$T/q.gguf")
printf '%s' "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
types = {t["name"]: t["type"] for t in d["tensors"]}
assert types["output.weight"] == "q6_K", types["output.weight"]
assert types["blk.3.attn_v.weight"] == "q8_0", types["blk.3.attn_v.weight"]
assert types["blk.0.ffn_gate_inp.weight"] == "f32"
assert d["metadata"]["general.file_type"] == 15, d["metadata"]["general.file_type"]
' && ok || bad "quantize types: $out"
expect 0 "" -- "$B" run -m "$T/q.gguf" -p "hi" -n 4 --raw
expect 2 "unknown type" -- "$B" quantize "$T/bf16.gguf" "$T/x.gguf" Q3_K_XL
expect 2 "usage" -- "$B" quantize "$T/bf16.gguf"
expect 1 "cannot open" -- "$B" quantize "$T/none.gguf" "$T/x.gguf" Q8_0
expect 1 "allow-requantize" -- "$B" quantize "$T/q.gguf" "$T/x.gguf" Q8_0
expect 0 "requantized" -- "$B" quantize "$T/q.gguf" "$T/x.gguf" Q8_0 --allow-requantize
# Interrupted: exit 130, no output file, no partial file.
# (a sparse full-width input: no disk, and long enough to interrupt)
"$B" synth "$T/big.gguf" --preset qwen3.6-35b-a3b --layers 4 --type bf16 --sparse 2>/dev/null
"$B" quantize "$T/big.gguf" "$T/big-q.gguf" Q4_K_M -t 1 2>/dev/null &
pid=$!
sleep 1
kill -INT $pid
wait $pid
rc=$?
if [ "$rc" -eq 130 ] && [ ! -e "$T/big-q.gguf" ] && [ ! -e "$T/big-q.gguf.partial" ]; then ok
else bad "interrupted quantize: exit $rc, files: $(ls "$T")"; fi

finish cli_quantize
