/* IEEE half (f16) and bfloat16 (bf16) <-> float conversions.
 *
 * Both 16-bit formats are carried as raw uint16_t bit patterns, as they are
 * stored in GGUF files. Conversions to 16 bits round to nearest, ties to
 * even. Results are bit-identical to ggml's portable C conversions,
 * including the treatment of NaN:
 *   - f32 -> f16 maps every NaN to the quiet NaN 0x7E00 (sign kept, payload
 *     dropped);
 *   - f16 -> f32 widens a NaN's payload and sets the quiet bit, which is
 *     what ggml's float-multiply based widening does on every IEEE FPU;
 *   - f32 -> bf16 truncates a NaN's payload and sets the quiet bit;
 *   - bf16 -> f32 is exact (a shift).
 * Integer-only code, so the results do not depend on FPU flags or on how
 * the compiler schedules floating point. */
#ifndef BG_FP16_H
#define BG_FP16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t bg_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bg_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* f16 layout: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
 * f32 layout: 1 sign, 8 exponent (bias 127), 23 mantissa bits. */
static inline float bg_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t man = h & 0x3FFu;

    if (exp == 0x1F) /* Inf, or NaN made quiet */
        return bg_f32_from_bits(sign | 0x7F800000u | (man << 13) |
                                (man ? 0x00400000u : 0));
    if (exp != 0) /* normal: rebias the exponent */
        return bg_f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
    if (man == 0)
        return bg_f32_from_bits(sign);
    /* Subnormal half: man * 2^-24, a normal float. Shift the leading one up
     * to the implicit-bit position and lower the exponent to match. */
    uint32_t e = 113; /* float exponent field of 2^-14 */
    while (!(man & 0x400u)) {
        man <<= 1;
        e--;
    }
    return bg_f32_from_bits(sign | (e << 23) | ((man & 0x3FFu) << 13));
}

/* Shifts v right by s bits (1 <= s <= 31), rounding to nearest, ties to
 * even. */
static inline uint32_t bg_shift_right_rne(uint32_t v, unsigned s)
{
    uint32_t half = 1u << (s - 1);
    uint32_t rest = v & ((1u << s) - 1);
    uint32_t q = v >> s;
    if (rest > half || (rest == half && (q & 1u)))
        q++;
    return q;
}

static inline uint16_t bg_f32_to_f16(float f)
{
    uint32_t w = bg_f32_bits(f);
    uint16_t sign = (uint16_t)((w >> 16) & 0x8000u);
    uint32_t abs = w & 0x7FFFFFFFu;

    if (abs > 0x7F800000u) /* NaN */
        return sign | 0x7E00u;
    if (abs >= 0x477FF000u) /* >= 65520: rounds past the largest half, 65504 */
        return sign | 0x7C00u;
    if (abs >= 0x38800000u) { /* >= 2^-14: normal half */
        /* Rebiasing the exponent (127 -> 15) keeps exponent and mantissa
         * contiguous, so a carry out of the mantissa bumps the exponent. */
        return sign | (uint16_t)bg_shift_right_rne(abs - (112u << 23), 13);
    }
    if (abs < 0x33000000u) /* below 2^-25, half the smallest subnormal: zero */
        return sign;
    /* Subnormal half, in units of 2^-24: the float's 24-bit significand
     * times 2^(exp - 126); exp here is in [102, 112], a shift of 14..24. */
    uint32_t exp = abs >> 23;
    uint32_t sig = (abs & 0x7FFFFFu) | 0x800000u;
    return sign | (uint16_t)bg_shift_right_rne(sig, 126 - exp);
}

/* bf16 is the top half of an f32. */
static inline float bg_bf16_to_f32(uint16_t h)
{
    return bg_f32_from_bits((uint32_t)h << 16);
}

static inline uint16_t bg_f32_to_bf16(float f)
{
    uint32_t w = bg_f32_bits(f);
    if ((w & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: keep it NaN, make it quiet */
        return (uint16_t)((w >> 16) | 0x0040u);
    /* Round the low 16 bits away, ties to even; a carry may run into the
     * exponent, which correctly yields the next binade or Inf. */
    uint32_t bias = 0x7FFFu + ((w >> 16) & 1u);
    return (uint16_t)((w + bias) >> 16);
}

#endif
