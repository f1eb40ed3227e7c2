/*
 * sha256hw.c - SHA-256 on the CPU's own instructions, where it has them.
 *
 * Every charge request is fingerprinted with SHA-256 (SPEC section 3), and
 * mbedTLS hashes in portable C: some 3 300 instructions per 64-byte block,
 * a sixth of the CPU time of a new charge.  x86-64 CPUs with the SHA
 * extensions and ARMv8 CPUs with the cryptography extension (most aarch64
 * boards: Cortex-A53/A55/A72 SoCs that include it) do a block in about a
 * tenth of that.  Which one is used is decided once, at run time, from what
 * the CPU reports (CPUID, the kernel's HWCAP); anything else - armhf, a
 * Raspberry Pi 3/4 whose SoC leaves the extension out, an old x86 - hashes
 * with mbedTLS as before.  Same digest either way: test_crypto compares the
 * two over every length up to several blocks and the NIST vectors.
 */
#include "sha256hw.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PT_SHA_X86 1
#include <cpuid.h>
#include <immintrin.h>
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__)) && defined(__linux__)
#define PT_SHA_ARM 1
#include <arm_neon.h>
#include <sys/auxv.h>
#ifndef HWCAP_SHA2
#define HWCAP_SHA2 (1 << 6)
#endif
#endif

#if PT_SHA_X86 || PT_SHA_ARM
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
#endif

#if PT_SHA_X86
/* Intel SHA extensions.  The state lives as ABEF/CDGH in two registers;
 * sha256rnds2 does two rounds, sha256msg1/msg2 the message schedule. */
__attribute__((target("sha,sse4.1,ssse3"))) static void blocks(uint32_t st[8],
                                                               const unsigned char *p, size_t n)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&st[0]), 0xB1); /* CDAB */
    __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&st[4]), 0x1B);  /* EFGH */
    __m128i s0 = _mm_alignr_epi8(tmp, s1, 8);                                        /* ABEF */
    s1 = _mm_blend_epi16(s1, tmp, 0xF0);                                             /* CDGH */
    for (; n; n--, p += 64) {
        __m128i abef = s0, cdgh = s1, w[4];
        for (int i = 0; i < 16; i++) {
            if (i < 4) {
                w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
            } else {
                /* W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16], four at a time */
                __m128i x = _mm_sha256msg1_epu32(w[i & 3], w[(i + 1) & 3]);
                x = _mm_add_epi32(x, _mm_alignr_epi8(w[(i + 3) & 3], w[(i + 2) & 3], 4));
                w[i & 3] = _mm_sha256msg2_epu32(x, w[(i + 3) & 3]);
            }
            __m128i m = _mm_add_epi32(w[i & 3], _mm_loadu_si128((const __m128i *)&K[4 * i]));
            s1 = _mm_sha256rnds2_epu32(s1, s0, m);
            s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(m, 0x0E));
        }
        s0 = _mm_add_epi32(s0, abef);
        s1 = _mm_add_epi32(s1, cdgh);
    }
    tmp = _mm_shuffle_epi32(s0, 0x1B);                                   /* FEBA */
    s1 = _mm_shuffle_epi32(s1, 0xB1);                                    /* DCHG */
    _mm_storeu_si128((__m128i *)&st[0], _mm_blend_epi16(tmp, s1, 0xF0)); /* DCBA */
    _mm_storeu_si128((__m128i *)&st[4], _mm_alignr_epi8(s1, tmp, 8));    /* HGFE */
}

static int cpu_has_it(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1))
        return 0;
    if (__get_cpuid_max(0, NULL) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (b & (1u << 29)) != 0; /* SHA */
}
#define PT_SHA_NAME "x86 SHA extensions"
#endif

#if PT_SHA_ARM
/* ARMv8 cryptography extension: sha256h/h2 do four rounds on ABCD/EFGH,
 * sha256su0/su1 the message schedule. */
__attribute__((target("+crypto"))) static void blocks(uint32_t st[8], const unsigned char *p,
                                                      size_t n)
{
    uint32x4_t s0 = vld1q_u32(&st[0]), s1 = vld1q_u32(&st[4]);
    for (; n; n--, p += 64) {
        uint32x4_t abcd = s0, efgh = s1, w[4];
        for (int i = 0; i < 16; i++) {
            if (i < 4)
                w[i] = vreinterpretq_u32_u8(vrev32q_u8(vld1q_u8(p + 16 * i)));
            else
                w[i & 3] = vsha256su1q_u32(vsha256su0q_u32(w[i & 3], w[(i + 1) & 3]),
                                           w[(i + 2) & 3], w[(i + 3) & 3]);
            uint32x4_t m = vaddq_u32(w[i & 3], vld1q_u32(&K[4 * i]));
            uint32x4_t prev = s0;
            s0 = vsha256hq_u32(s0, s1, m);
            s1 = vsha256h2q_u32(s1, prev, m);
        }
        s0 = vaddq_u32(s0, abcd);
        s1 = vaddq_u32(s1, efgh);
    }
    vst1q_u32(&st[0], s0);
    vst1q_u32(&st[4], s1);
}

static int cpu_has_it(void)
{
    return (getauxval(AT_HWCAP) & HWCAP_SHA2) != 0;
}
#define PT_SHA_NAME "ARMv8 cryptography extension"
#endif

#if PT_SHA_X86 || PT_SHA_ARM
static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int has_it;

static void probe(void)
{
    has_it = cpu_has_it();
}

const char *pt_sha256hw_name(void)
{
    pthread_once(&probe_once, probe);
    return has_it ? PT_SHA_NAME : NULL;
}

void pt_sha256hw(const void *data, size_t len, unsigned char out[32])
{
    uint32_t st[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                      0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const unsigned char *p = data;
    size_t full = len / 64, rest = len % 64;
    if (full)
        blocks(st, p, full);
    /* The tail, the 0x80 byte and the length in bits: one or two blocks. */
    unsigned char last[128] = {0};
    if (rest)
        memcpy(last, p + full * 64, rest);
    last[rest] = 0x80;
    size_t nlast = rest < 56 ? 1 : 2;
    uint64_t bits = (uint64_t)len * 8;
    put_be32(last + nlast * 64 - 8, (uint32_t)(bits >> 32));
    put_be32(last + nlast * 64 - 4, (uint32_t)bits);
    blocks(st, last, nlast);
    for (int i = 0; i < 8; i++)
        put_be32(out + 4 * i, st[i]);
}
#else
const char *pt_sha256hw_name(void)
{
    return NULL;
}

void pt_sha256hw(const void *data, size_t len, unsigned char out[32])
{
    (void)data;
    (void)len;
    memset(out, 0, 32); /* never called: pt_sha256hw_name() is NULL */
}
#endif
