/* sample.c — picking the next token from a row of logits: greedy argmax or
 * temperature / top-k / top-p (nucleus) sampling from a seeded generator.
 * One part of the runtime (tools/amalgamate.sh), so vendored generators,
 * `blockc generate` and blockc_generate draw the same tokens from the same
 * logits and seed.  Dependency-free: no allocation (the caller passes a
 * scratch of BCRT_SAMPLE_SCRATCH_BYTES(V)), no libc but exp().
 *
 * The generator is xoshiro256** (Blackman and Vigna) with its four words of
 * state seeded by four successive outputs of splitmix64 started at the seed
 * (their recommended seeding; the same generator blockc uses for weights).
 * A uniform double in [0, 1) is (next() >> 11) * 2^-53.
 *
 * The exact procedure of bcrt_sample is documented in blockc_rt.h. */

/* Logits that take part: finite or +inf (NaN and -inf never do). */
static int smp_valid(float l, int any_inf) {
  return any_inf ? l > FLT_MAX : (l == l && l >= -FLT_MAX);
}

/* The order tokens are ranked in: larger logit first, lower id on ties. */
static int smp_before(const float *l, int32_t a, int32_t b) {
  return l[a] > l[b] || (l[a] == l[b] && a < b);
}

static void smp_sift(const float *l, int32_t *h, long n, long i) {
  for (;;) {
    long c = 2 * i + 1, best = i;
    if (c < n && smp_before(l, h[c], h[best])) best = c;
    if (c + 1 < n && smp_before(l, h[c + 1], h[best])) best = c + 1;
    if (best == i) return;
    int32_t t = h[i];
    h[i] = h[best];
    h[best] = t;
    i = best;
  }
}

/* Moves the first token of heap h[0..n) in rank order to h[n-1]; the heap
 * shrinks to n-1.  Returns that token. */
static int32_t smp_pop(const float *l, int32_t *h, long n) {
  int32_t top = h[0];
  h[0] = h[n - 1];
  h[n - 1] = top;
  smp_sift(l, h, n - 1, 0);
  return top;
}

/* The unnormalised probability of a valid token: exp((l - lmax) / T), or 1
 * when some logit is +inf (then only the +inf ones are valid). */
static double smp_weight(float l, float lmax, double temperature, int any_inf) {
  return any_inf ? 1.0 : exp(((double)l - (double)lmax) / temperature);
}

void bcrt_rng_seed(bcrt_rng *r, unsigned long long seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    r->s[i] = z ^ (z >> 31);
  }
}

static unsigned long long smp_rotl(unsigned long long x, int k) { return (x << k) | (x >> (64 - k)); }

unsigned long long bcrt_rng_next(bcrt_rng *r) {
  unsigned long long *s = r->s, result = smp_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = smp_rotl(s[3], 45);
  return result;
}

double bcrt_rng_uniform(bcrt_rng *r) { return (double)(bcrt_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); /* 2^-53 */ }

/* The last token of the kept set in rank order (the set is a prefix of that
 * order): top-k, then top-p over what top-k left.  n valid tokens. */
static int32_t smp_threshold(const float *l, int V, int any_inf, float lmax, double temperature,
                             int top_k, double top_p, long n, int32_t *h) {
  long m = 0;
  for (int32_t i = 0; i < V; i++)
    if (smp_valid(l[i], any_inf)) h[m++] = i;
  for (long i = n / 2 - 1; i >= 0; i--) smp_sift(l, h, n, i);
  long k = top_k > 0 && top_k < n ? top_k : n;  /* the candidates after top-k */
  long popped = 0;
  double s = 0;                                  /* their weight, in rank order */
  if (k < n) {
    for (; popped < k; popped++) s += smp_weight(l[smp_pop(l, h, n - popped)], lmax, temperature, any_inf);
  } else {
    for (int32_t i = 0; i < V; i++)
      if (smp_valid(l[i], any_inf)) s += smp_weight(l[i], lmax, temperature, any_inf);
  }
  if (!(top_p < 1.0)) return popped ? h[n - k] : -1;  /* -1: every valid token */
  double c = 0;
  for (long j = 0; j < k; j++) {
    if (j == popped) smp_pop(l, h, n - popped++);
    int32_t t = h[n - 1 - j];
    c += smp_weight(l[t], lmax, temperature, any_inf) / s;
    if (c >= top_p) return t;
  }
  return h[n - k];  /* rounding left c < p: all k kept */
}

int bcrt_sample(const float *logits, int V, double temperature, int top_k, double top_p,
                bcrt_rng *rng, void *scratch) {
  if (!logits || V < 1 || !(temperature >= 0) || temperature > DBL_MAX || top_k < 0 ||
      !(top_p > 0 && top_p <= 1))
    return -1;
  int any_inf = 0;
  int32_t best = -1;
  long n = 0;
  for (int32_t i = 0; i < V; i++) any_inf |= logits[i] > FLT_MAX;
  for (int32_t i = 0; i < V; i++)
    if (smp_valid(logits[i], any_inf)) {
      n++;
      if (best < 0 || logits[i] > logits[best]) best = i;
    }
  if (best < 0 || temperature == 0) return best;
  if (!rng || !scratch) return -1;
  float lmax = logits[best];
  int32_t thr = -1;
  if ((top_k > 0 && top_k < n) || top_p < 1.0)
    thr = smp_threshold(logits, V, any_inf, lmax, temperature, top_k, top_p, n, (int32_t *)scratch);
  double total = 0;
  int32_t last = best;
  for (int32_t i = 0; i < V; i++) {
    if (!smp_valid(logits[i], any_inf) || (thr >= 0 && smp_before(logits, thr, i))) continue;
    total += smp_weight(logits[i], lmax, temperature, any_inf);
    last = i;
  }
  double target = bcrt_rng_uniform(rng) * total, acc = 0;
  for (int32_t i = 0; i < V; i++) {
    if (!smp_valid(logits[i], any_inf) || (thr >= 0 && smp_before(logits, thr, i))) continue;
    acc += smp_weight(logits[i], lmax, temperature, any_inf);
    if (acc > target) return i;
  }
  return last;
}
