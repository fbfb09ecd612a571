/* The few-row GEMM shim for MLX's CPU backend on Linux (see onyx/cpu/blas.py, which builds it
   once per machine with the host's vector instructions and preloads it before OpenBLAS). It
   exports `cblas_sgemm`: x @ W^T products of 1 to 512 rows go to its own kernels (`few_rows_product`),
   x @ V products of 1 to 128 rows with V at most 256 columns wide to `rows_times_matrix`, other
   one-row / one-column products to OpenBLAS's `cblas_sgemv`, everything else to OpenBLAS's
   `cblas_sgemm`. `onyx_blas_shim_init(path)` binds it to the OpenBLAS at `path`; preloaded with
   LD_PRELOAD instead, it binds to the next `cblas_sgemm` / `cblas_sgemv` (RTLD_NEXT). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>
enum { RowMajor = 101, NoTrans = 111, Trans = 112 };
typedef void (*gemm_t)(int, int, int, int, int, int, float, const float *, int, const float *, int,
                       float, float *, int);
typedef void (*gemv_t)(int, int, int, int, float, const float *, int, const float *, int, float,
                       float *, int);
static gemm_t real_gemm;
static gemv_t real_gemv;

int onyx_blas_shim_init(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return -1;
    real_gemm = (gemm_t)dlsym(h, "cblas_sgemm");
    real_gemv = (gemv_t)dlsym(h, "cblas_sgemv");
    return (real_gemm && real_gemv) ? 0 : -2;
}

int onyx_blas_shim_ready(void) { return real_gemm != 0 && real_gemv != 0; }

static void gemv(int trans, int m, int n, float alpha, const float *a, int lda, const float *x,
                 int incx, float beta, float *y, int incy, int leny) {
    if (beta == 0.0f) {  /* C may be uninitialised memory: never let 0 * NaN through */
        if (incy == 1) memset(y, 0, sizeof(float) * (size_t)leny);
        else for (int i = 0; i < leny; i++) y[(size_t)i * incy] = 0.0f;
    }
    real_gemv(RowMajor, trans, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

/* x @ W^T for 1 to 32 rows of x (more in pieces: `few_rows_product`): C = alpha * A @ B^T +
   beta * C with A (M x K), B (N x K), both row-major. A decode step multiplies one row (M = 1);
   verifying drafts and batched decoding a few (M = 2..32). Each weight row is read from memory
   once for all M rows of A. (OpenBLAS's sgemm repacks the whole matrix on every call, so a 2-row
   product costs about twice a 1-row one.)

   One row costs what its weights take to stream in. With more rows the multiply-adds catch up:
   M of them per weight float, so on one core with two 16-lane FMA pipes the arithmetic alone
   allows about 40 GB/s of weights at M = 8 and 20 at M = 16 (half that with 8 lanes). The kernel
   keeps both pipes busy: a tile of R weight rows x G rows of A holds R x G vector accumulators in
   registers and loads R weight vectors and G activation vectors per R x G multiply-adds. Rows of
   A beyond G (at most ACCS / 2: 12 with AVX-512's 32 registers, so that 9 to 12 rows still run
   as one group) are further groups (up to eight), run while the tile's weight
   rows are still in L1 (or, past what L1 holds of A, in L2: see `tiles`).
   Each tile prefetches the next tile's weight rows into L2.

   The order of the additions does not depend on M: every output accumulates in one vector over
   K in blocks (the same blocks for every M), each block's vector is summed by the same tree
   (`lane_sums`), the block sums are added in order, then the scalar tail of K, then alpha and
   beta. So a row of x gets the same bits alone or beside 31 others: verifying drafts reproduces
   the decode step's logits exactly. When K is split (K > KB_MAX), the blocks are the outer loop:
   a block of all M rows of A stays in L1 while every weight row's part of it streams by, and the
   partial sums wait in C. */
#if defined(__AVX512F__)
#include <immintrin.h>
typedef float vf __attribute__((vector_size(64)));
enum { VL = 16, ACCS = 24 };  /* 32 vector registers: up to 24 accumulators */
#define IN_REGISTER(x) __asm__("" : "+v"(x))
#elif defined(__AVX__)
#include <immintrin.h>
typedef float vf __attribute__((vector_size(32)));
enum { VL = 8, ACCS = 8 };  /* 16 vector registers */
#define IN_REGISTER(x) __asm__("" : "+x"(x))
#else
typedef float vf __attribute__((vector_size(16)));
enum { VL = 4, ACCS = 8 };
#define IN_REGISTER(x) ((void)0)
#endif
/* IN_REGISTER(x): keep an activation vector in a register. Left alone, GCC folds its load into
   each of the R multiply-adds that use it, and the load ports, not the FMA pipes, set the pace. */
enum { KB_MAX = 640, MAX_TILE = 24, MAX_ROWS = 32, CHUNKED_ROWS = 512, PIECES_MIN_K = 256 };  /* K blocks of <= 640 floats; tiles of <= 24 outputs */
#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")  /* constant trip counts: registers, not arrays, after this */

/* out[i] = the sum of the lanes of a[i] for i < n <= VL, by a tree that depends on a[i] alone. */
INLINE void lane_sums(const vf *a, int n, float *out) {
#if defined(__AVX512F__)
    /* four rounds of (shuffle, shuffle, add) fold 16 vectors into one vector of their 16 sums */
    const vf zero = {0};
    __m512 b[8], c[4], d[2], e;
    UNROLL for (int i = 0; i < 8; i++) {
        __m512 x = (__m512)(2 * i < n ? a[2 * i] : zero), y = (__m512)(2 * i + 1 < n ? a[2 * i + 1] : zero);
        b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44), _mm512_shuffle_f32x4(x, y, 0xEE));
    }
    UNROLL for (int i = 0; i < 4; i++)
        c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xDD));
    UNROLL for (int i = 0; i < 2; i++)
        d[i] = _mm512_add_ps(_mm512_unpacklo_ps(c[2 * i], c[2 * i + 1]), _mm512_unpackhi_ps(c[2 * i], c[2 * i + 1]));
    e = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(d[0]), _mm512_castps_pd(d[1]))),
                      _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(d[0]), _mm512_castps_pd(d[1]))));
    float t[16];
    _mm512_storeu_ps(t, e);
    UNROLL for (int i = 0; i < n; i++) out[i] = t[4 * (i & 3) + (i >> 2)];  /* lane 4q + t: a[4t + q] */
#elif defined(__AVX__)
    const vf zero = {0};
    __m256 b[4], c[2], e;
    UNROLL for (int i = 0; i < 4; i++) {
        __m256 x = (__m256)(2 * i < n ? a[2 * i] : zero), y = (__m256)(2 * i + 1 < n ? a[2 * i + 1] : zero);
        b[i] = _mm256_add_ps(_mm256_permute2f128_ps(x, y, 0x20), _mm256_permute2f128_ps(x, y, 0x31));
    }
    UNROLL for (int i = 0; i < 2; i++)
        c[i] = _mm256_add_ps(_mm256_unpacklo_ps(b[2 * i], b[2 * i + 1]), _mm256_unpackhi_ps(b[2 * i], b[2 * i + 1]));
    e = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(c[0]), _mm256_castps_pd(c[1]))),
                      _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(c[0]), _mm256_castps_pd(c[1]))));
    float t[8];
    _mm256_storeu_ps(t, e);
    UNROLL for (int i = 0; i < n; i++) out[i] = t[4 * (i & 1) + (i >> 1)];  /* lane 4q + t: a[2t + q] */
#else
    UNROLL for (int i = 0; i < n; i++) {
        float s = 0.0f;
        UNROLL for (int l = 0; l < VL; l++) s += a[i][l];
        out[i] = s;
    }
#endif
}

/* out[r * G + m] = row m of A . weight row r over K in [k0, k1), a whole number of vectors. With
   `prefetch`, also asks for the next tile's weight rows at the same offsets. */
INLINE void tile_body(const int prefetch, const int G, const int R, int k0, int k1, const float *A,
                      int lda, const float *W, int ldb, float *out) {
    vf acc[MAX_TILE];
    UNROLL for (int i = 0; i < R * G; i++) acc[i] = (vf){0};
    for (int k = k0; k < k1; k += VL) {
        vf w[4];
        UNROLL for (int r = 0; r < R; r++) memcpy(&w[r], W + (size_t)r * ldb + k, sizeof(vf));
        if (prefetch)
            UNROLL for (int r = 0; r < R; r++) __builtin_prefetch(W + (size_t)(R + r) * ldb + k, 0, 2);
        UNROLL for (int m = 0; m < G; m++) {
            vf x;
            memcpy(&x, A + (size_t)m * lda + k, sizeof x);
            IN_REGISTER(x);
            UNROLL for (int r = 0; r < R; r++) acc[r * G + m] += x * w[r];
        }
    }
    UNROLL for (int i = 0; i < R * G; i += VL) lane_sums(acc + i, R * G - i < VL ? R * G - i : VL, out + i);
}

/* One function per tile shape (G rows of A x R weight rows): inlined into the loops around it,
   the pointers to the rows of A and W no longer fit in the general registers. */
#define TILE_FN(G, R)                                                                             \
    static __attribute__((noinline)) void tile_##G##_##R(int prefetch, int k0, int k1,            \
                                                         const float *A, int lda, const float *W,  \
                                                         int ldb, float *out) {                   \
        if (prefetch) tile_body(1, G, R, k0, k1, A, lda, W, ldb, out);                            \
        else tile_body(0, G, R, k0, k1, A, lda, W, ldb, out);                                     \
    }
TILE_FN(1, 1) TILE_FN(1, 4) TILE_FN(2, 4) TILE_FN(3, 4) TILE_FN(4, 4) TILE_FN(5, 4) TILE_FN(6, 4)
TILE_FN(1, 2) TILE_FN(2, 2) TILE_FN(3, 2) TILE_FN(4, 2) TILE_FN(5, 2) TILE_FN(6, 2) TILE_FN(7, 2) TILE_FN(8, 2)
TILE_FN(9, 2) TILE_FN(10, 2) TILE_FN(11, 2) TILE_FN(12, 2)
#undef TILE_FN

INLINE void tile(const int prefetch, const int G, const int R, int k0, int k1, const float *A, int lda,
                 const float *W, int ldb, float *out) {
    void (*fn)(int, int, int, const float *, int, const float *, int, float *) =
        R == 1 ? tile_1_1 :
        R == 4 ? (G == 1 ? tile_1_4 : G == 2 ? tile_2_4 : G == 3 ? tile_3_4 : G == 4 ? tile_4_4 :
                  G == 5 ? tile_5_4 : tile_6_4) :
        (G == 1 ? tile_1_2 : G == 2 ? tile_2_2 : G == 3 ? tile_3_2 : G == 4 ? tile_4_2 :
         G == 5 ? tile_5_2 : G == 6 ? tile_6_2 : G == 7 ? tile_7_2 : G == 8 ? tile_8_2 :
         G == 9 ? tile_9_2 : G == 10 ? tile_10_2 : G == 11 ? tile_11_2 : tile_12_2);
    fn(prefetch, k0, k1, A, lda, W, ldb, out);
}

/* One pass over the weight rows for the block [k0, k1) of K. */
struct pass {
    int k0, k1, first, last;  /* first / last block */
    int plain;                /* one block, no tail, alpha = 1, beta = 0: the outputs are the sums */
    int KV, K;                /* the scalar tail of K, [KV, K), comes after the last block */
    float alpha, beta;
    const float *A;
    int lda;
    float *C;
    int ldc;
};

/* The output (m, j) after this pass, from s, this block's sum: the sum of the earlier blocks (kept
   in C) before it; after the last block, the scalar tail of K, then alpha and beta. */
INLINE float settle(const struct pass *p, int m, int j, const float *w, float s) {
    const float *c = p->C + (size_t)m * p->ldc + j;
    if (!p->first) s = *c + s;
    if (p->last) {
        const float *x = p->A + (size_t)m * p->lda;
        for (int k = p->KV; k < p->K; k++) s += x[k] * w[k];
        /* C may be uninitialised memory when beta is 0: never read it then */
        s = p->beta == 0.0f ? p->alpha * s : p->alpha * s + p->beta * *c;  /* beta: one block only */
    }
    return s;
}

/* Weight rows [j0, j1) in tiles of R; the rows of A in at most eight groups of at most GS rows
   (sizes as even as possible), each group's G and first row m0 constants. The weight rows go by
   in blocks of JB when all of A's rows over the pass's part of K (which every tile reads) would
   not stay in L1 (16 rows over K = 576 are 36 KB), otherwise one tile at a time; each group
   sweeps a whole block before the next group does: a group's rows of A stay in L1 across the
   block's tiles, and the block's weights, streamed from memory by the first group, are read
   again from L2. Where A fits in L1 the blocks only add overhead, so they are not used there.
   Each output is still one tile's sum, whatever the order of the tiles. */
enum { JB = 64 };
static long a_in_l1 = 30 << 10;  /* 15/16 of the L1 data cache (32 KB here), read at load */
__attribute__((constructor)) static void read_l1_size(void) {
#ifdef _SC_LEVEL1_DCACHE_SIZE
    const long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    if (l1 >= (16 << 10) && l1 <= (4 << 20)) a_in_l1 = l1 / 16 * 15;
#endif
}
INLINE void tiles(const int M, const int R, const int GS, int j0, int j1, const struct pass *p,
                  const float *B, int ldb) {
    const int ng = (M + GS - 1) / GS, base = M / ng, extra = M % ng;
    const int step = ng > 1 && (long)(M * (p->k1 - p->k0) * sizeof(float)) > a_in_l1 ? JB : R;
    float out[MAX_TILE];
    for (int jb = j0; jb < j1; jb += step) {
        const int je = jb + step < j1 ? jb + step : j1;
#define GROUP(g)                                                                                   \
        if (g < ng) {                                                                              \
            const int G = base + (g < extra), m0 = g * base + (g < extra ? g : extra);             \
            for (int j = jb; j < je; j += R) {                                                     \
                const float *W = B + (size_t)j * ldb;                                              \
                tile(g == 0, G, R, p->k0, p->k1, p->A + (size_t)m0 * p->lda, p->lda, W, ldb, out); \
                if (p->plain) {                                                                    \
                    for (int m = 0; m < G; m++)                                                    \
                        for (int r = 0; r < R; r++)                                                \
                            p->C[(size_t)(m0 + m) * p->ldc + j + r] = out[r * G + m];              \
                } else {                                                                           \
                    for (int m = 0; m < G; m++)                                                    \
                        for (int r = 0; r < R; r++)                                                \
                            p->C[(size_t)(m0 + m) * p->ldc + j + r] =                              \
                                settle(p, m0 + m, j + r, W + (size_t)r * ldb, out[r * G + m]);     \
                }                                                                                  \
            }                                                                                      \
        }
        GROUP(0) GROUP(1) GROUP(2) GROUP(3) GROUP(4) GROUP(5) GROUP(6) GROUP(7)
#undef GROUP
    }
}

/* The weight rows left over by the tiles (fewer than R), one output at a time. */
static void leftover_rows(int M, int j0, int N, const struct pass *p, const float *B, int ldb) {
    for (int j = j0; j < N; j++)
        for (int m = 0; m < M; m++) {
            float s;
            tile(0, 1, 1, p->k0, p->k1, p->A + (size_t)m * p->lda, p->lda, B + (size_t)j * ldb, ldb, &s);
            p->C[(size_t)m * p->ldc + j] = settle(p, m, j, B + (size_t)j * ldb, s);
        }
}

/* The product C = alpha * A @ B^T + beta * C of one call, as the kernels see it. With `q`, B is
   a quantized matrix (quant_shim.c) and M may exceed MAX_ROWS. */
struct qmat;
struct gemm {
    int M, N, K, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C;
    const struct qmat *q;
};
static void quant_rows(int j0, int j1, const struct gemm *g);

/* Weight rows [j0, j1) of the product (j0 a multiple of 4; j1 too unless it is N), every block
   of K. Outputs of different weight rows never meet, so the range can be any part of N: the
   bits of an output do not depend on how N is cut. */
INLINE void gemm_rows(const int M, int j0, int j1, const struct gemm *g) {
    /* R x G accumulators: 4 weight rows while 4 x M fit, else 2 rows and groups of ACCS / 2 */
    const int R = 4 * M <= ACCS ? 4 : 2, GS = 4 * M <= ACCS ? M : ACCS / 2, NR = g->N - g->N % R;
    const int K = g->K, KV = K - K % VL, nb = KV > KB_MAX ? (KV + KB_MAX - 1) / KB_MAX : 1;
    const int KB = ((KV + nb - 1) / nb + VL - 1) / VL * VL;
#define PASS(b)                                                                                   \
    const int k0 = (b) * KB, k1 = k0 + KB < KV ? k0 + KB : KV;                                    \
    const struct pass p = {k0, k1, (b) == 0, (b) == nb - 1,                                       \
                           nb == 1 && KV == K && g->alpha == 1.0f && g->beta == 0.0f,             \
                           KV, K, g->alpha, g->beta, g->A, g->lda, g->C, g->ldc};
    if (nb > 1 && (long)(M * KV * sizeof(float)) <= a_in_l1) {
        /* A's rows over all of K fit in L1: the blocks run inside each tile, so a weight row is
           read front to back rather than in one strip per pass (the same additions, in the same
           order: an output's block sums still wait in C). */
        const int je = j1 < NR ? j1 : NR;
        for (int j = j0; j < je; j += R)
            for (int b = 0; b < nb; b++) {
                PASS(b)
                tiles(M, R, GS, j, j + R, &p, g->B, g->ldb);
            }
        if (j1 == g->N)
            for (int b = 0; b < nb; b++) {
                PASS(b)
                leftover_rows(M, NR, g->N, &p, g->B, g->ldb);
            }
        return;
    }
    for (int b = 0; b < nb; b++) {
        PASS(b)
        tiles(M, R, GS, j0, j1 < NR ? j1 : NR, &p, g->B, g->ldb);
        if (j1 == g->N) leftover_rows(M, NR, g->N, &p, g->B, g->ldb);
    }
#undef PASS
}

/* A constant M per case: the tile shapes and groups are chosen at compile time. */
static void few_rows(int j0, int j1, const struct gemm *g) {
    switch (g->M) {
#define ROWS(m) case m: gemm_rows(m, j0, j1, g); break;
    ROWS(1) ROWS(2) ROWS(3) ROWS(4) ROWS(5) ROWS(6) ROWS(7) ROWS(8)
    ROWS(9) ROWS(10) ROWS(11) ROWS(12) ROWS(13) ROWS(14) ROWS(15) ROWS(16)
    ROWS(17) ROWS(18) ROWS(19) ROWS(20) ROWS(21) ROWS(22) ROWS(23) ROWS(24)
    ROWS(25) ROWS(26) ROWS(27) ROWS(28) ROWS(29) ROWS(30) ROWS(31) ROWS(32)
#undef ROWS
    }
}

/* Splitting a product between threads. A product is cut into chunks of weight rows; the calling
   thread and the helpers claim chunks one at a time until none is left, and the caller returns
   when every claimed chunk is done. Nothing waits for a helper that has not started: a helper
   that is descheduled (the machine is shared) or was never created (after fork) claims nothing,
   and the caller does the rest itself. So a busy machine costs at most the chunk a stalled helper
   holds, never the static half that OpenBLAS's threads wait for.

   `ticket` packs the job's sequence number, its chunk count and the next unclaimed chunk (24, 20
   and 20 bits): a claim is one compare-and-swap that can only succeed while that job is the
   current one, and the caller publishes the next job only after every claimed chunk is done, so
   the job's fields stay put while anyone works on them. Helpers spin briefly between products (a
   forward calls one every few microseconds), then sleep on a condition variable. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
enum { MAX_HELPERS = 15, CHUNK_BYTES = 128 << 10, SPLIT_MIN_BYTES = 256 << 10, SPIN = 20000 };
#define FIELD ((1u << 20) - 1)
static struct gemm job;
static int job_chunk;
static _Atomic uint64_t ticket;
static atomic_int job_done, sleepers, helpers_wanted;
static int helpers_started;
static atomic_flag busy = ATOMIC_FLAG_INIT;  /* a split is in progress */
static pthread_mutex_t wake_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake_cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Claims and runs chunks of the job `seq` until none is left; returns how many it ran. */
static int run_chunks(uint64_t seq) {
    int ran = 0;
    for (;;) {
        uint64_t t = atomic_load_explicit(&ticket, memory_order_acquire);
        const uint64_t n = (t >> 20) & FIELD, next = t & FIELD;
        if (t >> 40 != seq || next >= n) return ran;
        if (!atomic_compare_exchange_weak_explicit(&ticket, &t, t + 1, memory_order_acq_rel, memory_order_acquire))
            continue;
        const int j0 = (int)next * job_chunk, j1 = job.N - j0 > job_chunk ? j0 + job_chunk : job.N;
        if (job.q) quant_rows(j0, j1, &job);
        else few_rows(j0, j1, &job);
        atomic_fetch_add_explicit(&job_done, 1, memory_order_release);
        ran++;
    }
}

/* Helper number `arg` (0, 1, ...): it takes chunks while the threads wanted include it. */
static void *helper_main(void *arg) {
    const int index = (int)(intptr_t)arg;
    uint64_t seen = atomic_load(&ticket) >> 40;  /* jobs from before this helper are not its own */
    for (;;) {
        uint64_t seq = atomic_load_explicit(&ticket, memory_order_acquire) >> 40;
        for (int i = 0; seq == seen && i < SPIN; i++) {
            if (i % 64 == 63) sched_yield();  /* a thread that shares this core goes first */
            else cpu_relax();
            seq = atomic_load_explicit(&ticket, memory_order_acquire) >> 40;
        }
        if (seq == seen) {  /* idle: sleep until the next job is published */
            pthread_mutex_lock(&wake_mu);
            atomic_fetch_add(&sleepers, 1);
            while ((seq = atomic_load(&ticket) >> 40) == seen) pthread_cond_wait(&wake_cv, &wake_mu);
            atomic_fetch_sub(&sleepers, 1);
            pthread_mutex_unlock(&wake_mu);
        }
        seen = seq;
        if (index < atomic_load(&helpers_wanted)) run_chunks(seq);
    }
    return 0;
}

/* Products to run alone after a caller waited on a stalled helper (see run_gemm). */
enum { MIN_SOLO = 16, MAX_SOLO = 4096 };
static int solo_left, solo_next = MIN_SOLO;

static inline double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Counts, for diagnostics: split products, chunks the caller ran, chunks in all, stalls,
   products run alone after a stall. */
static long stats[5];

void onyx_blas_shim_stats(long out[5]) { memcpy(out, stats, sizeof stats); }

/* A forked child has no helpers (only the forking thread survives): it starts its own, with
   fresh locks (a helper may have held one at the fork). */
static void forget_helpers(void) {
    const uint64_t t = atomic_load(&ticket);
    atomic_store(&ticket, (t & ~(uint64_t)FIELD) | ((t >> 20) & FIELD));  /* no chunk left to claim */
    atomic_flag_clear(&busy);
    helpers_started = 0;
    atomic_store(&sleepers, 0);
    wake_mu = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
    wake_cv = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
    start_mu = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
}

/* Starts helpers up to the number wanted (once each; they live as long as the process, and
   those past the number wanted later take no chunks). */
static int ensure_helpers(void) {
    const int want = atomic_load(&helpers_wanted);
    if (helpers_started >= want) return helpers_started;
    pthread_mutex_lock(&start_mu);
    static int at_fork;
    if (!at_fork) at_fork = pthread_atfork(0, 0, forget_helpers) == 0;
    while (helpers_started < want) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        const int ok = pthread_create(&t, &attr, helper_main, (void *)(intptr_t)helpers_started) == 0;
        pthread_attr_destroy(&attr);
        if (!ok) break;
        helpers_started++;
    }
    pthread_mutex_unlock(&start_mu);
    return helpers_started;
}

/* Threads (the caller included) that share a product from now on; 1 turns splitting off. */
void onyx_blas_shim_threads(int n) {
    atomic_store(&helpers_wanted, n < 1 ? 0 : n - 1 > MAX_HELPERS ? MAX_HELPERS : n - 1);
}

/* Runs the product, split between threads when it is large enough to pay for it. One product
   at a time is split (MLX's CPU stream calls BLAS from one thread); a call that finds a split
   in progress runs alone. */
static void run_gemm(const struct gemm *g) {
    /* Chunks and the split threshold count weights as floats: a quantized product's time is
       dequantizing its values more than reading its bytes. */
    void (*rows)(int, int, const struct gemm *) = g->q ? quant_rows : few_rows;
    int chunk = (int)(CHUNK_BYTES / ((size_t)g->K * sizeof(float)));
    chunk = chunk < 16 ? 16 : chunk / 16 * 16;
    const uint64_t n = ((uint64_t)g->N + chunk - 1) / chunk;
    if (atomic_load_explicit(&helpers_wanted, memory_order_relaxed) == 0 ||
        (size_t)g->N * g->K * sizeof(float) < SPLIT_MIN_BYTES || n < 2 || n > FIELD ||
        atomic_flag_test_and_set_explicit(&busy, memory_order_acquire)) {
        rows(0, g->N, g);
        return;
    }
    const int solo = solo_left > 0;  /* backing off after a stall (below) */
    if (solo || ensure_helpers() == 0) {
        solo_left -= solo, stats[4] += solo;
        atomic_flag_clear_explicit(&busy, memory_order_release);
        rows(0, g->N, g);
        return;
    }
    job = *g;
    job_chunk = chunk;
    atomic_store_explicit(&job_done, 0, memory_order_relaxed);
    const uint64_t seq = ((atomic_load_explicit(&ticket, memory_order_relaxed) >> 40) + 1) & 0xFFFFFF;
    atomic_store(&ticket, (seq << 40) | (n << 20));  /* seq_cst: pairs with a helper going to sleep */
    if (atomic_load(&sleepers) > 0) {
        pthread_mutex_lock(&wake_mu);
        pthread_cond_broadcast(&wake_cv);
        pthread_mutex_unlock(&wake_mu);
    }
    const double t0 = now();
    const int ran = run_chunks(seq);
    const double t1 = now();
    for (int i = 0; atomic_load_explicit(&job_done, memory_order_acquire) < (int)n; i++) {
        if (i % 256 == 255) sched_yield();  /* a helper holding a chunk was descheduled */
        else cpu_relax();
    }
    /* Waiting for more than two chunks' time means a helper lost its core (another process):
       run the next products alone, twice as many after each such wait in a row. */
    const double waited = now() - t1;
    stats[0]++, stats[1] += ran, stats[2] += n;
    if (ran > 0 && waited > 2 * (t1 - t0) / ran + 20e-6) {
        stats[3]++;
        solo_left = solo_next;
        solo_next = solo_next < MAX_SOLO ? 2 * solo_next : MAX_SOLO;
    } else {
        solo_next = MIN_SOLO;
    }
    atomic_flag_clear_explicit(&busy, memory_order_release);
}

/* 0 (not done): more than CHUNKED_ROWS rows, more than MAX_ROWS with K under PIECES_MIN_K, or
   K split into blocks with beta not 0 (C's old values would be gone by the last block). */
static int few_rows_product(int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                            int ldb, float beta, float *C, int ldc) {
    const int KV = K - K % VL;
    if (M < 1 || M > CHUNKED_ROWS || (M > MAX_ROWS && K < PIECES_MIN_K) || (KV > KB_MAX && beta != 0.0f))
        return 0;
    /* past MAX_ROWS: pieces of at most MAX_ROWS rows, as even as possible (each reads the
       weights again; a row's bits do not depend on its piece). Only for weight-sized K: with
       K = 64 (attention's scores over a prompt chunk) each output's reduction weighs more than
       its multiply-adds, and OpenBLAS's sgemm is faster there. */
    const int pieces = (M + MAX_ROWS - 1) / MAX_ROWS, base = M / pieces, extra = M % pieces;
    for (int i = 0, m0 = 0; i < pieces; i++) {
        const int rows = base + (i < extra);
        const struct gemm g = {rows, N, K, lda, ldb, ldc, alpha, beta, A + (size_t)m0 * lda, B,
                               C + (size_t)m0 * ldc, 0};
        run_gemm(&g);
        m0 += rows;
    }
    return 1;
}

/* x @ V for 1 to 128 rows of x with V (K x N) row-major and not transposed: attention's
   probabilities times its values (K the keys, N a head's width). OpenBLAS's sgemm packs V on
   every call, which for a few rows costs more than the product; here each output row is a
   vector accumulator per VL columns that adds x[m, k] * V[k, :] for k in order, one rounding per
   multiply-add, whatever M is (a row gets the same bits alone or beside others, as in the x @ W^T
   kernels). V is read in blocks of PV_KB rows, which stay in L1 while every group of rows of x
   takes them; the accumulators live in `acc` between blocks, which does not change a bit.
   0 (not done): a shape it does not take (N not a whole number of vectors, or too wide). */
enum { PV_MAX_ROWS = 32, PV_CHUNKED_ROWS = 128, PV_MAX_N = 256, PV_KB = 96, PV_W = 4, PV_G = ACCS / PV_W };
#if defined(__AVX512F__)
#define PV_G_MAX 6  /* = PV_G: 24 accumulators */
#else
#define PV_G_MAX 2
#endif

INLINE void pv_tile(const int G, const int W, int k0, int k1, const float *A, int lda, const float *B,
                    int ldb, vf *acc, int NV) {
    vf s[PV_G][PV_W];
    UNROLL for (int r = 0; r < G; r++) UNROLL for (int w = 0; w < W; w++) s[r][w] = acc[r * NV + w];
    for (int k = k0; k < k1; k++) {
        vf b[PV_W];
        UNROLL for (int w = 0; w < W; w++) memcpy(&b[w], B + (size_t)k * ldb + w * VL, sizeof(vf));
        UNROLL for (int r = 0; r < G; r++) {
            const vf a = (vf){0} + A[(size_t)r * lda + k];
            UNROLL for (int w = 0; w < W; w++) s[r][w] += a * b[w];
        }
    }
    UNROLL for (int r = 0; r < G; r++) UNROLL for (int w = 0; w < W; w++) acc[r * NV + w] = s[r][w];
}


#define PV_TILE(g, w) pv_tile(g, w, k0, k1, a, lda, b, ldb, acc + (size_t)m0 * NV + j, NV)
static void rows_times_matrix_32(int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                                 int ldb, float beta, float *C, int ldc) {
    const int NV = N / VL;
    vf acc[PV_MAX_ROWS * PV_MAX_N / VL];
    for (int i = 0; i < M * NV; i++) acc[i] = (vf){0};
    for (int k0 = 0; k0 < K; k0 += PV_KB) {
        const int k1 = K - k0 < PV_KB ? K : k0 + PV_KB;
        for (int m0 = 0; m0 < M; m0 += PV_G) {
            const int g = M - m0 < PV_G ? M - m0 : PV_G;
            const float *a = A + (size_t)m0 * lda;
            for (int j = 0; j < NV; j += PV_W) {
                const float *b = B + (size_t)j * VL;
                const int w = NV - j < PV_W ? NV - j : PV_W;
                /* constant tile shapes, so that the accumulators are registers */
                switch ((g - 1) * PV_W + w - 1) {
#define PV_CASE(gg) \
                case (gg - 1) * PV_W + 0: PV_TILE(gg, 1); break; case (gg - 1) * PV_W + 1: PV_TILE(gg, 2); break; \
                case (gg - 1) * PV_W + 2: PV_TILE(gg, 3); break; case (gg - 1) * PV_W + 3: PV_TILE(gg, 4); break;
                PV_CASE(1) PV_CASE(2)
#if PV_G_MAX > 2
                PV_CASE(3) PV_CASE(4) PV_CASE(5) PV_CASE(6)
#endif
#undef PV_CASE
                }
            }
        }
    }
    for (int m = 0; m < M; m++) {
        const float *s = (const float *)(acc + (size_t)m * NV);
        float *c = C + (size_t)m * ldc;
        if (beta == 0.0f) for (int n = 0; n < N; n++) c[n] = alpha * s[n];  /* C is never read */
        else for (int n = 0; n < N; n++) c[n] = alpha * s[n] + beta * c[n];
    }
}
#undef PV_TILE

/* More than 32 rows (the query heads that share a key head times a step's queries) in pieces
   of 32: a row's bits stay those it gets alone. Past PV_CHUNKED_ROWS (prompt chunks), OpenBLAS. */
static int rows_times_matrix(int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                             int ldb, float beta, float *C, int ldc) {
    if (M < 1 || M > PV_CHUNKED_ROWS || N < VL || N > PV_MAX_N || N % VL) return 0;
    for (int m0 = 0; m0 < M; m0 += PV_MAX_ROWS)
        rows_times_matrix_32(M - m0 < PV_MAX_ROWS ? M - m0 : PV_MAX_ROWS, N, K, alpha, A + (size_t)m0 * lda, lda, B, ldb,
                             beta, C + (size_t)m0 * ldc, ldc);
    return 1;
}

static int quant_product(int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                         int ldb, float beta, float *C, int ldc);

void cblas_sgemm(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    if (!real_gemm) {
        real_gemm = (gemm_t)dlsym(RTLD_NEXT, "cblas_sgemm");
        real_gemv = (gemv_t)dlsym(RTLD_NEXT, "cblas_sgemv");
    }
    if (order == RowMajor && ta == NoTrans && tb == Trans && quant_product(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        return;  /* x @ W^T with W a registered quantized matrix (quant_shim.c) */
    if (order == RowMajor && K > 0 && real_gemv) {
        if (ta == NoTrans && tb == Trans && few_rows_product(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
            return;  /* x @ W^T: a decode step, a verification, a batch, a prompt chunk */
        if (ta == NoTrans && tb == NoTrans && rows_times_matrix(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
            return;  /* x @ V: attention's values for a few queries */
        if (M == 1) {  /* C[0,:] = alpha * A[0,:] @ op(B) + beta * C[0,:] */
            int incx = ta == NoTrans ? 1 : lda;
            if (tb == Trans) gemv(NoTrans, N, K, alpha, B, ldb, A, incx, beta, C, 1, N);
            else gemv(Trans, K, N, alpha, B, ldb, A, incx, beta, C, 1, N);
            return;
        }
        if (N == 1) {  /* C[:,0] = alpha * op(A) @ B[:,0] + beta * C[:,0] */
            int incx = tb == NoTrans ? ldb : 1;
            if (ta == NoTrans) gemv(NoTrans, M, K, alpha, A, lda, B, incx, beta, C, ldc, M);
            else gemv(Trans, K, M, alpha, A, lda, B, incx, beta, C, ldc, M);
            return;
        }
    }
    real_gemm(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
