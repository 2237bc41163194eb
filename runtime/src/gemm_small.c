/* gemm_small.c — the small-M GEMM on packed weights, and attention's few-row
 * products.
 * One part of the runtime: tools/amalgamate.sh concatenates runtime/src/
 * into runtime/blockc_rt.c (the file users vendor); prelude.c has the
 * includes and macros every part uses. */
/* --- issue 11: small-M and portable GEMM --- */
/* Two matrix products in plain C that gcc and clang vectorise:
 *
 *   bcrt_gemm_small  y = x W^T (+ bias) for few rows (decoding, small
 *     batches).  W is repacked once (bcrt_pack_nt) into panels of
 *     BCRT_PACK_NR output rows interleaved along k, so each panel is one
 *     contiguous stream and the inner loop is "broadcast x[i,k], FMA a
 *     row of the panel": every weight is read from memory once per call.
 *     Weights may be BF16 (half the bytes); above 64 rows the packed
 *     panels feed bcrt_sgemm's blocked loop instead.  bcrt_linear_wt takes
 *     those, IEEE F16 ones and ggml's Q8_0 / Q4_0 blocks in the same
 *     panels, for any m without allocating (the block types through
 *     gemm_q8.c's integer dot products).
 *   bcrt_sgemm  the general product, BLIS-style: op(A) packed a block of
 *     GM_MC x GM_KC at a time into micro-panels of GM_MR rows, op(B) a
 *     GM_KC x GM_NR micro-panel at a time; a GM_MR x GM_NR register tile
 *     accumulates in a local array the compiler keeps in vector registers.
 *     The -DBLOCKC_NO_BLAS cblas_sgemm above is a thin wrapper over it.
 *
 * Both micro-kernels are "acc[r][j] = fma(a[r], b[j], acc[r][j])" over
 * small constant bounds; after inlining with a constant row count gcc and
 * clang unroll them into straight FMA sequences on registers.  gcc prefers
 * 256-bit vectors on AVX-512 machines; the pragma below asks for 512-bit
 * ones here (measured 1.4-2x faster on these loops); clang keeps 256.
 * Without FMA hardware MADD is a multiply and an add: slower, same code. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC push_options
#pragma GCC target("prefer-vector-width=512")
#endif

/* Rows per register tile, from the vector registers the compiler will use:
 * the tile is GK_MR x 32 floats of accumulators, and must fit with room
 * for the loads (512-bit: 16 of 32 registers; clang keeps 256-bit vectors
 * even with AVX-512, 32 registers: 24; AVX2, 16 registers of 256 bits: 12;
 * SSE, 16 of 128 bits: 8). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#define GK_MR 8
#elif defined(__AVX512F__)
#define GK_MR 6
#elif defined(__AVX__)
#define GK_MR 3
#else
#define GK_MR 1
#endif

/* POSIX threads for bcrt_gemm_small_mt; elsewhere (or with
 * -DBLOCKC_NO_THREADS) it runs its parts one after the other. */
#if !defined(BLOCKC_NO_THREADS) && (defined(__unix__) || defined(__APPLE__))
#include <pthread.h>
#define GK_THREADS 1
#endif

#if defined(__GNUC__) || defined(__clang__)
#define GK_INLINE static inline __attribute__((always_inline))
/* Integer arithmetic: the address may lie past the end of the panel (a
 * prefetch never faults), and pointer arithmetic there would be UB. */
#define GK_PREFETCH(p, off) __builtin_prefetch((const void *)((uintptr_t)(p) + (off)))
#define GK_PREFETCH_L2(p, off) __builtin_prefetch((const void *)((uintptr_t)(p) + (off)), 0, 2)
#else
#define GK_INLINE static inline
#define GK_PREFETCH(p, off) ((void)0)
#define GK_PREFETCH_L2(p, off) ((void)0)
#endif

/* Small-M tiling: SG_MR rows of x per register tile (with AVX-512 and gcc,
 * 8 x 32 floats = 16 512-bit accumulators).  m <= SG_MR: one pass over each panel, with a
 * prefetch SG_PF bytes ahead into L1 (measured: 2 KiB beat 1 and 4 KiB at
 * M = 8, neutral at M = 1).  m > SG_MR: k in chunks of SG_KC, so a
 * panel's chunk (32 KiB) stays in L1 while every row block reads it, and
 * the tiles prefetch the next panel's chunk into L2 meanwhile (M = 32 went
 * from 1.42-1.53x to 1.53-1.68x cblas with the prefetch; chunks of 128 and
 * an L1 hint were no better, best-of-60 timings). */
enum { SG_NR = BCRT_PACK_NR, SG_MR = GK_MR, SG_KC = 256, SG_PF = 2048 };

unsigned long bcrt_pack_nt_size(int n, int k) {
  if (n <= 0 || k <= 0) return 0;
  return (unsigned long)(((long)n + SG_NR - 1) / SG_NR) * SG_NR * (unsigned long)k;
}

void bcrt_pack_nt(int n, int k, const float *w, float *packed) {
  if (n <= 0 || k <= 0) return;
  int np = (int)(((long)n + SG_NR - 1) / SG_NR);
  for (int p = 0; p < np; p++) {
    float *dst = packed + (size_t)p * SG_NR * (size_t)k;
    for (int j = 0; j < SG_NR; j++) {
      int row = p * SG_NR + j;
      const float *src = w + (size_t)row * (size_t)k;
      if (row < n)
        for (int kk = 0; kk < k; kk++) dst[(size_t)kk * SG_NR + (size_t)j] = src[kk];
      else
        for (int kk = 0; kk < k; kk++) dst[(size_t)kk * SG_NR + (size_t)j] = 0.0f;
    }
  }
}

void bcrt_pack_nn(int n, int k, const float *w, int ldw, float *packed) {
  if (n <= 0 || k <= 0) return;
  int np = (int)(((long)n + SG_NR - 1) / SG_NR);
  for (int p = 0; p < np; p++) {
    float *dst = packed + (size_t)p * SG_NR * (size_t)k;
    int j0 = p * SG_NR, nc = n - j0 < SG_NR ? n - j0 : SG_NR;
    for (int kk = 0; kk < k; kk++) {
      const float *src = w + (size_t)kk * (size_t)ldw + (size_t)j0;
      float *d = dst + (size_t)kk * SG_NR;
      for (int j = 0; j < SG_NR; j++) d[j] = j < nc ? src[j] : 0.0f;
    }
  }
}

/* Weight types (BCRT_WT_*): every panel is one contiguous stream of
 * weights for SG_NR output rows.  F32, BF16 and F16 panels hold k steps of
 * SG_NR weights; Q8_0 and Q4_0 panels hold ceil(k / SG_QK) blocks of SG_QK
 * steps, each SG_NR float scales (one per row) then the codes in 8 groups
 * of 4 steps, each row's 4 codes together (blockc_rt.h has the byte
 * layout): what gemm_q8.c's integer dot products read. */
enum { SG_QK = 32, SG_Q8_BLOCK = SG_NR * 4 + SG_QK * SG_NR, SG_Q4_BLOCK = SG_NR * 4 + SG_QK * SG_NR / 2 };
typedef char sg_q_blocks_are_lines[SG_Q8_BLOCK % 64 == 0 && SG_Q4_BLOCK % 64 == 0 ? 1 : -1];

/* F16 weights widen with one instruction per 16 (AVX-512F: vcvtph2ps zmm)
 * or 8 (F16C) halves; elsewhere sg_f16_to_f32's integer arithmetic. */
#if defined(__AVX512F__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SG_F16_AVX512 1
#elif defined(__F16C__) && defined(__AVX__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SG_F16_F16C 1
#endif

/* Bytes of one quantized block. */
GK_INLINE size_t sg_qblock(int wt) {
  return wt == BCRT_WT_Q8_0 ? (size_t)SG_Q8_BLOCK : (size_t)SG_Q4_BLOCK;
}

/* F32, BF16 and F16 panels: k steps of SG_NR weights of this many bytes
 * (0: a block type). */
GK_INLINE size_t sg_wbytes(int wt) {
  return wt == BCRT_WT_F32 ? 4u : wt == BCRT_WT_BF16 || wt == BCRT_WT_F16 ? 2u : 0u;
}

/* Bytes of one panel (all k steps, padding included). */
static size_t sg_panel_bytes(int wt, int k) {
  if (sg_wbytes(wt)) return (size_t)SG_NR * (size_t)k * sg_wbytes(wt);
  return ((size_t)k + SG_QK - 1) / SG_QK * sg_qblock(wt);
}

/* Panel p of a packed array, from k step k0 on (a multiple of SG_QK for the
 * block types). */
static const void *sg_panel_at(int wt, const void *packed, int k, int p, int k0) {
  size_t off = (size_t)p * sg_panel_bytes(wt, k);
  if (sg_wbytes(wt))
    off += (size_t)k0 * SG_NR * sg_wbytes(wt);
  else
    off += (size_t)(k0 / SG_QK) * sg_qblock(wt);
  return (const char *)packed + off;
}

/* One register tile: mr rows of x times kc steps of a panel w, then y (nc
 * valid columns) = acc + bias + beta*y, where beta == 0 means y is not read
 * (BLAS semantics) and bias may be NULL.  x is either rows in place (px ==
 * 0: x[r*ldx + kk]) or packed k-major (px == 1: x[kk*mr + r], one stream
 * of broadcasts).  w is of weight type wt, starting at a block boundary for
 * the block types (kc may end inside a block: the k tail).
 * far != 0: prefetch into L2 `far` bytes ahead (the next panel), else into
 * L1 SG_PF bytes ahead. */
/* Weight i of a panel: float, or BF16 (the high half of a float). */
GK_INLINE float sg_w(const void *w, const int bf, size_t i) {
  if (bf) {
    uint32_t u = (uint32_t)((const unsigned short *)w)[i] << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
  }
  return ((const float *)w)[i];
}

/* IEEE binary16 bits h as a float (exact), without branches so that the
 * loop over a panel's row vectorises: normal and Inf/NaN halves rebias
 * their exponent by a multiply by 2^-112 (exact), subnormals are m * 2^-24
 * from a float subtraction (exact), as in the FP16 library. */
GK_INLINE float sg_f16_to_f32(unsigned short h) {
  uint32_t w = (uint32_t)h << 16, sign = w & 0x80000000u, two_w = w + w, nb, db, r;
  uint32_t nbits = (two_w >> 4) + (0xE0u << 23), dbits = (two_w >> 17) | (126u << 23);
  float nf, df, out;
  memcpy(&nf, &nbits, sizeof nf);
  memcpy(&df, &dbits, sizeof df);
  nf *= 0x1p-112f;
  df -= 0.5f;
  memcpy(&nb, &nf, sizeof nb);
  memcpy(&db, &df, sizeof db);
  r = sign | (two_w < (1u << 27) ? db : nb);
  memcpy(&out, &r, sizeof out);
  return out;
}

/* Step kk of an F16 panel as floats: wv[j] = the weight of row j. */
GK_INLINE void sg_f16_row(const unsigned short *w, int kk, float wv[SG_NR]) {
  const unsigned short *hk = w + (size_t)kk * SG_NR;
#if defined(SG_F16_AVX512)
  for (int h = 0; h < SG_NR; h += 16)
    _mm512_storeu_ps(wv + h, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(hk + h))));
#elif defined(SG_F16_F16C)
  for (int h = 0; h < SG_NR; h += 8)
    _mm256_storeu_ps(wv + h, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(hk + h))));
#else
  for (int j = 0; j < SG_NR; j++) wv[j] = sg_f16_to_f32(hk[j]);
#endif
}

/* acc[r][:] += x[r, kk] * wv for the tile's rows. */
GK_INLINE void sg_step(const int mr, const int px, float acc[SG_MR][SG_NR], const float *x,
                       size_t ldx, int kk, const float *wv) {
  for (int r = 0; r < mr; r++) {
    float xv = px ? x[(size_t)kk * (size_t)mr + (size_t)r] : x[(size_t)r * ldx + (size_t)kk];
    for (int j = 0; j < SG_NR; j++) acc[r][j] = MADD(xv, wv[j], acc[r][j]);
  }
}

/* A tile's sums to y: y[r][j] = alpha acc[r][j] + bias[j] (+ beta y[r][j])
 * for mr rows of y (stride ldy) and nc columns, alpha and bias in one
 * multiply-add (alpha 1: acc + bias exactly so); beta == 0 does not read y,
 * bias may be NULL.  (gemm_q8.c's tiles and sgemm.c's too.) */
GK_INLINE void sg_store(int mr, float (*acc)[SG_NR], float alpha, const float *bias, float beta,
                        float *y, size_t ldy, int nc) {
  for (int r = 0; r < mr; r++) {
    float *yr = y + (size_t)r * ldy;
    if (bias)
      for (int j = 0; j < nc; j++) acc[r][j] = MADD(alpha, acc[r][j], bias[j]);
    else if (alpha != 1.0f)
      for (int j = 0; j < nc; j++) acc[r][j] *= alpha;
    if (beta == 0.0f)
      for (int j = 0; j < nc; j++) yr[j] = acc[r][j];
    else if (beta == 1.0f)
      for (int j = 0; j < nc; j++) yr[j] += acc[r][j];
    else
      for (int j = 0; j < nc; j++) yr[j] = MADD(beta, yr[j], acc[r][j]);
  }
}

GK_INLINE void sg_tile(const int mr, const int px, const int wt, int kc, const float *x,
                       size_t ldx, const void *w, const float *bias, float beta, float *y,
                       size_t ldy, int nc, size_t far) {
  float acc[SG_MR][SG_NR];
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < SG_NR; j++) acc[r][j] = 0.0f;
  if (wt == BCRT_WT_F32 || wt == BCRT_WT_BF16) {
    const int bf = wt == BCRT_WT_BF16;
    for (int kk = 0; kk < kc; kk++) {
      uintptr_t wk = (uintptr_t)w + (size_t)kk * SG_NR * (bf ? 2u : 4u);
      if (far) {
        GK_PREFETCH_L2(wk, far);
        if (!bf) GK_PREFETCH_L2(wk, far + 64);
      } else {
        GK_PREFETCH(wk, SG_PF);
        if (!bf) GK_PREFETCH(wk, SG_PF + 64);
      }
      for (int r = 0; r < mr; r++) {
        float xv = px ? x[(size_t)kk * (size_t)mr + (size_t)r] : x[(size_t)r * ldx + (size_t)kk];
        for (int j = 0; j < SG_NR; j++)
          acc[r][j] = MADD(xv, sg_w(w, bf, (size_t)kk * SG_NR + (size_t)j), acc[r][j]);
      }
    }
  } else if (wt == BCRT_WT_F16) { /* widened a step at a time, then the float FMAs */
    float wv[SG_NR];
    for (int kk = 0; kk < kc; kk++) {
      uintptr_t wk = (uintptr_t)w + (size_t)kk * SG_NR * 2u;
      if (far) GK_PREFETCH_L2(wk, far);
      else GK_PREFETCH(wk, SG_PF);
      sg_f16_row((const unsigned short *)w, kk, wv);
      sg_step(mr, px, acc, x, ldx, kk, wv);
    }
  }
  sg_store(mr, acc, 1.0f, bias, beta, y, ldy, nc);
}

/* sg_tile with constant row count, x layout and weight type, so each copy
 * unrolls into straight vector code. */
#define SG_TILE_CASE(mr, wt, px)                                                           \
  case (wt) * 2 + (px): sg_tile(mr, px, wt, kc, x, ldx, w, bias, beta, y, ldy, nc, far); break;
#define SG_TILE_N(mr)                                                                      \
  static void sg_tile_##mr(int px, int wt, int kc, const float *x, size_t ldx,             \
                           const void *w, const float *bias, float beta, float *y,         \
                           size_t ldy, int nc, size_t far) {                               \
    switch (wt * 2 + px) {                                                                 \
    SG_TILE_CASE(mr, BCRT_WT_F32, 0) SG_TILE_CASE(mr, BCRT_WT_F32, 1)                      \
    SG_TILE_CASE(mr, BCRT_WT_BF16, 0) SG_TILE_CASE(mr, BCRT_WT_BF16, 1)                    \
    SG_TILE_CASE(mr, BCRT_WT_F16, 0) SG_TILE_CASE(mr, BCRT_WT_F16, 1)                      \
    default: break;                                                                        \
    }                                                                                      \
  }
SG_TILE_N(1)
#if GK_MR >= 2
SG_TILE_N(2)
#endif
#if GK_MR >= 3
SG_TILE_N(3)
#endif
#if GK_MR >= 4
SG_TILE_N(4)
SG_TILE_N(5)
SG_TILE_N(6)
#endif
#if GK_MR >= 7
SG_TILE_N(7)
SG_TILE_N(8)
#endif

static void sg_tile_rows(int mr, int px, int wt, int kc, const float *x, size_t ldx,
                         const void *w, const float *bias, float beta, float *y, size_t ldy,
                         int nc, size_t far) {
  switch (mr) { /* 1 <= mr <= GK_MR */
#if GK_MR >= 2
  case 2: sg_tile_2(px, wt, kc, x, ldx, w, bias, beta, y, ldy, nc, far); break;
#endif
#if GK_MR >= 3
  case 3: sg_tile_3(px, wt, kc, x, ldx, w, bias, beta, y, ldy, nc, far); break;
#endif
#if GK_MR >= 4
  case 4: sg_tile_4(px, wt, kc, x, ldx, w, bias, beta, y, ldy, nc, far); break;
  case 5: sg_tile_5(px, wt, kc, x, ldx, w, bias, beta, y, ldy, nc, far); break;
  case 6: sg_tile_6(px, wt, kc, x, ldx, w, bias, beta, y, ldy, nc, far); break;
#endif
#if GK_MR >= 7
  case 7: sg_tile_7(px, wt, kc, x, ldx, w, bias, beta, y, ldy, nc, far); break;
  case 8: sg_tile_8(px, wt, kc, x, ldx, w, bias, beta, y, ldy, nc, far); break;
#endif
  default: sg_tile_1(px, wt, kc, x, ldx, w, bias, beta, y, ldy, nc, far); break;
  }
}

/* One or two rows of x against SG_WIDE consecutive panels at once (F32,
 * BF16, F16): each k step loads a weight vector from each panel, so the
 * weights come in SG_WIDE streams, not one.  A core gets more bandwidth
 * from several streams than from one (measured on the 2-vCPU Xeon: 10 GB/s
 * one sequential read, 14.7 two, 17.1 four) and the accumulators are
 * SG_WIDE times as many chains.  Every column's sum is the one sg_tile
 * forms, in the same order: the same bits. */
enum { SG_WIDE = 4 };
GK_INLINE void sg_wide(const int mr, const int wt, int k, const float *x, size_t ldx,
                       const void *w0, size_t pstride, const float *bias, float beta, float *y,
                       size_t ldy, int n) {
  float acc[SG_WIDE][2][SG_NR];
  const size_t wb = sg_wbytes(wt);
  for (int c = 0; c < SG_WIDE; c++)
    for (int r = 0; r < mr; r++)
      for (int j = 0; j < SG_NR; j++) acc[c][r][j] = 0.0f;
  for (int kk = 0; kk < k; kk++) {
    for (int c = 0; c < SG_WIDE; c++) {
      const void *w = (const char *)w0 + (size_t)c * pstride;
      uintptr_t wk = (uintptr_t)w + (size_t)kk * SG_NR * wb;
      GK_PREFETCH(wk, SG_PF);
      if (wb == 4) GK_PREFETCH(wk, SG_PF + 64);
      if (wt == BCRT_WT_F16) {
        float wv[SG_NR];
        sg_f16_row((const unsigned short *)w, kk, wv);
        for (int r = 0; r < mr; r++) {
          float xv = x[(size_t)r * ldx + (size_t)kk];
          for (int j = 0; j < SG_NR; j++) acc[c][r][j] = MADD(xv, wv[j], acc[c][r][j]);
        }
        continue;
      }
      for (int r = 0; r < mr; r++) {
        float xv = x[(size_t)r * ldx + (size_t)kk];
        for (int j = 0; j < SG_NR; j++)
          acc[c][r][j] = MADD(xv, sg_w(w, wt == BCRT_WT_BF16, (size_t)kk * SG_NR + (size_t)j), acc[c][r][j]);
      }
    }
  }
  for (int c = 0; c < SG_WIDE; c++) {
    int j0 = c * SG_NR, nc = n - j0 < SG_NR ? n - j0 : SG_NR;
    if (nc > 0) sg_store(mr, acc[c], 1.0f, bias ? bias + j0 : NULL, beta, y + j0, ldy, nc);
  }
}

#define SG_WIDE_N(mr)                                                                      \
  static void sg_wide_##mr(int wt, int k, const float *x, size_t ldx, const void *w0,      \
                           size_t pstride, const float *bias, float beta, float *y,        \
                           size_t ldy, int n) {                                            \
    if (wt == BCRT_WT_F32) sg_wide(mr, BCRT_WT_F32, k, x, ldx, w0, pstride, bias, beta, y, ldy, n); \
    else if (wt == BCRT_WT_BF16) sg_wide(mr, BCRT_WT_BF16, k, x, ldx, w0, pstride, bias, beta, y, ldy, n); \
    else sg_wide(mr, BCRT_WT_F16, k, x, ldx, w0, pstride, bias, beta, y, ldy, n);         \
  }
SG_WIDE_N(1)
SG_WIDE_N(2)

/* m <= SG_MR: one tile per panel over all of k, x read in place; every
 * weight is touched once, the kernel runs at the memory stream (one or
 * two rows: SG_WIDE panels at a time, several streams). */
static void sg_panels_few(int wt, int p0, int p1, int m, int n, int k, const float *x,
                          size_t ldx, const void *packed, const float *bias, float beta,
                          float *y, size_t ldy) {
  int p = p0;
  if (m <= 2 && sg_wbytes(wt))
    for (; p + SG_WIDE <= p1; p += SG_WIDE) {
      int j0 = p * SG_NR;
      (m == 1 ? sg_wide_1 : sg_wide_2)(wt, k, x, ldx, sg_panel_at(wt, packed, k, p, 0),
                                       sg_panel_bytes(wt, k), bias ? bias + j0 : NULL, beta,
                                       y + j0, ldy, n - j0);
    }
  for (; p < p1; p++) {
    int j0 = p * SG_NR, nc = n - j0 < SG_NR ? n - j0 : SG_NR;
    sg_tile_rows(m, 0, wt, k, x, ldx, sg_panel_at(wt, packed, k, p, 0),
                 bias ? bias + j0 : NULL, beta, y + j0, ldy, nc, 0);
  }
}

/* m > SG_MR: rows in groups of up to mg_max; per group, k in chunks of
 * kc_max: the chunk of x is packed (k-major per row block) into SG_XP
 * floats (32 KiB) on the stack, then every panel's chunk (<= 32 KiB,
 * contiguous) is read once from memory and reused from L1 by all the
 * group's row blocks, while the next panel's chunk is prefetched into L2.
 * Up to SG_MG rows: one group, chunks of SG_KC.  Up to BCRT_SMALL_M rows
 * (bcrt_linear's range): still one group, so every weight is read once,
 * in chunks of SG_XP / BCRT_SMALL_M = 128 (no allocation, unlike the
 * blocked path; see docs/gemm-kernels.md for the measurement).  More rows:
 * groups of BCRT_SMALL_M, each computed exactly as a call with its rows
 * alone would be (the chunk size follows the group's size).  Chunks are
 * multiples of SG_QK steps, so for the block types they start at a block.
 * Row blocks are balanced (m = 9 is 5 + 4, not 8 + 1). */
enum { SG_MG = 32, SG_XP = SG_MG * SG_KC };
typedef char sg_chunks_are_blocks[SG_KC % SG_QK == 0 && SG_XP / BCRT_SMALL_M % SG_QK == 0 ? 1 : -1];
typedef char sg_xp_fits_small_m[SG_XP % BCRT_SMALL_M == 0 && SG_XP / BCRT_SMALL_M >= 64 ? 1 : -1];

static void sg_pack_x(int mg, int rb, int kc, const float *x, size_t ldx, float *xp) {
  for (int i = 0; i < mg; i += rb) {
    int mr = mg - i < rb ? mg - i : rb;
    float *dst = xp + (size_t)i * (size_t)kc;
    for (int r = 0; r < mr; r++) {
      const float *src = x + (size_t)(i + r) * ldx;
      for (int kk = 0; kk < kc; kk++) dst[(size_t)kk * (size_t)mr + (size_t)r] = src[kk];
    }
  }
}

static void sg_panels_many(int wt, int p0, int p1, int m, int n, int k, const float *x,
                           size_t ldx, const void *packed, const float *bias, float beta,
                           float *y, size_t ldy) {
  float mem[SG_XP + 16];
  float *xp = (float *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
  size_t far = sg_panel_bytes(wt, k); /* the next panel's chunk */
  int mg_max = m <= SG_MG ? SG_MG : BCRT_SMALL_M;
  for (int i0 = 0; i0 < m; i0 += mg_max) {
    int mg = m - i0 < mg_max ? m - i0 : mg_max;
    int nb = (mg + SG_MR - 1) / SG_MR, rb = (mg + nb - 1) / nb;
    int kc_max = SG_XP / (mg <= SG_MG ? SG_MG : BCRT_SMALL_M);
    int k0 = 0;
    do {
      int kc = k - k0 < kc_max ? k - k0 : kc_max;
      sg_pack_x(mg, rb, kc, x + (size_t)i0 * ldx + (size_t)k0, ldx, xp);
      for (int p = p0; p < p1; p++) {
        int j0 = p * SG_NR, nc = n - j0 < SG_NR ? n - j0 : SG_NR;
        const void *w = sg_panel_at(wt, packed, k, p, k0);
        for (int i = 0; i < mg; i += rb)
          sg_tile_rows(mg - i < rb ? mg - i : rb, 1, wt, kc, xp + (size_t)i * (size_t)kc, 0, w,
                       k0 ? NULL : bias ? bias + j0 : NULL, k0 ? 1.0f : beta,
                       y + (size_t)(i0 + i) * ldy + (size_t)j0, ldy, nc, far);
      }
      k0 += kc;
    } while (k0 < k);
  }
}

static int sg_blocked(int bf, int p0, int p1, int m, int n, int k, const float *x, size_t ldx,
                      const void *packed, const float *bias, float beta, float *y,
                      size_t ldy);

/* Part `part` of `nparts` (a contiguous range of panels) of one call:
 * m <= 8 one pass, m <= BCRT_SMALL_M one row group over packed chunks of
 * x, more rows the blocked GEMM path (which allocates; F32 and BF16 only). */
static void sg_part(int wt, int part, int nparts, int m, int n, int k, const float *x, int ldx,
                    const void *packed, const float *bias, float beta, float *y, int ldy) {
  if (m <= 0 || n <= 0 || nparts < 1 || part < 0 || part >= nparts) return;
  long np = ((long)n + SG_NR - 1) / SG_NR;
  int p0 = (int)(np * part / nparts), p1 = (int)(np * (part + 1) / nparts);
  if (k < 0) k = 0;
  if (m <= SG_MR)
    sg_panels_few(wt, p0, p1, m, n, k, x, (size_t)ldx, packed, bias, beta, y, (size_t)ldy);
  else if (m <= BCRT_SMALL_M || k == 0 || (wt != BCRT_WT_F32 && wt != BCRT_WT_BF16) ||
           !sg_blocked(wt, p0, p1, m, n, k, x, (size_t)ldx, packed, bias, beta, y, (size_t)ldy))
    sg_panels_many(wt, p0, p1, m, n, k, x, (size_t)ldx, packed, bias, beta, y, (size_t)ldy);
}

void bcrt_gemm_small_part(int part, int nparts, int m, int n, int k, const float *x, int ldx,
                          const float *packed, const float *bias, float beta, float *y,
                          int ldy) {
  sg_part(0, part, nparts, m, n, k, x, ldx, packed, bias, beta, y, ldy);
}

void bcrt_gemm_small(int m, int n, int k, const float *x, int ldx, const float *packed,
                     const float *bias, float beta, float *y, int ldy) {
  sg_part(0, 0, 1, m, n, k, x, ldx, packed, bias, beta, y, ldy);
}

/* Threads: parts 1..nt-1 on fresh pthreads, part 0 on the caller's; a part
 * whose thread cannot start runs on the caller's too.  Thread start costs
 * ~10-30 us, so this pays for itself on MB-sized weights only. */
typedef struct {
  int wt, part, nparts, m, n, k, ldx, ldy;
  const float *x, *bias;
  const void *packed;
  float beta;
  float *y;
} sg_job;

static void sg_job_run(const sg_job *j) {
  sg_part(j->wt, j->part, j->nparts, j->m, j->n, j->k, j->x, j->ldx, j->packed, j->bias, j->beta,
          j->y, j->ldy);
}

#ifdef GK_THREADS
static void *sg_job_thread(void *arg) {
  sg_job_run((const sg_job *)arg);
  return NULL;
}
#endif

enum { SG_MAX_THREADS = 64 };

static void sg_mt(int wt, int nthreads, int m, int n, int k, const float *x, int ldx,
                  const void *packed, const float *bias, float beta, float *y, int ldy) {
  if (m <= 0 || n <= 0) return;
  int np = (int)(((long)n + SG_NR - 1) / SG_NR), nt = nthreads < 1 ? 1 : nthreads;
  nt = nt > SG_MAX_THREADS ? SG_MAX_THREADS : nt;
  nt = nt > np ? np : nt;
  sg_job job[SG_MAX_THREADS];
  for (int t = 0; t < nt; t++)
    job[t] = (sg_job){.wt = wt, .part = t, .nparts = nt, .m = m, .n = n, .k = k, .ldx = ldx, .ldy = ldy,
                      .x = x, .packed = packed, .bias = bias, .beta = beta, .y = y};
#ifdef GK_THREADS
  pthread_t tid[SG_MAX_THREADS];
  int started[SG_MAX_THREADS] = {0};
  for (int t = 1; t < nt; t++) started[t] = pthread_create(&tid[t], NULL, sg_job_thread, &job[t]) == 0;
  sg_job_run(&job[0]);
  for (int t = 1; t < nt; t++) {
    if (started[t]) pthread_join(tid[t], NULL);
    else sg_job_run(&job[t]);
  }
#else
  for (int t = 0; t < nt; t++) sg_job_run(&job[t]);
#endif
}

void bcrt_gemm_small_mt(int nthreads, int m, int n, int k, const float *x, int ldx,
                        const float *packed, const float *bias, float beta, float *y, int ldy) {
  sg_mt(0, nthreads, m, n, k, x, ldx, packed, bias, beta, y, ldy);
}

void bcrt_linear(int m, int n, int k, const float *x, int ldx, const float *w, int ldw,
                 int trans, const float *packed, long poff, const float *bias, float beta,
                 float *y, int ldy) {
  bcrt_linear_ws(NULL, m, n, k, x, ldx, w, ldw, trans, packed, poff, bias, beta, y, ldy);
}

/* Without OpenBLAS, the product runs bcrt_sgemm_cblas on ws; with it, ws is
 * not used. */
void bcrt_linear_ws(void *ws, int m, int n, int k, const float *x, int ldx, const float *w,
                    int ldw, int trans, const float *packed, long poff, const float *bias,
                    float beta, float *y, int ldy) {
  if (m <= 0 || n <= 0) return;
  if (packed && m <= BCRT_SMALL_M) {
    sg_part(0, 0, 1, m, n, k, x, ldx, packed + poff, bias, beta, y, ldy);
    return;
  }
  if (bias && beta == 0.0f) {  /* rows <- bias, then the product accumulates */
    bcrt_fill_cols(m, n, ldy, bias, y);
    bias = NULL;
    beta = 1.0f;
  }
#ifdef BLOCKC_NO_BLAS
  bcrt_sgemm_cblas(ws, BCRT_ROW_MAJOR, BCRT_NO_TRANS, trans, m, n, k, 1.0f, x, ldx, w, ldw, beta,
                   y, ldy);
#else
  (void)ws;
  cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, trans, m, n, k, 1.0f, x, ldx, w, ldw, beta, y, ldy);
#endif
  if (bias)
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) y[(size_t)i * (size_t)ldy + (size_t)j] += bias[j];
}

float bcrt_stream_sum(long n, const float *x, int prefetch) {
  float acc[64] = {0};
  long i = 0;
  for (; i + 64 <= n; i += 64) {
    if (prefetch)
      for (int q = 0; q < 4; q++) GK_PREFETCH(x + i, 2048u + 64u * (unsigned)q);
    for (int j = 0; j < 64; j++) acc[j] += x[i + j];
  }
  for (int j = 0; i + j < n; j++) acc[j] += x[i + j];
  float s = 0.0f;
  for (int j = 0; j < 64; j++) s += acc[j];
  return s;
}

/* Few-row attention products.  nt: per key row j (read once, from memory),
 * a 16-lane dot product with each of the m query rows (in L1).  nn: per
 * value row kk (read once), y_i += x[i, kk] * row into m accumulator rows
 * on the stack (in L1), scaled and stored at the end.  The rows are one
 * head's slice of a K|V cache row (256 B every 2-8 KiB): every line of the
 * row RW_AHEAD rows on is prefetched, as the hardware prefetcher does not
 * follow such strides (measured: decode at context 512 spent 3 ms of CPU
 * here with only the first line prefetched). */
enum { RW_LANES = 16, RW_ACC = 4096, RW_AHEAD = 8, RW_AHEAD16 = 32 };

/* Every cache line of floats [p, p + n). */
static void rw_prefetch(const float *p, int n) {
  for (long off = 0; off < (long)n * 4; off += 64) GK_PREFETCH(p, (size_t)off);
}

static float rw_dot(int k, const float *a, const float *b) {
  float acc[RW_LANES] = {0};
  int kk = 0;
  for (; kk + RW_LANES <= k; kk += RW_LANES)
    for (int l = 0; l < RW_LANES; l++) acc[l] = MADD(a[kk + l], b[kk + l], acc[l]);
  float s = 0.0f;
  for (; kk < k; kk++) s = MADD(a[kk], b[kk], s);
  for (int l = 0; l < RW_LANES; l++) s += acc[l];
  return s;
}

/* With AVX-512 (AVX2 + FMA) and k a multiple of 16 (8), the usual head
 * widths: one vector accumulator per dot product, reduced as a tree.  gcc
 * leaves rw_dot's 16 lanes scalar (16 scalar FMA chains and 16 adds per
 * dot): measured, decode of 16 rows at context 512 (llama_lm) spent ~10 ms
 * a step in it, this path is several times faster.  A dot differs from
 * rw_dot's by the order of the additions (float rounding). */
#if defined(__AVX512F__) && (defined(__GNUC__) || defined(__clang__))
#define RW_VEC 16
GK_INLINE float rw_vdot(int k, const float *a, const float *b) {
  __m512 acc = _mm512_setzero_ps();
  for (int kk = 0; kk < k; kk += 16)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + kk), _mm512_loadu_ps(b + kk), acc);
  return _mm512_reduce_add_ps(acc);
}
/* The lane sums of 16 vectors as one: lane 4c + l of the result is the sum
 * of v[4l + c]'s 16 lanes (so slot s = 4(L % 4) + L / 4 holds output L),
 * by four rounds of "halve and add two vectors at once": 15 additions and
 * 30 shuffles for 16 sums, where _mm512_reduce_add_ps takes 4 of each per
 * sum on a chain of dependent ones.  The pairs are added in a fixed tree. */
GK_INLINE __m512 rw_hsum16(const __m512 v[16]) {
  __m512 w[8], x[4], y[2];
  for (int p = 0; p < 8; p++) /* 128-bit chunks: [a0+a2, a1+a3, b0+b2, b1+b3] */
    w[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0x44),
                         _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0xEE));
  for (int q = 0; q < 4; q++) /* chunk c: 4 partial sums of v[4q + c] */
    x[q] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * q], w[2 * q + 1], 0x88),
                         _mm512_shuffle_f32x4(w[2 * q], w[2 * q + 1], 0xDD));
  for (int r = 0; r < 2; r++)
    y[r] = _mm512_add_ps(_mm512_unpacklo_ps(x[2 * r], x[2 * r + 1]),
                         _mm512_unpackhi_ps(x[2 * r], x[2 * r + 1]));
  __m512d a = _mm512_castps_pd(y[0]), b = _mm512_castps_pd(y[1]);
  return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                       _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
}

/* Keys j..j+15 against x's m rows: per row, 16 vector dot products (one
 * accumulator per key, rw_vdot's lanes) reduced together by rw_hsum16 and
 * stored as one vector of y's row. */
GK_INLINE void rw_nt16(int m, int k, float alpha, const float *x, int ldx, const float *b,
                       int ldb, float *y, int ldy, int j) {
  const float *bs[16];
  for (int s = 0; s < 16; s++) bs[s] = b + (size_t)(j + 4 * (s % 4) + s / 4) * (size_t)ldb;
  for (int i = 0; i < m; i++) {
    const float *xi = x + (size_t)i * (size_t)ldx;
    __m512 v[16]; /* 16 independent chains, in registers: kk outside */
    for (int s = 0; s < 16; s++) v[s] = _mm512_setzero_ps();
    for (int kk = 0; kk < k; kk += 16) {
      __m512 xv = _mm512_loadu_ps(xi + kk);
      for (int s = 0; s < 16; s++) v[s] = _mm512_fmadd_ps(xv, _mm512_loadu_ps(bs[s] + kk), v[s]);
    }
    _mm512_storeu_ps(y + (size_t)i * (size_t)ldy + (size_t)j,
                     _mm512_mul_ps(_mm512_set1_ps(alpha), rw_hsum16(v)));
  }
}
/* Keys j..j+7 against rows i and i+1 of x: rw_nt16's 16 chains as 2 rows x
 * 8 keys, so each key's vector is loaded once for both rows (8 + 2 loads per
 * 16 FMAs, not 16 + 1); lanes 0..7 of the reduced vector are row i's
 * scores, 8..15 row i+1's.  rw_hsum16 adds every slot's lanes in the same
 * order, so each score has rw_nt16's bits. */
GK_INLINE void rw_nt8x2(int k, float alpha, const float *x, int ldx, const float *b, int ldb,
                        float *y, int ldy, int i, int j) {
  const float *bs[8], *x0 = x + (size_t)i * (size_t)ldx, *x1 = x0 + ldx;
  for (int t = 0; t < 8; t++) bs[t] = b + (size_t)(j + t) * (size_t)ldb;
  __m512 v[16]; /* output lane L = 4 (s % 4) + s / 4: row L / 8, key L % 8 */
  for (int s = 0; s < 16; s++) v[s] = _mm512_setzero_ps();
  for (int kk = 0; kk < k; kk += 16) {
    __m512 a0 = _mm512_loadu_ps(x0 + kk), a1 = _mm512_loadu_ps(x1 + kk);
    for (int t = 0; t < 8; t++) {
      __m512 kv = _mm512_loadu_ps(bs[t] + kk);
      v[4 * (t % 4) + t / 4] = _mm512_fmadd_ps(a0, kv, v[4 * (t % 4) + t / 4]);
      v[4 * (t % 4) + (t + 8) / 4] = _mm512_fmadd_ps(a1, kv, v[4 * (t % 4) + (t + 8) / 4]);
    }
  }
  __m512 r = _mm512_mul_ps(_mm512_set1_ps(alpha), rw_hsum16(v));
  _mm256_storeu_ps(y + (size_t)i * (size_t)ldy + (size_t)j, _mm512_castps512_ps256(r));
  _mm256_storeu_ps(y + (size_t)(i + 1) * (size_t)ldy + (size_t)j,
                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(r), 1)));
}
#elif defined(__AVX2__) && defined(__FMA__) && (defined(__GNUC__) || defined(__clang__))
#define RW_VEC 8
GK_INLINE float rw_vdot(int k, const float *a, const float *b) {
  __m256 acc = _mm256_setzero_ps();
  for (int kk = 0; kk < k; kk += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + kk), _mm256_loadu_ps(b + kk), acc);
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}
#endif

void bcrt_gemm_rows_nt(int m, int n, int k, float alpha, const float *x, int ldx,
                       const float *b, int ldb, float *y, int ldy) {
  if (m <= 0 || n <= 0) return;
  if (m > BCRT_ROWS_M) {
    cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, BCRT_TRANS, m, n, k, alpha, x, ldx, b, ldb, 0.0f,
                y, ldy);
    return;
  }
#ifdef RW_VEC
  if (k > 0 && k % RW_VEC == 0) {
    int j = 0;
#if RW_VEC == 16
    /* whole blocks of 16 keys, the lines of the block RW_AHEAD16 keys on
     * prefetched first; the rest one key at a time below */
    for (; j + 16 <= n; j += 16) {
      for (int t = 0; t < 16 && j + RW_AHEAD16 + t < n; t++)
        rw_prefetch(b + (size_t)(j + RW_AHEAD16 + t) * (size_t)ldb, k);
      if (m % 2) rw_nt16(1, k, alpha, x + (size_t)(m - 1) * (size_t)ldx, ldx, b, ldb,
                         y + (size_t)(m - 1) * (size_t)ldy, ldy, j);
      for (int i = 0; i + 1 < m; i += 2) {
        rw_nt8x2(k, alpha, x, ldx, b, ldb, y, ldy, i, j);
        rw_nt8x2(k, alpha, x, ldx, b, ldb, y, ldy, i, j + 8);
      }
    }
#endif
    for (; j < n; j++) {
      const float *bj = b + (size_t)j * (size_t)ldb;
      if (j + RW_AHEAD < n) rw_prefetch(bj + (size_t)RW_AHEAD * (size_t)ldb, k);
      for (int i = 0; i < m; i++)
        y[(size_t)i * (size_t)ldy + (size_t)j] = alpha * rw_vdot(k, x + (size_t)i * (size_t)ldx, bj);
    }
    return;
  }
#endif
  for (int j = 0; j < n; j++) {
    const float *bj = b + (size_t)j * (size_t)ldb;
    if (j + RW_AHEAD < n) rw_prefetch(bj + (size_t)RW_AHEAD * (size_t)ldb, k);
    for (int i = 0; i < m; i++)
      y[(size_t)i * (size_t)ldy + (size_t)j] = alpha * rw_dot(k, x + (size_t)i * (size_t)ldx, bj);
  }
}

#if defined(RW_VEC) && RW_VEC == 16
/* Columns j0 .. j0 + 16 nb of y = alpha x b for m rows: m x nb vector
 * accumulators in registers (constant m and nb after inlining: every
 * index is a constant), one pass over the value rows, each row's nb blocks
 * loaded once and every line of the row RW_AHEAD rows on prefetched.  Each
 * element is bcrt_gemm_rows_nn's scalar loop: fused multiply-adds over kk
 * in order from zero, then times alpha. */
GK_INLINE void rw_nn_blk(const int m, const int nb, int k, float alpha, const float *x, int ldx,
                         const float *b, int ldb, float *y, int ldy, int j0) {
  __m512 va[16];
  for (int t = 0; t < m * nb; t++) va[t] = _mm512_setzero_ps();
  for (int kk = 0; kk < k; kk++) {
    const float *bk = b + (size_t)kk * (size_t)ldb + (size_t)j0;
    if (kk + RW_AHEAD < k)
      for (int c = 0; c < nb; c++) GK_PREFETCH(bk + (size_t)RW_AHEAD * (size_t)ldb, (size_t)c * 64u);
    __m512 bv[4];
    for (int c = 0; c < nb; c++) bv[c] = _mm512_loadu_ps(bk + 16 * c);
    for (int i = 0; i < m; i++) {
      __m512 xv = _mm512_set1_ps(x[(size_t)i * (size_t)ldx + (size_t)kk]);
      for (int c = 0; c < nb; c++) va[i * nb + c] = _mm512_fmadd_ps(xv, bv[c], va[i * nb + c]);
    }
  }
  for (int i = 0; i < m; i++)
    for (int c = 0; c < nb; c++)
      _mm512_storeu_ps(y + (size_t)i * (size_t)ldy + (size_t)j0 + 16u * (unsigned)c,
                       _mm512_mul_ps(_mm512_set1_ps(alpha), va[i * nb + c]));
}

/* rw_nn_blk with constant m (1 .. BCRT_ROWS_M) and nb (1, 2 or 4). */
static void rw_nn_pass(int m, int nb, int k, float alpha, const float *x, int ldx, const float *b,
                       int ldb, float *y, int ldy, int j0) {
#define RW_NN_CASE(mm, bb)                                                                         \
  case (mm) * 8 + (bb): rw_nn_blk(mm, bb, k, alpha, x, ldx, b, ldb, y, ldy, j0); break;
  switch (m * 8 + nb) {
    RW_NN_CASE(1, 1) RW_NN_CASE(2, 1) RW_NN_CASE(3, 1) RW_NN_CASE(4, 1)
    RW_NN_CASE(5, 1) RW_NN_CASE(6, 1) RW_NN_CASE(7, 1) RW_NN_CASE(8, 1)
    RW_NN_CASE(1, 4) RW_NN_CASE(2, 4) RW_NN_CASE(3, 4) RW_NN_CASE(4, 4)
    RW_NN_CASE(5, 2) RW_NN_CASE(6, 2) RW_NN_CASE(7, 2) RW_NN_CASE(8, 2)
  default: break;
  }
#undef RW_NN_CASE
}
#endif

void bcrt_gemm_rows_nn(int m, int n, int k, float alpha, const float *x, int ldx,
                       const float *b, int ldb, float *y, int ldy) {
  if (m <= 0 || n <= 0) return;
  if (m > BCRT_ROWS_M || (long)m * n > RW_ACC) {
    cblas_sgemm(BCRT_ROW_MAJOR, BCRT_NO_TRANS, BCRT_NO_TRANS, m, n, k, alpha, x, ldx, b, ldb, 0.0f,
                y, ldy);
    return;
  }
#ifdef RW_VEC
  /* n a multiple of the vector width: per block of RW_VEC columns (with
   * AVX-512, of up to 4 such blocks: rw_nn_pass), m vector accumulators in
   * registers over every kk (each value row's block read once); the same
   * fused multiply-adds in the same order as below. */
  if (n % RW_VEC == 0) {
#if RW_VEC == 16
    int j0 = 0, nb = m <= 4 ? 4 : 2; /* blocks of 16 columns per pass: m * nb <= 16 accumulators */
    for (; j0 + nb * 16 <= n; j0 += nb * 16) rw_nn_pass(m, nb, k, alpha, x, ldx, b, ldb, y, ldy, j0);
    for (; j0 < n; j0 += 16) rw_nn_pass(m, 1, k, alpha, x, ldx, b, ldb, y, ldy, j0);
    return;
#else
    for (int j0 = 0; j0 < n; j0 += RW_VEC) {
      __m256 va[BCRT_ROWS_M];
      for (int i = 0; i < m; i++) va[i] = _mm256_setzero_ps();
      for (int kk = 0; kk < k; kk++) {
        const float *bk = b + (size_t)kk * (size_t)ldb;
        if (j0 == 0 && kk + RW_AHEAD < k) rw_prefetch(bk + (size_t)RW_AHEAD * (size_t)ldb, n);
        __m256 bv = _mm256_loadu_ps(bk + j0);
        for (int i = 0; i < m; i++)
          va[i] = _mm256_fmadd_ps(_mm256_set1_ps(x[(size_t)i * (size_t)ldx + (size_t)kk]), bv, va[i]);
      }
      for (int i = 0; i < m; i++)
        _mm256_storeu_ps(y + (size_t)i * (size_t)ldy + (size_t)j0,
                         _mm256_mul_ps(_mm256_set1_ps(alpha), va[i]));
    }
    return;
#endif
  }
#endif
  float acc[RW_ACC];
  for (long t = 0; t < (long)m * n; t++) acc[t] = 0.0f;
  for (int kk = 0; kk < k; kk++) {
    const float *bk = b + (size_t)kk * (size_t)ldb;
    if (kk + RW_AHEAD < k) rw_prefetch(bk + (size_t)RW_AHEAD * (size_t)ldb, n);
    for (int i = 0; i < m; i++) {
      float a = x[(size_t)i * (size_t)ldx + (size_t)kk], *ai = acc + (size_t)i * (size_t)n;
      for (int j = 0; j < n; j++) ai[j] = MADD(a, bk[j], ai[j]);
    }
  }
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) y[(size_t)i * (size_t)ldy + (size_t)j] = alpha * acc[(size_t)i * (size_t)n + (size_t)j];
}

/* BF16: round to nearest even; NaN stays a (quiet) NaN. */
static unsigned short sg_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}

void bcrt_pack_nt_bf16(int n, int k, const float *w, unsigned short *packed) {
  if (n <= 0 || k <= 0) return;
  int np = (int)(((long)n + SG_NR - 1) / SG_NR);
  for (int p = 0; p < np; p++) {
    unsigned short *dst = packed + (size_t)p * SG_NR * (size_t)k;
    for (int j = 0; j < SG_NR; j++) {
      int row = p * SG_NR + j;
      const float *src = w + (size_t)row * (size_t)k;
      for (int kk = 0; kk < k; kk++)
        dst[(size_t)kk * SG_NR + (size_t)j] = row < n ? sg_to_bf16(src[kk]) : 0;
    }
  }
}

void bcrt_gemm_small_bf16(int nthreads, int m, int n, int k, const float *x, int ldx,
                          const unsigned short *packed, const float *bias, float beta, float *y,
                          int ldy) {
  sg_mt(1, nthreads, m, n, k, x, ldx, packed, bias, beta, y, ldy);
}

/* --- quantized weights: Q8_0 and Q4_0 panels --- */
/* Quantization is ggml's reference (quantize_row_q8_0_ref,
 * quantize_row_q4_0_ref), written anew: per row and block of SG_QK
 * weights, a scale d rounded to FP16 and stored as the float it rounds to,
 * and codes q with weight d * q (Q8_0) or d * (q - 8) (Q4_0), so that the
 * weights are bitwise those ggml dequantizes from its own blocks.  The k
 * tail of the last block is zero weights (code 0, nibble 8).  Two
 * departures, both where ggml's weights are NaN or zero anyway: a block
 * with a non-finite weight gets scale NaN and zero codes (ggml's
 * float-to-int conversion is undefined there); a block whose FP16 scale is
 * +-0 (|d| <= 2^-25) is stored as an all-zero block is (ggml keeps codes
 * whose weights are +-0: the same values, perhaps another sign of zero), so
 * that repacking the unpacked weights gives the same bytes, and 1/d never
 * overflows into a conversion. */

/* f as IEEE binary16 bits: to nearest even, |f| >= 65520 (past 65504 by
 * half an ulp or more) to +-Inf, subnormal halves exact, NaN a quiet NaN
 * (as GGML_FP32_TO_FP16, and PyTorch's .half()). */
static unsigned short sg_to_f16(float f) {
  uint32_t u, h;
  memcpy(&u, &f, sizeof u);
  uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) h = 0x7e00u;                   /* NaN */
  else if (a >= 0x477ff000u) h = 0x7c00u;             /* >= 65520: Inf */
  else if (a >= 0x38800000u)                          /* normal: >= 2^-14 */
    h = (a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u) >> 13;
  else if (a <= 0x33000000u) h = 0;                   /* <= 2^-25: zero */
  else {                                              /* subnormal, units of 2^-24 */
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, sh = 126u - e;
    uint32_t rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1u);
    h = m >> sh;
    if (rem > half || (rem == half && (h & 1u))) h++;
  }
  return (unsigned short)(sign | h);
}

/* f rounded to FP16 (to nearest even, overflow to +-Inf, as
 * GGML_FP32_TO_FP16), as a float. */
static float sg_round_fp16(float f) { return sg_f16_to_f32(sg_to_f16(f)); }

unsigned short bcrt_f32_to_f16(float f) { return sg_to_f16(f); }
float bcrt_f16_to_f32(unsigned short h) { return sg_f16_to_f32(h); }

/* |f|, f's bits (no <math.h> on freestanding targets). */
static float sg_fabs(float f) { return f < 0.0f ? -f : f; }
static int sg_finite(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (u & 0x7f800000u) != 0x7f800000u;
}

/* roundf (halves away from zero) for |t| < 2^23: t - trunc(t) is exact. */
static int sg_round_int(float t) {
  int i = (int)t;
  float frac = t - (float)i;
  return i + (frac >= 0.5f) - (frac <= -0.5f);
}

/* One row's block: v[0..SG_QK) (zero past the k tail) to its scale and
 * codes, code[kk] in 0..255 (Q8_0: the int8 as a byte; Q4_0: the nibble). */
static float sg_quant_block(int wt, const float *v, int kb, unsigned char *code) {
  int finite = 1;
  for (int i = 0; i < kb; i++) finite &= sg_finite(v[i]);
  if (!finite) {
    uint32_t qnan = 0x7fc00000u;
    float nan;
    memcpy(&nan, &qnan, sizeof nan);
    for (int i = 0; i < SG_QK; i++) code[i] = wt == BCRT_WT_Q8_0 ? 0 : 8;
    return nan;
  }
  float d;
  if (wt == BCRT_WT_Q8_0) {
    float amax = 0.0f;
    for (int i = 0; i < kb; i++) amax = sg_fabs(v[i]) > amax ? sg_fabs(v[i]) : amax;
    d = amax / 127.0f;
  } else {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < kb; i++)
      if (amax < sg_fabs(v[i])) amax = sg_fabs(v[i]), max = v[i];
    d = max / -8.0f;
  }
  float id = d != 0.0f ? 1.0f / d : 0.0f, ds = sg_round_fp16(d);
  if (ds == 0.0f) { /* what an all-zero block gives: Q8_0 +0, Q4_0 0 / -8 = -0 */
    for (int i = 0; i < SG_QK; i++) code[i] = wt == BCRT_WT_Q8_0 ? 0 : 8;
    return wt == BCRT_WT_Q8_0 ? 0.0f : -0.0f;
  }
  /* ds != 0: |d| >= 2^-25, id is finite, and the guards below never fail */
  for (int i = 0; i < SG_QK; i++) {
    float t = i < kb ? v[i] * id : 0.0f;
    if (wt == BCRT_WT_Q8_0)  /* |t| <= 127 (1 + 2^-22) */
      code[i] = t > -127.5f && t < 127.5f ? (unsigned char)(int8_t)sg_round_int(t) : 0;
    else {                   /* t + 8.5 in [0.49, 16.6] */
      t += 8.5f;
      int c = t >= 0.0f && t < 127.0f ? (int)t : 0;
      code[i] = (unsigned char)(c < 15 ? c : 15);
    }
    if (i >= kb) code[i] = wt == BCRT_WT_Q8_0 ? 0 : 8;
  }
  return ds;
}

float bcrt_quant_block(int wt, const float *v, int kb, unsigned char *code) {
  if ((wt != BCRT_WT_Q8_0 && wt != BCRT_WT_Q4_0) || kb < 0 || kb > SG_QK) return 0.0f;
  return sg_quant_block(wt, v, kb, code);
}

/* The byte of a block's codes holding step kq of row j: Q8_0 its int8
 * code + 128 (as an unsigned byte), Q4_0 its nibble (rows j and j + 16 share a byte, low and high). */
static size_t sg_q8_at(int kq, int j) { return (size_t)(kq / 4 * 128 + j * 4 + kq % 4); }
static size_t sg_q4_at(int kq, int j) { return (size_t)(kq / 4 * 64 + j % 16 * 4 + kq % 4); }

/* Packs any weight type from W[j, kk] = w[j*rs + kk*cs] (n x k). */
static void sg_pack_wt(int wt, int n, int k, const float *w, size_t rs, size_t cs, void *packed) {
  int np = (int)(((long)n + SG_NR - 1) / SG_NR);
  if (sg_wbytes(wt)) {
    for (int p = 0; p < np; p++)
      for (int kk = 0; kk < k; kk++)
        for (int j = 0; j < SG_NR; j++) {
          int row = p * SG_NR + j;
          float v = row < n ? w[(size_t)row * rs + (size_t)kk * cs] : 0.0f;
          size_t i = ((size_t)p * (size_t)k + (size_t)kk) * SG_NR + (size_t)j;
          if (wt == BCRT_WT_F32) ((float *)packed)[i] = v;
          else if (wt == BCRT_WT_F16) ((unsigned short *)packed)[i] = sg_to_f16(v);
          else ((unsigned short *)packed)[i] = sg_to_bf16(v);
        }
    return;
  }
  int nkb = (k + SG_QK - 1) / SG_QK;
  size_t qb = sg_qblock(wt);
  for (int p = 0; p < np; p++)
    for (int b = 0; b < nkb; b++) {
      unsigned char *blk = (unsigned char *)packed + ((size_t)p * (size_t)nkb + (size_t)b) * qb;
      unsigned char *q = blk + SG_NR * sizeof(float);
      int kb = k - b * SG_QK < SG_QK ? k - b * SG_QK : SG_QK;
      for (int j = 0; j < SG_NR; j++) {
        int row = p * SG_NR + j;
        float v[SG_QK] = {0}, d;
        unsigned char code[SG_QK];
        for (int i = 0; i < kb && row < n; i++)
          v[i] = w[(size_t)row * rs + (size_t)(b * SG_QK + i) * cs];
        d = sg_quant_block(wt, v, row < n ? kb : 0, code);
        memcpy(blk + (size_t)j * sizeof d, &d, sizeof d);
        for (int i = 0; i < SG_QK; i++) {
          if (wt == BCRT_WT_Q8_0) q[sg_q8_at(i, j)] = (unsigned char)(code[i] ^ 0x80u);
          else {
            unsigned char *byte = q + sg_q4_at(i, j);
            *byte = j < SG_NR / 2 ? (unsigned char)((*byte & 0xf0u) | code[i])
                                  : (unsigned char)((*byte & 0x0fu) | ((unsigned)code[i] << 4));
          }
        }
      }
    }
}

static int sg_wt_valid(int wt) { return wt >= 0 && wt < BCRT_WT_COUNT; }

unsigned long bcrt_pack_wt_bytes(int wt, int n, int k) {
  if (n <= 0 || k <= 0 || !sg_wt_valid(wt)) return 0;
  return (unsigned long)(((size_t)n + SG_NR - 1) / SG_NR * sg_panel_bytes(wt, k));
}

void bcrt_pack_nt_wt(int wt, int n, int k, const float *w, void *packed) {
  if (n <= 0 || k <= 0 || !sg_wt_valid(wt)) return;
  sg_pack_wt(wt, n, k, w, (size_t)k, 1, packed);
}

void bcrt_pack_nn_wt(int wt, int n, int k, const float *w, int ldw, void *packed) {
  if (n <= 0 || k <= 0 || !sg_wt_valid(wt)) return;
  sg_pack_wt(wt, n, k, w, 1, (size_t)ldw, packed);
}

void bcrt_unpack_wt(int wt, int n, int k, const void *packed, float *w) {
  if (n <= 0 || k <= 0 || !sg_wt_valid(wt)) return;
  for (int row = 0; row < n; row++) {
    int p = row / SG_NR, j = row % SG_NR;
    const unsigned char *pan = sg_panel_at(wt, packed, k, p, 0);
    for (int kk = 0; kk < k; kk++) {
      float *o = w + (size_t)row * (size_t)k + (size_t)kk;
      if (wt == BCRT_WT_F16) {
        *o = sg_f16_to_f32(((const unsigned short *)(const void *)pan)[(size_t)kk * SG_NR + (size_t)j]);
        continue;
      }
      if (wt == BCRT_WT_F32 || wt == BCRT_WT_BF16) {
        *o = sg_w(pan, wt == BCRT_WT_BF16, (size_t)kk * SG_NR + (size_t)j);
        continue;
      }
      const unsigned char *blk = pan + (size_t)(kk / SG_QK) * sg_qblock(wt);
      const unsigned char *q = blk + SG_NR * sizeof(float);
      float d;
      memcpy(&d, blk + (size_t)j * sizeof d, sizeof d);
      int kq = kk % SG_QK;
      if (wt == BCRT_WT_Q8_0) *o = d * (float)((int)q[sg_q8_at(kq, j)] - 128);
      else {
        unsigned char byte = q[sg_q4_at(kq, j)];
        *o = d * (float)((int)(j < SG_NR / 2 ? byte & 15u : byte >> 4) - 8);
      }
    }
  }
}

static void sq_panels(int wt, int p0, int p1, int m, int n, int k, const float *x, size_t ldx,
                      const void *packed, const float *bias, float beta, float *y, size_t ldy);

/* Block types: gemm_q8.c's integer products, any m; the others m <= SG_MR
 * one pass, more the row groups of sg_panels_many (which allocate nothing). */
void bcrt_linear_wt(int wt, int m, int n, int k, const float *x, int ldx, const void *packed,
                    long poff_bytes, const float *bias, float beta, float *y, int ldy) {
  if (m <= 0 || n <= 0 || !sg_wt_valid(wt)) return;
  if (k < 0) k = 0;
  int np = (int)(((long)n + SG_NR - 1) / SG_NR);
  const void *pk = (const char *)packed + poff_bytes;
  if (wt == BCRT_WT_Q8_0 || wt == BCRT_WT_Q4_0)
    sq_panels(wt, 0, np, m, n, k, x, (size_t)ldx, pk, bias, beta, y, (size_t)ldy);
  else if (m <= SG_MR)
    sg_panels_few(wt, 0, np, m, n, k, x, (size_t)ldx, pk, bias, beta, y, (size_t)ldy);
  else
    sg_panels_many(wt, 0, np, m, n, k, x, (size_t)ldx, pk, bias, beta, y, (size_t)ldy);
}

/* Over a pool (the contract in blockc_rt.h).  A part is a run of whole
 * panels; every panel is computed
 * by the code, and with the arithmetic, of the single-threaded call.  Calls
 * under SG_POOL_MIN multiply-adds stay on the caller's thread (a dispatch
 * costs a few microseconds). */
#define SG_POOL_MIN (1L << 16)
typedef struct {
  int wt, m, n, k, ldx, ldw, trans, ldy, unit, nunits, f32;
  const float *x, *w, *bias;
  const void *packed; /* at the call's offset; NULL: cblas on w */
  float beta;
  float *y;
} sg_pjob;

static void sg_cblas_units(const sg_pjob *j, int p0, int p1);

static void sg_pool_task(void *arg, int part, int nparts) {
  const sg_pjob *j = (const sg_pjob *)arg;
  int np = (int)(((long)j->n + SG_NR - 1) / SG_NR);
  int u0 = (int)((long)j->nunits * part / nparts), u1 = (int)((long)j->nunits * (part + 1) / nparts);
  int p0 = u0 * j->unit, p1 = u1 * j->unit < np ? u1 * j->unit : np;
  if (p0 >= p1) return;
  int j0 = p0 * SG_NR, nc = (j->n < p1 * SG_NR ? j->n : p1 * SG_NR) - j0;
  const float *bias = j->bias ? j->bias + j0 : NULL;
  if (j->f32 && !j->packed) { /* cblas on the run's columns of W */
    sg_cblas_units(j, p0, p1);
  } else if (j->f32) {
    sg_part(0, 0, 1, j->m, nc, j->k, j->x, j->ldx, (const float *)sg_panel_at(0, j->packed, j->k, p0, 0),
            bias, j->beta, j->y + j0, j->ldy);
  } else if (j->wt == BCRT_WT_Q8_0 || j->wt == BCRT_WT_Q4_0) {
    sq_panels(j->wt, p0, p1, j->m, j->n, j->k, j->x, (size_t)j->ldx, j->packed, j->bias, j->beta,
              j->y, (size_t)j->ldy);
  } else if (j->m <= SG_MR) {
    sg_panels_few(j->wt, p0, p1, j->m, j->n, j->k, j->x, (size_t)j->ldx, j->packed, j->bias, j->beta,
                  j->y, (size_t)j->ldy);
  } else {
    sg_panels_many(j->wt, p0, p1, j->m, j->n, j->k, j->x, (size_t)j->ldx, j->packed, j->bias,
                   j->beta, j->y, (size_t)j->ldy);
  }
}

/* cblas runs: OpenBLAS's result for a column depends on the product's
 * shape (its small-matrix kernels, its blocking), so the columns go in
 * fixed units of SG_CB_PANELS panels, one cblas call each, whatever the
 * pool (NULL included): the bits then never depend on the thread count.
 * The portable GEMM (-DBLOCKC_NO_BLAS) gives every column the same bits
 * in any run of whole GM_NR tiles, so it is called on whole parts. */
enum { SG_CB_PANELS = 8 };

static void sg_cblas_units(const sg_pjob *j, int p0, int p1) {
  int np = (int)(((long)j->n + SG_NR - 1) / SG_NR);
#ifdef BLOCKC_NO_BLAS
  int step = p1 - p0;
#else
  int step = SG_CB_PANELS;
#endif
  for (int q = p0; q < p1; q += step) {
    int q1 = q + step < p1 ? q + step : p1;
    q1 = q1 < np ? q1 : np;
    int j0 = q * SG_NR, nc = (j->n < q1 * SG_NR ? j->n : q1 * SG_NR) - j0;
    const float *w = j->trans == BCRT_TRANS ? j->w + (size_t)j0 * (size_t)j->ldw : j->w + j0;
    bcrt_linear_ws(NULL, j->m, nc, j->k, j->x, j->ldx, w, j->ldw, j->trans, NULL, 0,
                   j->bias ? j->bias + j0 : NULL, j->beta, j->y + j0, j->ldy);
  }
}

/* The parts a call of m x n x k takes on pool (1: stay on the caller's). */
static int sg_pool_parts(const bcrt_pool *pool, int m, int n, int k, int nunits) {
  int nt = bcrt_pool_nthreads(pool);
  if (nt > nunits) nt = nunits;
  if ((double)m * (double)n * (double)(k > 0 ? k : 0) < (double)SG_POOL_MIN * 2) nt = 1;
  return nt < 1 ? 1 : nt;
}

void bcrt_linear_pool_ws(bcrt_pool *pool, void *ws, int m, int n, int k, const float *x, int ldx,
                         const float *w, int ldw, int trans, const float *packed, long poff,
                         const float *bias, float beta, float *y, int ldy) {
  if (m <= 0 || n <= 0) return;
  int np = (int)(((long)n + SG_NR - 1) / SG_NR);
  int small = packed && m <= BCRT_SMALL_M;
#ifdef BLOCKC_NO_BLAS
  int unit = 1;
#else
  int unit = small ? 1 : SG_CB_PANELS;
#endif
  int nunits = (np + unit - 1) / unit;
  int nt = sg_pool_parts(pool, m, n, k, nunits);
  sg_pjob j = {.wt = BCRT_WT_F32, .m = m, .n = n, .k = k < 0 ? 0 : k, .ldx = ldx, .ldw = ldw,
               .trans = trans, .ldy = ldy, .unit = unit, .nunits = nunits, .f32 = 1, .x = x,
               .w = w, .bias = bias, .packed = small ? (const void *)(packed + poff) : NULL,
               .beta = beta, .y = y};
  if (nt > 1) bcrt_pool_run(pool, nt, sg_pool_task, &j);
#ifndef BLOCKC_NO_BLAS
  else if (!small) sg_cblas_units(&j, 0, np);
#endif
  else bcrt_linear_ws(ws, m, n, k, x, ldx, w, ldw, trans, packed, poff, bias, beta, y, ldy);
}

void bcrt_linear_pool(bcrt_pool *pool, int m, int n, int k, const float *x, int ldx,
                      const float *w, int ldw, int trans, const float *packed, long poff,
                      const float *bias, float beta, float *y, int ldy) {
  bcrt_linear_pool_ws(pool, NULL, m, n, k, x, ldx, w, ldw, trans, packed, poff, bias, beta, y, ldy);
}

void bcrt_linear_wt_pool(bcrt_pool *pool, int wt, int m, int n, int k, const float *x, int ldx,
                         const void *packed, long poff_bytes, const float *bias, float beta,
                         float *y, int ldy) {
  if (m <= 0 || n <= 0 || !sg_wt_valid(wt)) return;
  int np = (int)(((long)n + SG_NR - 1) / SG_NR);
  int unit = 1, nunits = np;
  int nt = sg_pool_parts(pool, m, n, k, nunits);
  if (nt <= 1) {
    bcrt_linear_wt(wt, m, n, k, x, ldx, packed, poff_bytes, bias, beta, y, ldy);
    return;
  }
  sg_pjob j = {.wt = wt, .m = m, .n = n, .k = k < 0 ? 0 : k, .ldx = ldx, .ldy = ldy, .unit = unit,
               .nunits = nunits, .f32 = 0, .x = x, .bias = bias,
               .packed = (const char *)packed + poff_bytes, .beta = beta, .y = y};
  bcrt_pool_run(pool, nt, sg_pool_task, &j);
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC pop_options
#endif
