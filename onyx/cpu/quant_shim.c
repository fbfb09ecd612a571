/* Quantized weights for the few-row GEMM shim (compiled after blas_shim.c, in the same unit; see
   onyx/cpu/quant.py for the Python side).

   MLX has no fast quantized product on its CPU backend, and no way to add a CPU kernel from
   Python. So a quantized Linear reaches this code through `cblas_sgemm`: its packed weights
   (MLX's affine layout: rows of uint32 words, `bits` = 4 or 8 bits per value, the lowest bits
   first; one scale and one bias per `group` values of a row) are shown to MLX as a float32 array
   of the same bytes, `carrier`, N rows of Kc = K * bits / 32 floats, and registered here with
   `onyx_quant_register`. The Linear multiplies its input, reshaped from M x K to (M * 32 / bits)
   x Kc, by carrier^T: MLX calls `cblas_sgemm` with B = the carrier, which this file recognises
   by its address, and the first M rows of C receive x @ W^T for the true M and K (the other
   rows are not written; the Linear drops them).

   The weights are read from memory as they are stored (4.5 to 8.5 bits a value instead of 32).
   With up to Q_FUSED_ROWS rows of A they are dequantized 32 values at a time in registers and
   multiplied at once; with more, a tile of weight rows is dequantized into a per-thread buffer
   once for all rows of A and multiplied by the float tiles of blas_shim.c. Both add in the same
   order, so an output gets the same bits whatever rows of A share the call, as with float
   weights. Threads split the weight rows as they do for float products. */
#include <stdlib.h>

enum { Q_SLOTS = 8192, Q_MAX_ENTRIES = Q_SLOTS / 2, Q_TILE_FLOATS = 8192 };

struct qmat {
    const uint8_t *w;           /* N rows of row_bytes */
    const void *scales, *biases;  /* N x (K / group), of `sdtype`: 0 float32, 1 float16, 2 bfloat16 */
    int N, K, kc, bits, group, groups, sdtype;
    size_t row_bytes;
};

static struct qmat q_entries[Q_SLOTS];
static const void *_Atomic q_keys[Q_SLOTS];  /* the carrier's address; 0 empty, Q_GONE removed */
#define Q_GONE ((const void *)1)
static atomic_int q_count;
static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static long q_stats[2];  /* products run, products refused (shapes that cannot be this matrix) */

static inline size_t q_hash(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33, x *= 0xff51afd7ed558ccdULL, x ^= x >> 33;
    return (size_t)x & (Q_SLOTS - 1);
}

static const struct qmat *q_find(const void *p) {
    if (atomic_load_explicit(&q_count, memory_order_relaxed) == 0) return 0;
    for (size_t i = q_hash(p), n = 0; n < Q_SLOTS; i = (i + 1) & (Q_SLOTS - 1), n++) {
        const void *k = atomic_load_explicit(&q_keys[i], memory_order_acquire);
        if (k == p) return &q_entries[i];
        if (k == 0) return 0;
    }
    return 0;
}

/* Registers the carrier at `w` (see the top of the file). Returns 0, or a negative code: -1 bad
   arguments (bits not 4 or 8, group not a multiple of 32 dividing K, a row longer than a tile),
   -2 the table is full. The arrays must stay where they are until `onyx_quant_unregister`. */
int onyx_quant_register(const void *w, int N, int K, int bits, int group, const void *scales,
                        const void *biases, int sdtype) {
    if (!w || !scales || !biases || N < 1 || K < 1 || (bits != 4 && bits != 8) || group < 32 ||
        group % 32 != 0 || K % group != 0 || K > Q_TILE_FLOATS || sdtype < 0 || sdtype > 2)
        return -1;
    pthread_mutex_lock(&q_mu);
    int rc = -2;
    if (atomic_load(&q_count) < Q_MAX_ENTRIES) {
        size_t i = q_hash(w), free_slot = (size_t)-1;
        for (size_t n = 0; n < Q_SLOTS; i = (i + 1) & (Q_SLOTS - 1), n++) {
            const void *k = atomic_load(&q_keys[i]);
            if (k == w) { free_slot = i; break; }
            if (k == Q_GONE && free_slot == (size_t)-1) free_slot = i;
            if (k == 0) { if (free_slot == (size_t)-1) free_slot = i; break; }
        }
        const int fresh = atomic_load(&q_keys[free_slot]) != w;
        /* hidden while its fields change (a tombstone: lookups of other keys probe past it) */
        atomic_store(&q_keys[free_slot], Q_GONE);
        q_entries[free_slot] = (struct qmat){(const uint8_t *)w, scales, biases, N, K, K * bits / 32,
                                             bits, group, K / group, sdtype, (size_t)K * bits / 8};
        atomic_store_explicit(&q_keys[free_slot], w, memory_order_release);
        if (fresh) atomic_fetch_add(&q_count, 1);
        rc = 0;
    }
    pthread_mutex_unlock(&q_mu);
    return rc;
}

/* Forgets the carrier at `w` (no effect if it is not registered). */
void onyx_quant_unregister(const void *w) {
    pthread_mutex_lock(&q_mu);
    for (size_t i = q_hash(w), n = 0; n < Q_SLOTS; i = (i + 1) & (Q_SLOTS - 1), n++) {
        const void *k = atomic_load(&q_keys[i]);
        if (k == 0) break;
        if (k == w) {
            /* the end of a chain can become empty again; inside one, a tombstone keeps it whole */
            atomic_store(&q_keys[i], atomic_load(&q_keys[(i + 1) & (Q_SLOTS - 1)]) == 0 ? 0 : Q_GONE);
            atomic_fetch_sub(&q_count, 1);
            break;
        }
    }
    pthread_mutex_unlock(&q_mu);
}

/* Products run, products refused, matrices registered now. */
void onyx_quant_stats(long out[3]) {
    memcpy(out, q_stats, sizeof q_stats);
    out[2] = atomic_load(&q_count);
}

static inline float q_scalar(const void *p, int sdtype, size_t i) {
    uint32_t bits;
    float f;
    if (sdtype == 0) return ((const float *)p)[i];
    if (sdtype == 2) {
        bits = (uint32_t)((const uint16_t *)p)[i] << 16;
    } else {  /* IEEE half: normal, subnormal, zero, inf and NaN */
        const uint32_t h = ((const uint16_t *)p)[i], sign = (h & 0x8000u) << 16, e = (h >> 10) & 31, m = h & 1023;
        if (e == 31) bits = sign | 0x7f800000u | (m << 13);
        else if (e != 0) bits = sign | ((e + 112) << 23) | (m << 13);
        else if (m == 0) bits = sign;
        else {
            f = (float)m * (1.0f / 16777216.0f);  /* m * 2^-24 */
            return sign ? -f : f;
        }
    }
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* n scales (or biases) from `p` + i, as float32. */
static void q_floats(const void *p, int sdtype, size_t i, int n, float *out) {
    int g = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
    if (sdtype == 1) {
        for (; g < n; g += 16) {
            const __mmask16 k = n - g >= 16 ? 0xFFFF : (__mmask16)((1u << (n - g)) - 1);
            _mm512_mask_storeu_ps(out + g, k, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, (const uint16_t *)p + i + g)));
        }
        return;
    }
#endif
    for (; g < n; g++) out[g] = q_scalar(p, sdtype, i + g);
}

#if (defined(__AVX512F__) && defined(__AVX512BW__)) || (defined(__AVX2__) && defined(__FMA__))
/* The levels of 32 values from `p` as bytes, in order: values 0-15 in v0, 16-31 in v1. */
INLINE void levels32(const uint8_t *p, const int bits, __m128i *v0, __m128i *v1) {
    if (bits == 8) {
        *v0 = _mm_loadu_si128((const __m128i *)p), *v1 = _mm_loadu_si128((const __m128i *)(p + 16));
    } else {  /* byte i holds value 2i in its low half, 2i + 1 in its high half */
        const __m128i v = _mm_loadu_si128((const __m128i *)p), m4 = _mm_set1_epi8(15);
        const __m128i lo = _mm_and_si128(v, m4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
        *v0 = _mm_unpacklo_epi8(lo, hi), *v1 = _mm_unpackhi_epi8(lo, hi);
    }
}
#endif

/* 32 values from `p` (16 bytes at 4 bits, 32 at 8), as scale * q + bias, into 32 / VL vectors.
   Both paths below dequantize through this function: a weight gets the same float either way. */
INLINE void deq32(const uint8_t *p, const int bits, float s, float b, vf *out) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
    __m128i v0, v1;
    levels32(p, bits, &v0, &v1);
    const __m512 vs = _mm512_set1_ps(s), vb = _mm512_set1_ps(b);
    out[0] = (vf)_mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v0)), vs, vb);
    out[1] = (vf)_mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v1)), vs, vb);
#elif defined(__AVX2__) && defined(__FMA__)
    __m128i v0, v1;
    levels32(p, bits, &v0, &v1);
    const __m256 vs = _mm256_set1_ps(s), vb = _mm256_set1_ps(b);
    out[0] = (vf)_mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v0)), vs, vb);
    out[1] = (vf)_mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v0, 8))), vs, vb);
    out[2] = (vf)_mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v1)), vs, vb);
    out[3] = (vf)_mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v1, 8))), vs, vb);
#else
    float f[32];
    for (int i = 0; i < 32; i++)
        f[i] = (float)(bits == 8 ? p[i] : (i & 1) ? p[i / 2] >> 4 : p[i / 2] & 15);
    for (int i = 0; i < 32; i++) f[i] = __builtin_fmaf(f[i], s, b);
    memcpy(out, f, sizeof f);
#endif
}

/* Weight row j as K floats. */
static void dequant_row(const struct qmat *q, int j, float *out) {
    const uint8_t *w = q->w + (size_t)j * q->row_bytes;
    float sc[Q_TILE_FLOATS / 32], bi[Q_TILE_FLOATS / 32];
    q_floats(q->scales, q->sdtype, (size_t)j * q->groups, q->groups, sc);
    q_floats(q->biases, q->sdtype, (size_t)j * q->groups, q->groups, bi);
    const int step = q->bits * 4;  /* bytes per 32 values */
    for (int k = 0; k < q->K; k += 32, w += step) {
        const int g = k / q->group;
        vf v[32 / VL];
        deq32(w, q->bits, sc[g], bi[g], v);
        memcpy(out + k, v, sizeof v);
    }
}

/* out[r * G + m] = row m of A . weight row j + r, for R weight rows dequantized 32 values at a
   time in registers. The additions are those of `tile_body` over the dequantized rows (one
   accumulator per output over all of K, then `lane_sums`), so this and the buffered path give
   an output the same bits. */
INLINE void qtile_body(const int G, const int R, const float *A, int lda, const struct qmat *q, int j,
                       const float *sc, const float *bi, float *out) {
    vf acc[MAX_TILE];
    UNROLL for (int i = 0; i < R * G; i++) acc[i] = (vf){0};
    const int step = q->bits * 4, ng = q->groups;
    const uint8_t *w = q->w + (size_t)j * q->row_bytes;
    for (int k = 0; k < q->K; k += 32, w += step) {
        const int g = k / q->group;
        vf wv[4][32 / VL];
        const int line = (k & (512 / q->bits - 1)) == 0;  /* a new 64-byte line of each row */
        UNROLL for (int r = 0; r < R; r++) {
            if (line) __builtin_prefetch(w + (size_t)(r + R) * q->row_bytes, 0, 3);
            deq32(w + (size_t)r * q->row_bytes, q->bits, sc[r * ng + g], bi[r * ng + g], wv[r]);
        }
        UNROLL for (int v = 0; v < 32 / VL; v++)
            UNROLL for (int m = 0; m < G; m++) {
                vf x;
                memcpy(&x, A + (size_t)m * lda + k + v * VL, sizeof x);
                IN_REGISTER(x);
                UNROLL for (int r = 0; r < R; r++) acc[r * G + m] += x * wv[r][v];
            }
    }
    UNROLL for (int i = 0; i < R * G; i += VL) lane_sums(acc + i, R * G - i < VL ? R * G - i : VL, out + i);
}

/* Fused tiles: up to Q_FUSED_ROWS rows of A, 4 weight rows while 4 x M accumulators fit, else 3,
   else 2 (1 for the last rows): the more weight rows a tile takes, the more multiply-adds each
   dequantized vector feeds. */
enum { Q_FUSED_ROWS = ACCS / 2 };

#define QTILE_FN(G, R)                                                                            \
    static __attribute__((noinline)) void qtile_##G##_##R(const float *A, int lda, const struct qmat *q, \
                                                          int j, const float *sc, const float *bi, float *out) { \
        qtile_body(G, R, A, lda, q, j, sc, bi, out);                                              \
    }
#define QTILE_ROWS(R) QTILE_FN(1, R) QTILE_FN(2, R) QTILE_FN(3, R) QTILE_FN(4, R) QTILE_FN(5, R) QTILE_FN(6, R)
QTILE_ROWS(1) QTILE_ROWS(2) QTILE_ROWS(4)
#if defined(__AVX512F__)  /* ACCS = 24: up to 12 rows of A with 2 weight rows */
QTILE_FN(7, 1) QTILE_FN(8, 1) QTILE_FN(9, 1) QTILE_FN(10, 1) QTILE_FN(11, 1) QTILE_FN(12, 1)
QTILE_FN(7, 2) QTILE_FN(8, 2) QTILE_FN(9, 2) QTILE_FN(10, 2) QTILE_FN(11, 2) QTILE_FN(12, 2)
QTILE_FN(7, 3) QTILE_FN(8, 3)
#define Q_MORE_ROWS(R) qtile_7_##R, qtile_8_##R, qtile_9_##R, qtile_10_##R, qtile_11_##R, qtile_12_##R
#else
#define Q_MORE_ROWS(R) 0
#endif
#undef QTILE_FN

static void qtile(int G, int R, const float *A, int lda, const struct qmat *q, int j, const float *sc,
                  const float *bi, float *out) {
    typedef void (*fn_t)(const float *, int, const struct qmat *, int, const float *, const float *, float *);
    static const fn_t ones[] = {qtile_1_1, qtile_2_1, qtile_3_1, qtile_4_1, qtile_5_1, qtile_6_1, Q_MORE_ROWS(1)};
    static const fn_t twos[] = {qtile_1_2, qtile_2_2, qtile_3_2, qtile_4_2, qtile_5_2, qtile_6_2, Q_MORE_ROWS(2)};
    static const fn_t fours[] = {qtile_1_4, qtile_2_4, qtile_3_4, qtile_4_4, qtile_5_4, qtile_6_4};
#if defined(__AVX512F__)
    if (R == 3) {
        (G == 7 ? qtile_7_3 : qtile_8_3)(A, lda, q, j, sc, bi, out);
        return;
    }
#endif
    (R == 1 ? ones : R == 2 ? twos : fours)[G - 1](A, lda, q, j, sc, bi, out);
}

/* Weight rows [j0, j1) of a quantized product. Up to Q_FUSED_ROWS rows of A: the weights are
   dequantized in registers, QR rows at a time. More rows: tiles of weight rows dequantized into
   this thread's buffer (once for all rows of A), then multiplied by groups of rows of A with the
   float tiles over all of K. */
static void quant_rows(int j0, int j1, const struct gemm *g) {
    const struct qmat *q = g->q;
    const int M = g->M, ng = q->groups;
    float out[MAX_TILE];
    if (M <= Q_FUSED_ROWS) {
        float sc[4 * (Q_TILE_FLOATS / 32)], bi[4 * (Q_TILE_FLOATS / 32)];
#if defined(__AVX512F__)
        const int QR = 4 * M <= ACCS ? 4 : 3 * M <= ACCS ? 3 : 2;
#else
        const int QR = 4 * M <= ACCS ? 4 : 2;
#endif
        for (int j = j0; j < j1; j += QR) {
            const int R = j1 - j >= QR ? QR : 1;
            q_floats(q->scales, q->sdtype, (size_t)j * ng, R * ng, sc);
            q_floats(q->biases, q->sdtype, (size_t)j * ng, R * ng, bi);
            qtile(M, R, g->A, g->lda, q, j, sc, bi, out);
            for (int m = 0; m < M; m++)
                for (int r = 0; r < R; r++) g->C[(size_t)m * g->ldc + j + r] = g->alpha * out[r * M + m];
            if (R == 1 && QR > 1) j += 1 - QR;  /* one row at a time at the end */
        }
        return;
    }
    static __thread float tile_buf[Q_TILE_FLOATS];
    int T = Q_TILE_FLOATS / q->K;
    if (T >= 4) T -= T % 4;
    const int GS = ACCS / 2, groups = (M + GS - 1) / GS, base = M / groups, extra = M % groups;
    for (int j = j0; j < j1; j += T) {
        const int rows = j1 - j < T ? j1 - j : T;
        for (int r = 0; r < rows; r++) dequant_row(q, j + r, tile_buf + (size_t)r * q->K);
        for (int i = 0, m0 = 0; i < groups; i++) {
            const int G = base + (i < extra);
            for (int r = 0; r + 2 <= rows; r += 2) {
                tile(0, G, 2, 0, q->K, g->A + (size_t)m0 * g->lda, g->lda, tile_buf + (size_t)r * q->K, q->K, out);
                for (int m = 0; m < G; m++)
                    for (int rr = 0; rr < 2; rr++)
                        g->C[(size_t)(m0 + m) * g->ldc + j + r + rr] = g->alpha * out[rr * G + m];
            }
            if (rows % 2)  /* the last weight row alone (`tile` takes one row of A then) */
                for (int m = m0; m < m0 + G; m++) {
                    tile(0, 1, 1, 0, q->K, g->A + (size_t)m * g->lda, g->lda, tile_buf + (size_t)(rows - 1) * q->K,
                         q->K, out);
                    g->C[(size_t)m * g->ldc + j + rows - 1] = g->alpha * out[0];
                }
            m0 += G;
        }
    }
}

/* The shim's entry for registered matrices: 0 when B is not one. A call whose shapes do not
   fit the registered matrix (it cannot come from onyx.cpu.quant) gets NaN in every output of
   C rather than a product of the packed bits as floats. */
static int quant_product(int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                         int ldb, float beta, float *C, int ldc) {
    const struct qmat *q = q_find(B);
    if (!q) return 0;
    const int r = 32 / q->bits;
    if (N != q->N || K != q->kc || ldb != q->kc || lda != q->kc || M < r || M % r != 0 || ldc < N ||
        beta != 0.0f) {
        q_stats[1]++;
        for (int m = 0; m < M; m++)
            for (int j = 0; j < N; j++) C[(size_t)m * ldc + j] = __builtin_nanf("");
        return 1;
    }
    q_stats[0]++;
    /* A's M x Kc floats are the true M / r rows of K floats, back to back */
    const struct gemm g = {M / r, N, q->K, q->K, 0, ldc, alpha, 0.0f, A, 0, C, q};
    run_gemm(&g);
    return 1;
}
