#!/bin/sh
# `brigade tokenize` as a user meets it: ids one per line, --pieces,
# --special against plain text, --add-special, -f FILE and standard input,
# a synthetic model's own tokenizer, and clear errors for a missing file, a
# model without a tokenizer and tokenizers brigade does not handle.
B=${BRIGADE:-build/brigade}
M=${ORACLE_SRC_DIR:-.oracle/llama.cpp}/models
Q=$M/ggml-vocab-qwen35.gguf
L=$M/ggml-vocab-llama-bpe.gguf
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib_cli.sh"


# same NAME EXPECTED ACTUAL
same() {
    if [ "$2" = "$3" ]; then ok; else bad "$1: expected [$2], got [$3]"; fi
}

# Ids, one per line, as llama.cpp's fixtures have them.
same "ids of 'Hello world'" "9707
1879" "$("$B" tokenize -m "$Q" -p 'Hello world')"
same "ids of ' Hello, world!'" "21927 11 1879 0" \
    "$("$B" tokenize -m "$Q" -p ' Hello, world!' | tr '\n' ' ' | sed 's/ $//')"
same "an empty text" "" "$("$B" tokenize -m "$Q" -p '')"

# --pieces: id, tab, the text; control characters escaped.
tab=$(printf '\t')
same "pieces" "9707${tab}Hello
1879${tab} world" "$("$B" tokenize -m "$Q" -p 'Hello world' --pieces)"
nl='a
b'
same "a newline's piece" "64${tab}a
198${tab}\\n
65${tab}b" "$("$B" tokenize -m "$Q" -p "$nl" --pieces)"

# Control tokens written in the text: ids with --special, plain text without.
same "--special" "151644
872" "$("$B" tokenize -m "$Q" -p '<|im_start|>user' --special)"
out=$("$B" tokenize -m "$Q" -p '<|im_start|>user')
case "$out" in
    *151644*) bad "<|im_start|> became a control token without --special" ;;
    *) ok ;;
esac
same "control token piece" "151645${tab}<|im_end|>" \
    "$("$B" tokenize -m "$Q" -p '<|im_end|>' --special --pieces)"
# User-defined tokens are recognised either way.
same "a user-defined token" "151650" "$("$B" tokenize -m "$Q" -p '[PAD151650]')"

# --add-special: llama-bpe asks for a BOS token, qwen35 for none.
same "--add-special (llama-bpe)" "128000
13347" "$("$B" tokenize -m "$L" -p 'Hi' --add-special)"
same "no --add-special (llama-bpe)" "13347" "$("$B" tokenize -m "$L" -p 'Hi')"
same "--add-special (qwen35)" "13048" "$("$B" tokenize -m "$Q" -p 'Hi' --add-special)"

# -f FILE and standard input give what -p gives.
# (octal escapes: dash's printf has no \x)
printf 'The quick brown fox\njumps over 12345 lazy dogs.\n' > "$T/text.txt"
printf '\t\303\244\346\227\245\346\234\254\n' >> "$T/text.txt"
from_p=$("$B" tokenize -m "$Q" -p "$(cat "$T/text.txt")
")
same "-f FILE" "$from_p" "$("$B" tokenize -m "$Q" -f "$T/text.txt")"
same "-f -" "$from_p" "$("$B" tokenize -m "$Q" -f - < "$T/text.txt")"
# Malformed UTF-8 is tokenized, not refused.
printf 'a\377\300\257b' > "$T/bad.txt"
expect 0 "5691" -- "$B" tokenize -m "$Q" -f "$T/bad.txt"

# A model's own tokenizer: synth copies the vocabulary (padded), so ids agree.
"$B" synth "$T/m.gguf" --preset tiny-qwen35moe --vocab "$Q" 2>/dev/null
same "a model's tokenizer" "$("$B" tokenize -m "$Q" -f "$T/text.txt")" \
    "$("$B" tokenize -m "$T/m.gguf" -f "$T/text.txt")"

# Errors.
expect 2 "usage: brigade tokenize" -- "$B" tokenize
expect 2 "usage: brigade tokenize" -- "$B" tokenize -p hi
expect 2 "not both" -- "$B" tokenize -m "$Q" -p hi -f "$T/text.txt"
expect 2 "unknown option" -- "$B" tokenize -m "$Q" -p hi --bogus
expect 0 "usage: brigade tokenize" -- "$B" tokenize --help
expect 1 "cannot open" -- "$B" tokenize -m "$T/missing.gguf" -p hi
expect 1 "cannot open '$T/missing.txt'" -- "$B" tokenize -m "$Q" -f "$T/missing.txt"
# A GGUF holding only general.architecture: no tokenizer.
printf 'GGUF\003\000\000\000' > "$T/notok.gguf"                      # version 3
printf '\000\000\000\000\000\000\000\000' >> "$T/notok.gguf"         # no tensors
printf '\001\000\000\000\000\000\000\000' >> "$T/notok.gguf"         # one key
printf '\024\000\000\000\000\000\000\000general.architecture\010\000\000\000' >> "$T/notok.gguf"
printf '\005\000\000\000\000\000\000\000qwen2' >> "$T/notok.gguf"
expect 1 "has no tokenizer" -- "$B" tokenize -m "$T/notok.gguf" -p hi
expect 1 "'llama' is not supported" -- "$B" tokenize -m "$M/ggml-vocab-llama-spm.gguf" -p hi
expect 1 "'deepseek-coder' is not supported (supported: qwen35" -- \
    "$B" tokenize -m "$M/ggml-vocab-deepseek-coder.gguf" -p hi

finish cli_tokenize
