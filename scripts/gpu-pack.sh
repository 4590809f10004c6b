#!/bin/sh
# Builds everything scripts/gpu-check.sh runs, for one card generation,
# here, and packs it into build-gpu/prebuilt.tar.xz: the programs
# (stripped), the helpers (logits_nmse, membw, and llama.cpp's bench and
# logits when scripts/gpu-oracle.sh has packed its CUDA build), and the shared
# libraries they load beyond glibc and the CUDA driver. The GPU machine
# then needs no compile and none of the Debian -dev packages, and the
# lease's minutes go to the checks; gpu-check.sh uses the pack when it is
# there and its brigade starts, and builds on the machine otherwise.
#
#   sh scripts/gpu-pack.sh          # ARCH=90 (H100, H200)
#   ARCH=89 sh scripts/gpu-pack.sh
set -eu
cd "$(dirname "$0")/.."
ARCH=${ARCH:-90}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
J=$(nproc)
# where gpu-check.sh unpacks llama.cpp's CUDA build: its bench looks for the
# CPU backends there (ggml_backend_load_all_from_path)
LLAMA_DIR=/tmp/brigade-llama/llama-cuda

make -j"$J" CUDA=1 BUILD=build-gpu CUDA_ARCHS="$ARCH" all \
    build-gpu/tests/test_cuda_ops build-gpu/tests/gpu_session
pack=build-gpu/pack
rm -rf "$pack" && mkdir -p "$pack/bin" "$pack/lib"
for b in build-gpu/brigade build-gpu/tests/test_cuda_ops build-gpu/tests/gpu_session; do
    strip -o "$pack/bin/$(basename "$b")" "$b"
done
cc -std=c11 -O2 -o "$pack/bin/logits_nmse" scripts/logits_nmse.c -lm
"$CUDA_HOME/bin/nvcc" -O2 -arch=sm_"$ARCH" -o "$pack/bin/membw" scripts/membw.cu
if [ -f build-gpu/llama-cuda.tar.xz ]; then
    L=.oracle/cuda/llama-cuda
    for prog in oracle_bench oracle_logits; do
        cc -std=c11 -O2 -D_DEFAULT_SOURCE -I"$L/include" -Itests -DORACLE_LIB_DIR="\"$LLAMA_DIR/lib\"" \
            bench/$prog.c -L"$L/lib" -l:libllama.cuda.v0.5.0.so -l:libggml.cuda.v0.5.0.so \
            -l:libggml-base.so -Wl,-rpath,"$LLAMA_DIR/lib" -o "$pack/bin/${prog}_cuda"
    done
fi
# every library the programs load from the system, less glibc's, the C++
# runtime's and the driver's (the GPU machine's own, as new or newer)
for b in "$pack"/bin/*; do ldd "$b" 2>/dev/null; done | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' |
    sort -u | while read -r lib; do
        case $(basename "$lib") in
        libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcuda.so*) ;;
        libstdc++.so*|libgcc_s.so*) ;;
        libllama*|libggml*) ;; # llama.cpp's, from its own bundle
        *) cp -L "$lib" "$pack/lib/" ;;
        esac
    done
echo "$ARCH" > "$pack/ARCH"
git rev-parse --short HEAD > "$pack/COMMIT" 2>/dev/null || echo unknown > "$pack/COMMIT"
git diff --quiet 2>/dev/null || echo modified >> "$pack/COMMIT"
tar -C build-gpu -cJf build-gpu/prebuilt.tar.xz pack
rm -rf "$pack"
echo "gpu-pack: wrote build-gpu/prebuilt.tar.xz ($(du -h build-gpu/prebuilt.tar.xz | cut -f1)) for sm_$ARCH;" \
    "carry build-gpu/prebuilt.tar.xz (and build-gpu/llama-cuda.tar.xz) to the GPU machine" >&2
