#!/usr/bin/env python3
"""Writes a few small, valid GGUF v3 seed files for fuzz/fuzz_gguf.c.

    python3 fuzz/make_corpus.py [outdir]      (default: fuzz/corpus)

Seeds: a tokenizer-style file (string/float/int arrays, arch keys), a file
with tensors of several types and shapes (non-default alignment), a file with
nested arrays and every scalar type, and an empty (no keys, no tensors) file.
Standard library only."""
import os
import struct
import sys

# GGUF value type ids
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i",
              F32: "<f", BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def payload(t, v):
    """The bytes of a value of type t, without its type tag."""
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        out = struct.pack("<IQ", et, len(items))
        return out + b"".join(payload(et, x) for x in items)
    return struct.pack(SCALAR_FMT[t], v)


def gguf(kvs, tensors=(), alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, type_id, dims, data_bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, t, v in kvs:
        out += gstr(key) + struct.pack("<I", t) + payload(t, v)
    offset = 0
    offsets = []
    for name, ttype, dims, data in tensors:
        offsets.append(offset)
        out += gstr(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", ttype, offset)
        offset += (len(data) + alignment - 1) // alignment * alignment
    if tensors:
        out += b"\0" * (-len(out) % alignment)
        for (_, _, _, data), off in zip(tensors, offsets):
            out += data + b"\0" * (-len(data) % alignment)
    return out


def pattern(n, seed):
    return bytes((i * 131 + seed * 17 + (i >> 8)) & 0xFF for i in range(n))


def tokenizer_seed():
    tokens = ["<unk>", "<s>", "</s>", "a", "b", "ab", " the", "\u00e9t\u00e9", "x\0y", ""]
    return gguf([
        ("general.architecture", STR, "qwen35moe"),
        ("general.name", STR, "seed"),
        ("qwen35moe.block_count", U32, 2),
        ("qwen35moe.context_length", U64, 4096),
        ("qwen35moe.attention.layer_norm_rms_epsilon", F32, 1e-6),
        ("qwen35moe.attention.head_count_kv", ARR, (I32, [2, 0])),
        ("qwen35moe.rope.dimension_sections", ARR, (I32, [11, 11, 10, 0])),
        ("tokenizer.ggml.model", STR, "gpt2"),
        ("tokenizer.ggml.pre", STR, "qwen35"),
        ("tokenizer.ggml.tokens", ARR, (STR, tokens)),
        ("tokenizer.ggml.scores", ARR, (F32, [float(-i) for i in range(len(tokens))])),
        ("tokenizer.ggml.token_type", ARR, (I32, [2, 3, 3] + [1] * (len(tokens) - 3))),
        ("tokenizer.ggml.merges", ARR, (STR, ["a b", "\u0120 t", "h e"])),
        ("tokenizer.ggml.bos_token_id", U32, 1),
        ("tokenizer.ggml.eos_token_id", U32, 2),
        ("tokenizer.ggml.add_bos_token", BOOL, 0),
        ("tokenizer.chat_template", STR, "{% for m in messages %}{{ m.content }}{% endfor %}"),
    ])


def tensor_seed():
    # (name, type id, dims innermost first, block elems, block bytes)
    specs = [("token_embd.weight", 0, [8, 3], 1, 4),           # f32
             ("blk.0.attn_norm.weight", 1, [16], 1, 2),        # f16
             ("blk.0.ffn_up.weight", 8, [64, 2], 32, 34),      # q8_0
             ("blk.0.ffn_down_exps.weight", 12, [256, 1, 2], 256, 144),  # q4_K
             ("blk.0.ssm_a", 30, [4, 2, 2, 2], 1, 2),          # bf16
             ("output.weight", 2, [32, 2], 32, 18)]             # q4_0
    tensors = []
    for i, (name, t, dims, be, bb) in enumerate(specs):
        n = 1
        for d in dims:
            n *= d
        tensors.append((name, t, dims, pattern(n // be * bb, i)))
    return gguf([("general.architecture", STR, "qwen3moe"),
                 ("general.alignment", U32, 64),
                 ("qwen3moe.expert_count", U32, 2)], tensors, alignment=64)


def nested_seed():
    return gguf([
        ("u8", U8, 200), ("i8", I8, -100), ("u16", U16, 60000), ("i16", I16, -30000),
        ("u32", U32, 4000000000), ("i32", I32, -2000000000), ("f32", F32, 1.5),
        ("bool", BOOL, 1), ("str", STR, "hello"), ("u64", U64, 2 ** 63 + 5),
        ("i64", I64, -(2 ** 62)), ("f64", F64, -2.25), ("empty.str", STR, ""),
        ("empty.arr", ARR, (U16, [])),
        ("bools", ARR, (BOOL, [0, 1, 1])),
        ("nested", ARR, (ARR, [(U8, [1, 2, 3]), (STR, ["p", "qq"]), (ARR, [(F64, [0.5])]), (I64, [])])),
        ("deep", ARR, (ARR, [(ARR, [(ARR, [(U32, [7])])])])),
    ], [("t", 24, [5], pattern(5, 9))])  # i8


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
    os.makedirs(outdir, exist_ok=True)
    seeds = {"tokenizer.gguf": tokenizer_seed(), "tensors.gguf": tensor_seed(),
             "nested.gguf": nested_seed(), "empty.gguf": gguf([])}
    for name, data in seeds.items():
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data)
        print(f"{outdir}/{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
