/* sgemm.c — the portable GEMM (bcrt_sgemm), and cblas_sgemm over it
 * with -DBLOCKC_NO_BLAS.
 * One part of the runtime: tools/amalgamate.sh concatenates runtime/src/
 * into runtime/blockc_rt.c (the file users vendor); prelude.c has the
 * includes and macros every part uses. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC push_options
#pragma GCC target("prefer-vector-width=512")
#endif

/* Portable GEMM blocking: GM_MR x GM_NR register tile; an A block of
 * GM_MC x GM_KC (<= 128 KiB, L2; GM_MC a multiple of GM_MR) packed once
 * per (k block, row block); a B micro-panel of GM_KC x GM_NR (32 KiB, L1) packed just before the tiles
 * that use it, so B is packed ceil(m / GM_MC) times in all. */
enum { GM_MR = GK_MR, GM_NR = 32, GM_KC = 256, GM_MC = 128 / GK_MR * GK_MR };
/* The packing buffers for an m x n x k product, the A block then the B
 * micro-panel 64-byte aligned right after the A block's
 * roundup(min(m, GM_MC), GM_MR) x min(k, GM_KC) floats: inside the
 * BCRT_SGEMM_WS_FOR(m, k) the header promises (for any GK_MR <= 16;
 * BCRT_SGEMM_WS_FOR(huge, huge) == BCRT_SGEMM_WS_BYTES). */
typedef char gm_ws_fits[GM_MR <= 16 && GM_MC <= 128 && GM_KC == 256 && GM_NR == 32 &&
                                BCRT_SGEMM_WS_FOR(1 << 30, 1 << 30) == BCRT_SGEMM_WS_BYTES
                            ? 1
                            : -1];
static float *gm_buffers(void *mem, int m, int k, int mcmax, float **bp) {
  float *ap = (float *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
  size_t mc = (size_t)(m < mcmax ? m : mcmax), kc = (size_t)(k < GM_KC ? k : GM_KC);
  size_t na = (mc + GM_MR - 1) / GM_MR * GM_MR * kc;
  *bp = ap + (na + 15) / 16 * 16;
  return ap;
}
#ifndef BLOCKC_NO_IO
/* The buffers' bytes for row blocks of mcmax rows (gm_buffers' layout). */
static size_t gm_buffers_bytes(int m, int k, int mcmax) {
  size_t mc = (size_t)(m < mcmax ? m : mcmax), kc = (size_t)(k < GM_KC ? k : GM_KC);
  size_t na = (mc + GM_MR - 1) / GM_MR * GM_MR * kc;
  return 64 + 4 * ((na + 15) / 16 * 16 + kc * GM_NR);
}
#endif
/* With buffers of its own (ws NULL) bcrt_sgemm_ws takes row blocks of up
 * to GM_MC_OWN rows (a 512 KiB A block, in L2 on current cores) instead of
 * GM_MC: each B micro-panel is packed 4x less often.  The arithmetic is the
 * same (every tile sums its GM_KC blocks in the same order), so are the bits. */
enum { GM_MC_OWN = 512 / GK_MR * GK_MR };
/* sg_blocked reads packed weight panels as B micro-panels. */
typedef char gm_nr_matches_pack_nr[(int)GM_NR == (int)SG_NR ? 1 : -1];

static inline float gm_at(int trans, const float *m, size_t ld, int r, int c) {
  return trans ? m[(size_t)c * ld + (size_t)r] : m[(size_t)r * ld + (size_t)c];
}

/* Packing a transposed operand is a transpose: 8 x 8 blocks through AVX
 * registers where there are some (a copy: the bits are the same either way). */
#if defined(__AVX__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GM_T8 1
/* dst[q * ldd + i] = src[i * lds + q], i, q < 8. */
static inline void gm_t8(const float *src, size_t lds, float *dst, size_t ldd) {
  __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + lds),
         r2 = _mm256_loadu_ps(src + 2 * lds), r3 = _mm256_loadu_ps(src + 3 * lds),
         r4 = _mm256_loadu_ps(src + 4 * lds), r5 = _mm256_loadu_ps(src + 5 * lds),
         r6 = _mm256_loadu_ps(src + 6 * lds), r7 = _mm256_loadu_ps(src + 7 * lds);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
         t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
         t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
         t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee),
         u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee),
         u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee),
         u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
  _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(dst + ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(dst + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(dst + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(dst + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(dst + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(dst + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(dst + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
}
#else
#define GM_T8 0
#endif

/* A rows [i0, i0 + mc), columns [p0, p0 + kc) of op(A) into micro-panels
 * of GM_MR rows, k-major inside each (ap[panel][p][r]), zero rows past mc. */
static void gm_pack_a(int ta, const float *a, size_t lda, int i0, int mc, int p0, int kc,
                      float *ap) {
  for (int ir = 0; ir < mc; ir += GM_MR) {
    float *dst = ap + (size_t)ir * (size_t)kc;
    int mr = mc - ir < GM_MR ? mc - ir : GM_MR;
    if (ta) {
      for (int p = 0; p < kc; p++) {
        const float *src = a + (size_t)(p0 + p) * lda + (size_t)(i0 + ir);
        for (int r = 0; r < GM_MR; r++) dst[(size_t)p * GM_MR + (size_t)r] = r < mr ? src[r] : 0.0f;
      }
    } else {
#if GM_T8
      if (GM_MR == 8 && mr == 8) {  /* whole 8 x 8 blocks, then the last columns */
        const float *src = a + (size_t)(i0 + ir) * lda + (size_t)p0;
        int p = 0;
        for (; p + 8 <= kc; p += 8) gm_t8(src + p, lda, dst + (size_t)p * GM_MR, GM_MR);
        for (; p < kc; p++)
          for (int r = 0; r < GM_MR; r++) dst[(size_t)p * GM_MR + (size_t)r] = src[(size_t)r * lda + (size_t)p];
        continue;
      }
#endif
      for (int r = 0; r < GM_MR; r++) {
        const float *src = a + (size_t)(i0 + ir + r) * lda + (size_t)p0;
        if (r < mr)
          for (int p = 0; p < kc; p++) dst[(size_t)p * GM_MR + (size_t)r] = src[p];
        else
          for (int p = 0; p < kc; p++) dst[(size_t)p * GM_MR + (size_t)r] = 0.0f;
      }
    }
  }
}

/* op(B) rows [p0, p0 + kc), columns [j0, j0 + nr) into bp[p][j], zero
 * columns past nr. */
static void gm_pack_b(int tb, const float *b, size_t ldb, int p0, int kc, int j0, int nr,
                      float *bp) {
  if (tb) {
#if GM_T8
    if (nr == GM_NR) {  /* whole 8 x 8 blocks, then the last rows */
      for (int jb = 0; jb < GM_NR; jb += 8) {
        const float *src = b + (size_t)(j0 + jb) * ldb + (size_t)p0;
        int p = 0;
        for (; p + 8 <= kc; p += 8) gm_t8(src + p, ldb, bp + (size_t)p * GM_NR + jb, GM_NR);
        for (; p < kc; p++)
          for (int j = 0; j < 8; j++) bp[(size_t)p * GM_NR + jb + j] = src[(size_t)j * ldb + (size_t)p];
      }
      return;
    }
#endif
    for (int j = 0; j < GM_NR; j++) {
      const float *src = b + (size_t)(j0 + j) * ldb + (size_t)p0;
      if (j < nr)
        for (int p = 0; p < kc; p++) bp[(size_t)p * GM_NR + (size_t)j] = src[p];
      else
        for (int p = 0; p < kc; p++) bp[(size_t)p * GM_NR + (size_t)j] = 0.0f;
    }
  } else {
    for (int p = 0; p < kc; p++) {
      const float *src = b + (size_t)(p0 + p) * ldb + (size_t)j0;
      float *dst = bp + (size_t)p * GM_NR;
      for (int j = 0; j < GM_NR; j++) dst[j] = j < nr ? src[j] : 0.0f;
    }
  }
}

/* The register tile: acc = A micro-panel x B micro-panel over kc steps,
 * then C (mr x nr valid) = alpha acc (+ bias) + beta C (beta == 0: C not
 * read; bias may be NULL). */
static void gm_tile(int kc, const float *ap, const float *bp, float alpha, const float *bias,
                    float beta, float *c, size_t ldc, int mr, int nr) {
  float acc[GM_MR][GM_NR];
  for (int r = 0; r < GM_MR; r++)
    for (int j = 0; j < GM_NR; j++) acc[r][j] = 0.0f;
  for (int p = 0; p < kc; p++) {
    const float *bk = bp + (size_t)p * GM_NR, *ak = ap + (size_t)p * GM_MR;
    for (int r = 0; r < GM_MR; r++) {
      float av = ak[r];
      for (int j = 0; j < GM_NR; j++) acc[r][j] = MADD(av, bk[j], acc[r][j]);
    }
  }
  sg_store(mr, acc, alpha, bias, beta, c, ldc, nr);
}

/* bcrt_gemm_small for many rows (m > SG_MG, k > 0): bcrt_sgemm's blocking,
 * with the packed weights as the B micro-panels as they are (a panel's k
 * block is a contiguous GM_KC x 32 micro-panel), so nothing but x is
 * packed; BF16 micro-panels are widened into a float buffer first.  Panels
 * [p0, p1) only (the caller's part).  Returns 0 if the packing buffers
 * cannot be allocated, or in a -DBLOCKC_NO_IO build, which has no malloc
 * (the caller then takes the row-group path). */
static int sg_blocked(int bf, int p0, int p1, int m, int n, int k, const float *x, size_t ldx,
                      const void *packed, const float *bias, float beta, float *y,
                      size_t ldy) {
#ifdef BLOCKC_NO_IO
  (void)bf, (void)p0, (void)p1, (void)m, (void)n, (void)k, (void)x, (void)ldx, (void)packed;
  (void)bias, (void)beta, (void)y, (void)ldy;
  return 0;
#else
  void *mem = malloc(BCRT_SGEMM_WS_FOR(m, k));
  if (!mem) return 0;
  float *bp, *ap = gm_buffers(mem, m, k, GM_MC, &bp);
  size_t pstride = (size_t)SG_NR * (size_t)k;
  for (int k0 = 0; k0 < k; k0 += GM_KC) {
    int kc = k - k0 < GM_KC ? k - k0 : GM_KC;
    for (int i0 = 0; i0 < m; i0 += GM_MC) {
      int mc = m - i0 < GM_MC ? m - i0 : GM_MC;
      gm_pack_a(0, x, ldx, i0, mc, k0, kc, ap);
      for (int p = p0; p < p1; p++) {
        int j0 = p * SG_NR, nr = n - j0 < SG_NR ? n - j0 : SG_NR;
        size_t off = (size_t)p * pstride + (size_t)k0 * SG_NR;
        const float *b = bf ? bp : (const float *)packed + off;
        if (bf) {
          const unsigned short *h = (const unsigned short *)packed + off;
          for (size_t i = 0; i < (size_t)kc * GM_NR; i++) {
            uint32_t u = (uint32_t)h[i] << 16;
            memcpy(&bp[i], &u, sizeof u);
          }
        }
        for (int ir = 0; ir < mc; ir += GM_MR)
          gm_tile(kc, ap + (size_t)ir * (size_t)kc, b, 1.0f, k0 ? NULL : bias ? bias + j0 : NULL,
                  k0 ? 1.0f : beta, y + (size_t)(i0 + ir) * ldy + (size_t)j0, ldy,
                  mc - ir < GM_MR ? mc - ir : GM_MR, nr);
      }
    }
  }
  free(mem);
  return 1;
#endif
}

/* C = beta C; beta == 0 writes zeros without reading C. */
static void gm_scale(int m, int n, float beta, float *c, size_t ldc) {
  if (beta == 1.0f) return;
  for (int i = 0; i < m; i++) {
    float *cr = c + (size_t)i * ldc;
    if (beta == 0.0f)
      for (int j = 0; j < n; j++) cr[j] = 0.0f;
    else
      for (int j = 0; j < n; j++) cr[j] *= beta;
  }
}

/* Unpacked fallback (packing buffers unavailable): one dot product per
 * element of C; slow, but never wrong. */
static void gm_plain(int ta, int tb, int m, int n, int k, float alpha, const float *a,
                     size_t lda, const float *b, size_t ldb, float beta, float *c, size_t ldc) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      float s = 0.0f;
      for (int p = 0; p < k; p++) s = MADD(gm_at(ta, a, lda, i, p), gm_at(tb, b, ldb, p, j), s);
      float *cij = c + (size_t)i * ldc + (size_t)j;
      *cij = beta == 0.0f ? alpha * s : MADD(alpha, s, beta * *cij);
    }
}

/* The product with the packing buffers at ws (BCRT_SGEMM_WS_FOR(m, k)). */
static void gm_blocked(void *ws, int mcmax, int ta, int tb, int m, int n, int k, float alpha,
                       const float *a, size_t lda, const float *b, size_t ldb, float beta,
                       float *c, size_t ldc) {
  float *bp, *ap = gm_buffers(ws, m, k, mcmax, &bp);
  for (int p0 = 0; p0 < k; p0 += GM_KC) {
    int kc = k - p0 < GM_KC ? k - p0 : GM_KC;
    float bt = p0 ? 1.0f : beta;
    for (int i0 = 0; i0 < m; i0 += mcmax) {
      int mc = m - i0 < mcmax ? m - i0 : mcmax;
      gm_pack_a(ta, a, lda, i0, mc, p0, kc, ap);
      for (int j0 = 0; j0 < n; j0 += GM_NR) {
        int nr = n - j0 < GM_NR ? n - j0 : GM_NR;
        gm_pack_b(tb, b, ldb, p0, kc, j0, nr, bp);
        for (int ir = 0; ir < mc; ir += GM_MR)
          gm_tile(kc, ap + (size_t)ir * (size_t)kc, bp, alpha, NULL, bt,
                  c + (size_t)(i0 + ir) * ldc + (size_t)j0, ldc,
                  mc - ir < GM_MR ? mc - ir : GM_MR, nr);
      }
    }
  }
}

/* For attention's tiles (attention.c), whose key and value tiles are the
 * B operand of every query block of a head: B packed once instead of once
 * a block.  gm_pack_panels: op(B) (k x n, k <= GM_KC) as ceil(n / GM_NR)
 * micro-panels of k x GM_NR floats (gm_pack_b's layout, zero columns past
 * n), panel q at bp + q * ps (ps >= k * GM_NR).  gm_packed: C (m x n, m <=
 * GM_MC) = alpha A B + beta C (alpha != 0, 0 < k <= GM_KC) over the first k
 * rows of such panels, A packed into ws (BCRT_SGEMM_WS_FOR(m, k)): the
 * tiles and their order are gm_blocked's for one k block and one row block,
 * so the bits are bcrt_sgemm_ws's.  (Not in -DBLOCKC_NO_IO builds: no
 * allocator for the panels.) */
#ifndef BLOCKC_NO_IO
static void gm_pack_panels(int tb, const float *b, size_t ldb, int k, int n, float *bp,
                           size_t ps) {
  for (int j0 = 0; j0 < n; j0 += GM_NR)
    gm_pack_b(tb, b, ldb, 0, k, j0, n - j0 < GM_NR ? n - j0 : GM_NR,
              bp + (size_t)(j0 / GM_NR) * ps);
}

static void gm_packed(void *ws, int m, int n, int k, float alpha, const float *a, size_t lda,
                      const float *bp, size_t ps, float beta, float *c, size_t ldc) {
  float *bunused, *ap = gm_buffers(ws, m, k, GM_MC, &bunused);
  gm_pack_a(0, a, lda, 0, m, 0, k, ap);
  for (int j0 = 0; j0 < n; j0 += GM_NR) {
    const float *b = bp + (size_t)(j0 / GM_NR) * ps;
    for (int ir = 0; ir < m; ir += GM_MR)
      gm_tile(k, ap + (size_t)ir * (size_t)k, b, alpha, NULL, beta,
              c + (size_t)ir * ldc + (size_t)j0, ldc, m - ir < GM_MR ? m - ir : GM_MR,
              n - j0 < GM_NR ? n - j0 : GM_NR);
  }
}
#endif

/* ws NULL: buffers from malloc, else (out of memory, or no malloc in a
 * -DBLOCKC_NO_IO build) the unpacked loop. */
void bcrt_sgemm_ws(void *ws, int transa, int transb, int m, int n, int k, float alpha,
                   const float *a, int lda, const float *b, int ldb, float beta, float *c,
                   int ldc) {
  int ta = transa == BCRT_TRANS, tb = transb == BCRT_TRANS;
  if (m <= 0 || n <= 0) return;
  if (alpha == 0.0f || k <= 0) {
    gm_scale(m, n, beta, c, (size_t)ldc);
    return;
  }
  void *mem = ws;
  int mcmax = GM_MC;
#ifndef BLOCKC_NO_IO
  if (!ws) mem = malloc(gm_buffers_bytes(m, k, mcmax = GM_MC_OWN));
#endif
  if (!mem) {
    gm_plain(ta, tb, m, n, k, alpha, a, (size_t)lda, b, (size_t)ldb, beta, c, (size_t)ldc);
    return;
  }
  gm_blocked(mem, mcmax, ta, tb, m, n, k, alpha, a, (size_t)lda, b, (size_t)ldb, beta, c,
             (size_t)ldc);
#ifndef BLOCKC_NO_IO
  if (!ws) free(mem);
#endif
}

void bcrt_sgemm(int transa, int transb, int m, int n, int k, float alpha, const float *a,
                int lda, const float *b, int ldb, float beta, float *c, int ldc) {
  bcrt_sgemm_ws(NULL, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* bcrt_sgemm over nthreads threads: C's columns in blocks of whole GM_NR
 * register tiles, one run of columns per thread (parts 1..nt-1 on fresh
 * pthreads, part 0 on the caller's; a part whose thread cannot start runs
 * on the caller's).  A tile's columns are independent lanes and every tile
 * sums its GM_KC blocks in the same order whatever its place, so each
 * element of C gets the bits it gets on one thread: the result does not
 * depend on nthreads.  Products under GM_MT_MIN multiply-adds stay on one
 * thread (a thread start costs ~10-30 us, ~2-6 M multiply-adds). */
enum { GM_MT_MAX = 64 };
#define GM_MT_MIN (1L << 22)
typedef struct {
  int transa, transb, m, n, k, lda, ldb, ldc;
  float alpha, beta;
  const float *a, *b;
  float *c;
} gm_job;

static void gm_job_run(const gm_job *j) {
  bcrt_sgemm_ws(NULL, j->transa, j->transb, j->m, j->n, j->k, j->alpha, j->a, j->lda, j->b, j->ldb,
                j->beta, j->c, j->ldc);
}

#ifdef GK_THREADS
static void *gm_job_thread(void *arg) {
  gm_job_run((const gm_job *)arg);
  return NULL;
}
#endif

void bcrt_sgemm_mt(int nthreads, int transa, int transb, int m, int n, int k, float alpha,
                   const float *a, int lda, const float *b, int ldb, float beta, float *c,
                   int ldc) {
  int nb = n > 0 ? (n + GM_NR - 1) / GM_NR : 0, nt = nthreads < 1 ? 1 : nthreads;
  nt = nt > GM_MT_MAX ? GM_MT_MAX : nt > nb ? nb : nt;
  if (nt <= 1 || m <= 0 || (long)m * (long)n * (long)(k > 0 ? k : 0) < GM_MT_MIN) {
    bcrt_sgemm_ws(NULL, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  int tb = transb == BCRT_TRANS;
  gm_job job[GM_MT_MAX];
  for (int t = 0; t < nt; t++) {
    int j0 = (int)((long)nb * t / nt) * GM_NR, j1 = (int)((long)nb * (t + 1) / nt) * GM_NR;
    if (j1 > n) j1 = n;
    job[t] = (gm_job){.transa = transa, .transb = transb, .m = m, .n = j1 - j0, .k = k,
                      .lda = lda, .ldb = ldb, .ldc = ldc, .alpha = alpha, .beta = beta, .a = a,
                      .b = b + (tb ? (size_t)j0 * (size_t)ldb : (size_t)j0), .c = c + j0};
  }
#ifdef GK_THREADS
  pthread_t tid[GM_MT_MAX];
  int started[GM_MT_MAX] = {0};
  for (int t = 1; t < nt; t++) started[t] = pthread_create(&tid[t], NULL, gm_job_thread, &job[t]) == 0;
  gm_job_run(&job[0]);
  for (int t = 1; t < nt; t++) {
    if (started[t]) pthread_join(tid[t], NULL);
    else gm_job_run(&job[t]);
  }
#else
  for (int t = 0; t < nt; t++) gm_job_run(&job[t]);
#endif
}

/* CBLAS's calling convention: column-major C = op(A) op(B) is row-major
 * C^T = op(B)^T op(A)^T. */
void bcrt_sgemm_cblas(void *ws, int order, int transa, int transb, int m, int n, int k,
                      float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                      float *c, int ldc) {
  if (order == BCRT_ROW_MAJOR)
    bcrt_sgemm_ws(ws, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    bcrt_sgemm_ws(ws, transb, transa, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC pop_options
#endif

/* The training step's GEMMs.  bcrt_sgemm built for AVX-512 (gcc or clang,
 * -march=native on such a CPU) runs 140-185 GFLOP/s on one core where
 * OpenBLAS's AVX2 kernels (its Haswell or Zen core type: an older CPU
 * table, or OPENBLAS_CORETYPE) run ~105 (docs/analysis.md, "Training
 * speed").  So when this file is built for AVX-512 and OpenBLAS says it
 * runs a core type without AVX-512 kernels, the step's products go to
 * bcrt_sgemm, split over OpenBLAS's thread count (bcrt_sgemm_mt: the same
 * bits on any count); otherwise to cblas_sgemm (on AVX-512 kernels
 * OpenBLAS is the faster: 180-205 GFLOP/s against bcrt_sgemm's 130-190 on
 * the model's shapes, `build/bench_train --peak`).  The choice depends only
 * on the build and the core type, never on a timing, so a run gives the
 * same bits every time.  Weak references: a program linked with another
 * CBLAS gets cblas_sgemm always.  Returns the threads (0: cblas_sgemm). */
#if !defined(BLOCKC_NO_BLAS) && !defined(BLOCKC_NO_IO) && defined(__AVX512F__) && \
    defined(__FMA__) && (defined(__GNUC__) || defined(__clang__))
char *openblas_get_corename(void) __attribute__((weak));
int openblas_get_num_threads(void) __attribute__((weak));
static int sgemm_pick_own(void) {
  if (!openblas_get_corename || !openblas_get_num_threads) return 0;
  const char *c = openblas_get_corename();
  if (!c) return 0;
  static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids",
                                       "Sapphirerapids", "Zen4", "Zen5"};
  for (size_t i = 0; i < sizeof avx512 / sizeof *avx512; i++)
    if (!strcmp(c, avx512[i])) return 0;
  int nt = openblas_get_num_threads();
  return nt < 1 ? 1 : nt;
}
#else
static int sgemm_pick_own(void) { return 0; }
#endif

void bcrt_sgemm_pick(int order, int transa, int transb, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc) {
  int nt = sgemm_pick_own();
  if (!nt)
    cblas_sgemm(order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else if (order == BCRT_ROW_MAJOR)
    bcrt_sgemm_mt(nt, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    bcrt_sgemm_mt(nt, transb, transa, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
}

/* The training step's GEMMs over a pool: bcrt_sgemm_pick's product cut
 * into fixed tiles of C, SP_M rows by SP_N columns, one call each, claimed
 * by the pool's threads.  OpenBLAS's bits for an element depend on the
 * shape of the call that computes it (its small-matrix kernels, its
 * blocking, its thread split), so the tiles are the same for every pool,
 * NULL included, and OpenBLAS must run one thread (the CLI and the API set
 * it so): the result is then bit-identical for any thread count.  A tile's
 * repacking costs about 2/SP_M of its arithmetic.  Products under SP_MIN
 * multiply-adds are one call on the caller's thread.  Where the step's
 * products go to the runtime's own bcrt_sgemm (bcrt_sgemm_pick's rule), the
 * tiles are only a split of the work: its bits do not depend on them. */
enum { SP_M = 256, SP_N = 256 };
#define SP_MIN (1L << 18)
typedef struct {
  int ta, tb, m, n, k, lda, ldb, ldc, own, tn, sm, sn; /* sm x sn: the tiles */
  float alpha, beta;
  const float *a, *b;
  float *c;
} sp_job;

static void sp_tile(void *arg, int t, int ntiles) {
  (void)ntiles;
  const sp_job *j = (const sp_job *)arg;
  int i0 = t / j->tn * j->sm, j0 = t % j->tn * j->sn;
  int mm = j->m - i0 < j->sm ? j->m - i0 : j->sm, nn = j->n - j0 < j->sn ? j->n - j0 : j->sn;
  const float *a = j->ta == BCRT_TRANS ? j->a + i0 : j->a + (size_t)i0 * (size_t)j->lda;
  const float *b = j->tb == BCRT_TRANS ? j->b + (size_t)j0 * (size_t)j->ldb : j->b + j0;
  float *c = j->c + (size_t)i0 * (size_t)j->ldc + (size_t)j0;
  if (j->own)
    bcrt_sgemm(j->ta, j->tb, mm, nn, j->k, j->alpha, a, j->lda, b, j->ldb, j->beta, c, j->ldc);
  else
    cblas_sgemm(BCRT_ROW_MAJOR, j->ta, j->tb, mm, nn, j->k, j->alpha, a, j->lda, b, j->ldb,
                j->beta, c, j->ldc);
}

void bcrt_sgemm_pool(bcrt_pool *pool, int order, int transa, int transb, int m, int n, int k,
                     float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                     float *c, int ldc) {
  if (order != BCRT_ROW_MAJOR) { /* C^T = op(B)^T op(A)^T */
    bcrt_sgemm_pool(pool, BCRT_ROW_MAJOR, transb, transa, n, m, k, alpha, b, ldb, a, lda, beta, c,
                    ldc);
    return;
  }
  if (m <= 0 || n <= 0) return;
  if ((double)m * (double)n * (double)(k > 0 ? k : 0) < (double)SP_MIN) {
    bcrt_sgemm_pick(order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  /* bcrt_sgemm gives every element the same bits in any split into whole
   * GM_NR columns: its split is for speed alone, one run of columns per
   * thread (each packs A once), whole on one. */
  int own = sgemm_pick_own() != 0, sm = SP_M, sn = SP_N;
  if (own) {
    int nt = bcrt_pool_nthreads(pool), np = (n + GM_NR - 1) / GM_NR;
    if (nt > np) nt = np;
    sm = m;
    sn = (np + nt - 1) / nt * GM_NR;
  }
  int tm = (m + sm - 1) / sm, tn = (n + sn - 1) / sn;
  sp_job j = {.ta = transa, .tb = transb, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb,
              .ldc = ldc, .own = own, .tn = tn, .sm = sm, .sn = sn, .alpha = alpha,
              .beta = beta, .a = a, .b = b, .c = c};
  bcrt_pool_run(pool, tm * tn, sp_tile, &j);
}

#ifdef BLOCKC_NO_BLAS
/* cblas_sgemm for code without OpenBLAS (packing buffers from malloc;
 * generated code passes its workspace to bcrt_sgemm_cblas instead). */
void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c,
                 int ldc) {
  bcrt_sgemm_cblas(NULL, order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
#endif /* BLOCKC_NO_BLAS */
