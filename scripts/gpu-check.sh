#!/bin/sh
# The CUDA backend's check, on a machine with an NVIDIA GPU, in under
# 8 minutes: builds with CUDA=1 for this card, compares GPU and CPU logits
# (NMSE <= 1e-4, or twice the distance between two valid summation orders
# on the same model where its logits move more than that: the CPU's
# batched and token-by-token logits, the CPU's and llama.cpp's, llama.cpp's
# GPU and CPU) on the tiny models and a 4-layer Qwen3.6-geometry slice in
# every weight type and KV type (prefill, and decode token by token, which
# replays CUDA graphs) plus a CPU/GPU split, checks the GPU memory measured
# against the plan (within 2%), and benchmarks pp512/tg128 on the full
# 40-layer Qwen3.6-35B-A3B Q4_K_M synthetic model all on the GPU, with
# --gpu-budget 24G and 16G (-ngl auto), and 1/4/16 parallel sequences;
# decode all on the GPU is also given as weight bytes per second, a share
# of the card's copy bandwidth (scripts/membw.cu), and without
# programmatic dependent launch (BRIGADE_CUDA_PDL=0), without the blocks'
# L2 prefetch before their wait (BRIGADE_CUDA_PREFETCH=0), without the fused
# tails (BRIGADE_CUDA_FUSE=0) beside it, and
# prefill without the int8 tensor cores (BRIGADE_CUDA_MMA=0) and with them
# unstaged (BRIGADE_CUDA_MMA_STAGE=0); where
# Nsight Compute is installed, the decode step's kernels by GPU time.
# With build-gpu/llama-cuda.tar.xz present (scripts/gpu-oracle.sh writes it
# on a machine with npm; carry it along), llama.cpp's CUDA build runs the
# same file with the same placement (-ngl, --n-cpu-moe) and the table gives
# brigade/llama.cpp ratios.
# With build-gpu/prebuilt.tar.xz present (scripts/gpu-pack.sh builds and
# packs everything below where the -dev packages are), nothing is compiled
# here. Writes $OUT/gpu-check.md as it goes (and its log beside it); exits
# 1 if a check failed. Every GPU command has a time limit, and parts past
# DEADLINE seconds are skipped and say so, so the report always comes back.
#
#   OUT=/tmp/out sh scripts/gpu-check.sh
# WORK=dir for the models (disk: ~35 GB); LIMIT=seconds after which slice
# types are not started (440); DEADLINE=seconds after which the benches
# left are skipped (380); SKIP_FULL=1 leaves out the full model.
# EMU=1 is a dry run of the script itself on a machine without a GPU: the
# program on the CUDA emulation (make build/brigade-emu), three weight
# types (EMU_TYPES: others), and the tiny qwen35moe model standing in for
# the full one, so every table and parser below runs before a GPU's
# minutes are spent on it; llama.cpp's CPU (the oracle, .oracle) gives its
# distances beside the parity rows.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$(pwd)/build-gpu/check}
WORK=${WORK:-/tmp/brigade-gpu-check}
DEADLINE=${DEADLINE:-380} # seconds; the benches left are skipped after this
LIMIT=${LIMIT:-440}   # seconds; the slice's types stop being started after this
BOUND=${BOUND:-1e-4}
mkdir -p "$OUT" "$WORK"
MD="$OUT/gpu-check.md"
LOG="$OUT/gpu-check.log"
: > "$LOG"
START=$(date +%s)
elapsed() { echo $(($(date +%s) - START)); }
failed=0
note() { echo "$*" | tee -a "$LOG" >&2; }

J=$(nproc)
PP=512 TG=128
TYPES="f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs"
if [ -n "${EMU:-}" ]; then
    CAP=emu GPU="none: CUDA emulation (dry run of this script)"
    TYPES=${EMU_TYPES:-f32 q8_0 q4_k}
    LIMIT=${EMU_LIMIT:-0} # the slices are minutes each on the emulation
    DEADLINE=${EMU_DEADLINE:-900} # its kernel and session checks take 6 minutes
    PP=16 TG=4 # each emulated thread is a fiber: benches stay small
else
    CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
    GPU=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
    [ -n "$CAP" ] || { echo "gpu-check: no NVIDIA GPU (nvidia-smi)" >&2; exit 2; }
fi

# ------------------------------------------------------------------ build
t0=$(date +%s)
mkdir -p build-gpu
B="" LLAMA="" MEMBW="" REF="" REF_GPU=""
LLAMA_NOTE="not run: no build-gpu/llama-cuda.tar.xz (make it with scripts/gpu-oracle.sh)"
# a program of the pack runs with the pack's libraries (and the machine's
# cuBLAS, for llama.cpp's CUDA build): a wrapper each, so nothing else here
# (nvidia-smi, python3) loads them
wrap() { # name binary
    printf '#!/bin/sh\nexport LD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"\nexec "%s" "$@"\n' \
        "$LIBS" "$2" > "$WORK/run/$1" && chmod +x "$WORK/run/$1" && echo "$WORK/run/$1"
}
if [ -z "${EMU:-}" ] && [ -f build-gpu/prebuilt.tar.xz ]; then
    rm -rf "$WORK/pack" "$WORK/run" && mkdir -p "$WORK/run" && tar -C "$WORK" -xJf build-gpu/prebuilt.tar.xz
    P=$WORK/pack
    CUBLAS=$(timeout 30 find /usr/local /opt /usr/lib/x86_64-linux-gnu -name 'libcublas.so.13' 2>/dev/null | head -n 1)
    LIBS="$P/lib${CUBLAS:+:$(dirname "$CUBLAS")}"
    PB=$(wrap brigade "$P/bin/brigade")
    if [ "$(cat "$P/ARCH")" = "$CAP" ] && "$PB" --version >>"$LOG" 2>&1; then
        B=$PB OPS_BIN=$(wrap test_cuda_ops "$P/bin/test_cuda_ops")
        SESSION_BIN=$(wrap gpu_session "$P/bin/gpu_session") NMSE=$P/bin/logits_nmse MEMBW=$P/bin/membw
        HOW="prebuilt by scripts/gpu-pack.sh for sm_$(cat "$P/ARCH") at $(tr '\n' ' ' < "$P/COMMIT")"
        if [ -f build-gpu/llama-cuda.tar.xz ] && [ -x "$P/bin/oracle_bench_cuda" ]; then
            # the pack's bench looks for the CPU backends in /tmp/brigade-llama
            rm -rf /tmp/brigade-llama && mkdir -p /tmp/brigade-llama &&
                tar -C /tmp/brigade-llama -xJf build-gpu/llama-cuda.tar.xz &&
                LLAMA=$(wrap oracle_bench_cuda "$P/bin/oracle_bench_cuda") &&
                REF=$(wrap oracle_logits_cuda "$P/bin/oracle_logits_cuda") && REF_GPU=1 &&
                LLAMA_NOTE="llama.cpp 0.5.0 CUDA build (npm node-llama-cpp 3.22.1), device code for sm_$(cat /tmp/brigade-llama/llama-cuda/ARCH)${CUBLAS:+, cuBLAS $CUBLAS}"
        fi
    else
        note "the prebuilt pack does not run here (sm_$(cat "$P/ARCH"), this card sm_$CAP; see the log): building"
    fi
fi
if [ -n "$B" ]; then
    :
elif [ -n "${EMU:-}" ]; then
    make -j"$J" build/brigade-emu build/tests/emu_cuda_ops build/tests/emu_gpu_session >>"$LOG" 2>&1 || {
        tail -n 40 "$LOG"; echo "gpu-check: build failed" >&2; exit 1; }
    B=build/brigade-emu OPS_BIN=build/tests/emu_cuda_ops SESSION_BIN=build/tests/emu_gpu_session
    HOW="make build/brigade-emu (the CUDA emulation)"
    # llama.cpp's CPU logits beside the parity rows, where the oracle is
    make build/bench/oracle_logits >>"$LOG" 2>&1 && REF=build/bench/oracle_logits
else
    if ! make -j"$J" CUDA=1 BUILD=build-gpu CUDA_ARCHS="$CAP" all build-gpu/tests/test_cuda_ops \
            build-gpu/tests/gpu_session >>"$LOG" 2>&1; then
        tail -n 40 "$LOG"; echo "gpu-check: build failed" >&2; exit 1
    fi
    B=build-gpu/brigade OPS_BIN=build-gpu/tests/test_cuda_ops SESSION_BIN=build-gpu/tests/gpu_session
    HOW="make CUDA=1 CUDA_ARCHS=$CAP"
fi
if [ -z "${NMSE:-}" ]; then
    cc -std=c11 -O2 -o build-gpu/logits_nmse scripts/logits_nmse.c -lm || exit 1
    NMSE=build-gpu/logits_nmse
fi
if [ -z "$MEMBW" ] && [ -z "${EMU:-}" ] &&
    ${NVCC:-/usr/local/cuda/bin/nvcc} -O2 -o build-gpu/membw scripts/membw.cu >>"$LOG" 2>&1; then
    MEMBW=build-gpu/membw
fi
BUILD_S=$(($(date +%s) - t0))

# llama.cpp's CUDA build, when carried here (scripts/gpu-oracle.sh) and not
# in the pack: its bench compiled here
if [ -z "$LLAMA" ] && [ -z "${EMU:-}" ] && [ -f build-gpu/llama-cuda.tar.xz ]; then
    mkdir -p "$WORK/llama" && tar -C "$WORK/llama" -xJf build-gpu/llama-cuda.tar.xz
    L=$WORK/llama/llama-cuda
    ok=1
    for prog in oracle_bench oracle_logits; do
        cc -std=c11 -O2 -D_DEFAULT_SOURCE -I"$L/include" -Itests -DORACLE_LIB_DIR="\"$L/lib\"" \
            bench/$prog.c -L"$L/lib" -l:libllama.cuda.v0.5.0.so -l:libggml.cuda.v0.5.0.so \
            -l:libggml-base.so -Wl,-rpath,"$L/lib" -o build-gpu/${prog}_cuda >>"$LOG" 2>&1 || ok=""
    done
    if [ -n "$ok" ]; then
        LLAMA=build-gpu/oracle_bench_cuda REF=build-gpu/oracle_logits_cuda REF_GPU=1
        LLAMA_NOTE="llama.cpp 0.5.0 CUDA build (npm node-llama-cpp 3.22.1), device code for sm_$(cat "$L/ARCH")"
    else
        LLAMA_NOTE="not run: oracle_bench did not build against the CUDA bundle (see log)"
    fi
fi

{
    echo "# brigade GPU check"
    echo
    echo "- GPU: $GPU (sm_$CAP), $J CPU cores"
    # the CPU's float dots sum in its SIMD variant's order (kernels.c picks
    # AVX2 or AVX-512): the parity rows with f16/f32 K caches depend on it
    echo "- CPU: $(grep -m 1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')," \
        "$(grep -m 1 -o -w 'avx512f' /proc/cpuinfo || echo 'no avx512f')," \
        "$(grep -m 1 -o -w 'amx_tile' /proc/cpuinfo || echo 'no amx')"
    echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (modified)')"
    echo "- build: $HOW, ready in ${BUILD_S} s"
    echo "- disk for the models ($WORK): $(df -Ph "$WORK" | awk 'NR == 2 { print $4 " free of " $2 }')"
    echo
} > "$MD"

# ------------------------------- the full model, written in the background
# synth --fast writes the 21 GB file while the checks below run (llama.cpp
# needs no warm-up: gpu-oracle.sh gives it machine code for the card).
FULL="$WORK/qwen3.6-35b-a3b-q4_k_m.gguf"
SYNTH_PID=""
if [ -z "${SKIP_FULL:-}" ]; then
    (
        t0=$(date +%s)
        if [ -n "${EMU:-}" ]; then # the tiny model stands in
            "$B" synth "$FULL" --preset tiny-qwen35moe --type q4_k --fast
        else
            "$B" synth "$FULL" --preset qwen3.6-35b-a3b --mix Q4_K_M --fast
        fi > "$WORK/synth.log" 2>&1
        echo $? > "$WORK/synth.rc"
        echo $(($(date +%s) - t0)) > "$WORK/synth.s"
    ) &
    SYNTH_PID=$!
fi

# ------------------------------------------------ each kernel, then parity
# test_cuda_ops compares every device operation with the host reference on
# the same inputs: a parity failure below can be traced to one kernel.
OPS=$(timeout 300 "$OPS_BIN" 2>&1); ops_rc=$?
echo "$OPS" >> "$LOG"
{
    echo "## Kernels against the host reference (tests/test_cuda_ops)"
    echo
    echo '```'
    echo "$OPS" | tail -n 40
    echo '```'
    echo
} >> "$MD"
if ! { [ $ops_rc -eq 0 ] && echo "$OPS" | grep -q ' [1-9][0-9]* passed, 0 failed'; }; then
    failed=1
    # whether the failures are the tensor-core kernels' (prefill's integer
    # products): the same checks with them off
    OPS0=$(BRIGADE_CUDA_MMA=0 timeout 300 "$OPS_BIN" 2>&1)
    echo "$OPS0" >> "$LOG"
    {
        echo "With BRIGADE_CUDA_MMA=0 (no tensor cores): $(echo "$OPS0" | tail -n 1)"
        echo
    } >> "$MD"
fi
note "kernels done at $(elapsed) s"

# whole sessions on the device against the CPU's logits (test_gpu_mock's
# device test: splits, cache types, long decode, graph replays)
SES=$(timeout 300 "$SESSION_BIN" 2>&1); ses_rc=$?
echo "$SES" >> "$LOG"
{
    echo "## Whole sessions on the device against the CPU (tests/test_gpu_mock.c, BG_TEST_DEVICE)"
    echo
    echo '```'
    echo "$SES" | grep -v '^ok ' | tail -n 30
    echo '```'
    echo
} >> "$MD"
[ $ses_rc -eq 0 ] && echo "$SES" | grep -q ' [1-9][0-9]* passed, 0 failed' || failed=1
note "sessions done at $(elapsed) s"

# ----------------------------------------------------------------- parity
# GPU against CPU logits for one model: prefill (-ub 512) and decode
# (-ub 1: one token at a time, CUDA graphs) with KV types $3/$4 and the
# GPU flags $5. The bound is the CPU parity suite's: BOUND, or, for a
# model whose logits move more than that between two valid summation
# orders, twice that distance plus 1e-5 (the suite's rule for llama.cpp's
# batched mode). Random synthetic weights amplify a last-bit difference
# that moves one activation across a rounding tie (llama.cpp's own CPU
# modes differ by up to 1.5e-4 on the tiny models: the CI log's
# oracle_parity lines), so the distances are measured on the same file and
# tokens: brigade's CPU batched against token by token, and, for a row
# above the bound so far, its scalar reference kernels against its SIMD
# ones (BRIGADE_CPU_ISA=scalar: the same products in another order, which
# on the tiny models moves the logits by up to 1.6e-4, as far as the GPU's
# order does), then, still above it, llama.cpp's (bench/oracle_logits: REF, with
# REF_GPU its CUDA build): brigade's CPU against llama.cpp's token by
# token, llama.cpp's batched against its token by token, and llama.cpp's
# GPU against its CPU.
seq 1 24 | awk '{ printf "%d ", ($1 * 7919) % 251 + 3 } END { print "" }' > "$WORK/tokens.txt"
bound_of() { # distances ("-": not measured)
    echo "$@" | awk -v b="$BOUND" '{ x = 0; for (i = 1; i <= NF; i++) if ($i != "-" && $i + 0 > x) x = $i + 0
        x = 2 * x + 1e-5; printf "%.3g", (x > b ? x : b) }'
}
within() { awk -v e="$1" -v b="$2" 'BEGIN { exit !(e ~ /^[0-9.e+-]+$/ && e + 0 <= b + 0) }'; }
parity() {
    m=$1 name=$2 ctk=$3 ctv=$4 flags=$5
    for ub in 512 1; do
        timeout 120 "$B" eval -m "$m" --tokens "$WORK/tokens.txt" --logits-out "$WORK/cpu$ub.bin" -ub $ub \
            -ctk "$ctk" -ctv "$ctv" -c 64 >>"$LOG" 2>&1 || { note "cpu eval failed: $name"; }
    done
    spread=$($NMSE "$WORK/cpu512.bin" "$WORK/cpu1.bin")
    bound=$(bound_of "$spread")
    for ub in 512 1; do
        # shellcheck disable=SC2086
        if timeout 120 "$B" eval -m "$m" --tokens "$WORK/tokens.txt" --logits-out "$WORK/gpu$ub.bin" -ub $ub \
            -ctk "$ctk" -ctv "$ctv" -c 64 $flags >>"$LOG" 2>&1; then
            e=$($NMSE "$WORK/gpu$ub.bin" "$WORK/cpu$ub.bin")
        else
            # again with each launch waited for (BRIGADE_CUDA_DEBUG): the
            # error then names the kernel that faulted
            # shellcheck disable=SC2086
            why=$(BRIGADE_CUDA_DEBUG=1 timeout 120 "$B" eval -m "$m" --tokens "$WORK/tokens.txt" \
                --logits-out "$WORK/gpu$ub.bin" -ub $ub -ctk "$ctk" -ctv "$ctv" -c 64 $flags 2>&1 |
                tee -a "$LOG" | grep -v '^ *$' | tail -n 1 | cut -c1-200 | tr '|' '/')
            e="error: ${why:-see the log}"
        fi
        eval "e$ub=\$e"
    done
    # above the bound so far: the CPU's scalar reference kernels (the same
    # products summed in another order than its SIMD ones, as the GPU's
    # are; slow on the slice, so only where a row needs it), then
    # llama.cpp's distances on the same file
    isa=- lcpu=- lspread=- lgpu=-
    if ! { within "$e512" "$bound" && within "$e1" "$bound"; }; then
        if BRIGADE_CPU_ISA=scalar timeout 120 "$B" eval -m "$m" --tokens "$WORK/tokens.txt" \
            --logits-out "$WORK/scalar.bin" -ub 512 -ctk "$ctk" -ctv "$ctv" -c 64 >>"$LOG" 2>&1; then
            isa=$($NMSE "$WORK/scalar.bin" "$WORK/cpu512.bin")
        else
            note "cpu scalar eval failed: $name"
        fi
        bound=$(bound_of "$spread" "$isa")
    fi
    if [ -n "$REF" ] && ! { within "$e512" "$bound" && within "$e1" "$bound"; } &&
        timeout 120 "$REF" "$m" "$WORK/tokens.txt" "$WORK/ref" -ctk "$ctk" -ctv "$ctv" \
            ${REF_GPU:+--gpu} >>"$LOG" 2>&1; then
        lcpu=$($NMSE "$WORK/cpu1.bin" "$WORK/ref.tok.bin")
        lspread=$($NMSE "$WORK/ref.bat.bin" "$WORK/ref.tok.bin")
        [ -z "$REF_GPU" ] || lgpu=$($NMSE "$WORK/ref.gpu.bin" "$WORK/ref.tok.bin")
        bound=$(bound_of "$spread" "$isa" "$lcpu" "$lspread" "$lgpu")
    fi
    for ub in 512 1; do
        eval "e=\$e$ub"
        mode=$([ $ub = 1 ] && echo decode || echo prefill)
        res=pass; within "$e" "$bound" || { res=FAIL; failed=1; }
        echo "| $name | $ctk/$ctv | $flags | $mode | $e | $spread | $isa | $lcpu | $lspread | $lgpu | $bound | $res |" >> "$MD"
    done
    rm -f "$WORK"/cpu512.bin "$WORK"/cpu1.bin "$WORK"/scalar.bin "$WORK"/gpu512.bin "$WORK"/gpu1.bin "$WORK"/ref.*.bin
}
PARITY_HEAD="| model | KV | GPU flags | mode | NMSE | CPU spread | CPU scalar vs SIMD | CPU vs llama.cpp | llama.cpp spread | llama.cpp GPU vs CPU | bound | result |
| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"

{
    echo "## GPU vs CPU logits"
    echo
    echo "NMSE of brigade's GPU logits against its CPU's, 24 tokens. Beside it, distances"
    echo "between valid summation orders on the same file: the CPU's batched against its"
    echo "token-by-token logits (CPU spread) and, for a row above $BOUND without them, its"
    echo "scalar reference kernels' against its SIMD kernels' (BRIGADE_CPU_ISA=scalar, prefill),"
    echo "then llama.cpp's: the CPU's token-by-token logits against llama.cpp's, llama.cpp's"
    echo "batched against its token-by-token (its spread), llama.cpp's GPU against its CPU."
    echo "Bound: $BOUND, or twice the largest distance + 1e-5. Quantized tiny models with"
    echo "every expert active, as the CPU parity suite has them (no routing near-tie to"
    echo "flip); the float ones and the slice with top-k routing. \"-\": not measured."
    echo
    echo "$PARITY_HEAD"
} >> "$MD"
for preset in tiny-qwen35moe tiny-qwen3moe; do
    for t in $TYPES; do
        m="$WORK/$preset-$t.gguf"
        case $t in f32|f16|bf16) all="" ;; *) all="--experts-used 8" ;; esac
        # shellcheck disable=SC2086
        "$B" synth "$m" --preset "$preset" --type "$t" --fast $all >>"$LOG" 2>&1
        parity "$m" "$preset $t${all:+ (all experts)}" f16 f16 "-ngl 99"
        if [ "$t" = q4_k ]; then
            parity "$m" "$preset $t" q8_0 q8_0 "-ngl 99"
            parity "$m" "$preset $t" q4_0 q4_0 "-ngl 99"
            parity "$m" "$preset $t" f32 f32 "-ngl 99"
            parity "$m" "$preset $t" f16 q8_0 "-ngl 2 --n-cpu-moe 1"
        fi
        rm -f "$m"
    done
done
note "parity (tiny) done at $(elapsed) s"

# ------------------------------------------- full model: memory and speed
if [ -z "${SKIP_FULL:-}" ]; then
note "waiting for the full model's synth at $(elapsed) s"
wait "$SYNTH_PID"
[ "$(cat "$WORK/synth.rc" 2>/dev/null)" = 0 ] || {
    note "synth of the full model failed: $(tail -n 3 "$WORK/synth.log")"; failed=1; }
SYNTH_S=$(cat "$WORK/synth.s" 2>/dev/null)
cat "$WORK/synth.log" >> "$LOG" 2>/dev/null
{
    echo
    echo "## Qwen3.6-35B-A3B Q4_K_M (synthetic, $(du -h "$FULL" 2>/dev/null | cut -f1), written by synth --fast in ${SYNTH_S} s)"
    echo
} >> "$MD"

# "gpu:" lines: planned (less the runtime overhead the planner assumes) vs
# measured, within 2%.
memory_rows() {
    grep '^gpu: ' "$1" | sort -u | while read -r line; do
        planned=$(echo "$line" | sed -n 's/.*planned \([0-9.]*\) GiB.*/\1/p')
        over=$(echo "$line" | sed -n 's/.*(\([0-9.]*\) GiB of it runtime overhead).*/\1/p')
        meas=$(echo "$line" | sed -n 's/.*measured \([0-9.]*\) GiB.*/\1/p')
        rt=$(echo "$line" | sed -n 's/.*runtime \([0-9.]*\) GiB, free.*/\1/p')
        layers=$(echo "$line" | sed -n 's/.*: \([0-9]*\) layers on the GPU, routed experts of \([0-9]*\) on.*/ngl \1, n-cpu-moe \2/p')
        verdict=$(awk -v p="$planned" -v o="$over" -v m="$meas" 'BEGIN {
            q = p - o; d = (m - q) / q * 100; if (d < 0) d = -d;
            printf "%.2f%% %s", d, d <= 2 ? "pass" : "FAIL" }')
        echo "| $2 | $layers | $planned - $over | $meas | $rt | $verdict |"
    done
}
{
    echo "### GPU memory: planned (less the assumed runtime overhead) vs measured"
    echo
    echo "| run | split | planned GiB | measured GiB | runtime GiB | diff |"
    echo "| --- | --- | ---: | ---: | ---: | --- |"
} > "$OUT/memory.md"

# brigade's t/s from its bench table, as "label|test|t/s" lines
brigade_rows() {
    awk -F'|' -v label="$1" '$11 ~ /[0-9]/ && $10 !~ /test/ {
        t = $10; gsub(/ /, "", t); split($11, v, " "); print label "|" t "|" v[1] }' "$2"
}
# llama.cpp on the same file and placement
llama_bench() { # label ngl n_cpu_moe
    [ -n "$LLAMA" ] || return 0
    [ "$(elapsed)" -le "$DEADLINE" ] || { echo "$1|pp$PP|skipped" >> "$OUT/llama.txt"; return 0; }
    note "llama.cpp $1 (-ngl $2 --n-cpu-moe $3) at $(elapsed) s"
    if timeout 300 "$LLAMA" "$FULL" -p "$PP" -n "$TG" -r 2 -ngl "$2" --n-cpu-moe "$3" \
        > "$WORK/l.out" 2>> "$LOG"; then
        awk -v label="$1" '$1 == "llama.cpp" { n[$2]++; s[$2] += $3 }
            END { for (t in s) printf "%s|%s|%.2f\n", label, t, s[t] / n[t] }' \
            "$WORK/l.out" >> "$OUT/llama.txt"
    else
        echo "$1|pp$PP|failed" >> "$OUT/llama.txt"
    fi
}
bench() {
    label=$1; shift
    echo "### $label" >> "$OUT/bench.md"
    echo >> "$OUT/bench.md"
    if [ "$(elapsed)" -gt "$DEADLINE" ]; then
        echo "skipped: past ${DEADLINE} s" >> "$OUT/bench.md"; echo >> "$OUT/bench.md"
        note "bench $label skipped at $(elapsed) s"
        return
    fi
    note "bench $label at $(elapsed) s"
    if timeout 240 "$B" bench -m "$FULL" -r 2 "$@" > "$WORK/b.md" 2> "$WORK/b.err"; then
        cat "$WORK/b.md" >> "$OUT/bench.md"
        brigade_rows "$label" "$WORK/b.md" >> "$OUT/brigade.txt"
    else
        echo "failed: $(tail -n 3 "$WORK/b.err")" >> "$OUT/bench.md"; failed=1
    fi
    echo >> "$OUT/bench.md"
    cat "$WORK/b.err" >> "$LOG"
    memory_rows "$WORK/b.err" "$label" >> "$OUT/memory.md"
    # the placement brigade ran, for llama.cpp's run beside it
    PLACED=$(grep '^gpu: ' "$WORK/b.err" | head -n 1 |
        sed -n 's/.*: \([0-9]*\) layers on the GPU, routed experts of \([0-9]*\) on.*/\1 \2/p')
    # the first run's (all on the GPU): the kernels a decode step replays
    [ -n "${KERNELS:-}" ] || KERNELS=$(grep '^gpu: ' "$WORK/b.err" |
        sed -n "s/.*a decode step's graph: \([0-9]*\) kernels.*/\1/p" | tail -n 1)
}
: > "$OUT/bench.md"; : > "$OUT/brigade.txt"; : > "$OUT/llama.txt"
for budget in "" 24G 16G; do
    if [ -z "$budget" ]; then
        label="all on the GPU (-ngl 99)"
        bench "$label" -p "$PP" -n "$TG" -ngl 99
    else
        label="--gpu-budget $budget (-ngl auto)"
        bench "$label" -p "$PP" -n "$TG" -ngl auto --gpu-budget "$budget"
    fi
    set -- ${PLACED:-99 0}
    # llama.cpp's -ngl counts the output layer too: all of brigade's layers
    # on the GPU is llama.cpp's 99
    ngl=$1; [ "$1" -ge 40 ] && ngl=99
    llama_bench "$label" "$ngl" "$2"
done
bench "parallel sequences (-ngl 99)" -p 0 -n "$TG" -np 1,4,16 -ngl 99
# the same decode without programmatic dependent launch, for its effect
export BRIGADE_CUDA_PDL=0
bench "all on the GPU, PDL off (-ngl 99)" -p 0 -n "$TG" -ngl 99
unset BRIGADE_CUDA_PDL
# the same decode without the blocks' L2 prefetch of their weight rows
# before the wait (BRIGADE_CUDA_PREFETCH=0), for its effect
export BRIGADE_CUDA_PREFETCH=0
bench "all on the GPU, L2 prefetch off (-ngl 99)" -p 0 -n "$TG" -ngl 99
unset BRIGADE_CUDA_PREFETCH
# the same decode with the work a kernel's last block finishes run as
# launches of their own (BRIGADE_CUDA_FUSE=0), for what the tails cost
export BRIGADE_CUDA_FUSE=0
bench "all on the GPU, fused tails off (-ngl 99)" -p 0 -n "$TG" -ngl 99
unset BRIGADE_CUDA_FUSE
# prefill without the tensor cores (the dp4a kernels), for their effect
export BRIGADE_CUDA_MMA=0
bench "all on the GPU, tensor cores off (-ngl 99)" -p "$PP" -n 0 -ngl 99
unset BRIGADE_CUDA_MMA
# prefill on the tensor cores reading straight from memory instead of
# through shared memory (BRIGADE_CUDA_MMA_STAGE=0), for the staging's effect
export BRIGADE_CUDA_MMA_STAGE=0
bench "all on the GPU, tensor cores unstaged (-ngl 99)" -p "$PP" -n 0 -ngl 99
unset BRIGADE_CUDA_MMA_STAGE
bench "CPU only, for reference" -p "$PP" -n 32 -r 1
{
    echo "### brigade / llama.cpp, same file and placement"
    echo
    echo "llama.cpp: $LLAMA_NOTE"
    echo
    echo "| placement | test | brigade t/s | llama.cpp t/s | ratio |"
    echo "| --- | --- | ---: | ---: | ---: |"
    awk -F'|' 'NR == FNR { l[$1 "|" $2] = $3; next }
        {   k = $1 "|" $2; lv = (k in l) ? l[k] : "-";
            r = (lv + 0 > 0) ? sprintf("%.3f", $3 / lv) : "-";
            printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, lv, r }' \
        "$OUT/llama.txt" "$OUT/brigade.txt"
    echo
} >> "$OUT/bench.md"
# Decode against the weight-bandwidth limit: the weight bytes one decode
# token reads with every layer on the GPU (every tensor but the routed
# experts and the embeddings, one row of which comes from host memory;
# of the routed experts, the used share) times tg t/s, over the card's
# bandwidth as a device-to-device copy measures it (scripts/membw.cu).
{
    echo "### Decode against the weight-bandwidth limit"
    echo
    INFO=$("$B" info "$FULL" 2>/dev/null)
    n_exp=$(echo "$INFO" | awk '$1 == "expert_count" { print $2 }')
    n_used=$(echo "$INFO" | awk '$1 == "expert_used_count" { print $2 }')
    PER_TOK=$("$B" fit -m "$FULL" --json -c 4096 --gpu 80 2>/dev/null | python3 -c '
import json, sys
w = json.load(sys.stdin)["weights"]
e, k = float(sys.argv[1]), float(sys.argv[2])
print(int(sum(v for n, v in w.items() if n not in ("routed_experts", "token_embd"))
          + w["routed_experts"] * k / e))' "${n_exp:-1}" "${n_used:-1}" 2>>"$LOG")
    BW=""
    [ -n "$MEMBW" ] && BW=$(timeout 60 "$MEMBW" 2>>"$LOG")
    echo "Weight bytes per decode token: ${PER_TOK:-?} (experts: $n_used of $n_exp);" \
        "copy bandwidth: ${BW:-not measured} GB/s; kernels a decode step's graph" \
        "replays: ${KERNELS:-?}."
    echo
    echo "| placement | test | t/s | weight GB/s | share of the copy bandwidth |"
    echo "| --- | --- | ---: | ---: | ---: |"
    grep '^all on the GPU' "$OUT/brigade.txt" | grep '|tg' |
        awk -F'|' -v b="${PER_TOK:-0}" -v bw="${BW:-0}" '{
            gbs = $3 * b / 1e9
            share = (bw > 0) ? sprintf("%.1f%%", gbs / bw * 100) : "-"
            printf "| %s | %s | %s | %.1f | %s |\n", $1, $2, $3, gbs, share }'
    echo
} >> "$OUT/bench.md"
# Where a decode step's time goes, kernel by kernel, when Nsight Compute
# is on the machine (for the next round of work; no check depends on it):
# each kernel of a decode step timed alone (ncu replays it), summed by
# kernel over the run; why the slowest kernels' warps wait; then the times
# with the fused tails off (BRIGADE_CUDA_FUSE=0), which tells a kernel's
# own time from its tail's. ncu's CSVs stay in $OUT for a closer look.
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
# A decode step's kernels (300 launches, past the first 300: warm), each
# timed alone by Nsight Compute, with the bytes it moved to and from DRAM
# and L2, the instructions it ran, its registers and its achieved
# occupancy: a kernel far under the card's bandwidth with few bytes waits
# on latency, not memory; many instructions a byte say it computes.
NCU_METRICS=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,smsp__inst_executed.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
# ncu's CSV, long (a metric a row) or wide (--page raw: a launch a row),
# as one dict of metrics per launch
cat > "$WORK/ncu_csv.py" <<'PY'
import csv

def launches(path):
    head, rows, by_id = None, [], {}
    for r in csv.reader(open(path, errors="replace")):
        if r and r[0] == "ID" and "Kernel Name" in r:
            head = r
            continue
        if not head or len(r) != len(head) or not r[0].strip().isdigit():
            continue  # ncu's own lines, or the units row of --page raw
        d = dict(zip(head, r))
        if "Metric Name" in head:
            rec = by_id.setdefault(d["ID"], {"kernel": d["Kernel Name"], "shape": d["Grid Size"] + " x " + d["Block Size"]})
            rec[d["Metric Name"]] = num(d["Metric Value"])
        else:
            rec = {"kernel": d["Kernel Name"], "shape": d.get("Grid Size", "") + " x " + d.get("Block Size", "")}
            for k, v in d.items():
                rec[k] = num(v)
            rows.append(rec)
    return rows + list(by_id.values())

def num(v):
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return v

def name(rec):
    return rec["kernel"].split("(")[0].replace("void ", "")[:44]
PY
# A report section's body: the command (an ncu run, 90 s at most) writes
# the CSV $OUT/$1, which the parser $WORK/$2 turns into the table.
ncu_section() { # CSV name, parser, then the command
    csv=$1 parser=$2; shift 2
    if [ -n "${EMU:-}" ] || [ -z "$NCU" ]; then
        echo "not run: no ncu on this machine"
    elif [ "$(elapsed)" -gt "$DEADLINE" ]; then
        echo "skipped: past ${DEADLINE} s"
    elif timeout 90 "$@" > "$OUT/$csv" 2>>"$LOG"; then
        echo '```'
        python3 "$WORK/$parser" "$OUT/$csv"
        echo '```'
    else
        echo "ncu failed (see gpu-check.log)"
    fi
    echo
}
ncu_table() { # title, CSV name under $OUT, the run's bench flags and ncu's launch window, then environment assignments
    title=$1 csv=$2 run=$3 window=$4; shift 4
    echo "### $title, each kernel timed alone by ncu"
    echo
    # shellcheck disable=SC2086 # $window and $run are lists of flags
    ncu_section "$csv" ncu_table.py env "$@" "$NCU" --clock-control none \
        --metrics "$NCU_METRICS" --csv --print-units base $window \
        "$B" bench -m "$FULL" $run -r 1 -ngl 99
}
cat > "$WORK/ncu_table.py" <<'PY'
import collections, sys
sys.path.insert(0, sys.argv[0].rsplit("/", 1)[0])
from ncu_csv import launches, name
agg, shape = collections.defaultdict(lambda: collections.defaultdict(float)), {}
for rec in launches(sys.argv[1]):
    k = name(rec)
    for m, v in rec.items():
        if isinstance(v, float):
            agg[k][m] += v
    agg[k]["calls"] += 1
    shape[k] = rec["shape"]
T = "gpu__time_duration.sum"
total = sum(a[T] for a in agg.values()) / 1e3
print("%9s %5s %8s %6s %8s %7s %8s %7s %4s %5s  %-44s %s" % ("us", "calls", "us/call", "share", "MB/call",
      "GB/s", "L2 MB", "kinst", "regs", "occ%", "kernel", "grid x block"))
for k, a in sorted(agg.items(), key=lambda kv: -kv[1][T])[:18]:
    n, t = max(a["calls"], 1), a[T]
    mb = (a["dram__bytes_read.sum"] + a["dram__bytes_write.sum"]) / n / 1e6
    print("%9.1f %5d %8.2f %5.1f%% %8.3f %7.1f %8.3f %7.1f %4d %5.1f  %-44s %s" % (
        t / 1e3, n, t / 1e3 / n, 100 * t / 1e3 / max(total, 1e-9), mb, mb * 1e6 / max(t / n, 1e-9),
        a["lts__t_bytes.sum"] / n / 1e6, a["smsp__inst_executed.sum"] / n / 1e3,
        a["launch__registers_per_thread"] / n, a["sm__warps_active.avg.pct_of_peak_sustained_active"] / n,
        k, shape[k]))
print("%9.1f us in all, %d kernels" % (total, sum(a["calls"] for a in agg.values())))
PY
# Why the slowest decode kernels wait: Nsight Compute's warp states for a
# few warm launches of each (the WarpStateStats section), as the cycles a
# warp spends per issued instruction in each stall reason, the largest
# first: long_scoreboard is a load from memory, membar a fence, barrier a
# __syncthreads, wait a fixed latency, lg_throttle too many loads queued.
NCU_STALL_KERNELS='regex:k_expert_group|k_dn_recur|k_matmul|k_attn'
ncu_stalls() {
    echo "### Why decode kernels wait (ncu WarpStateStats, launches 61-120 of k_expert_group, k_dn_recur, k_matmul*, k_attn in tg4 all on the GPU)"
    echo
    ncu_section ncu-stalls.csv ncu_stalls.py "$NCU" --clock-control none \
        --section WarpStateStats --section Occupancy \
        --metrics gpu__time_duration.sum,smsp__inst_executed.sum --page raw --csv \
        --print-units base -k "$NCU_STALL_KERNELS" --launch-skip 60 --launch-count 60 \
        "$B" bench -m "$FULL" -p 0 -n 4 -r 1 -ngl 99
}
cat > "$WORK/ncu_stalls.py" <<'PY'
import collections, re, sys
sys.path.insert(0, sys.argv[0].rsplit("/", 1)[0])
from ncu_csv import launches, name
STALL = re.compile(r"smsp__average_warps?_issue_stalled_(\w+?)_per_issue_active\.ratio$")
agg = collections.defaultdict(lambda: collections.defaultdict(float))
for rec in launches(sys.argv[1]):
    a = agg[name(rec)]
    a["calls"] += 1
    for m, v in rec.items():
        if not isinstance(v, float):
            continue
        s = STALL.match(m)
        if s:
            a["stall " + s.group(1)] += v
        elif m in ("gpu__time_duration.sum", "smsp__inst_executed.sum",
                   "sm__warps_active.avg.pct_of_peak_sustained_active",
                   "sm__maximum_warps_per_active_cycle_pct"):
            a[m] += v
if not agg:
    sys.exit("no launches in " + sys.argv[1])
print("%8s %7s %5s %5s  %-44s %s" % ("us/call", "kinst", "occ%", "theo%", "kernel", "stall cycles per issued instruction, largest first"))
for k, a in sorted(agg.items(), key=lambda kv: -kv[1]["gpu__time_duration.sum"] / kv[1]["calls"]):
    n = a["calls"]
    stalls = sorted(((v / n, m[6:]) for m, v in a.items() if m.startswith("stall ")), reverse=True)
    print("%8.2f %7.1f %5.1f %5.1f  %-44s %s" % (
        a["gpu__time_duration.sum"] / n / 1e3, a["smsp__inst_executed.sum"] / n / 1e3,
        a["sm__warps_active.avg.pct_of_peak_sustained_active"] / n,
        a["sm__maximum_warps_per_active_cycle_pct"] / n, k,
        " ".join("%s %.1f" % (m, v) for v, m in stalls[:6] if v >= 0.05) or "(no stall metrics)"))
PY
# A decode step as it runs (graph replayed, programmatic dependent launch):
# BRIGADE_CUDA_TIMELINE notes when each launch's first block passed its
# wait, in device time, and writes each launch's mean over 16 steps; the
# report takes its table by site, $OUT/timeline*.md keep every launch.
timeline_table() { # title, file name under $OUT, then environment assignments
    title=$1 file=$2; shift 2
    echo "### $title"
    echo
    if [ "$(elapsed)" -gt "$DEADLINE" ]; then
        echo "skipped: past ${DEADLINE} s"; echo; return
    fi
    rm -f "$OUT/$file"
    if env "$@" BRIGADE_CUDA_TIMELINE="$OUT/$file" timeout 120 "$B" bench -m "$FULL" \
            -p 0 -n 24 -r 1 -ngl 99 > "$WORK/tl.out" 2>> "$LOG" && [ -s "$OUT/$file" ]; then
        sed -n '1,/^| # |/p' "$OUT/$file" | sed '$d'
    else
        echo "failed (see gpu-check.log)"; failed=1
    fi
    echo
}
DECODE_RUN="-p 0 -n 4" DECODE_WINDOW="--launch-skip 300 --launch-count 300"
# a prefill's: past the first layers of the warm-up's micro-batch of 512
# tokens; the warm-up and the counted run launch the same kernels
PREFILL_RUN="-p 512 -n 0" PREFILL_WINDOW="--launch-skip 450 --launch-count 450"
{
    timeline_table "Decode step on the device's clock, all on the GPU" timeline.md \
        BRIGADE_CUDA_FUSE=1
    timeline_table "Decode step on the device's clock, fused tails off" timeline-unfused.md \
        BRIGADE_CUDA_FUSE=0
    timeline_table "Decode step on the device's clock, L2 prefetch off" timeline-noprefetch.md \
        BRIGADE_CUDA_FUSE=1 BRIGADE_CUDA_PREFETCH=0
    ncu_table "Decode kernels by GPU time: launches 301-600 of tg4 all on the GPU" \
        ncu-fused.csv "$DECODE_RUN" "$DECODE_WINDOW" BRIGADE_CUDA_FUSE=1
    ncu_stalls
    ncu_table "Prefill kernels by GPU time: launches 451-900 of pp512 all on the GPU" \
        ncu-prefill.csv "$PREFILL_RUN" "$PREFILL_WINDOW" BRIGADE_CUDA_FUSE=1
    ncu_table "Decode kernels by GPU time, fused tails off: launches 301-600 of tg4" \
        ncu-unfused.csv "$DECODE_RUN" "$DECODE_WINDOW" BRIGADE_CUDA_FUSE=0
} >> "$OUT/bench.md"
cat "$OUT/memory.md" >> "$MD"
grep -q 'FAIL |$' "$OUT/memory.md" && failed=1
[ "$(grep -c '^| ' "$OUT/memory.md")" -gt 2 ] || { echo "no GPU memory report" >> "$MD"; failed=1; }
echo >> "$MD"
cat "$OUT/bench.md" >> "$MD"
rm -f "$FULL"
fi


# ------------------------------------ the 4-layer slice in every type
{
    echo "## 4-layer Qwen3.6-geometry slice: GPU vs CPU logits (as above)"
    echo
    echo "$PARITY_HEAD"
} >> "$MD"
# the quantized types first: the float slices are 6-13 GB files
for t in q4_k_m $(echo "$TYPES" | tr ' ' '\n' | grep -v '^f32$\|^f16$\|^bf16$') \
         $(echo "$TYPES" | tr ' ' '\n' | grep '^f32$\|^f16$\|^bf16$' | sort -r); do
    if [ "$(elapsed)" -gt "$LIMIT" ]; then
        echo "| slice $t | | | | skipped: past ${LIMIT} s | | | | | | | |" >> "$MD"
        continue
    fi
    m="$WORK/slice-$t.gguf"
    "$B" synth "$m" --preset qwen3.6-35b-a3b --layers 4 --type "$t" --fast >>"$LOG" 2>&1
    parity "$m" "slice $t" f16 f16 "-ngl 99"
    if [ "$t" = q4_k_m ]; then
        parity "$m" "slice $t" q8_0 q8_0 "-ngl 99"
        parity "$m" "slice $t" q4_0 q4_0 "-ngl 99"
    fi
    rm -f "$m"
done

note "slices done at $(elapsed) s"

echo >> "$MD"
echo "Total: $(elapsed) s; $([ $failed -eq 0 ] && echo 'all checks passed' || echo 'SOME CHECKS FAILED')." >> "$MD"
cat "$MD"
exit $failed
