/* ------------------------------------------------------------------------ */
/* Tiled attention over a pool (issue 26): every head of every batch row,  */
/* a block of query rows at a time, never a T x T score matrix             */
/* ------------------------------------------------------------------------ */

/* bcrt_attention (the contract in blockc_rt.h) is FlashAttention's
 * schedule on the CPU: for a block of up to AT_BQ query rows of one head,
 * the keys go by in tiles of AT_BK; each tile's scores S = scale Q K^T
 * (cblas, or the streaming bcrt_gemm_rows_nt for a few rows) are capped and
 * masked, the rows' running maxima m and sums l are updated (the online
 * softmax: the output so far and l are scaled by exp(m_old - m_new) when a
 * larger score comes), and P V is added to the output rows in place.  At the
 * end each output row is divided by its l.  A causal block stops at the
 * last key its last row sees (the tiles above the diagonal are never
 * computed), a windowed one starts at the first key its first row sees.
 *
 * The only memory is one tile of scores (AT_BQ x AT_BK floats) and the
 * block's m and l, on the stack: nothing grows with T.  Tasks are (batch
 * row, head, query block), each writing its own output rows and columns
 * with the same arithmetic whatever thread runs it: the result is the same
 * for every pool.  One new position in a grouped-query step (T == 1, a
 * group of query heads per K|V head) runs the group's heads as the rows of
 * one block, so the cached keys and values are read once per group.
 *
 * Scores follow bcrt_softmax_ex: row i (absolute position row0 + i, or
 * rowpos[b] + i when a position per batch row is given) sees
 * keys [lo, hi), hi = causal ? min(row0 + i + 1, nk) : nk, lo = window ?
 * max(0, row0 + i + 1 - window) : 0; a row that sees no key gets zeros. */
#ifdef BLOCKC_NO_IO /* small stacks */
enum { AT_BQ = 8, AT_BK = 64, AT_PV = 512 };
#else
enum { AT_BQ = 64, AT_BK = 256, AT_PV = 4096 };
#endif

typedef struct {
  int B, T, H, group, dh, S, causal, row0, window, nqb, gstep;
  long ldq, ldkv, kvrows, vcol, ldo;
  const float *q, *k;
  const int *nk;
  const long *rowpos;
  float scale, cap;
  float *o;
  /* The training forward (bcrt_attention_train): each row's log-sum-exp,
   * and dropout on the weights (dthr 0: none) with element (b, h, i, j)
   * numbered ((b*H + h)*T + i)*kvrows + j. */
  float *lse;
  unsigned long long dkey;
  unsigned dthr;
  float dscale;
  /* The keys and values packed once a call (at_prepack; NULL: each block
   * packs the tiles it multiplies): K|V head (b, g)'s key panels at
   * kp + (b * nkv + g) * kstride, its value tiles at vp + (b * nkv + g) *
   * vstride (sgemm.c's gm_pack_panels layouts). */
  float *kp, *vp;
  size_t kstride, vstride;
} at_job;

/* The tiles' products run the portable GEMM (bcrt_sgemm_ws) on packing
 * buffers on the stack, or the streaming bcrt_gemm_rows_* for a few rows:
 * OpenBLAS serialises concurrent small calls on its buffer lock (measured:
 * two threads slower than one at T = 128), and its bits follow the shapes.
 * Without an allocator (-DBLOCKC_NO_IO) the GEMM takes its unpacked loop. */
#ifdef BLOCKC_NO_IO
#define AT_WS(name) void *name = NULL
#else
#define AT_WS(name)                                                                                \
  unsigned char name##_mem[BCRT_SGEMM_WS_FOR(AT_BQ, 256)];                                         \
  void *name = name##_mem
#endif

/* s (nr x nc, row stride nc) = scale x k^T: x rows ldx apart, k rows ldk;
 * kp (NULL: none) the same keys packed (gm_pack_panels). */
static void at_scores(void *ws, int nr, int nc, int dh, float scale, const float *x, long ldx,
                      const float *k, long ldk, const float *kp, float *s) {
#ifdef BLOCKC_NO_IO
  (void)kp;
#endif
  if (nr <= BCRT_ROWS_M)
    bcrt_gemm_rows_nt(nr, nc, dh, scale, x, (int)ldx, k, (int)ldk, s, nc);
#ifndef BLOCKC_NO_IO
  else if (kp)
    gm_packed(ws, nr, nc, dh, scale, x, (size_t)ldx, kp, (size_t)dh * 32, 0.0f, s, (size_t)nc);
#endif
  else
    bcrt_sgemm_ws(dh <= 256 ? ws : NULL, BCRT_NO_TRANS, BCRT_TRANS, nr, nc, dh, scale, x, (int)ldx,
                  k, (int)ldk, 0.0f, s, nc);
}

/* o (nr x dh, rows ldo apart) (+)= p v: p nr x nc (stride nc), v rows ldv;
 * vp (NULL: none) the same values packed (gm_pack_panels). */
static void at_pv(void *ws, int nr, int nc, int dh, const float *p, const float *v, long ldv,
                  const float *vp, int first, float *o, long ldo) {
#ifdef BLOCKC_NO_IO
  (void)vp;
#endif
  if (nr <= BCRT_ROWS_M && nr * dh <= AT_PV) {
    float t[AT_PV];
    bcrt_gemm_rows_nn(nr, dh, nc, 1.0f, p, nc, v, (int)ldv, first ? o : t, first ? (int)ldo : dh);
    if (!first)
      for (int r = 0; r < nr; r++)
        for (int c = 0; c < dh; c++) o[(size_t)r * (size_t)ldo + (size_t)c] += t[r * dh + c];
  } else {
#ifndef BLOCKC_NO_IO
    if (vp) {
      gm_packed(ws, nr, dh, nc, 1.0f, p, (size_t)nc, vp, (size_t)AT_BK * 32, first ? 0.0f : 1.0f, o,
                (size_t)ldo);
      return;
    }
#endif
    bcrt_sgemm_ws(ws, BCRT_NO_TRANS, BCRT_NO_TRANS, nr, dh, nc, 1.0f, p, nc, v, (int)ldv,
                  first ? 0.0f : 1.0f, o, (int)ldo);
  }
}

/* One block: nr rows, row r at q + r*ldq, output o + r*ldo, absolute
 * position pos[r] (the keys it sees follow from it).  lse (NULL: none)
 * receives each row's log sum exp of its scores (FLT_MAX for a row that
 * sees no key: its weights are then exp(s - FLT_MAX) = 0); with dropout,
 * row r's key c is element drow + r*kvrows + c of the mask. */
static void at_block(const at_job *j, int nr, const float *q, long ldq, float *o, long ldo,
                     const int *pos, const float *kb, const float *kp, const float *vp, int nkb,
                     float *lse, long drow) {
  float s[AT_BQ * AT_BK], mx[AT_BQ], l[AT_BQ];
  AT_WS(ws);
  int lo_r[AT_BQ], hi_r[AT_BQ];
  int lo = nkb, hi = 0;
  for (int r = 0; r < nr; r++) {
    int h1 = j->causal && pos[r] + 1 < nkb ? pos[r] + 1 : nkb;
    int l0 = j->window > 0 && pos[r] + 1 - j->window > 0 ? pos[r] + 1 - j->window : 0;
    lo_r[r] = l0 < h1 ? l0 : h1;
    hi_r[r] = h1;
    lo = lo_r[r] < lo ? lo_r[r] : lo;
    hi = hi_r[r] > hi ? hi_r[r] : hi;
    mx[r] = -FLT_MAX;
    l[r] = 0.0f;
  }
  const float *vb = kb + j->vcol;
  int first = 1;
  for (int j0 = lo; j0 < hi; j0 += AT_BK) {
    int nc = hi - j0 < AT_BK ? hi - j0 : AT_BK;
    /* with packed keys and values (window 0, so the tiles start at 0, 256, ...) */
    const float *kpt = kp ? kp + (size_t)j0 * (size_t)j->dh : NULL;
    const float *vpt = vp ? vp + (size_t)j0 * (size_t)((j->dh + 31) / 32 * 32) : NULL;
    at_scores(ws, nr, nc, j->dh, j->scale, q, ldq, kb + (size_t)j0 * (size_t)j->ldkv, j->ldkv,
              kpt, s);
    for (int r = 0; r < nr; r++) {
      float *row = s + (size_t)r * (size_t)nc;
      int a = lo_r[r] > j0 ? lo_r[r] - j0 : 0, e = hi_r[r] - j0 < nc ? hi_r[r] - j0 : nc;
      if (a >= e) { /* no key of this row in the tile: it adds nothing */
        for (int c = 0; c < nc; c++) row[c] = 0.0f;
        if (!first) continue;
        for (int c = 0; c < j->dh; c++) o[(size_t)r * (size_t)ldo + (size_t)c] = 0.0f;
        continue;
      }
      /* the row's keys [a, e) as softmax_row takes them: whole LANES
       * blocks to lim (capped at the tile), selects past len */
      float *x = row + a;
      int len = e - a, lim = len % LANES ? len + LANES - len % LANES : len;
      if (a + lim > nc) lim = nc - a;
      if (j->cap > 0.0f)
        for (int c = 0; c < len; c++) x[c] = j->cap * tanh_f(x[c] / j->cap);
      float m = row_max(lim, len, x);
      float mnew = m > mx[r] ? m : mx[r];
      float alpha = mx[r] == -FLT_MAX ? 0.0f : exp_nonpos(mx[r] - mnew);
      for (int c = 0; c < a; c++) row[c] = 0.0f;
      for (int c = 0; c < lim; c++) x[c] = c < len ? exp_nonpos(x[c] - mnew) : 0.0f;
      for (int c = a + lim; c < nc; c++) row[c] = 0.0f;
      float sum = row_sum(lim, x);
      if (j->dthr) /* the values weighted by the dropped weights; l by all */
        bcrt_dropout(len, x, x, j->dkey, drow + (long)r * j->kvrows + j0 + a, j->dthr, j->dscale);
      l[r] = l[r] * alpha + sum;
      mx[r] = mnew;
      if (!first && alpha != 1.0f)
        for (int d = 0; d < j->dh; d++) o[(size_t)r * (size_t)ldo + (size_t)d] *= alpha;
    }
    at_pv(ws, nr, nc, j->dh, s, vb + (size_t)j0 * (size_t)j->ldkv, j->ldkv, vpt, first, o, ldo);
    first = 0;
  }
  for (int r = 0; lse && r < nr; r++)
    lse[r] = first || !(l[r] > 0.0f) ? FLT_MAX : mx[r] + (float)log((double)l[r]);
  for (int r = 0; r < nr; r++) {
    float *orow = o + (size_t)r * (size_t)ldo;
    if (first || !(l[r] > 0.0f)) { /* no key at all (or a NaN sum: keep it) */
      for (int d = 0; d < j->dh; d++) orow[d] = first ? 0.0f : orow[d] * l[r];
      continue;
    }
    float inv = 1.0f / l[r];
    for (int d = 0; d < j->dh; d++) orow[d] *= inv;
  }
}

static void at_task(void *arg, int task, int ntasks) {
  (void)ntasks;
  const at_job *j = (const at_job *)arg;
  int pos[AT_BQ];
  if (j->gstep) { /* task = (b, K|V head): the group's heads as rows */
    int nkv = j->H / j->group, b = task / nkv, g = task % nkv;
    const float *q = j->q + (size_t)b * (size_t)j->ldq + (size_t)g * (size_t)j->group * (size_t)j->dh;
    float *o = j->o + (size_t)b * (size_t)j->ldo + (size_t)g * (size_t)j->group * (size_t)j->dh;
    const float *kb = j->k + (size_t)b * (size_t)j->kvrows * (size_t)j->ldkv + (size_t)g * (size_t)j->dh;
    int nkb = j->nk ? j->nk[b] : j->S, p0 = j->rowpos ? (int)j->rowpos[b] : j->row0;
    for (int r = 0; r < j->group; r++) pos[r] = p0;
    size_t bg = (size_t)b * (size_t)nkv + (size_t)g;
    at_block(j, j->group, q, j->dh, o, j->dh, pos, kb, j->kp ? j->kp + bg * j->kstride : NULL,
             j->vp ? j->vp + bg * j->vstride : NULL, nkb, NULL, 0);
    return;
  }
  int qb = task % j->nqb, bh = task / j->nqb, h = bh % j->H, b = bh / j->H;
  int i0 = qb * AT_BQ, nr = j->T - i0 < AT_BQ ? j->T - i0 : AT_BQ;
  const float *q = j->q + ((size_t)b * (size_t)j->T + (size_t)i0) * (size_t)j->ldq + (size_t)h * (size_t)j->dh;
  float *o = j->o + ((size_t)b * (size_t)j->T + (size_t)i0) * (size_t)j->ldo + (size_t)h * (size_t)j->dh;
  const float *kb = j->k + (size_t)b * (size_t)j->kvrows * (size_t)j->ldkv +
                    (size_t)(h / j->group) * (size_t)j->dh;
  int nkb = j->nk ? j->nk[b] : j->S, p0 = j->rowpos ? (int)j->rowpos[b] : j->row0;
  for (int r = 0; r < nr; r++) pos[r] = p0 + i0 + r;
  long row = ((long)b * j->H + h) * j->T + i0; /* (b, h, i0) in [B, H, T] */
  size_t bg = (size_t)b * (size_t)(j->H / j->group) + (size_t)(h / j->group);
  at_block(j, nr, q, j->ldq, o, j->ldo, pos, kb, j->kp ? j->kp + bg * j->kstride : NULL,
           j->vp ? j->vp + bg * j->vstride : NULL, nkb, j->lse ? j->lse + row : NULL,
           row * j->kvrows);
}

/* Packing the keys and values once a call, when several query blocks of a
 * head multiply them through the GEMM (more than BCRT_ROWS_M rows a block)
 * and every tile starts at a multiple of AT_BK (no window) — the blocks
 * then read the panels (at_scores, at_pv) instead of packing each tile
 * again, with the same tiles and bits.  The training forward only: the
 * panels are malloc'd, and the forward and step entries allocate nothing
 * (blockc_rt.h; `make alloc-test`), while the training step's GEMMs
 * allocate per call anyway.  Not with a position per batch row, nor when
 * the panels cannot be allocated (then every block packs, as before).
 * Task (b, g): K|V head g of batch row b, keys [0, nk[b]). */
#ifndef BLOCKC_NO_IO
static void at_pack_task(void *arg, int task, int ntasks) {
  (void)ntasks;
  const at_job *j = (const at_job *)arg;
  int nkv = j->H / j->group, b = task / nkv, g = task % nkv;
  int n = j->nk ? j->nk[b] : j->S;
  if (n > j->S) n = j->S;
  const float *kb = j->k + (size_t)b * (size_t)j->kvrows * (size_t)j->ldkv + (size_t)g * (size_t)j->dh;
  float *kp = j->kp + (size_t)task * j->kstride, *vp = j->vp + (size_t)task * j->vstride;
  size_t dhp = (size_t)(j->dh + 31) / 32 * 32;
  if (n > 0) gm_pack_panels(1, kb, (size_t)j->ldkv, j->dh, n, kp, (size_t)j->dh * 32);
  for (int j0 = 0; j0 < n; j0 += AT_BK)
    gm_pack_panels(0, kb + j->vcol + (size_t)j0 * (size_t)j->ldkv, (size_t)j->ldkv,
                   n - j0 < AT_BK ? n - j0 : AT_BK, j->dh, vp + (size_t)j0 * dhp,
                   (size_t)AT_BK * 32);
}
#endif

/* Runs job j over pool; with pack, its keys and values packed first where
 * that pays. */
static void at_run(bcrt_pool *pool, at_job *j, int ntasks, int pack) {
#ifdef BLOCKC_NO_IO
  (void)pack;
#else
  int rows = j->gstep ? j->group : j->T < AT_BQ ? j->T : AT_BQ;
  int nkv = j->H / j->group;
  double keys = (double)(j->S + AT_BK) * (double)j->B * (double)nkv;
  if (pack && rows > BCRT_ROWS_M && !j->rowpos && j->window <= 0 && j->dh <= 256 && j->S > 0 &&
      j->scale != 0.0f && (j->gstep || j->nqb > 1) && keys * (double)(j->dh + 32) < 1e10) {
    size_t nbg = (size_t)j->B * (size_t)nkv, dhp = (size_t)(j->dh + 31) / 32 * 32;
    j->kstride = (size_t)(j->S + 31) / 32 * 32 * (size_t)j->dh;
    j->vstride = (size_t)(j->S + AT_BK - 1) / AT_BK * AT_BK * dhp;
    j->kp = (float *)malloc(nbg * (j->kstride + j->vstride) * sizeof(float));
    if (j->kp) {
      j->vp = j->kp + nbg * j->kstride;
      bcrt_pool_run(pool, (int)nbg, at_pack_task, j);
    }
  }
#endif
  bcrt_pool_run(pool, ntasks, at_task, j);
#ifndef BLOCKC_NO_IO
  free(j->kp);
#endif
}

void bcrt_attention(bcrt_pool *pool, int B, int T, int H, int group, int dh, const float *q,
                    long ldq, const float *k, long ldkv, long kvrows, long vcol, const int *nk,
                    int S, int causal, int row0, const long *rowpos, int window, float scale,
                    float cap, float *o, long ldo) {
  if (B <= 0 || T <= 0 || H <= 0 || dh <= 0 || group <= 0 || H % group) return;
  at_job j = {.B = B, .T = T, .H = H, .group = group, .dh = dh, .S = S, .causal = causal,
              .row0 = row0, .window = window, .nqb = (T + AT_BQ - 1) / AT_BQ, .ldq = ldq,
              .ldkv = ldkv, .kvrows = kvrows, .vcol = vcol, .ldo = ldo, .q = q, .k = k, .nk = nk,
              .rowpos = rowpos,
              .scale = scale, .cap = cap, .o = o};
  j.gstep = T == 1 && group > 1 && group <= AT_BQ;
  long ntasks = j.gstep ? (long)B * (H / group) : (long)B * H * j.nqb;
  if (ntasks > INT_MAX) return;
  at_run(pool, &j, (int)ntasks, 0);
}

/* The training forward: bcrt_attention (row0 0, no rowpos) that also keeps
 * each row's log sum exp for the backward, and drops weights when dthr. */
void bcrt_attention_train(bcrt_pool *pool, int B, int T, int H, int group, int dh,
                          const float *q, long ldq, const float *k, long ldkv, long kvrows,
                          long vcol, const int *nk, int S, int causal, int window, float scale,
                          float cap, unsigned long long dkey, unsigned dthr, float dscale,
                          float *o, long ldo, float *lse) {
  if (B <= 0 || T <= 0 || H <= 0 || dh <= 0 || group <= 0 || H % group) return;
  at_job j = {.B = B, .T = T, .H = H, .group = group, .dh = dh, .S = S, .causal = causal,
              .window = window, .nqb = (T + AT_BQ - 1) / AT_BQ, .ldq = ldq, .ldkv = ldkv,
              .kvrows = kvrows, .vcol = vcol, .ldo = ldo, .q = q, .k = k, .nk = nk,
              .scale = scale, .cap = cap, .o = o, .lse = lse, .dkey = dkey, .dthr = dthr,
              .dscale = dscale};
  long ntasks = (long)B * H * j.nqb;
  if (ntasks > INT_MAX) return;
  at_run(pool, &j, (int)ntasks, 1);
}

/* ------------------------------------------------------------------------ */
/* The backward, tiled: the weights recomputed from the kept log sum exps  */
/* ------------------------------------------------------------------------ */

/* bcrt_attention_bwd is FlashAttention-2's backward on the CPU.  A task
 * is a (batch row, K|V head) pair: it owns that head's rows of dK and dV
 * and the dQ columns of the group's query heads, so it accumulates into
 * them in place, and no two tasks write the same float (no atomics, and the
 * same arithmetic whatever thread runs it: the result is the same for every
 * pool).  For each query head of the group and each block of AB_BQ query
 * rows (D_i = dO_i . O_i once per block), the key tiles of AB_BK keys the
 * block sees go by; a tile recomputes the scores s = cap(scale q.k), the
 * weights p = exp(s - lse) (0 outside the keys the row sees), dP = dO V^T
 * through the dropout mask, dS = p (dP - D) (times 1 - (s/cap)^2 under a
 * cap), then dV += P'^T dO (P' the weights as dropped and scaled),
 * dK += scale dS^T Q and dQ += scale dS K: five products per tile, one more
 * than with the weights kept.  Causal tiles above the diagonal and windowed
 * tiles before the window are skipped.  The memory is three tiles and the
 * GEMM's packing buffers on the stack. */
#ifdef BLOCKC_NO_IO
enum { AB_BQ = 8, AB_BK = 64 };
#define AB_WS(name) void *name = NULL
#else
enum { AB_BQ = 64, AB_BK = 128 };
#define AB_WS(name)                                                                                \
  unsigned char name##_mem[BCRT_SGEMM_WS_FOR(AB_BK, 256)];                                         \
  void *name = name##_mem
#endif
typedef struct {
  at_job f; /* the forward's geometry (q, k, nk, masks, scale, cap, dropout) */
  const float *o, *dout, *lse;
  float *dq, *dk;
} ab_job;

/* Keys [lo, hi) that the row at position i sees among n. */
static void ab_range(const at_job *f, int i, int n, int *lo, int *hi) {
  int h1 = f->causal && i + 1 < n ? i + 1 : n;
  int l0 = f->window > 0 && i + 1 - f->window > 0 ? i + 1 - f->window : 0;
  *lo = l0 < h1 ? l0 : h1;
  *hi = h1;
}

/* One tile: the block's nr query rows (q, dout rows ldq / ldo apart, their
 * D in dsum, lse, mask rows from drow) against keys j0..j0+nc-1 (kb, v =
 * kb + vcol).  s, p, ds: nr x nc; p receives the weights as the forward
 * applied them to V (dropped, scaled), ds receives dS. */
static void ab_tile(const at_job *f, void *ws, const float *q, const float *dout, const float *kb,
                    int i0, int nr, int j0, int nc, int n, const float *lse, const float *dsum,
                    long drow, float *s, float *p, float *ds) {
  at_scores(ws, nr, nc, f->dh, f->scale, q, f->ldq, kb, f->ldkv, NULL, s);
  at_scores(ws, nr, nc, f->dh, 1.0f, dout, f->ldo, kb + f->vcol, f->ldkv, NULL, ds); /* dO V^T */
  for (int r = 0; r < nr; r++) {
    float *sr = s + (size_t)r * (size_t)nc, *dr = ds + (size_t)r * (size_t)nc;
    float *pr = p + (size_t)r * (size_t)nc;
    int lo, hi;
    ab_range(f, i0 + r, n, &lo, &hi);
    int a = lo > j0 ? lo - j0 : 0, e = hi - j0 < nc ? hi - j0 : nc;
    long doff = drow + (long)r * f->kvrows + j0;
    if (f->dthr && a < e) /* dP through the mask */
      bcrt_dropout(e - a, dr + a, dr + a, f->dkey, doff + a, f->dthr, f->dscale);
    for (int c = 0; c < a; c++) dr[c] = pr[c] = 0.0f;
    for (int c = e; c < nc; c++) dr[c] = pr[c] = 0.0f;
    const float l = lse[r], dm = dsum[r], cap = f->cap;
    if (cap > 0.0f) {
      for (int c = a; c < e; c++) {
        float x = cap * tanh_f(sr[c] / cap), w = exp_nonpos(x - l);
        dr[c] = w * (dr[c] - dm) * (1.0f - (x / cap) * (x / cap));
        pr[c] = w;
      }
    } else {
      for (int c = a; c < e; c++) { /* branch-free: vectorised */
        float w = exp_nonpos(sr[c] - l);
        dr[c] = w * (dr[c] - dm);
        pr[c] = w;
      }
    }
    if (f->dthr && a < e) bcrt_dropout(e - a, pr + a, pr + a, f->dkey, doff + a, f->dthr, f->dscale);
  }
}

static void ab_task(void *arg, int task, int ntasks) {
  (void)ntasks;
  const ab_job *J = (const ab_job *)arg;
  const at_job *f = &J->f;
  float s[AB_BQ * AB_BK], p[AB_BQ * AB_BK], ds[AB_BQ * AB_BK], dsum[AB_BQ];
  AB_WS(ws);
  int nkv = f->H / f->group, g = task % nkv, b = task / nkv;
  int n = f->nk ? f->nk[b] : f->S;
  if (n > f->kvrows) n = (int)f->kvrows;
  size_t dh = (size_t)f->dh;
  const float *kb = f->k + (size_t)b * (size_t)f->kvrows * (size_t)f->ldkv + (size_t)g * dh;
  float *dk = J->dk + (size_t)b * (size_t)f->kvrows * (size_t)f->ldkv + (size_t)g * dh;
  for (int h = g * f->group; h < (g + 1) * f->group; h++)
    for (int i0 = 0; i0 < f->T; i0 += AB_BQ) {
      int nr = f->T - i0 < AB_BQ ? f->T - i0 : AB_BQ;
      size_t qrow = (size_t)b * (size_t)f->T + (size_t)i0;
      const float *q = f->q + qrow * (size_t)f->ldq + (size_t)h * dh;
      const float *o = J->o + qrow * (size_t)f->ldo + (size_t)h * dh;
      const float *dout = J->dout + qrow * (size_t)f->ldo + (size_t)h * dh;
      float *dq = J->dq + qrow * (size_t)f->ldq + (size_t)h * dh;
      long row = ((long)b * f->H + h) * f->T + i0;
      for (int r = 0; r < nr; r++) {
        const float *orow = o + (size_t)r * (size_t)f->ldo, *drow = dout + (size_t)r * (size_t)f->ldo;
        float d = 0.0f;
        for (size_t c = 0; c < dh; c++) d += drow[c] * orow[c];
        dsum[r] = d;
      }
      int lo0, hi0, lo1, hi1; /* lo and hi grow with the row: the block sees [lo0, hi1) */
      ab_range(f, i0, n, &lo0, &hi0);
      ab_range(f, i0 + nr - 1, n, &lo1, &hi1);
      for (int j0 = lo0 / AB_BK * AB_BK; j0 < hi1; j0 += AB_BK) {
        int nc = hi1 - j0 < AB_BK ? hi1 - j0 : AB_BK;
        const float *kj = kb + (size_t)j0 * (size_t)f->ldkv;
        float *dkj = dk + (size_t)j0 * (size_t)f->ldkv;
        ab_tile(f, ws, q, dout, kj, i0, nr, j0, nc, n, J->lse + row, dsum, row * f->kvrows, s, p, ds);
        bcrt_sgemm_ws(ws, BCRT_TRANS, BCRT_NO_TRANS, nc, f->dh, nr, 1.0f, p, nc, dout, (int)f->ldo,
                      1.0f, dkj + f->vcol, (int)f->ldkv); /* dV += P'^T dO */
        bcrt_sgemm_ws(ws, BCRT_TRANS, BCRT_NO_TRANS, nc, f->dh, nr, f->scale, ds, nc, q, (int)f->ldq,
                      1.0f, dkj, (int)f->ldkv); /* dK += scale dS^T Q */
        bcrt_sgemm_ws(ws, BCRT_NO_TRANS, BCRT_NO_TRANS, nr, f->dh, nc, f->scale, ds, nc, kj,
                      (int)f->ldkv, 1.0f, dq, (int)f->ldq); /* dQ += scale dS K */
      }
    }
}

void bcrt_attention_bwd(bcrt_pool *pool, int B, int T, int H, int group, int dh, const float *q,
                        long ldq, const float *k, long ldkv, long kvrows, long vcol, const int *nk,
                        int S, int causal, int window, float scale, float cap,
                        unsigned long long dkey, unsigned dthr, float dscale, const float *o,
                        const float *dout, long ldo, const float *lse, float *dq, float *dk) {
  if (B <= 0 || T <= 0 || H <= 0 || dh <= 0 || group <= 0 || H % group || kvrows <= 0) return;
  ab_job J = {.f = {.B = B, .T = T, .H = H, .group = group, .dh = dh, .S = S, .causal = causal,
                    .window = window, .nqb = (T + AT_BQ - 1) / AT_BQ, .ldq = ldq, .ldkv = ldkv,
                    .kvrows = kvrows, .vcol = vcol, .ldo = ldo, .q = q, .k = k, .nk = nk,
                    .scale = scale, .cap = cap, .dkey = dkey, .dthr = dthr, .dscale = dscale},
              .o = o, .dout = dout, .lse = lse, .dq = dq, .dk = dk};
  long ntasks = (long)B * (H / group);
  if (ntasks > INT_MAX) return;
  bcrt_pool_run(pool, (int)ntasks, ab_task, &J);
}
