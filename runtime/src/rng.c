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
 *   h(e)      = mix64(key + (e + 1) * 0x9E3779B97F4A7C15)      (element e >= 0)
 *   u(e)      = (h(e) >> 40) / 2^24, in [0, 1), 24 bits exact in float and double
 * An element is kept iff u >= p, i.e. iff (h >> 40) >= thr with
 * thr = ceil(p * 2^24) (bcrt_drop_threshold), and a kept value is scaled by
 * 1/(1-p).  h(e) is splitmix64's e-th output from state `key`. */

static uint64_t drop_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t drop_bits(uint64_t key, long e) {
  return drop_mix64(key + ((uint64_t)e + 1u) * 0x9E3779B97F4A7C15ull) >> 40;
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
  for (long i = 0; i < n; i++) y[i] = drop_bits(key, off + i) >= thr ? x[i] * scale : 0.0f;
}

void bcrt_dropout_acc(long n, const float *dy, float *dx, unsigned long long key, long off,
                      unsigned thr, float scale) {
  for (long i = 0; i < n; i++)
    if (drop_bits(key, off + i) >= thr) dx[i] += dy[i] * scale;
}

void bcrt_dropout_rows(int n, int d, int ld, float *x, unsigned long long key, long off,
                       unsigned thr, float scale) {
  for (int r = 0; r < n; r++) {
    float *row = x + (size_t)r * (size_t)ld;
    long e0 = off + (long)r * d;
    for (int j = 0; j < d; j++) row[j] = drop_bits(key, e0 + j) >= thr ? row[j] * scale : 0.0f;
  }
}
