/* crc32.c - CRC-32 (the zip / gzip / PNG checksum: reflected polynomial 0xEDB88320).

   Checkpoint archives are zip files, and a zip member carries the CRC-32 of its bytes. A
   ResNet checkpoint is tens of megabytes, written and (to catch corruption) checked on every
   save and load, so the checksum must run near memory speed: zlib's table loop manages about
   2 GB/s here, which would cost more than the write itself.

   Two paths, same results (tests compare both with zlib.crc32):
   - x86-64 with PCLMULQDQ: carry-less multiplication folds 64 bytes per step into four
     128-bit accumulators, then reduces them to 32 bits (Barrett reduction). The method and
     its constants are those of Intel's paper "Fast CRC Computation for Generic Polynomials
     Using PCLMULQDQ Instruction" (Gopal et al., 2009), for the bit-reflected polynomial.
   - elsewhere: slicing-by-8 tables, eight bytes per step.
   Both run on the internal state (the CRC inverted); hl_crc32 inverts on entry and exit, so
   crc = hl_crc32(crc, next_chunk, n) continues a running checksum exactly as zlib does. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hl_core.h"

/* ---- slicing-by-8 ------------------------------------------------------------------------- */

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void make_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
        table[0][i] = c;
    }
    /* table[k][i]: the state after byte i followed by k zero bytes */
    for (uint32_t i = 0; i < 256; i++)
        for (int k = 1; k < 8; k++)
            table[k][i] = (table[k - 1][i] >> 8) ^ table[0][table[k - 1][i] & 0xFF];
}

static uint32_t crc_bytes(uint32_t state, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        state = (state >> 8) ^ table[0][(state ^ *p++) & 0xFF];
        n--;
    }
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= state; /* little-endian: the first byte is the low byte */
        state = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^
                table[5][(lo >> 16) & 0xFF] ^ table[4][lo >> 24] ^
                table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^
                table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
    }
    while (n--) state = (state >> 8) ^ table[0][(state ^ *p++) & 0xFF];
    return state;
}

/* ---- carry-less multiplication folding (x86-64) ------------------------------------------ */

#if defined(__x86_64__) && defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#include <immintrin.h>
#define HAVE_CLMUL 1

#define CLMUL_TARGET __attribute__((target("pclmul,sse4.1")))

/* Folding constants: x^(k) mod P for the distances the folds jump, bit-reflected. */
static const uint64_t K1K2[2] = {0x0154442bd4ull, 0x01c6e41596ull}; /* 4 x 128 bits */
static const uint64_t K3K4[2] = {0x01751997d0ull, 0x00ccaa009eull}; /* 1 x 128 bits */
static const uint64_t K5[2] = {0x0163cd6124ull, 0};                 /* 96 -> 64 bits */
static const uint64_t POLY_MU[2] = {0x01db710641ull, 0x01f7011641ull}; /* P', Barrett mu */

/* The state over n bytes, n >= 64 and a multiple of 16. */
CLMUL_TARGET static uint32_t crc_clmul(uint32_t state, const unsigned char *p, size_t n) {
    const __m128i *v = (const __m128i *)p;
    __m128i x1 = _mm_loadu_si128(v + 0), x2 = _mm_loadu_si128(v + 1);
    __m128i x3 = _mm_loadu_si128(v + 2), x4 = _mm_loadu_si128(v + 3);
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)state));
    __m128i k = _mm_loadu_si128((const __m128i *)K1K2);
    v += 4;
    n -= 64;
    while (n >= 64) { /* each accumulator jumps 512 bits ahead and takes in the next block */
        __m128i a1 = _mm_clmulepi64_si128(x1, k, 0x00), b1 = _mm_clmulepi64_si128(x1, k, 0x11);
        __m128i a2 = _mm_clmulepi64_si128(x2, k, 0x00), b2 = _mm_clmulepi64_si128(x2, k, 0x11);
        __m128i a3 = _mm_clmulepi64_si128(x3, k, 0x00), b3 = _mm_clmulepi64_si128(x3, k, 0x11);
        __m128i a4 = _mm_clmulepi64_si128(x4, k, 0x00), b4 = _mm_clmulepi64_si128(x4, k, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(a1, b1), _mm_loadu_si128(v + 0));
        x2 = _mm_xor_si128(_mm_xor_si128(a2, b2), _mm_loadu_si128(v + 1));
        x3 = _mm_xor_si128(_mm_xor_si128(a3, b3), _mm_loadu_si128(v + 2));
        x4 = _mm_xor_si128(_mm_xor_si128(a4, b4), _mm_loadu_si128(v + 3));
        v += 4;
        n -= 64;
    }
    /* four accumulators into one, then the remaining 16-byte blocks */
    k = _mm_loadu_si128((const __m128i *)K3K4);
    __m128i next[3] = {x2, x3, x4};
    for (int i = 0; i < 3; i++) {
        __m128i a = _mm_clmulepi64_si128(x1, k, 0x00), b = _mm_clmulepi64_si128(x1, k, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(a, b), next[i]);
    }
    for (; n >= 16; n -= 16, v++) {
        __m128i a = _mm_clmulepi64_si128(x1, k, 0x00), b = _mm_clmulepi64_si128(x1, k, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(a, b), _mm_loadu_si128(v));
    }
    /* 128 -> 96 -> 64 bits */
    const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
    __m128i t = _mm_clmulepi64_si128(x1, k, 0x10);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
    k = _mm_loadu_si128((const __m128i *)K5);
    t = _mm_srli_si128(x1, 4);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, low32), k, 0x00), t);
    /* Barrett reduction to 32 bits */
    k = _mm_loadu_si128((const __m128i *)POLY_MU);
    t = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), k, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), k, 0x00);
    x1 = _mm_xor_si128(x1, t);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}

static int clmul_ok = -1;

static int have_clmul(void) {
    if (clmul_ok < 0) {
        __builtin_cpu_init();
        clmul_ok = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    }
    return clmul_ok;
}
#else
#define HAVE_CLMUL 0
#endif

uint32_t hl_crc32(uint32_t crc, const void *data, size_t n) {
    pthread_once(&table_once, make_table);
    const unsigned char *p = (const unsigned char *)data;
    uint32_t state = ~crc;
#if HAVE_CLMUL
    if (n >= 64 && have_clmul()) {
        size_t body = n & ~(size_t)15;
        state = crc_clmul(state, p, body);
        p += body;
        n -= body;
    }
#endif
    return ~crc_bytes(state, p, n);
}

/* ---- combining ------------------------------------------------------------------------------

   crc(A || B) from crc(A), crc(B) and len(B): appending len(B) zero bytes to A multiplies its
   (non-inverted) CRC polynomial by x^(8 len(B)) modulo P, and the CRC is linear in the data.
   Polynomials are bit-reflected: bit 31 is x^0. */

#define POLY 0xEDB88320u

static uint32_t mul_mod_p(uint32_t a, uint32_t b) { /* a(x) b(x) mod P(x) */
    uint32_t product = 0;
    for (uint32_t bit = 1u << 31; bit; bit >>= 1) {
        if (a & bit) product ^= b;
        b = (b & 1) ? (b >> 1) ^ POLY : b >> 1; /* b *= x */
    }
    return product;
}

static uint32_t x_pow_8n(uint64_t n) { /* x^(8n) mod P, by squaring */
    uint32_t result = 1u << 31, square = 1u << 23; /* x^0 and x^8 */
    for (; n; n >>= 1) {
        if (n & 1) result = mul_mod_p(result, square);
        square = mul_mod_p(square, square);
    }
    return result;
}

uint32_t hl_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
    return mul_mod_p(x_pow_8n(len_b), crc_a) ^ crc_b;
}

int hl_crc32_accelerated(void) {
#if HAVE_CLMUL
    return have_clmul();
#else
    return 0;
#endif
}
