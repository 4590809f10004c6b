#!/bin/sh
# Installs the test oracle: llama.cpp 0.5.0 prebuilt (from the npm package
# node-llama-cpp) and its source tree (shipped inside that package as a git
# bundle). Tests link the libraries; the product never does.
set -eu
dir=${ORACLE_DIR:-.oracle}
mkdir -p "$dir"
cd "$dir"
if ! command -v npm >/dev/null 2>&1; then
    echo "setup-oracle: npm is required (apt-get install npm)" >&2
    exit 1
fi
[ -f package.json ] || printf '{"name":"brigade-oracle","private":true}\n' > package.json
echo "setup-oracle: installing node-llama-cpp 3.22.1 from npm" >&2
npm i -E --ignore-scripts --no-audit --no-fund \
    @node-llama-cpp/linux-x64@3.22.1 node-llama-cpp@3.22.1 >/dev/null
rm -rf llama.cpp
git -c advice.detachedHead=false clone -q \
    node_modules/node-llama-cpp/llama/gitRelease.bundle llama.cpp
ln -sfn node_modules/@node-llama-cpp/linux-x64/bins/linux-x64 lib
for f in lib/libllama.v0.5.0.so lib/libggml-base.so llama.cpp/include/llama.h \
         llama.cpp/models/ggml-vocab-qwen35.gguf; do
    [ -e "$f" ] || { echo "setup-oracle: missing $dir/$f after install" >&2; exit 1; }
done
touch stamp
echo "setup-oracle: ready in $dir" >&2
