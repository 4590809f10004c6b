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
# only compute_90 PTX of ISA 9.1 (CUDA 13.1), which the GPU machine's CUDA
# 13.0 driver refuses ("PTX was compiled with an unsupported toolchain"). So
# where a fatbinary has only PTX for this GPU, the PTX is compiled here by
# CUDA 13.0's ptxas (its .version lowered to 9.0; ptxas rejects any 9.1-only
# feature) and the fatbinary is rewritten to hold just that sm_$ARCH cubin,
# built by CUDA's fatbinary tool. This needs the CUDA 13.0 toolkit
# (CUDA_BIN, default /usr/local/cuda/bin) and zstd, as the entries are
# zstd-compressed; a few minutes of ptxas.
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
CUDA_BIN=${CUDA_BIN:-/usr/local/cuda/bin} \
python3 - "$bins/libggml-cuda.so" "$work/llama-cuda/lib/libggml-cuda.so" "$ARCH" <<'EOF'
# Fatbinary: a 16-byte header (magic 0xBA55ED50, version, header size, size
# of the entries), then entries, each a header (kind: 1 PTX, 2 ELF; its
# header size; padded payload size; stored size; ...; the sm version at byte
# 28; flags at 40, 0x8000 = zstd-compressed; unpacked size at 56) and a
# payload.
import os, re, struct, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor
src, dst, arch = sys.argv[1], sys.argv[2], int(sys.argv[3])
bindir = os.environ['CUDA_BIN']
d = bytearray(open(src, 'rb').read())
magic = struct.pack('<I', 0xBA55ED50)
pos = containers = kept = zeroed = 0
todo = []   # (container start, end, PTX entry) to compile here
while True:
    i = d.find(magic, pos)
    if i < 0:
        break
    _, hsize, size = struct.unpack_from('<HHQ', d, i + 4)
    if hsize != 16 or size == 0 or i + 16 + size > len(d):
        pos = i + 4
        continue
    containers += 1
    p, end, mine = i + 16, i + 16 + size, []
    while p < end:
        kind, _, ehs, padded = struct.unpack_from('<HHIQ', d, p)
        sm = struct.unpack_from('<I', d, p + 28)[0]
        if ehs < 32 or p + ehs + padded > end:
            sys.exit('gpu-oracle: unexpected fatbinary entry at byte %d' % p)
        if sm == arch and kind in (1, 2):
            mine.append((kind, p))
        else:
            d[p + ehs:p + ehs + padded] = bytes(padded)
            zeroed += padded
        p += ehs + padded
    if not mine:
        sys.exit('gpu-oracle: a fatbinary at byte %d has no code for sm_%d' % (i, arch))
    if any(k == 2 for k, _ in mine):
        kept += len(mine)
    else:
        todo.append((i, end, mine[0][1]))
    pos = end
if not containers:
    sys.exit('gpu-oracle: no fatbinary found in ' + src)

def run(*cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, **kw)
    if r.returncode:
        sys.exit('gpu-oracle: %s failed: %s' % (cmd[0], r.stderr.decode(errors='replace')[-2000:]))
    return r.stdout

def compile_ptx(job):
    n, (i, end, p) = job
    ehs, padded, stored = struct.unpack_from('<IQI', d, p + 4)
    flags, _, unpacked = struct.unpack_from('<QQQ', d, p + 40)
    if flags & 0x2000:   # the older LZ4-style compression
        sys.exit('gpu-oracle: unsupported fatbinary compression at byte %d' % p)
    ptx = bytes(d[p + ehs:p + ehs + (stored if flags & 0x8000 else padded)])
    if flags & 0x8000:
        ptx = run('zstd', '-dcq', input=ptx)
        if len(ptx) != unpacked:
            sys.exit('gpu-oracle: PTX at byte %d unpacks to %d bytes, not %d' % (p, len(ptx), unpacked))
    # 9.0 is the newest PTX ISA CUDA 13.0 takes; ptxas errors on newer features.
    ptx = re.sub(rb'^\.version (\d+)\.(\d+)',
                 lambda m: m.group(0) if (int(m[1]), int(m[2])) <= (9, 0) else b'.version 9.0',
                 ptx.rstrip(b'\0'), count=1, flags=re.M)
    base = os.path.join(tmp, str(n))
    open(base + '.ptx', 'wb').write(ptx)
    run(os.path.join(bindir, 'ptxas'), '-arch=sm_%d' % arch, base + '.ptx', '-o', base + '.cubin')
    run(os.path.join(bindir, 'fatbinary'), '-64', '--create', base + '.fatbin', '--compress-all',
        '--compress-mode=size', '--image3=kind=elf,sm=%d,file=%s.cubin' % (arch, base))
    fb = open(base + '.fatbin', 'rb').read()
    for f in ('.ptx', '.cubin', '.fatbin'):
        os.remove(base + f)
    # The new fatbinary (its header gives its own size) replaces the old one
    # in place; the rest of the old one's bytes are zeroed.
    if fb[:4] != magic or len(fb) > end - i:
        sys.exit('gpu-oracle: the sm_%d cubin for the fatbinary at byte %d does not fit' % (arch, i))
    return i, end, fb

if todo:
    v = run(os.path.join(bindir, 'ptxas'), '--version').decode()
    if 'release 13.0,' not in v:   # the cubins must load on a CUDA 13.0 driver
        sys.exit('gpu-oracle: needs CUDA 13.0\'s ptxas in CUDA_BIN, found: ' + v.strip().splitlines()[-1])
    run('zstd', '--version')
    print('gpu-oracle: compiling %d PTX entries for sm_%d with ptxas 13.0' % (len(todo), arch),
          file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(os.cpu_count() or 2) as ex:
        done = list(ex.map(compile_ptx, enumerate(todo)))
    for i, end, fb in done:
        d[i:end] = fb + bytes(end - i - len(fb))
    kept += len(done)
open(dst, 'wb').write(d)
print('gpu-oracle: %d fatbinaries, %d entries kept for sm_%d (%d compiled here), %.1f MB zeroed'
      % (containers, kept, arch, len(todo), zeroed / 1e6), file=sys.stderr)
EOF
echo "$ARCH" > "$work/llama-cuda/ARCH"
tar -C "$work" -cf - llama-cuda | xz -T0 -6 > "$out"
echo "gpu-oracle: wrote $out ($(du -h "$out" | cut -f1)); carry it to the GPU machine" >&2
