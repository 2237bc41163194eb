/* rng.c — dropout's counter-based generator: a mask element is a pure
 * function of (seed, step, node, element), so the interpreter's reference
 * backward, the JIT, AOT and every emitted backward draw the same masks,
 * and a backward regenerates them instead of storing them.
 * One part of the runtime: tools/amalgamate.sh concatenates runtime/src/
 * into runtime/blockc_rt.c; prelude.c has the includes.
 *
 * The function (all arithmetic mod 2^64):
 *   mix64(z)  = splitmix64's finaliser: z ^= z >> 30; z *= 0xBF58476D1CE4E5B9;
 *               z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31
 *   key       = mix64(mix64(mix64(seed) + step) + node)        (bcrt_drop_key)
 *   h(c)      = mix64(key + (c + 1) * 0x9E3779B97F4A7C15)      (counter c >= 0)
 *   bits(e)   = h(e / 2) >> 40 for even e, (h(e / 2) >> 16) & 0xFFFFFF for odd e
 *   u(e)      = bits(e) / 2^24, in [0, 1), 24 bits exact in float and double
 * (one 64-bit hash serves two elements: two disjoint 24-bit fields of it;
 * bcrt_drop_uniform(key, e) is u(e)).
 * An element is kept iff u >= p, i.e. iff bits >= thr with
 * thr = ceil(p * 2^24) (bcrt_drop_threshold), and a kept value is scaled by
 * 1/(1-p).  h(c) is splitmix64's c-th output from state `key`.  Cost: about
 * 0.6 ns per element on one core (gcc -O3 -march=native, AVX-512), twice a copy. */

static uint64_t drop_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t drop_hash(uint64_t key, long c) {
  return drop_mix64(key + ((uint64_t)c + 1u) * 0x9E3779B97F4A7C15ull);
}

static unsigned drop_bits(uint64_t key, long e) {
  uint64_t h = drop_hash(key, e >> 1);
  return (unsigned)((e & 1) ? (h >> 16) & 0xFFFFFFu : h >> 40);
}

/* y[i] = keep(e0 + i) ? x[i] * scale : 0 for i < n (y may alias x): a
 * single element up to an even e, then pairs from one hash each. */
static void drop_run(long n, const float *x, float *y, uint64_t key, long e0, unsigned thr,
                     float scale) {
  long i = 0;
  if (n > 0 && (e0 & 1)) {
    y[0] = drop_bits(key, e0) >= thr ? x[0] * scale : 0.0f;
    i = 1;
  }
  long c0 = (e0 + i) >> 1;
  for (; i + 1 < n; i += 2) {
    uint64_t h = drop_hash(key, c0 + (i >> 1));
    unsigned b0 = (unsigned)(h >> 40), b1 = (unsigned)((h >> 16) & 0xFFFFFFu);
    float x0 = x[i], x1 = x[i + 1];
    y[i] = b0 >= thr ? x0 * scale : 0.0f;
    y[i + 1] = b1 >= thr ? x1 * scale : 0.0f;
  }
  if (i < n) y[i] = drop_bits(key, e0 + i) >= thr ? x[i] * scale : 0.0f;
}

unsigned long long bcrt_drop_key(unsigned long long seed, unsigned long long step, long node) {
  return drop_mix64(drop_mix64(drop_mix64(seed) + step) + (uint64_t)node);
}

unsigned bcrt_drop_threshold(double p) {
  if (!(p > 0)) return 0;
  if (p >= 1) return 1u << 24;
  double t = p * 16777216.0, c = (double)(long)t;
  return (unsigned)(c < t ? c + 1 : c);
}

float bcrt_drop_uniform(unsigned long long key, long e) {
  return (float)drop_bits(key, e) * (1.0f / 16777216.0f);
}

void bcrt_dropout(long n, const float *x, float *y, unsigned long long key, long off,
                  unsigned thr, float scale) {
  drop_run(n, x, y, key, off, thr, scale);
}

void bcrt_dropout_acc(long n, const float *dy, float *dx, unsigned long long key, long off,
                      unsigned thr, float scale) {
  long i = 0;
  if (n > 0 && (off & 1)) {
    dx[0] += drop_bits(key, off) >= thr ? dy[0] * scale : 0.0f;
    i = 1;
  }
  long c0 = (off + i) >> 1;
  for (; i + 1 < n; i += 2) {
    uint64_t h = drop_hash(key, c0 + (i >> 1));
    unsigned b0 = (unsigned)(h >> 40), b1 = (unsigned)((h >> 16) & 0xFFFFFFu);
    float g0 = dy[i], g1 = dy[i + 1];
    dx[i] += b0 >= thr ? g0 * scale : 0.0f;
    dx[i + 1] += b1 >= thr ? g1 * scale : 0.0f;
  }
  if (i < n) dx[i] += drop_bits(key, off + i) >= thr ? dy[i] * scale : 0.0f;
}

void bcrt_dropout_rows(int n, int d, int ld, float *x, unsigned long long key, long off,
                       unsigned thr, float scale) {
  for (int r = 0; r < n; r++) {
    float *row = x + (size_t)r * (size_t)ld;
    drop_run(d, row, row, key, off + (long)r * d, thr, scale);
  }
}
