/* gemm_q8.c — Q8_0 and Q4_0 products as integer dot products on 8-bit
 * activations.
 * One part of the runtime (after gemm_small.c, whose panels, blocks and
 * bcrt_linear_wt entry points it serves; tools/amalgamate.sh has the order).
 *
 * A decode step reads every weight once, so with Q8_0 (1.125 bytes a
 * weight in our panels) or Q4_0 (0.625) the bytes are few and what bounds a
 * float kernel is its arithmetic: widening each code to a float, scaling
 * it, one FMA per row.  So these products do what llama.cpp does for its
 * q8_0 and q4_0 matrices: each row of x is quantized, per block of 32 along
 * k, to int8 codes qx with a scale dx (bcrt_quant_act: dx = max|x| / 127,
 * qx = roundf(x / dx)), the block's dot products are exact int32 sums of
 * code times code, and each sum is scaled once:
 *
 *   acc[r][j] = fma((float)sum_kk qw[kk][j] * qx[r][kk], dw[j] * dx[r], acc[r][j])
 *
 * block after block in k order, then y = acc + bias (+ beta y).  The
 * integers are exact, so the bits are those of that formula on every
 * machine and path: AVX-512 VNNI (vpdpbusd: 64 multiply-adds an
 * instruction), AVX2 (vpmaddubsw + vpmaddwd, llama.cpp's sign trick for
 * Q8_0), or plain C; any thread count (parts are whole panels); any row
 * count (rows never share an accumulator; k beyond BCRT_QX_BYTES steps
 * goes in chunks summed in y, as the float kernels' chunks are).
 *
 * vpdpbusd multiplies unsigned bytes by signed ones: the weights are the
 * unsigned ones, x's codes the signed.  Q4_0's nibbles are unsigned
 * already (code = nibble - 8), and Q8_0's panels store code + 128; so a
 * block's sum has 8 (128) times the sum of x's codes on top of the exact
 * one, subtracted once per block (kept per row and block when x is
 * quantized).  AVX2's vpmaddubsw would saturate on code + 128: there the
 * codes go back to signed and take llama.cpp's sign trick.
 *
 * The layout (blockc_rt.h): each block's codes come in 8 groups of 4 k
 * steps, row j's 4 codes of a group in 4 consecutive bytes (Q4_0: rows j and
 * j+16 share the bytes, low and high nibble), so one 64-byte load is 16
 * rows x 4 steps: one vpdpbusd operand. */

/* Activation blocks: qx[i] = roundf(x[i] / d) in -127..127 for i < kb, 0
 * past it; d = max|x| / 127 (a float, not rounded to FP16 as ggml's q8_0
 * blocks are: nothing stores it, and FP16 would overflow for |x| > 8.3e6).
 * A block with a NaN or Inf gets d = NaN (its products come out NaN); one
 * whose d is 0, or so small that 1/d overflows (max|x| < 3.7e-37), is all
 * zeros with d = 0.  The quantization of both Q8_0 and Q4_0 products. */
#if defined(__AVX512F__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

/* The block's codes and scale (bcrt_quant_act), and *sum: the codes' sum.
 * With AVX-512 two vectors of 16 lanes, bitwise the loops' arithmetic. */
GK_INLINE float sq_quant(const float *x, int kb, signed char *q, int32_t *sum) {
  *sum = 0;
  if (kb < 0) kb = 0;
  if (kb > SG_QK) kb = SG_QK;
#if defined(__AVX512F__) && (defined(__GNUC__) || defined(__clang__))
  __mmask16 m0 = (__mmask16)(kb >= 16 ? 0xffffu : (1u << kb) - 1u);
  __mmask16 m1 = (__mmask16)(kb >= 32 ? 0xffffu : kb <= 16 ? 0u : (1u << (kb - 16)) - 1u);
  __m512 v0 = _mm512_maskz_loadu_ps(m0, x), v1 = _mm512_maskz_loadu_ps(m1, x + 16);
  const __m512i expo = _mm512_set1_epi32(0x7f800000), mag = _mm512_set1_epi32(0x7fffffff);
  __m512i u0 = _mm512_castps_si512(v0), u1 = _mm512_castps_si512(v1);
  __mmask16 bad = _mm512_cmpeq_epi32_mask(_mm512_and_si512(u0, expo), expo) |
                  _mm512_cmpeq_epi32_mask(_mm512_and_si512(u1, expo), expo);
  _mm256_storeu_si256((__m256i *)(void *)q, _mm256_setzero_si256());
  if (bad) {
    uint32_t qnan = 0x7fc00000u;
    float nan;
    memcpy(&nan, &qnan, sizeof nan);
    return nan;
  }
  float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_castsi512_ps(_mm512_and_si512(u0, mag)),
                                                  _mm512_castsi512_ps(_mm512_and_si512(u1, mag))));
  float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  if (!(id > 0.0f && id <= 3.40282347e38f)) return 0.0f;
  const __m512 vid = _mm512_set1_ps(id), half = _mm512_set1_ps(0.5f), mhalf = _mm512_set1_ps(-0.5f);
  const __m512i one = _mm512_set1_epi32(1), lim = _mm512_set1_epi32(127), nlim = _mm512_set1_epi32(-127);
  __m512i c[2];
  for (int h = 0; h < 2; h++) {
    __m512 t = _mm512_mul_ps(h ? v1 : v0, vid);
    __m512i ci = _mm512_cvttps_epi32(t);
    __m512 frac = _mm512_sub_ps(t, _mm512_cvtepi32_ps(ci));
    ci = _mm512_mask_add_epi32(ci, _mm512_cmp_ps_mask(frac, half, _CMP_GE_OQ), ci, one);
    ci = _mm512_mask_sub_epi32(ci, _mm512_cmp_ps_mask(frac, mhalf, _CMP_LE_OQ), ci, one);
    c[h] = _mm512_max_epi32(_mm512_min_epi32(ci, lim), nlim);
    _mm_storeu_si128((__m128i *)(void *)(q + 16 * h), _mm512_cvtepi32_epi8(c[h]));
  }
  *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(c[0], c[1]));
  return d;
#else
  float v[SG_QK], amax = 0.0f;
  uint32_t bad = 0;
  for (int i = 0; i < SG_QK; i++) v[i] = i < kb ? x[i] : 0.0f;
  for (int i = 0; i < SG_QK; i++) {
    uint32_t u;
    memcpy(&u, &v[i], sizeof u);
    bad |= (u & 0x7f800000u) == 0x7f800000u;
    float a = sg_fabs(v[i]);
    amax = a > amax ? a : amax;
  }
  for (int i = 0; i < SG_QK; i++) q[i] = 0;
  if (bad) {
    uint32_t qnan = 0x7fc00000u;
    float nan;
    memcpy(&nan, &qnan, sizeof nan);
    return nan;
  }
  float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  if (!(id > 0.0f && id <= 3.40282347e38f)) return 0.0f;
  int32_t s = 0;
  for (int i = 0; i < SG_QK; i++) { /* roundf: |v * id| <= 127 (1 + 2^-22), t - trunc(t) exact */
    float t = v[i] * id;
    int c = (int)t;
    float frac = t - (float)c;
    c += (frac >= 0.5f) - (frac <= -0.5f);
    c = c > 127 ? 127 : c < -127 ? -127 : c;
    q[i] = (signed char)c;
    s += c;
  }
  *sum = s;
  return d;
#endif
}

float bcrt_quant_act(const float *x, int kb, signed char *q) {
  int32_t s;
  return sq_quant(x, kb, q, &s);
}

/* x's codes a call keeps on the stack (and 8/32 of that for their scales
 * and sums); -DBLOCKC_NO_IO builds (small devices, small stacks) 4 KiB. */
#ifndef BCRT_QX_BYTES
#ifdef BLOCKC_NO_IO
#define BCRT_QX_BYTES 4096
#else
#define BCRT_QX_BYTES 32768
#endif
#endif
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SQ_VNNI 1
enum { SQ_MR = 4 };  /* 4 rows x 32 columns: 8 int32 + 8 float accumulators of 512 bits */
#elif defined(__AVX2__) && defined(__FMA__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SQ_AVX2 1
enum { SQ_MR = 1 };  /* 16 registers of 256 bits: 4 int32 + 4 float accumulators a row */
#else
enum { SQ_MR = 4 };
#endif
enum { SQ_QX = BCRT_QX_BYTES / SG_QK * SG_QK, SQ_NBX = SQ_QX / SG_QK, SQ_MAXG = 64 };
typedef char sq_qx_holds_a_block[(int)SQ_QX >= (int)SG_QK ? 1 : -1];


#if defined(SQ_VNNI)
/* Group g of a block's codes q as two vpdpbusd operands, rows 0-15 and
 * 16-31 (4 steps each): Q8_0 two lines, Q4_0 one line's low and high
 * nibbles. */
GK_INLINE void sq_group(const int wt, const unsigned char *q, int g, __m512i *v0, __m512i *v1) {
  if (wt == BCRT_WT_Q8_0) {
    *v0 = _mm512_loadu_si512((const void *)(q + g * 128));
    *v1 = _mm512_loadu_si512((const void *)(q + g * 128 + 64));
  } else {
    const __m512i low = _mm512_set1_epi8(15);
    __m512i l = _mm512_loadu_si512((const void *)(q + g * 64));
    *v0 = _mm512_and_si512(l, low);
    *v1 = _mm512_and_si512(_mm512_srli_epi16(l, 4), low);
  }
}

/* One block's int32 sums s0, s1 (columns 0-15, 16-31) into the float
 * accumulators: fa += (float)(s - c) * (d * dx), d the block's scales. */
GK_INLINE void sq_scale(__m512i s0, __m512i s1, int32_t c, float dx, const unsigned char *blk,
                        __m512 fa[2]) {
  const float *d = (const float *)(const void *)blk;
  __m512i cv = _mm512_set1_epi32(c);
  __m512 sv = _mm512_set1_ps(dx);
  fa[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(s0, cv)), _mm512_mul_ps(_mm512_loadu_ps(d), sv), fa[0]);
  fa[1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(s1, cv)), _mm512_mul_ps(_mm512_loadu_ps(d + 16), sv), fa[1]);
}
#endif

/* Rows x[i0 .. i0+mg), k steps [0, kc) of each (x already at the chunk's
 * start): codes to qx (nb blocks a row, row stride nb * 32), scales to dx,
 * and the weights' offset (Q8_0 128, Q4_0 8) times the sum of each block's
 * codes to cx: what a sum of stored (unsigned) codes times x's codes has
 * on top of the sum with the weights' signed codes. */
static void sq_quant_rows(int wt, int mg, int kc, const float *x, size_t ldx, unsigned char *qx,
                          float *dx, int32_t *cx) {
  int nb = (kc + SG_QK - 1) / SG_QK;
  for (int r = 0; r < mg; r++)
    for (int b = 0; b < nb; b++) {
      int kb = kc - b * SG_QK < SG_QK ? kc - b * SG_QK : SG_QK;
      int32_t s;
      dx[(size_t)r * (size_t)nb + (size_t)b] = sq_quant(x + (size_t)r * ldx + (size_t)b * SG_QK, kb,
                                        (signed char *)(qx + ((size_t)r * (size_t)nb + (size_t)b) * SG_QK), &s);
      cx[(size_t)r * (size_t)nb + (size_t)b] = (wt == BCRT_WT_Q8_0 ? 128 : 8) * s;
    }
}

#if !defined(SQ_VNNI) && !defined(SQ_AVX2)
/* Row j's weight code at step 4g + t of a block's codes q (-128..127). */
GK_INLINE int sq_wcode(const int wt, const unsigned char *q, int g, int j, int t) {
  if (wt == BCRT_WT_Q8_0) return (int)q[g * 128 + j * 4 + t] - 128;
  unsigned char byte = q[g * 64 + (j % 16) * 4 + t];
  return (int)(j < 16 ? byte & 15u : byte >> 4) - 8;
}
#endif

/* acc[r][:] (mr rows) += the nb blocks of panel w (at a block) times rows
 * r of the quantized x (qx: nb * 32 bytes a row; dx, cx: nb a row).  pf:
 * prefetch the stream SG_PF bytes ahead (the first row tile of a panel). */
GK_INLINE void sq_tile(const int mr, const int wt, int nb, const unsigned char *qx,
                       const float *dx, const int32_t *cx, const unsigned char *w, int pf,
                       float acc[SQ_MR][SG_NR]) {
  const size_t qb = sg_qblock(wt), lq = (size_t)nb * SG_QK;
#if defined(SQ_VNNI)
  /* int32 sums of even and odd groups apart when there are few rows, so
   * that 4 chains of vpdpbusd (latency 5) are in flight */
  enum { SPLIT = 2 };
  const int split = mr <= 2;
  __m512 fa[SQ_MR][2];
  for (int r = 0; r < mr; r++)
    fa[r][0] = _mm512_loadu_ps(acc[r]), fa[r][1] = _mm512_loadu_ps(acc[r] + 16);
  for (int b = 0; b < nb; b++) {
    const unsigned char *blk = w + (size_t)b * qb, *q = blk + SG_NR * 4;
    if (pf)
      for (size_t off = 0; off < qb; off += 64) GK_PREFETCH(blk, SG_PF + off);
    __m512i ia[SPLIT][SQ_MR][2];
    for (int e = 0; e < 1 + split; e++)
      for (int r = 0; r < mr; r++) ia[e][r][0] = ia[e][r][1] = _mm512_setzero_si512();
    for (int g = 0; g < 8; g++) {
      const int e = split ? g & 1 : 0;
      __m512i w0, w1;
      sq_group(wt, q, g, &w0, &w1);
      for (int r = 0; r < mr; r++) {
        int32_t xv;
        memcpy(&xv, qx + (size_t)r * lq + (size_t)b * SG_QK + (size_t)g * 4, sizeof xv);
        __m512i xb = _mm512_set1_epi32(xv);
        ia[e][r][0] = _mm512_dpbusd_epi32(ia[e][r][0], w0, xb);
        ia[e][r][1] = _mm512_dpbusd_epi32(ia[e][r][1], w1, xb);
      }
    }
    for (int r = 0; r < mr; r++) {
      __m512i s0 = ia[0][r][0], s1 = ia[0][r][1];
      if (split) s0 = _mm512_add_epi32(s0, ia[1][r][0]), s1 = _mm512_add_epi32(s1, ia[1][r][1]);
      sq_scale(s0, s1, cx[(size_t)r * (size_t)nb + (size_t)b], dx[(size_t)r * (size_t)nb + (size_t)b], blk, fa[r]);
    }
  }
  for (int r = 0; r < mr; r++)
    _mm512_storeu_ps(acc[r], fa[r][0]), _mm512_storeu_ps(acc[r] + 16, fa[r][1]);
#elif defined(SQ_AVX2)
  /* 8 rows of 4 steps a vector: Q8_0 rows 0-7, 8-15, 16-23, 24-31 at byte
   * offsets 0, 32, 64, 96 of a group; Q4_0 low nibbles of bytes 0-31 rows
   * 0-7, of 32-63 rows 8-15, high nibbles rows 16-23 and 24-31. */
  __m256 fa[SQ_MR][4];
  for (int r = 0; r < mr; r++)
    for (int h = 0; h < 4; h++) fa[r][h] = _mm256_loadu_ps(acc[r] + 8 * h);
  const __m256i ones16 = _mm256_set1_epi16(1), low = _mm256_set1_epi8(15);
  const __m256i flip = _mm256_set1_epi8((char)0x80);
  for (int b = 0; b < nb; b++) {
    const unsigned char *blk = w + (size_t)b * qb, *q = blk + SG_NR * 4;
    if (pf)
      for (size_t off = 0; off < qb; off += 64) GK_PREFETCH(blk, SG_PF + off);
    __m256i ia[SQ_MR][4];
    for (int r = 0; r < mr; r++)
      for (int h = 0; h < 4; h++) ia[r][h] = _mm256_setzero_si256();
    for (int g = 0; g < 8; g++) {
      __m256i wv[4];
      if (wt == BCRT_WT_Q8_0) { /* the stored code + 128, back to the signed code */
        for (int h = 0; h < 4; h++)
          wv[h] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(q + g * 128 + 32 * h)), flip);
      } else {
        __m256i l0 = _mm256_loadu_si256((const __m256i *)(const void *)(q + g * 64));
        __m256i l1 = _mm256_loadu_si256((const __m256i *)(const void *)(q + g * 64 + 32));
        wv[0] = _mm256_and_si256(l0, low), wv[1] = _mm256_and_si256(l1, low);
        wv[2] = _mm256_and_si256(_mm256_srli_epi16(l0, 4), low);
        wv[3] = _mm256_and_si256(_mm256_srli_epi16(l1, 4), low);
      }
      for (int r = 0; r < mr; r++) {
        int32_t xv;
        memcpy(&xv, qx + (size_t)r * lq + (size_t)b * SG_QK + (size_t)g * 4, sizeof xv);
        __m256i xb = _mm256_set1_epi32(xv);
        for (int h = 0; h < 4; h++) {  /* wv: signed codes (Q8_0) or nibbles (Q4_0) */
          __m256i p;
          if (wt == BCRT_WT_Q8_0) /* |w| * (x with w's sign): pairs <= 2 * 127 * 127 */
            p = _mm256_maddubs_epi16(_mm256_abs_epi8(wv[h]), _mm256_sign_epi8(xb, wv[h]));
          else /* nibble * x: pairs <= 2 * 15 * 127 */
            p = _mm256_maddubs_epi16(wv[h], xb);
          ia[r][h] = _mm256_add_epi32(ia[r][h], _mm256_madd_epi16(p, ones16));
        }
      }
    }
    for (int r = 0; r < mr; r++) {
      __m256i c = wt == BCRT_WT_Q8_0 ? _mm256_setzero_si256() : _mm256_set1_epi32(cx[(size_t)r * (size_t)nb + (size_t)b]);
      __m256 s = _mm256_set1_ps(dx[(size_t)r * (size_t)nb + (size_t)b]);
      for (int h = 0; h < 4; h++) {
        __m256 d = _mm256_loadu_ps((const float *)(const void *)blk + 8 * h);
        fa[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(ia[r][h], c)), _mm256_mul_ps(d, s), fa[r][h]);
      }
    }
  }
  for (int r = 0; r < mr; r++)
    for (int h = 0; h < 4; h++) _mm256_storeu_ps(acc[r] + 8 * h, fa[r][h]);
#else
  (void)cx, (void)pf;
  for (int b = 0; b < nb; b++) {
    const unsigned char *blk = w + (size_t)b * qb, *q = blk + SG_NR * 4;
    int32_t ia[SQ_MR][SG_NR];
    for (int r = 0; r < mr; r++)
      for (int j = 0; j < SG_NR; j++) ia[r][j] = 0;
    for (int g = 0; g < 8; g++)
      for (int j = 0; j < SG_NR; j++)
        for (int t = 0; t < 4; t++) {
          int wc = sq_wcode(wt, q, g, j, t);
          for (int r = 0; r < mr; r++)
            ia[r][j] += wc * (int)(signed char)qx[(size_t)r * lq + (size_t)b * SG_QK + (size_t)(g * 4 + t)];
        }
    for (int r = 0; r < mr; r++) {
      float s = dx[(size_t)r * (size_t)nb + (size_t)b];
      for (int j = 0; j < SG_NR; j++) {
        float d;
        memcpy(&d, blk + (size_t)j * sizeof d, sizeof d);
        acc[r][j] = MADD((float)ia[r][j], d * s, acc[r][j]);
      }
    }
  }
#endif
}

/* sq_tile with constant row count and type, so each copy unrolls. */
#define SQ_TILE_N(mr)                                                                         \
  static void sq_tile_##mr(int wt, int nb, const unsigned char *qx, const float *dx,         \
                           const int32_t *cx, const unsigned char *w, int pf,                \
                           float acc[SQ_MR][SG_NR]) {                                        \
    if (wt == BCRT_WT_Q8_0) sq_tile(mr, BCRT_WT_Q8_0, nb, qx, dx, cx, w, pf, acc);           \
    else sq_tile(mr, BCRT_WT_Q4_0, nb, qx, dx, cx, w, pf, acc);                              \
  }
SQ_TILE_N(1)
#if !defined(SQ_AVX2)
SQ_TILE_N(2)
SQ_TILE_N(3)
SQ_TILE_N(4)
#endif

static void sq_tile_rows(int mr, int wt, int nb, const unsigned char *qx, const float *dx,
                         const int32_t *cx, const unsigned char *w, int pf,
                         float acc[SQ_MR][SG_NR]) {
  switch (mr) { /* 1 <= mr <= SQ_MR */
#if !defined(SQ_AVX2)
  case 2: sq_tile_2(wt, nb, qx, dx, cx, w, pf, acc); break;
  case 3: sq_tile_3(wt, nb, qx, dx, cx, w, pf, acc); break;
  case 4: sq_tile_4(wt, nb, qx, dx, cx, w, pf, acc); break;
#endif
  default: sq_tile_1(wt, nb, qx, dx, cx, w, pf, acc); break;
  }
}

#if defined(SQ_VNNI)
/* One row against 4 consecutive panels, or two rows against 2: the panels'
 * weights come in that many streams at once (a core reads several streams
 * faster than one: gemm_small.c's sg_wide) and the int32 sums are as many
 * independent chains.  Each column's sums and their scaling are sq_tile's:
 * the same bits. */
enum { SQ_WIDE = 4 };
GK_INLINE void sq_wide(const int mr, const int np, const int wt, int nb, const unsigned char *qx,
                       const float *dx, const int32_t *cx, const unsigned char *w0,
                       size_t pstride, float acc[SQ_WIDE][SQ_MR][SG_NR]) {
  const size_t qb = sg_qblock(wt), lq = (size_t)nb * SG_QK;
  __m512 fa[SQ_WIDE][2][2];
  for (int c = 0; c < np; c++)
    for (int r = 0; r < mr; r++) fa[c][r][0] = fa[c][r][1] = _mm512_setzero_ps();
  for (int b = 0; b < nb; b++) {
    __m512i ia[SQ_WIDE][2][2];
    for (int c = 0; c < np; c++) {
      const unsigned char *blk = w0 + (size_t)c * pstride + (size_t)b * qb;
      for (size_t off = 0; off < qb; off += 64) GK_PREFETCH(blk, SG_PF + off);
      for (int r = 0; r < mr; r++) ia[c][r][0] = ia[c][r][1] = _mm512_setzero_si512();
    }
    for (int g = 0; g < 8; g++) {
      __m512i xb[2];
      for (int r = 0; r < mr; r++) {
        int32_t xv;
        memcpy(&xv, qx + (size_t)r * lq + (size_t)b * SG_QK + (size_t)g * 4, sizeof xv);
        xb[r] = _mm512_set1_epi32(xv);
      }
      for (int c = 0; c < np; c++) {
        __m512i v0, v1;
        sq_group(wt, w0 + (size_t)c * pstride + (size_t)b * qb + SG_NR * 4, g, &v0, &v1);
        for (int r = 0; r < mr; r++) {
          ia[c][r][0] = _mm512_dpbusd_epi32(ia[c][r][0], v0, xb[r]);
          ia[c][r][1] = _mm512_dpbusd_epi32(ia[c][r][1], v1, xb[r]);
        }
      }
    }
    for (int c = 0; c < np; c++)
      for (int r = 0; r < mr; r++)
        sq_scale(ia[c][r][0], ia[c][r][1], cx[(size_t)r * (size_t)nb + (size_t)b],
                 dx[(size_t)r * (size_t)nb + (size_t)b], w0 + (size_t)c * pstride + (size_t)b * qb, fa[c][r]);
  }
  for (int c = 0; c < np; c++)
    for (int r = 0; r < mr; r++)
      _mm512_storeu_ps(acc[c][r], fa[c][r][0]), _mm512_storeu_ps(acc[c][r] + 16, fa[c][r][1]);
}

static void sq_wide_rows(int mr, int wt, int nb, const unsigned char *qx, const float *dx,
                         const int32_t *cx, const unsigned char *w0, size_t pstride,
                         float acc[SQ_WIDE][SQ_MR][SG_NR]) {
  if (mr == 1 && wt == BCRT_WT_Q8_0) sq_wide(1, 4, BCRT_WT_Q8_0, nb, qx, dx, cx, w0, pstride, acc);
  else if (mr == 1) sq_wide(1, 4, BCRT_WT_Q4_0, nb, qx, dx, cx, w0, pstride, acc);
  else if (wt == BCRT_WT_Q8_0) sq_wide(2, 2, BCRT_WT_Q8_0, nb, qx, dx, cx, w0, pstride, acc);
  else sq_wide(2, 2, BCRT_WT_Q4_0, nb, qx, dx, cx, w0, pstride, acc);
}
#endif

/* Panels [p0, p1) of y = x W^T (+ bias) (+ beta y) for a Q8_0 / Q4_0 W:
 * rows in groups whose codes fit the stack buffer (up to SQ_MAXG), each
 * group quantized once and then every panel's tiles of SQ_MR rows, over
 * all of k (or chunks of SQ_QX steps, summed in y).  A group's rows reuse a
 * panel from L1 or L2; the first tile streams it from memory. */
static void sq_panels(int wt, int p0, int p1, int m, int n, int k, const float *x, size_t ldx,
                      const void *packed, const float *bias, float beta, float *y, size_t ldy) {
  unsigned char qmem[SQ_QX + 64];
  unsigned char *qx = (unsigned char *)(((uintptr_t)qmem + 63) & ~(uintptr_t)63);
  float dx[SQ_NBX];
  int32_t cx[SQ_NBX];
  int kp = (k + SG_QK - 1) / SG_QK * SG_QK, kch = kp < SQ_QX ? kp : SQ_QX;
  int gmax = kch > 0 ? SQ_QX / kch : SQ_MAXG;
  gmax = gmax > SQ_MAXG ? SQ_MAXG : gmax < 1 ? 1 : gmax;
  for (int i0 = 0; i0 < m; i0 += gmax) {
    int mg = m - i0 < gmax ? m - i0 : gmax, k0 = 0;
    do {
      int kc = k - k0 < kch ? k - k0 : kch, nb = (kc + SG_QK - 1) / SG_QK;
      sq_quant_rows(wt, mg, kc, x + (size_t)i0 * ldx + (size_t)k0, ldx, qx, dx, cx);
      int p = p0;
#if defined(SQ_VNNI)
      for (int np = mg == 1 ? 4 : 2; mg <= 2 && kc > 0 && p + np <= p1; p += np) {
        float acc[SQ_WIDE][SQ_MR][SG_NR];
        sq_wide_rows(mg, wt, nb, qx, dx, cx, (const unsigned char *)sg_panel_at(wt, packed, k, p, k0),
                     sg_panel_bytes(wt, k), acc);
        for (int c = 0; c < np; c++) {
          int j0 = (p + c) * SG_NR, nc = n - j0 < SG_NR ? n - j0 : SG_NR;
          sg_store(mg, acc[c], 1.0f, k0 || !bias ? NULL : bias + j0, k0 ? 1.0f : beta,
                   y + (size_t)i0 * ldy + (size_t)j0, ldy, nc);
        }
      }
#endif
      for (; p < p1; p++) {
        int j0 = p * SG_NR, nc = n - j0 < SG_NR ? n - j0 : SG_NR;
        const unsigned char *w = (const unsigned char *)sg_panel_at(wt, packed, k, p, k0);
        for (int i = 0; i < mg; i += SQ_MR) {
          int mr = mg - i < SQ_MR ? mg - i : SQ_MR;
          float acc[SQ_MR][SG_NR];
          for (int r = 0; r < mr; r++)
            for (int j = 0; j < SG_NR; j++) acc[r][j] = 0.0f;
          if (kc > 0)
            sq_tile_rows(mr, wt, nb, qx + (size_t)i * (size_t)nb * SG_QK, dx + (size_t)i * (size_t)nb,
                         cx + (size_t)i * (size_t)nb, w, i == 0, acc);
          /* a later chunk: its sums added */
          sg_store(mr, acc, 1.0f, k0 || !bias ? NULL : bias + j0, k0 ? 1.0f : beta,
                   y + (size_t)(i0 + i) * ldy + (size_t)j0, ldy, nc);
        }
      }
      k0 += kc;
    } while (k0 < k);
  }
}
