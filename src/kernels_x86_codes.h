/* The 32 codes of a 32-element block as AVX2 bytes, shared by the dots
 * against Q8_0 activations (kernels_x86_legacy.c) and the tiled products
 * that unpack the same blocks (kernels_x86_gemm.c), and the IQ4 codebook
 * and IQ4_XS group scales that the IQ4_XS dots and tile both decode.
 * Layouts in quant.h. */
#ifndef BG_KERNELS_X86_CODES_H
#define BG_KERNELS_X86_CODES_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"

/* A subset of every caller's target, so these inline into all of them. */
#define BG_CODES __attribute__((target("avx2")))

/* The IQ4_NL/IQ4_XS codebook (the format's constant table), for pshufb. */
static const int8_t bg_iq4_codebook[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

/* 16 bytes of nibbles as 32 bytes 0..15: byte j's low nibble goes to lane
 * j, its high nibble to lane j + 16 (the Q4/Q5/IQ4_NL element order). */
BG_CODES static inline __m256i bg_unpack_nibbles(const uint8_t *qs)
{
    /* the 16 bytes in both halves (one broadcasting load), the upper half's
     * shifted down a nibble */
    const __m256i v =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)qs));
    const __m256i both = _mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

/* The 32 bits of the little-endian word at qh as 32 bytes: 0xFF in lane j
 * where bit j is set, else 0. */
BG_CODES static inline __m256i bg_expand_bits(const uint8_t *qh)
{
    int32_t bits;
    memcpy(&bits, qh, sizeof bits);
    /* Lane j takes byte j / 8 of the word, then tests bit j % 8 of it. */
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                             0x0101010101010101, 0x0000000000000000);
    const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(bits), spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* A Q5 block's unsigned codes 0..31 (Q5_0's and Q5_1's qh and qs): the
 * nibbles with their fifth bit from qh. */
BG_CODES static inline __m256i bg_unsigned_codes_q5(const uint8_t *qh, const uint8_t *qs)
{
    return _mm256_or_si256(bg_unpack_nibbles(qs),
                           _mm256_and_si256(bg_expand_bits(qh), _mm256_set1_epi8(16)));
}

/* The signed codes of the block at wb: Q4_0 nibble - 8, Q5_0 five bits -
 * 16, IQ4_NL the codebook's values, Q8_0 the bytes (any int8). */
BG_CODES static inline __m256i bg_codes_q4_0(const uint8_t *wb)
{
    const __m256i q = bg_unpack_nibbles(wb + offsetof(bg_block_q4_0, qs));
    return _mm256_sub_epi8(q, _mm256_set1_epi8(8));
}

BG_CODES static inline __m256i bg_codes_q5_0(const uint8_t *wb)
{
    const __m256i q = bg_unpack_nibbles(wb + offsetof(bg_block_q5_0, qs));
    const __m256i high = bg_expand_bits(wb + offsetof(bg_block_q5_0, qh));
    /* code - 16: the nibble where bit 4 is set, else the nibble - 16,
     * which is the nibble with its upper four bits set (0xF0 = -16). */
    const __m256i minus16 = _mm256_andnot_si256(high, _mm256_set1_epi8((char)0xF0));
    return _mm256_or_si256(q, minus16);
}

BG_CODES static inline __m256i bg_codes_iq4_nl(const uint8_t *wb)
{
    const __m256i book = _mm256_broadcastsi128_si256(
        _mm_loadu_si128((const __m128i *)(const void *)bg_iq4_codebook));
    return _mm256_shuffle_epi8(book, bg_unpack_nibbles(wb + offsetof(bg_block_iq4_nl, qs)));
}

BG_CODES static inline __m256i bg_codes_q8_0(const uint8_t *wb)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)(wb + offsetof(bg_block_q8_0, qs)));
}

/* The eight six-bit group scales of the IQ4_XS block at x, minus 32, one a
 * 32-bit lane: a variable shift pulls nibble g of scales_l and bit pair g
 * of scales_h into lane g at once. */
BG_CODES static inline __m256i bg_iq4_xs_scales32(const uint8_t *x)
{
    uint32_t sl;
    uint16_t sh;
    memcpy(&sl, x + offsetof(bg_block_iq4_xs, scales_l), sizeof sl);
    memcpy(&sh, x + offsetof(bg_block_iq4_xs, scales_h), sizeof sh);
    const __m256i nibble_at = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const __m256i pair_at = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sl), nibble_at),
                                        _mm256_set1_epi32(0xF));
    const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(sh), pair_at),
                                        _mm256_set1_epi32(3));
    return _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
}

#endif
