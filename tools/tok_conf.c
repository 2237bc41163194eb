/* tok_conf.c — blockc's side of `make tok-conformance`: encodes and decodes
 * every document of the corpus with runtime/blockc_tok.c and compares with
 * what tools/tok_ref.mjs recorded from the Hugging Face `tokenizers` library.
 *
 *   tok_conf NAME (TOKENIZER.json | MODEL.gguf | VOCAB.json MERGES.txt) CORPUS_DIR N REF [--no-roundtrip]
 *
 * (MODEL.gguf: the tokenizer its tokenizer.ggml.* metadata describes, loaded
 * by the CLI's cli_tokenizer_load, so this links libblockc_cli.a.)
 * Per document: ids (no special tokens) == REF.ids, ids with special tokens
 * == REF.ids_sp, decode(ids) == REF.dec (HF's decode), decode(encode(s)) ==
 * the text HF saw (REF.text: the document with invalid UTF-8 as U+FFFD)
 * unless --no-roundtrip (a normalizer changes the text; with
 * --lossy-leading-space, Metaspace's decoder, not of documents that start
 * with a space), and of documents without special tokens, and the stream
 * (one id at a time, the first 2048 ids) == decode of those ids.  Then the throughput: the median of 3 encode
 * passes over the corpus, next to REF.mbps.  Exit 1 when anything differs
 * (the first differences printed), 0 otherwise. */
#define _POSIX_C_SOURCE 200809L
#include "blockc_tok.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STREAM_IDS 2048

typedef struct blob { char *p; size_t n; } blob;

static blob slurp(const char *path) {
  blob b = {0};
  FILE *f = fopen(path, "rb");
  if (!f) return b;
  size_t cap = 1 << 16;
  b.p = malloc(cap);
  for (size_t k; b.p && (k = fread(b.p + b.n, 1, cap - b.n, f)) > 0;) {
    b.n += k;
    if (b.n == cap) b.p = realloc(b.p, cap *= 2);
  }
  fclose(f);
  return b;
}

/* Record i of a length-prefixed file (u32 LE + bytes); 0 when missing. */
static int rec(const blob *b, size_t *off, const char **p, size_t *n) {
  if (*off + 4 > b->n) return 0;
  const unsigned char *u = (const unsigned char *)b->p + *off;
  *n = (size_t)u[0] | (size_t)u[1] << 8 | (size_t)u[2] << 16 | (size_t)u[3] << 24;
  *p = b->p + *off + 4;
  *off += 4 + *n;
  return *off <= b->n;
}

/* Line of ids at *off into ids (count *n). */
static void ids_line(const blob *b, size_t *off, int32_t *ids, size_t cap, size_t *n) {
  *n = 0;
  while (*off < b->n && b->p[*off] != '\n') {
    while (*off < b->n && b->p[*off] == ' ') (*off)++;
    if (*off >= b->n || b->p[*off] == '\n') break;
    long v = strtol(b->p + *off, NULL, 10);
    while (*off < b->n && b->p[*off] != ' ' && b->p[*off] != '\n') (*off)++;
    if (*n < cap) ids[*n] = (int32_t)v;
    (*n)++;
  }
  (*off)++;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct counts { int ids, ids_sp, dec, rt, stream, shown, nspecial, rt_special_bad; } counts;

static void show_ids(const char *what, int doc, const int32_t *a, size_t na, const int32_t *b, size_t nb) {
  size_t i = 0;
  while (i < na && i < nb && a[i] == b[i]) i++;
  fprintf(stderr, "  doc %05d %s: blockc %zu ids, tokenizers %zu; first difference at %zu:", doc, what, na, nb, i);
  for (size_t k = i > 2 ? i - 2 : 0; k < i + 4; k++)
    fprintf(stderr, " [%s%d/%d]", k == i ? "*" : "", k < na ? a[k] : -1, k < nb ? b[k] : -1);
  fputc('\n', stderr);
}

int main(int argc, char **argv) {
  int noround = argc > 1 && !strcmp(argv[argc - 1], "--no-roundtrip");
  int lead = argc > 1 && !strcmp(argv[argc - 1], "--lossy-leading-space");
  if (noround || lead) argc--;
  if (argc != 6 && argc != 7) {
    fprintf(stderr, "usage: tok_conf NAME (TOKENIZER.json | VOCAB MERGES) DIR N REF [--no-roundtrip | --lossy-leading-space]\n");
    return 2;
  }
  const char *name = argv[1], *dir = argv[argc - 3], *refp = argv[argc - 1];
  int n = atoi(argv[argc - 2]);
  char err[1024], path[4096];
  /* a .gguf file: the tokenizer it carries, read as `blockc generate` reads it */
  blockc_tokenizer *t = argc == 6 ? cli_tokenizer_load(argv[2], err, sizeof err)
                                  : blockc_tokenizer_load_bpe(argv[2], argv[3], err, sizeof err);
  if (!t) { fprintf(stderr, "tok-conformance: %s: %s\n", name, err); return 1; }
  blob ref[4];
  const char *ext[4] = {"ids", "ids_sp", "dec", "text"};
  for (int k = 0; k < 4; k++) {
    snprintf(path, sizeof path, "%s.%s", refp, ext[k]);
    ref[k] = slurp(path);
    if (!ref[k].p) { fprintf(stderr, "tok-conformance: cannot read %s\n", path); return 1; }
  }
  size_t off[4] = {0}, bytes = 0, cap = 1 << 22;
  int32_t *want = malloc(cap * sizeof(int32_t));
  blob *docs = calloc((size_t)n, sizeof(blob));
  counts c = {0};
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/%05d.txt", dir, i);
    docs[i] = slurp(path);
    if (!docs[i].p) { fprintf(stderr, "tok-conformance: cannot read %s\n", path); return 1; }
    bytes += docs[i].n;
    for (int sp = 0; sp < 2; sp++) {
      int32_t *ids;
      size_t nids, nw;
      ids_line(&ref[sp], &off[sp], want, cap, &nw);
      if (blockc_tokenizer_encode(t, docs[i].p, docs[i].n, sp, &ids, &nids, err, sizeof err)) {
        fprintf(stderr, "  doc %05d: encode failed: %s\n", i, err);
        return 1;
      }
      int same = nids == nw && !memcmp(ids, want, nids * sizeof(int32_t));
      if (same) *(sp ? &c.ids_sp : &c.ids) += 1;
      else if (c.shown++ < 5) show_ids(sp ? "ids (add_special)" : "ids", i, ids, nids, want, nw);
      if (sp) { free(ids); continue; }
      char *text;
      size_t len;
      const char *hd, *ht;
      size_t hn, htn;
      rec(&ref[2], &off[2], &hd, &hn);
      rec(&ref[3], &off[3], &ht, &htn);
      /* decode of HF's ids (the same as ours when they agree) */
      if (blockc_tokenizer_decode(t, want, nw, 0, &text, &len, err, sizeof err)) {
        fprintf(stderr, "  doc %05d: decode failed: %s\n", i, err);
        return 1;
      }
      if (len == hn && !memcmp(text, hd, hn)) c.dec++;
      else if (c.shown++ < 5) fprintf(stderr, "  doc %05d: decode differs from tokenizers' (%zu vs %zu bytes)\n", i, len, hn);
      free(text);
      if (blockc_tokenizer_decode(t, ids, nids, 0, &text, &len, err, sizeof err)) return 1;
      /* A special token splits the text: the Prepend normalizer of Llama 2
       * files then adds a "\u2581" after it that the text did not have; the
       * round trip is required of documents without special tokens. */
      int special = 0;
      for (size_t k = 0; k < nids; k++) special |= blockc_tokenizer_is_special(t, ids[k]);
      c.nspecial += special;
      if (len == htn && !memcmp(text, ht, htn)) c.rt++;
      else if (special || (lead && docs[i].n && docs[i].p[0] == ' ')) c.rt_special_bad++;
      else if (!noround && c.shown++ < 5) fprintf(stderr, "  doc %05d: decode(encode(s)) != s\n", i);
      /* The stream over the first STREAM_IDS ids (a generation's length:
       * position-dependent decoders re-decode the whole sequence per push),
       * against decode of those ids. */
      size_t ns = nids < STREAM_IDS ? nids : STREAM_IDS;
      /* not inside a run of byte tokens (cut there, the run's decode differs) */
      while (ns < nids && blockc_tokenizer_id_to_token(t, ids[ns]) &&
             !strncmp(blockc_tokenizer_id_to_token(t, ids[ns]), "<0x", 3))
        ns++;
      char *part;
      size_t plen;
      if (blockc_tokenizer_decode(t, ids, ns, 0, &part, &plen, err, sizeof err)) return 1;
      blockc_tokenizer_stream *s = blockc_tokenizer_stream_new(t, 0);
      char *acc = malloc(plen + 64);
      size_t an = 0, cap2 = plen + 64;
      int ok = 1;
      for (size_t k = 0; k <= ns && ok; k++) {
        const char *o;
        size_t on;
        int rc = k < ns ? blockc_tokenizer_stream_push(s, ids[k], &o, &on) : blockc_tokenizer_stream_finish(s, &o, &on);
        if (rc || an + on > cap2) { ok = 0; break; }
        memcpy(acc + an, o, on);
        an += on;
      }
      if (ok && an == plen && !memcmp(acc, part, plen)) c.stream++;
      else if (c.shown++ < 5) fprintf(stderr, "  doc %05d: the stream's text differs from decode\n", i);
      blockc_tokenizer_stream_free(s);
      free(part);
      free(acc);
      free(text);
      free(ids);
    }
  }
  double times[3];
  for (int r = 0; r < 3; r++) {
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
      int32_t *ids;
      size_t nids;
      blockc_tokenizer_encode(t, docs[i].p, docs[i].n, 0, &ids, &nids, err, sizeof err);
      free(ids);
    }
    times[r] = now_s() - t0;
  }
  qsort(times, 3, sizeof(double), cmp_d);
  double ours = bytes / 1e6 / times[1], theirs = 0;
  snprintf(path, sizeof path, "%s.mbps", refp);
  blob hm = slurp(path);
  if (hm.p) theirs = strtod(hm.p, NULL);
  int fail = c.ids != n || c.ids_sp != n || c.dec != n || c.stream != n ||
             (!noround && c.rt + c.rt_special_bad != n);
  char rtnote[128] = "";
  if (noround) snprintf(rtnote, sizeof rtnote, " (not required: a normalizer changes the text)");
  else if (c.rt_special_bad)
    snprintf(rtnote, sizeof rtnote, " (%d documents with special tokens%s differ: not required)",
             c.rt_special_bad, lead ? " or a leading space" : "");
  printf("tok-conformance: %-16s %d documents, %.2f MB: ids %d/%d, ids with special tokens %d/%d, decode = "
         "tokenizers' %d/%d, decode(encode(s)) = s %d/%d%s, stream = decode (first %d ids) %d/%d: %s\n",
         name, n, bytes / 1e6, c.ids, n, c.ids_sp, n, c.dec, n, c.rt, n, rtnote, STREAM_IDS, c.stream, n,
         fail ? "FAIL" : "ok");
  printf("tok-conformance: %-16s encode throughput (median of 3): blockc %.2f MB/s, tokenizers (Node) %.2f MB/s, "
         "ratio %.2f\n", name, ours, theirs, theirs > 0 ? ours / theirs : 0.0);
  for (int i = 0; i < n; i++) free(docs[i].p);
  free(docs);
  free(want);
  free(hm.p);
  for (int k = 0; k < 4; k++) free(ref[k].p);
  blockc_tokenizer_free(t);
  return fail;
}
