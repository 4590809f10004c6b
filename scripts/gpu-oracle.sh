#!/bin/sh
# Packs llama.cpp's CUDA build (the npm package @node-llama-cpp/linux-x64-cuda,
# the same release as the CPU oracle) for scripts/gpu-check.sh, which runs on
# a GPU machine that reaches no network: run this here, then carry the file
# it writes (build-gpu/llama-cuda.tar.xz) with the working tree.
#
# The package's libggml-cuda.so is 159 MB of device code for many GPUs, over
# what a carry holds. Its fatbinaries are kept whole except the payloads of
# entries for other GPUs, which are zeroed (headers intact, so the CUDA
# runtime still reads every entry and picks this GPU's one); zeros compress
# to nothing. For ARCH=90 (H100/H200) the release has no sm_90 machine code,
# only compute_90 PTX, which the driver compiles on first use: gpu-check.sh
# gives llama.cpp a warm-up run and a kernel cache.
#
#   sh scripts/gpu-oracle.sh            # ARCH=90
#   ARCH=89 sh scripts/gpu-oracle.sh
set -eu
cd "$(dirname "$0")/.."
ARCH=${ARCH:-90}
VERSION=3.22.1
work=.oracle/cuda
out=build-gpu/llama-cuda.tar.xz
command -v npm >/dev/null 2>&1 || { echo "gpu-oracle: npm is required" >&2; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "gpu-oracle: python3 is required" >&2; exit 1; }
[ -f .oracle/llama.cpp/include/llama.h ] || {
    echo "gpu-oracle: run scripts/setup-oracle.sh first (the headers come from it)" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work/pack" "$work/llama-cuda/lib" "$work/llama-cuda/include" build-gpu
echo "gpu-oracle: fetching @node-llama-cpp/linux-x64-cuda@$VERSION" >&2
(cd "$work/pack" && npm pack -q "@node-llama-cpp/linux-x64-cuda@$VERSION" >/dev/null &&
    tar xzf ./*.tgz)
bins=$work/pack/package/bins/linux-x64-cuda
for f in libggml-base.so libggml.cuda.v0.5.0.so libllama.cuda.v0.5.0.so libggml-cuda.so; do
    [ -f "$bins/$f" ] || { echo "gpu-oracle: $f missing from the package" >&2; exit 1; }
done
cp "$bins"/libggml-base.so "$bins"/libggml.cuda.v0.5.0.so "$bins"/libllama.cuda.v0.5.0.so \
    "$bins"/libggml-cpu-*.so "$work/llama-cuda/lib/"
cp .oracle/llama.cpp/include/*.h .oracle/llama.cpp/ggml/include/*.h "$work/llama-cuda/include/"

echo "gpu-oracle: keeping the device code for sm_$ARCH" >&2
python3 - "$bins/libggml-cuda.so" "$work/llama-cuda/lib/libggml-cuda.so" "$ARCH" <<'EOF'
# Fatbinary: a 16-byte header (magic 0xBA55ED50, version, header size, size
# of the entries), then entries, each a header (kind: 1 PTX, 2 ELF; its
# header size; payload size; ...; the sm version at byte 28) and a payload.
import struct, sys
src, dst, arch = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = bytearray(open(src, 'rb').read())
magic = struct.pack('<I', 0xBA55ED50)
pos = containers = kept = zeroed = 0
while True:
    i = d.find(magic, pos)
    if i < 0:
        break
    _, hsize, size = struct.unpack_from('<HHQ', d, i + 4)
    if hsize != 16 or size == 0 or i + 16 + size > len(d):
        pos = i + 4
        continue
    containers += 1
    p, end, here = i + 16, i + 16 + size, 0
    while p < end:
        kind, _, ehs, padded = struct.unpack_from('<HHII', d, p)
        sm = struct.unpack_from('<I', d, p + 28)[0]
        if ehs < 32 or p + ehs + padded > end:
            sys.exit('gpu-oracle: unexpected fatbinary entry at byte %d' % p)
        if sm == arch and kind in (1, 2):
            here += 1
        else:
            d[p + ehs:p + ehs + padded] = bytes(padded)
            zeroed += padded
        p += ehs + padded
    if not here:
        sys.exit('gpu-oracle: a fatbinary at byte %d has no code for sm_%d' % (i, arch))
    kept += here
    pos = end
if not containers:
    sys.exit('gpu-oracle: no fatbinary found in ' + src)
open(dst, 'wb').write(d)
print('gpu-oracle: %d fatbinaries, %d entries kept for sm_%d, %.1f MB zeroed'
      % (containers, kept, arch, zeroed / 1e6), file=sys.stderr)
EOF
echo "$ARCH" > "$work/llama-cuda/ARCH"
tar -C "$work" -cf - llama-cuda | xz -T0 -6 > "$out"
echo "gpu-oracle: wrote $out ($(du -h "$out" | cut -f1)); carry it to the GPU machine" >&2
