/* Firmware for tests/test_rtl_cpu.py: computations of the Pentary-EGGROLL spec on the
 * RV32I core, checked against pentegg.golden. Inputs come from `params` (in .data, so
 * that the compiler cannot fold them), results go to `results` (in .bss); the test reads
 * both by symbol. RV32I has no multiply or divide: those come from compiler_rt. */

#include <stdint.h>

#define N_XS 8      /* xorshift32 words */
#define N_MIX 4     /* mix32 values */
#define N_RSHR 6    /* rshr values */
#define N_CRC 40    /* CRC-16/CCITT-FALSE input bytes */
#define N_MUL 4     /* multiply/divide cases */

/* params: [0] xorshift seed, [1..N_MIX] mix32 inputs, then N_RSHR (x, s) pairs, then
 * N_MUL (a, b) pairs; crc_data: the CRC's input */
volatile uint32_t params[1 + N_MIX + 2 * N_RSHR + 2 * N_MUL] = {
    0x12345678u,
    0u, 1u, 0xDEADBEEFu, 0x5EEDE66Bu,
    (uint32_t)-1000001, 3, 1000001, 3, (uint32_t)-8, 4, 7, 1, (uint32_t)-7, 1, 0x7FFFFFFF, 20,
    1234567u, 89u, 0xFFFFFFF0u, 7u, (uint32_t)-5000000, 1234u, 0x80000000u, 3u,
};
volatile uint8_t crc_data[N_CRC] = "pentary eggroll: five levels, one key.";

/* results: xorshift words, mix32 values, rshr values, crc, then per multiply case
 * a*b (low), a/b, a%b (unsigned), a/b (signed), a*b (signed 64-bit, low and high) */
volatile uint32_t results[N_XS + N_MIX + N_RSHR + 1 + 6 * N_MUL];

static uint32_t xs32(uint32_t x) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x;
}

static uint32_t mix32(uint32_t x) {
    for (int i = 0; i < 6; i++) {
        x = xs32(x);
        x += x << 11;
    }
    return x;
}

/* rounding arithmetic right shift, ties towards +infinity (spec 0.2) */
static int64_t rshr(int64_t x, unsigned s) {
    if (s == 0)
        return x;
    return (x + ((int64_t)1 << (s - 1))) >> s;
}

static uint16_t crc16_ccitt_false(const volatile uint8_t *p, int n) {
    uint16_t crc = 0xFFFF;
    for (int i = 0; i < n; i++) {
        crc ^= (uint16_t)p[i] << 8;
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)(crc << 1) ^ 0x1021 : (uint16_t)(crc << 1);
    }
    return crc;
}

int main(void) {
    int k = 0;
    uint32_t x = params[0];
    for (int i = 0; i < N_XS; i++) {
        results[k++] = x;
        x = xs32(x);
    }
    for (int i = 0; i < N_MIX; i++)
        results[k++] = mix32(params[1 + i]);
    for (int i = 0; i < N_RSHR; i++) {
        int32_t v = (int32_t)params[1 + N_MIX + 2 * i];
        unsigned s = params[2 + N_MIX + 2 * i];
        results[k++] = (uint32_t)rshr(v, s);
    }
    results[k++] = crc16_ccitt_false(crc_data, N_CRC);
    for (int i = 0; i < N_MUL; i++) {
        uint32_t a = params[1 + N_MIX + 2 * N_RSHR + 2 * i];
        uint32_t b = params[2 + N_MIX + 2 * N_RSHR + 2 * i];
        int64_t p = (int64_t)(int32_t)a * (int32_t)b;
        results[k++] = a * b;
        results[k++] = a / b;
        results[k++] = a % b;
        results[k++] = (uint32_t)((int32_t)a / (int32_t)b);
        results[k++] = (uint32_t)p;
        results[k++] = (uint32_t)((uint64_t)p >> 32);
    }
    return k;
}
