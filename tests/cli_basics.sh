#!/bin/sh
# The brigade program as a user meets it: help, clear errors with a non-zero
# exit for bad arguments and bad files, and synth -> info round trips.
B=${BRIGADE:-build/brigade}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib_cli.sh"


expect 0 "usage: brigade" -- "$B" --help
expect 2 "unknown command 'frobnicate'" -- "$B" frobnicate
expect 2 "usage: brigade synth" -- "$B" synth
expect 1 "unknown preset 'gpt-5'" -- "$B" synth "$T/a.gguf" --preset gpt-5
expect 2 "unknown tensor type 'q3_x'" -- "$B" synth "$T/a.gguf" --preset tiny-qwen3moe --type q3_x
expect 1 "cannot be used for weights" -- "$B" synth "$T/a.gguf" --preset tiny-qwen3moe --type q8_k
expect 1 "needs at least 4 layers" -- "$B" synth "$T/a.gguf" --preset tiny-qwen35moe --layers 2
expect 2 "not a non-negative integer" -- "$B" synth "$T/a.gguf" --preset tiny-qwen35moe --layers -3
expect 1 "but the model has 8" -- "$B" synth "$T/a.gguf" --preset tiny-qwen35moe --experts-used 9
expect 1 "cannot open" -- "$B" info "$T/missing.gguf"
printf 'not a gguf file at all, just text\n' > "$T/text.gguf"
expect 1 "not a GGUF file" -- "$B" info "$T/text.gguf"
: > "$T/empty.gguf"
expect 1 "too small for a GGUF header" -- "$B" info "$T/empty.gguf"
[ ! -e "$T/a.gguf" ] && ok || bad "a failed synth left a file behind"

expect 0 "wrote" -- "$B" synth "$T/m.gguf" --preset tiny-qwen35moe --type q4_k --seed 5
expect 0 "architecture: qwen35moe" -- "$B" info "$T/m.gguf"
expect 0 "q4_K" -- "$B" info --no-mmap "$T/m.gguf"
expect 0 '"n_params"' -- "$B" info --json "$T/m.gguf"
# Same seed, same bytes; another seed, other bytes.
"$B" synth "$T/m2.gguf" --preset tiny-qwen35moe --type q4_k --seed 5 2>/dev/null
cmp -s "$T/m.gguf" "$T/m2.gguf" && ok || bad "synth is not reproducible for a seed"
"$B" synth "$T/m3.gguf" --preset tiny-qwen35moe --type q4_k --seed 6 2>/dev/null
cmp -s "$T/m.gguf" "$T/m3.gguf" && bad "different seeds gave the same file" || ok
# A truncated model is refused with the tensor and offsets named.
head -c 100000 "$T/m.gguf" > "$T/cut.gguf"
expect 1 "ends beyond the end of the file" -- "$B" info "$T/cut.gguf"
# --fast: reproducible, other bytes than the slow path, loads and runs.
expect 0 "wrote" -- "$B" synth "$T/f.gguf" --preset tiny-qwen35moe --type q4_k --seed 5 --fast
"$B" synth "$T/f2.gguf" --preset tiny-qwen35moe --type q4_k --seed 5 --fast 2>/dev/null
cmp -s "$T/f.gguf" "$T/f2.gguf" && ok || bad "synth --fast is not reproducible for a seed"
cmp -s "$T/f.gguf" "$T/m.gguf" && bad "synth --fast wrote the slow path's bytes" || ok
expect 0 "generation:" -- "$B" run -m "$T/f.gguf" -p "Hi" -n 4 -t 1
# GPU flags: parsed everywhere; -ngl 0 is the CPU; a build without CUDA
# refuses GPU layers and says why.
expect 0 "generation:" -- "$B" run -m "$T/f.gguf" -p "Hi" -n 2 -t 1 -ngl 0
expect 2 "is not a size" -- "$B" run -m "$T/f.gguf" -p "Hi" --gpu-budget 24X
expect 2 "not a non-negative integer" -- "$B" run -m "$T/f.gguf" -p "Hi" -ngl lots
out=$("$B" run -m "$T/f.gguf" -p "Hi" -n 2 -t 1 -ngl 2 2>&1)
case "$out" in
    *"built without CUDA: -ngl 2 needs a build with"*|*"GPU: "*|*"gpu: "*) ok ;;
    *) bad "-ngl 2: $out" ;;
esac
# Sparse: the full-size header over a hole.
expect 0 "wrote" -- "$B" synth "$T/full.gguf" --preset qwen3.6-35b-a3b --type q4_k --sparse
expect 0 "params:     3466" -- "$B" info "$T/full.gguf"

finish cli_basics
