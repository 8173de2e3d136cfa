/* The arithmetic of docs/spec.md, sections 0-4 (the golden model's arith.py, prng.py and
 * lowrank.py): integers only, the same bits. */
#include "fw.h"

/* 0.2 rounding shift, ties towards +infinity (arithmetic shift of a signed value) */
int32_t rshr(int32_t x, unsigned s) { return s ? (x + (1 << (s - 1))) >> s : x; }

/* 0.3 sat: fw.h (inline) */

/* 0.4 floor(sqrt(n)), bit by bit */
uint32_t isqrt64(uint64_t n) {
    uint64_t root = 0, bit = (uint64_t)1 << 62;
    while (bit > n) bit >>= 2;
    while (bit) {
        if (n >= root + bit) {
            n -= root + bit;
            root = (root >> 1) + bit;
        } else {
            root >>= 1;
        }
        bit >>= 2;
    }
    return (uint32_t)root;
}

/* 1.2 storage code -> value (-2..2); the invalid codes read as 0 (never written) */
int digit_of_code(unsigned code) {
    static const int8_t value[8] = {0, 1, 2, 0, 0, 0, -2, -1};
    return value[code & 7];
}

/* 4.1 PQUANT: m = min(2, (2|x| + 2^f) >> (f + 1)), sign(x) * m */
int pquant(int32_t x, unsigned f) {
    uint32_t a = x < 0 ? -(uint32_t)x : (uint32_t)x;
    uint32_t m = (2 * a + ((uint32_t)1 << f)) >> (f + 1);
    if (m > 2) m = 2;
    return x < 0 ? -(int)m : (int)m;
}

/* 2.1 xorshift32 (13, 17, 5) */
uint32_t xs32(uint32_t x) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x;
}

/* 2.2 six rounds of xs32 then x += x << 11 (mod 2^32) */
uint32_t mix32(uint32_t x) {
    for (int i = 0; i < 6; i++) {
        x = xs32(x);
        x += x << 11;
    }
    return x;
}

/* 2.3 keys */
uint32_t run_key(uint32_t seed) { return mix32(seed ^ 0x5EEDE66Bu) | 0x80000000u; }

uint32_t stream_state(uint32_t key, uint32_t step, uint32_t pair, uint32_t layer, uint32_t ab) {
    return mix32((step << 15 | pair << 4 | layer << 1 | ab) ^ key);
}

/* 2.4, 2.5 digits skip .. skip + n - 1 of the stream starting at state, LSB first */
void stream_digits(uint32_t state, uint32_t skip, uint32_t n, int8_t *out) {
#if UNIFORM
    const unsigned per = 4, bits = 8;
#else
    const unsigned per = 8, bits = 4;
#endif
    uint32_t w = state;
    for (uint32_t i = skip / per; i; i--) w = xs32(w);
    unsigned pos = skip % per;
    uint32_t word = w >> (bits * pos);
    while (n) {
#if UNIFORM
        uint32_t byte = word & 0xFF;
        *out++ = (int8_t)((((byte << 2) + byte) >> 8) - 2);
#else
        static const int8_t popcount_less_2[16] = {-2, -1, -1, 0, -1, 0, 0, 1,
                                                   -1, 0, 0, 1, 0, 1, 1, 2};
        *out++ = popcount_less_2[word & 0xF];
#endif
        word >>= bits;
        n--;
        if (++pos == per) {
            pos = 0;
            w = xs32(w);
            word = w;
        }
    }
}
