#!/bin/sh
# brigade perplexity end to end on synthetic models: a float base saved with
# --save-logits, a q8_0 model compared with it (--kld-base), and inputs that
# must be refused with a clear message, a nonzero exit and no crash.
B=${BRIGADE:-build/brigade}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib_cli.sh"

"$B" synth "$T/f32.gguf" --preset tiny-qwen35moe --type f32 --seed 3 2>/dev/null || bad "synth f32"
"$B" synth "$T/q8.gguf" --preset tiny-qwen35moe --type q8_0 --seed 3 2>/dev/null || bad "synth q8_0"
para="The river runs slow in the late summer, when the hills above the valley turn brown and the
farmers wait for rain. Children walk along the banks after school, throwing flat stones and
counting how many times each one skips before it sinks."
for i in 1 2 3 4; do printf '%s\n' "$para"; done >"$T/text.txt"
printf 'Too short.\n' >"$T/short.txt"
printf '%s\n' "$para" | tr 'a-z' 'b-za' >"$T/other.txt"
for i in 1 2 3 4; do cat "$T/other.txt"; done >"$T/other4.txt"
P="$B perplexity -t 2 -c 64"

# The base run: progress per window on stderr, the estimate on stdout.
out=$($P -m "$T/f32.gguf" -f "$T/text.txt" --save-logits "$T/base.bin" 2>"$T/err")
rc=$?
[ $rc -eq 0 ] && ok || bad "perplexity --save-logits exited $rc: $(cat "$T/err")"
printf '%s' "$out" | grep -Eq '^Final estimate: PPL = [0-9]+\.[0-9]{4} \+/- [0-9]+\.[0-9]{5}$' \
    && ok || bad "no final estimate: $out"
grep -q '\[1\][0-9.]*,\[2\][0-9.]*,' "$T/err" && ok || bad "no running estimate: $(cat "$T/err")"
base_ppl=$(printf '%s' "$out" | sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p')
# llama.cpp's layout: magic, n_ctx, n_vocab, n_chunk, tokens, then for each
# window 31 rows of (4 + n_vocab rounded up to even) uint16 words.
python3 - "$T/base.bin" <<'EOF' && ok || bad "base file layout"
import os, struct, sys
d = open(sys.argv[1], "rb").read()
assert d[:8] == b"_logits_", d[:8]
n_ctx, n_vocab, n_chunk = struct.unpack("<iii", d[8:20])
assert n_ctx == 64 and n_chunk >= 2, (n_ctx, n_chunk)
words = 4 + (n_vocab + 1) // 2 * 2
assert len(d) == 20 + 4 * n_ctx * n_chunk + n_chunk * 31 * words * 2, len(d)
EOF

# The same estimate from brigade's own pieces, put together here: the text's
# ids (tokenize), each window's logits (eval), the second half scored in
# Python, with llama-perplexity's error. eval takes micro-batches of 32, as
# perplexity's half windows of 64 come: from 64 tokens a micro-batch's
# attention accumulates in f32 (llama.cpp's tiled path), other last bits.
python3 - "$B" "$T" "$base_ppl" "$out" <<'EOF' && ok || bad "perplexity differs from tokenize + eval"
import math, re, struct, subprocess, sys
b, t, want, line = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
ids = subprocess.run([b, "tokenize", "-m", t + "/f32.gguf", "-f", t + "/text.txt",
                      "--add-special"], capture_output=True, text=True, check=True).stdout.split()
ids = [int(x) for x in ids]
n_ctx, nll = 64, []
for c in range(len(ids) // n_ctx):
    w = ids[c * n_ctx:(c + 1) * n_ctx]
    open(t + "/w.txt", "w").write(" ".join(map(str, w)))
    subprocess.run([b, "eval", "-m", t + "/f32.gguf", "--tokens", t + "/w.txt", "--logits-out",
                    t + "/w.bin", "-t", "2", "-ub", "32"], capture_output=True, check=True)
    d = open(t + "/w.bin", "rb").read()
    n_vocab = len(d) // 4 // n_ctx
    for j in range(n_ctx // 2, n_ctx - 1):
        row = struct.unpack_from("<%df" % n_vocab, d, 4 * j * n_vocab)
        m = max(row)
        lse = m + math.log(sum(math.exp(x - m) for x in row))
        nll.append(lse - row[w[j + 1]])
n = len(nll)
mean = sum(nll) / n
var = sum(x * x for x in nll) / n - mean * mean
ppl, err = math.exp(mean), math.exp(mean) * math.sqrt(var / (n - 1))
got_err = float(re.search(r"\+/- (\S+)", line).group(1))
assert abs(ppl - want) <= 1e-4 + 1e-6 * ppl, (ppl, want)
assert abs(err - got_err) <= 1e-5 + 1e-5 * err, (err, got_err)
EOF

# A quantized model against the base; the base against itself.
out=$($P -m "$T/q8.gguf" --kld-base "$T/base.bin" -f "$T/text.txt" 2>"$T/err")
rc=$?
[ $rc -eq 0 ] && ok || bad "--kld-base exited $rc: $(cat "$T/err")"
for line in "Mean PPL(Q)" "Mean PPL(base)" "Mean    KLD:" "Maximum KLD:" "99.9%   KLD:" \
    "99.0%   KLD:" "90.0%   KLD:" "Median  KLD:" "Mean    Δp:" "RMS Δp    :" "Same top p:"; do
    printf '%s' "$out" | grep -qF "$line" && ok || bad "KLD output lacks '$line': $out"
done
grep -q "KL Divergence" "$T/err" && ok || bad "no per-window KLD table: $(cat "$T/err")"
printf '%s' "$out" | python3 -c '
import re, sys
t = sys.stdin.read()
kld = float(re.search(r"Mean    KLD:\s+(\S+)", t).group(1))
top = float(re.search(r"Same top p:\s+(\S+)", t).group(1))
assert 0 < kld < 0.05 and 50 < top <= 100, (kld, top)
' && ok || bad "q8_0 vs f32 statistics out of range: $out"
out=$($P -m "$T/f32.gguf" --kld-base "$T/base.bin" 2>"$T/err")
rc=$?
[ $rc -eq 0 ] && ok || bad "self KLD exited $rc: $(cat "$T/err")"
printf '%s' "$out" | python3 -c '
import re, sys
t = sys.stdin.read()
kld = float(re.search(r"Mean    KLD:\s+(\S+)", t).group(1))
ppl = float(re.search(r"Mean PPL\(Q\)\s+:\s+(\S+)", t).group(1))
assert abs(kld) < 1e-5, kld
assert "Same top p: 100.000" in t, t
assert abs(ppl / float(sys.argv[1]) - 1) < 1e-5, (ppl, sys.argv[1])
' "$base_ppl" && ok || bad "a model against itself: $out"

# Refusals.
expect 1 "cannot open" -- $P -m "$T/none.gguf" -f "$T/text.txt"
expect 1 "cannot open $T/none.txt" -- $P -m "$T/f32.gguf" -f "$T/none.txt"
expect 1 "needs at least 128" -- $P -m "$T/f32.gguf" -f "$T/short.txt"
expect 1 "cannot open" -- $P -m "$T/q8.gguf" --kld-base "$T/none.bin"
expect 2 "cannot be used together" -- $P -m "$T/f32.gguf" -f "$T/text.txt" \
    --save-logits "$T/b2.bin" --kld-base "$T/base.bin"
expect 2 "at least 3" -- $B perplexity -m "$T/f32.gguf" -f "$T/text.txt" -c 2
expect 2 "unknown option" -- $P -m "$T/f32.gguf" -f "$T/text.txt" --frobnicate
expect 2 "a text (-f) is required" -- $P -m "$T/f32.gguf"
expect 1 "cannot write" -- $P -m "$T/f32.gguf" -f "$T/text.txt" --save-logits "$T/no/dir/b.bin"
expect 1 "not -c 32" -- $B perplexity -m "$T/q8.gguf" --kld-base "$T/base.bin" -c 32
expect 1 "is not the text" -- $P -m "$T/q8.gguf" --kld-base "$T/base.bin" -f "$T/other4.txt"
expect 1 "tokenizes to" -- $P -m "$T/q8.gguf" --kld-base "$T/base.bin" -f "$T/short.txt"
head -c 1000 "$T/base.bin" >"$T/trunc.bin"
expect 1 "trunc.bin: truncated" -- $P -m "$T/q8.gguf" --kld-base "$T/trunc.bin"
head -c 10 "$T/base.bin" >"$T/stub.bin"
expect 1 "stub.bin: byte 8" -- $P -m "$T/q8.gguf" --kld-base "$T/stub.bin"
printf 'GGUF' | dd of="$T/magic.bin" bs=1 2>/dev/null && cat "$T/base.bin" | tail -c +5 >>"$T/magic.bin"
expect 1 "not a log-probability file" -- $P -m "$T/q8.gguf" --kld-base "$T/magic.bin"
# A row whose scale is NaN, in the second window; a token outside the vocabulary.
python3 - "$T/base.bin" "$T/nan.bin" "$T/tok.bin" "$T/vocab.bin" <<'EOF'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
n_ctx, n_vocab, n_chunk = struct.unpack("<iii", d[8:20])
words = 4 + (n_vocab + 1) // 2 * 2
at = 20 + 4 * n_ctx * n_chunk + 31 * words * 2
nan = bytearray(d); nan[at:at + 4] = struct.pack("<f", float("nan"))
open(sys.argv[2], "wb").write(nan)
tok = bytearray(d); tok[20 + 4 * 5:24 + 4 * 5] = struct.pack("<i", n_vocab)
open(sys.argv[3], "wb").write(tok)
# The same windows over a vocabulary of another size: valid, but not this model's.
nv = n_vocab + 7
w2 = 4 + (nv + 1) // 2 * 2
out = d[:8] + struct.pack("<iii", n_ctx, nv, n_chunk) + d[20:20 + 4 * n_ctx * n_chunk]
row = struct.pack("<ff", 0.0, -5.0) + bytes(2 * (w2 - 4))
out += row * (31 * n_chunk)
open(sys.argv[4], "wb").write(out)
EOF
expect 1 "nan.bin: byte [0-9]*: row 31 has scale nan" -- $P -m "$T/q8.gguf" --kld-base "$T/nan.bin"
expect 1 "tok.bin: byte 40: token 5" -- $P -m "$T/q8.gguf" --kld-base "$T/tok.bin"
expect 1 "vocabulary mismatch" -- $P -m "$T/q8.gguf" --kld-base "$T/vocab.bin"

finish cli_perplexity
