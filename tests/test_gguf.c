// test_gguf.c — llama.cpp's GGUF files (issue 25): the runtime's reader
// (metadata of every value type, the tensor table, every block type it
// converts, against a per-element formula written here from ggml's block
// layouts), each malformed-file rule with its message, and the loader's
// view: a LLaMA GGUF (llama.cpp's names, its rope row permutation of
// attn_q / attn_k, Q8_0 and Q4_0 matrices) loads into graphs/llama_lm.blk
// as exactly the floats of the same weights saved as a Hugging Face
// safetensors file; a GPT-2 GGUF (its transposed Conv1D matrices) into
// graphs/gpt2_lm.blk; `blockc run` takes the dims, eps and rope theta from
// the file and gives the same logits as the safetensors run; `generate
// --prompt` on either family's GGUF uses the file's tokenizer (the ids of
// the same --prompt-ids; its EOS stops).  The writer
// (`blockc weights -o W.gguf`, bcF_write_gguf): for both families and every
// weight type the GGUF file loads as exactly the floats of the safetensors
// file written alongside, with llama.cpp's names, ne order, types and
// metadata (dims back with no -D), the same logits from `blockc run`; its
// blocks are the runtime packer's values and ggml's reference bytes;
// unmappable graphs and partial blocks are refused leaving no file; a
// safetensors checkpoint converts.
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"
#include "gguf_writer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockc_rt.h"

#define open_mem gw_open

static uint32_t lcg(uint32_t *s) { return *s = *s * 1664525u + 1013904223u; }

// --- metadata and the table ------------------------------------------------------
static void test_metadata(void **state) {
  (void)state;
  gw_buf kv = {0}, f = {0};
  gw_kv_str(&kv, "general.architecture", "llama");
  gw_kv_u32(&kv, "llama.block_count", 7);
  gw_kv_f32(&kv, "llama.rope.freq_base", 500000.0f);
  gw_str(&kv, "neg"), gw_u32(&kv, 1), gw_u8(&kv, 0xfe);              // int8 -2
  gw_str(&kv, "flag"), gw_u32(&kv, 7), gw_u8(&kv, 1);                // bool
  gw_str(&kv, "big"), gw_u32(&kv, 10), gw_u64(&kv, 1ull << 40);      // uint64
  gw_str(&kv, "d"), gw_u32(&kv, 12), gw_u64(&kv, 0x400921fb54442d18ull);  // float64 pi
  gw_str(&kv, "ints"), gw_u32(&kv, 9), gw_u32(&kv, 5), gw_u64(&kv, 3);
  gw_u32(&kv, (uint32_t)-1), gw_u32(&kv, 0), gw_u32(&kv, 77);        // int32 [-1, 0, 77]
  gw_str(&kv, "toks"), gw_u32(&kv, 9), gw_u32(&kv, 8), gw_u64(&kv, 3);
  gw_str(&kv, "a"), gw_str(&kv, ""), gw_str(&kv, "\xc3\xa9t\xc3\xa9");
  float w[6] = {1, 2, 3, 4, 5, 6};
  uint16_t h[4] = {gw_f16(1.5f), gw_f16(-2), gw_f16(65504), gw_f16(6.1035156e-05f)};
  uint16_t bf[2] = {0x3f80, 0xc040};  // 1, -3
  gw_tensor t[] = {{"w", 0, 2, {3, 2}, w, sizeof w}, {"h", 1, 1, {4}, h, sizeof h}, {"bf", 30, 1, {2}, bf, sizeof bf}};
  gw_file(&f, 3, 9, &kv, t, 3, 32);
  bcrt_gguf_file *g = NULL;
  bcrt_error e;
  assert_int_equal(open_mem(&f, &g, &e), BCRT_OK);
  assert_int_equal(bcrt_gguf_version(g), 3);
  assert_int_equal(bcrt_gguf_kv_count(g), 9);
  assert_string_equal(bcrt_gguf_get(g, "general.architecture")->str, "llama");
  assert_int_equal(bcrt_gguf_get(g, "llama.block_count")->u, 7);
  assert_true(bcrt_gguf_get(g, "llama.rope.freq_base")->f == 500000.0);
  const bcrt_gguf_kv *n = bcrt_gguf_get(g, "neg");
  assert_true(n->is_int && n->neg && n->i == -2);
  assert_int_equal(bcrt_gguf_get(g, "flag")->u, 1);
  assert_true(bcrt_gguf_get(g, "big")->u == 1ull << 40);
  assert_true(fabs(bcrt_gguf_get(g, "d")->f - 3.141592653589793) < 1e-15);
  const bcrt_gguf_kv *ints = bcrt_gguf_get(g, "ints");
  double v;
  assert_int_equal(ints->count, 3);
  assert_int_equal(bcrt_gguf_array_num(g, ints, 0, &v), BCRT_OK);
  assert_true(v == -1);
  assert_int_equal(bcrt_gguf_array_num(g, ints, 2, &v), BCRT_OK);
  assert_true(v == 77);
  assert_int_equal(bcrt_gguf_array_num(g, ints, 3, &v), BCRT_EINVAL);
  assert_null(bcrt_gguf_get(g, "nope"));
  // the three tensors, sorted by name, offsets absolute and aligned
  assert_int_equal(bcrt_gguf_count(g), 3);
  assert_string_equal(bcrt_gguf_tensor_at(g, 0)->name, "bf");
  const bcrt_gguf_tensor *tw = bcrt_gguf_find(g, "w");
  assert_non_null(tw);
  assert_int_equal(tw->rank, 2);
  assert_true(tw->ne[0] == 3 && tw->ne[1] == 2 && tw->ne[2] == 1 && tw->numel == 6 && tw->bytes == 24);
  assert_int_equal(tw->offset % 32, 0);
  float y[6];
  assert_int_equal(bcrt_gguf_read_f32(g, tw, y, &e), BCRT_OK);
  assert_memory_equal(y, w, sizeof w);
  assert_int_equal(bcrt_gguf_read_f32(g, bcrt_gguf_find(g, "h"), y, &e), BCRT_OK);
  assert_true(y[0] == 1.5f && y[1] == -2 && y[2] == 65504 && y[3] == 6.1035156e-05f);
  assert_int_equal(bcrt_gguf_read_f32(g, bcrt_gguf_find(g, "bf"), y, &e), BCRT_OK);
  assert_true(y[0] == 1 && y[1] == -3);
  bcrt_gguf_close(g);
  free(kv.p), free(f.p);
}

static int collect(void *ud, unsigned long long i, const char *s, unsigned long len) {
  char *out = ud;
  snprintf(out + strlen(out), 64, "%llu:%s(%lu);", i, s, len);
  return 0;
}

static void test_string_array(void **state) {
  (void)state;
  gw_buf kv = {0}, f = {0};
  gw_str(&kv, "toks"), gw_u32(&kv, 9), gw_u32(&kv, 8), gw_u64(&kv, 3);
  gw_str(&kv, "a"), gw_str(&kv, ""), gw_str(&kv, "\xc3\xa9t\xc3\xa9");
  gw_file(&f, 2, 1, &kv, NULL, 0, 32);
  bcrt_gguf_file *g = NULL;
  bcrt_error e;
  assert_int_equal(open_mem(&f, &g, &e), BCRT_OK);
  char out[256] = "";
  assert_int_equal(bcrt_gguf_array_strings(g, bcrt_gguf_get(g, "toks"), collect, out), BCRT_OK);
  assert_string_equal(out, "0:a(1);1:(0);2:\xc3\xa9t\xc3\xa9(5);");
  bcrt_gguf_close(g);
  free(kv.p), free(f.p);
}

// --- block types -----------------------------------------------------------------
// Element e of a block of each type, from the layouts in ggml's
// ggml-common.h / ggml-quants.c, one element at a time (the runtime converts
// whole blocks in loops).
static float h16(const unsigned char *p) { return gw_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }
static unsigned sm6(const unsigned char *s, int j, int want_min) {  // 6-bit scale / min j of 8
  if (j < 4) return (want_min ? s[j + 4] : s[j]) & 63u;
  return want_min ? (unsigned)(s[j + 4] >> 4) | (unsigned)(s[j] >> 6) << 4
                  : (unsigned)(s[j + 4] & 15) | (unsigned)(s[j - 4] >> 6) << 4;
}
static float ref_elem(int type, const unsigned char *b, int e) {
  switch (type) {
  case 8: return h16(b) * (float)(signed char)b[2 + e];
  case 2: return h16(b) * (float)((e < 16 ? b[2 + e] & 15 : b[2 + e - 16] >> 4) - 8);
  case 3: return (float)(e < 16 ? b[4 + e] & 15 : b[4 + e - 16] >> 4) * h16(b) + h16(b + 2);
  case 6: case 7: {
    int o = type == 7 ? 4 : 2, j = e % 16;
    uint32_t qh = (uint32_t)b[o] | (uint32_t)b[o + 1] << 8 | (uint32_t)b[o + 2] << 16 | (uint32_t)b[o + 3] << 24;
    int q = (e < 16 ? b[o + 4 + j] & 15 : b[o + 4 + j] >> 4) | (int)((qh >> e) & 1) << 4;
    return type == 7 ? (float)q * h16(b) + h16(b + 2) : (float)(q - 16) * h16(b);
  }
  case 12: {
    int j = e / 64, sub = (e % 64) / 32, l = e % 32;
    unsigned char q = b[16 + j * 32 + l];
    int is = 2 * j + sub;
    return h16(b) * (float)sm6(b + 4, is, 0) * (float)(sub ? q >> 4 : q & 15) - h16(b + 2) * (float)sm6(b + 4, is, 1);
  }
  case 14: {
    int n = e / 128, r = e % 128, l = r % 32, g = r / 32;
    unsigned char lo = b[n * 64 + l + (g & 1) * 32];
    int q = ((g < 2 ? lo & 15 : lo >> 4) | ((b[128 + n * 32 + l] >> (2 * g)) & 3) << 4) - 32;
    return h16(b + 208) * (float)(signed char)b[192 + n * 8 + l / 16 + 2 * g] * (float)q;
  }
  }
  return NAN;
}

static void test_block_types(void **state) {
  (void)state;
  const struct { int type, blck, size; const char *name; } ty[] = {
      {8, 32, 34, "Q8_0"}, {2, 32, 18, "Q4_0"}, {3, 32, 20, "Q4_1"}, {6, 32, 22, "Q5_0"},
      {7, 32, 24, "Q5_1"}, {12, 256, 144, "Q4_K"}, {14, 256, 210, "Q6_K"}};
  uint32_t s = 12345;
  for (size_t k = 0; k < sizeof ty / sizeof ty[0]; k++) {
    int nb = 5, n = nb * ty[k].blck;
    unsigned char *raw = malloc((size_t)(nb * ty[k].size));
    for (int i = 0; i < nb * ty[k].size; i++) raw[i] = (unsigned char)(lcg(&s) >> 24);
    for (int b = 0; b < nb; b++) {  // finite half scales: exponent below 31
      unsigned char *p = raw + b * ty[k].size;
      int at[] = {0, 2}, nat = ty[k].type == 14 ? 0 : (ty[k].type == 3 || ty[k].type == 7 || ty[k].type == 12) ? 2 : 1;
      for (int i = 0; i < nat; i++) p[at[i] + 1] &= 0x3b;
      if (ty[k].type == 14) p[209] &= 0x3b;
    }
    gw_buf kv = {0}, f = {0};
    gw_tensor t = {"t", ty[k].type, 2, {(uint64_t)ty[k].blck, (uint64_t)nb}, raw, (size_t)(nb * ty[k].size)};
    gw_file(&f, 3, 0, &kv, &t, 1, 32);
    bcrt_gguf_file *g = NULL;
    bcrt_error e;
    assert_int_equal(open_mem(&f, &g, &e), BCRT_OK);
    const bcrt_gguf_tensor *gt = bcrt_gguf_find(g, "t");
    assert_string_equal(gt->type_name, ty[k].name);
    float *y = malloc((size_t)n * sizeof *y);
    assert_int_equal(bcrt_gguf_read_f32(g, gt, y, &e), BCRT_OK);
    for (int i = 0; i < n; i++) {
      float want = ref_elem(ty[k].type, raw + (i / ty[k].blck) * ty[k].size, i % ty[k].blck);
      if (!(y[i] == want || fabsf(y[i] - want) <= 1e-6f * fabsf(want))) {
        print_error("%s element %d: %g, want %g\n", ty[k].name, i, y[i], want);
        fail();
      }
    }
    bcrt_gguf_close(g);
    free(y), free(raw), free(kv.p), free(f.p);
  }
}

// The test's quantizers against ggml's reference semantics: Q8_0 and Q4_0
// round trips stay within half a step of the block's scale.
static void test_quantizers(void **state) {
  (void)state;
  float x[64], y[64];
  unsigned char q8[68], q4[36];
  tu_fill(x, 64, 7);
  x[5] = -3;  // Q4_0's scale comes from the signed value of largest magnitude
  gw_buf kv = {0}, f = {0};
  gw_q8_0(x, 64, q8);
  gw_q4_0(x, 64, q4);
  gw_tensor t[] = {{"a", 8, 1, {64}, q8, sizeof q8}, {"b", 2, 1, {64}, q4, sizeof q4}};
  gw_file(&f, 3, 0, &kv, t, 2, 32);
  bcrt_gguf_file *g = NULL;
  bcrt_error e;
  assert_int_equal(open_mem(&f, &g, &e), BCRT_OK);
  assert_int_equal(bcrt_gguf_read_f32(g, bcrt_gguf_find(g, "a"), y, &e), BCRT_OK);
  for (int i = 0; i < 64; i++) assert_true(fabsf(y[i] - x[i]) <= 3.0f / 127 * 0.5f + 1e-3f);
  assert_int_equal(bcrt_gguf_read_f32(g, bcrt_gguf_find(g, "b"), y, &e), BCRT_OK);
  assert_true(y[5] == -3);  // the extreme value is exact: q = 0, d = 3/8
  for (int i = 0; i < 32; i++) assert_true(fabsf(y[i] - x[i]) <= 3.0f / 8 * 0.5f + 1e-3f);
  bcrt_gguf_close(g);
  free(kv.p), free(f.p);
}

// --- malformed files ----------------------------------------------------------------
static void expect_bad(const gw_buf *b, const char *want) {
  char path[256];
  tu_tmp_path(path, sizeof path, ".gguf");
  tu_write_bytes(path, b->p, b->n);
  tu_errors errs;
  bc_ctx *ctx = tu_ctx(&errs);
  bc_st_file *f = (bc_st_file *)1;
  int rc = bcS_open(ctx, path, &f);
  bc_ctx_free(ctx);
  tu_expect_read_error(path, rc, BC_EINPUT, f == NULL, errs.buf, want);
  unlink(path);
}

// A file with one metadata entry (given bytes) and one tensor.
static void one(gw_buf *out, uint32_t version, const gw_buf *kv, uint64_t nkv, const gw_tensor *t, int nt) {
  out->n = 0;
  gw_file(out, version, nkv, kv, t, nt, 32);
}

static void test_bad_files(void **state) {
  (void)state;
  float w[8] = {0};
  gw_tensor t1 = {"w", 0, 1, {8}, w, sizeof w};
  gw_buf kv = {0}, f = {0};
  one(&f, 3, &kv, 0, &t1, 1);
  gw_buf cut = f;
  cut.n = 50;  // inside the tensor info
  expect_bad(&cut, "the file ends inside");
  gw_buf magic = {0};
  gw_put(&magic, "GGUG", 4), gw_u32(&magic, 3), gw_u64(&magic, 0), gw_u64(&magic, 0);
  // not GGUF magic: read as safetensors, which refuses it differently; the GGUF reader's own check:
  bcrt_gguf_file *g;
  bcrt_error e;
  assert_int_equal(open_mem(&magic, &g, &e), BCRT_EFORMAT);
  assert_non_null(strstr(e.msg, "not a GGUF file"));
  one(&f, 1, &kv, 0, &t1, 1);
  expect_bad(&f, "GGUF version 1 (versions 2 and 3 are read; version 1 had 32-bit counts)");
  one(&f, 4, &kv, 0, &t1, 1);
  expect_bad(&f, "GGUF version 4");
  // counts no file of this size can hold
  gw_buf c = {0};
  gw_put(&c, "GGUF", 4), gw_u32(&c, 3), gw_u64(&c, 1ull << 40), gw_u64(&c, 0);
  expect_bad(&c, "tensors cannot fit in a file of");
  c.n = 0, gw_put(&c, "GGUF", 4), gw_u32(&c, 3), gw_u64(&c, 0), gw_u64(&c, ~0ull);
  expect_bad(&c, "metadata entries cannot fit");
  // a string longer than the file
  kv.n = 0, gw_u64(&kv, 1ull << 50);
  one(&f, 3, &kv, 1, NULL, 0);
  expect_bad(&f, "a metadata key is 1125899906842624 bytes long but only");
  kv.n = 0, gw_str(&kv, "k"), gw_u32(&kv, 13), gw_u32(&kv, 0);
  one(&f, 3, &kv, 1, NULL, 0);
  expect_bad(&f, "metadata 'k': unknown value type 13");
  kv.n = 0, gw_str(&kv, "k"), gw_u32(&kv, 9), gw_u32(&kv, 9), gw_u64(&kv, 1);
  one(&f, 3, &kv, 1, NULL, 0);
  expect_bad(&f, "metadata 'k': an array of arrays (not supported)");
  kv.n = 0, gw_str(&kv, "k"), gw_u32(&kv, 9), gw_u32(&kv, 4), gw_u64(&kv, 1ull << 60);
  one(&f, 3, &kv, 1, NULL, 0);
  expect_bad(&f, "metadata 'k': an array of 1152921504606846976 uint32 values does not fit in the file");
  kv.n = 0, gw_str(&kv, "k"), gw_u32(&kv, 7), gw_u8(&kv, 2);
  one(&f, 3, &kv, 1, NULL, 0);
  expect_bad(&f, "metadata 'k': a bool of value 2 (0 or 1)");
  kv.n = 0, gw_kv_u32(&kv, "k", 1), gw_kv_u32(&kv, "k", 2);
  one(&f, 3, &kv, 2, NULL, 0);
  expect_bad(&f, "metadata key 'k' appears twice");
  kv.n = 0, gw_kv_u32(&kv, "", 1);
  one(&f, 3, &kv, 1, NULL, 0);
  expect_bad(&f, "metadata key 0 is empty");
  kv.n = 0, gw_str(&kv, "a\x01"), gw_u32(&kv, 8);
  gw_u64(&kv, 3), gw_put(&kv, "x\0y", 3);
  one(&f, 3, &kv, 1, NULL, 0);
  expect_bad(&f, "a metadata string holds a NUL byte");
  kv.n = 0, gw_kv_u32(&kv, "general.alignment", 24);
  one(&f, 3, &kv, 1, &t1, 1);
  expect_bad(&f, "general.alignment must be a uint32 power of two");
  kv.n = 0;
  // tensors
  gw_tensor bad = t1;
  bad.rank = 0;
  one(&f, 3, &kv, 0, &bad, 1);
  expect_bad(&f, "tensor 'w': 0 dims (GGUF tensors have 1 to 4)");
  bad = t1, bad.rank = 5, bad.ne[1] = bad.ne[2] = bad.ne[3] = 1;
  one(&f, 3, &kv, 0, &bad, 1);
  expect_bad(&f, "tensor 'w': 5 dims");
  bad = t1, bad.ne[0] = 0;
  one(&f, 3, &kv, 0, &bad, 1);
  expect_bad(&f, "tensor 'w': ne[0] = 0 is out of range");
  bad = t1, bad.rank = 4, bad.ne[0] = bad.ne[1] = bad.ne[2] = bad.ne[3] = 1u << 20;
  one(&f, 3, &kv, 0, &bad, 1);
  expect_bad(&f, "is out of range");
  bad = t1, bad.type = 17;
  one(&f, 3, &kv, 0, &bad, 1);
  expect_bad(&f, "tensor 'w': unknown ggml type 17");
  bad = t1, bad.type = 8, bad.ne[0] = 8;
  one(&f, 3, &kv, 0, &bad, 1);
  expect_bad(&f, "tensor 'w': rows of 8 weights are not whole Q8_0 blocks of 32");
  bad = t1, bad.name = "";
  one(&f, 3, &kv, 0, &bad, 1);
  expect_bad(&f, "a tensor with an empty name");
  gw_tensor two[2] = {t1, t1};
  one(&f, 3, &kv, 0, two, 2);
  expect_bad(&f, "tensor name 'w' appears twice");
  // data past the end, a misaligned offset, two tensors sharing bytes
  one(&f, 3, &kv, 0, &t1, 1);
  f.n -= 4;
  expect_bad(&f, "tensor 'w': 32 bytes at offset 0 run past the end of the data section (28 bytes)");
  one(&f, 3, &kv, 0, &t1, 1);
  // the offset is the last 8 bytes of the tensor info, just before the padding
  size_t info_end = 4 + 4 + 8 + 8 + (8 + 1) + 4 + 8 + 4 + 8;
  f.p[info_end - 8] = 4;
  expect_bad(&f, "tensor 'w': offset 4 is not a multiple of the alignment 32");
  gw_tensor ov[2] = {t1, {"v", 0, 1, {8}, w, sizeof w}};
  one(&f, 3, &kv, 0, ov, 2);
  size_t info2 = info_end + (8 + 1) + 4 + 8 + 4 + 8;
  f.p[info2 - 8] = 0;  // v at offset 0 too
  expect_bad(&f, "share bytes");
  free(kv.p), free(f.p), free(magic.p), free(c.p);
}

// --- the loader's view: LLaMA and GPT-2 ---------------------------------------------
static const bc_define llama_defs[] = {{"D", 32}, {"H", 4}, {"KV", 2}, {"F", 64}, {"N", 2}, {"V", 40}};

// llama.cpp's permutation of q/k rows for its rope (convert.py's permute):
// file row h*dh + 2i + j holds HF row h*dh + j*dh/2 + i.
static void permute_rows(const float *hf, float *out, int rows, int cols, int heads) {
  int dh = rows / heads, half = dh / 2;
  for (int h = 0; h < heads; h++)
    for (int i = 0; i < half; i++)
      for (int j = 0; j < 2; j++)
        memcpy(out + (size_t)(h * dh + 2 * i + j) * cols, hf + (size_t)(h * dh + j * half + i) * cols,
               (size_t)cols * sizeof *out);
}

static const char *llama_gguf_name(const char *hf, char *buf, size_t n) {
  static const char *const map[][2] = {
      {"input_layernorm.weight", "attn_norm.weight"}, {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},   {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},    {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"}};
  if (!strcmp(hf, "model.embed_tokens.weight")) return "token_embd.weight";
  if (!strcmp(hf, "model.norm.weight")) return "output_norm.weight";
  if (!strcmp(hf, "lm_head.weight")) return "output.weight";
  int layer, at;
  if (sscanf(hf, "model.layers.%d.%n", &layer, &at) == 1)
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
      if (!strcmp(hf + at, map[i][0])) {
        snprintf(buf, n, "blk.%d.%s", layer, map[i][1]);
        return buf;
      }
  return NULL;
}

// Writes m's weights as a LLaMA GGUF (matrices as `qtype`: 0 F32, 8 Q8_0,
// 2 Q4_0; norms F32) with the given eps, and sets m's matrices to what the
// file holds (dequantized), so that a safetensors file of m is the same model.
// extra: nextra more metadata entries (a tokenizer), or NULL.
static void write_llama_gguf(tu_model *m, const char *path, int qtype, float eps, float theta,
                             const gw_buf *extra, int nextra) {
  gw_buf kv = {0}, f = {0};
  gw_kv_str(&kv, "general.architecture", "llama");
  gw_kv_u32(&kv, "llama.embedding_length", 32);
  gw_kv_u32(&kv, "llama.block_count", 2);
  gw_kv_u32(&kv, "llama.attention.head_count", 4);
  gw_kv_u32(&kv, "llama.attention.head_count_kv", 2);
  gw_kv_u32(&kv, "llama.feed_forward_length", 64);
  gw_kv_u32(&kv, "llama.context_length", 64);
  gw_kv_f32(&kv, "llama.attention.layer_norm_rms_epsilon", eps);
  gw_kv_f32(&kv, "llama.rope.freq_base", theta);
  if (extra) gw_put(&kv, extra->p, extra->n);
  const bc_graph *g = m->g;
  gw_tensor *t = calloc((size_t)g->nparams, sizeof *t);
  char (*names)[64] = calloc((size_t)g->nparams, 64);
  void **bufs = calloc((size_t)g->nparams, sizeof *bufs);
  for (int i = 0; i < g->nparams; i++) {
    const bc_param *p = &g->params[i];
    const char *gn = llama_gguf_name(p->name, names[i], 64);
    assert_non_null(gn);
    if (gn != names[i]) snprintf(names[i], 64, "%s", gn);
    int64_t numel = bc_shape_numel(&p->shape);
    float *x = m->w.p[i];
    float *perm = malloc((size_t)numel * sizeof *perm);
    memcpy(perm, x, (size_t)numel * sizeof *perm);
    if (strstr(gn, "attn_q.weight")) permute_rows(x, perm, (int)p->shape.d[0], (int)p->shape.d[1], 4);
    if (strstr(gn, "attn_k.weight")) permute_rows(x, perm, (int)p->shape.d[0], (int)p->shape.d[1], 2);
    t[i].name = names[i];
    t[i].rank = p->shape.rank;
    for (int k = 0; k < p->shape.rank; k++) t[i].ne[k] = (uint64_t)p->shape.d[p->shape.rank - 1 - k];
    bool mat = p->shape.rank == 2 && qtype;
    t[i].type = mat ? qtype : 0;
    if (!mat) {
      bufs[i] = perm, t[i].data = perm, t[i].bytes = (size_t)numel * 4;
      continue;
    }
    size_t bytes = qtype == 1 ? (size_t)numel * 2 : (size_t)numel / 32 * (qtype == 8 ? 34 : 18);
    unsigned char *q = malloc(bytes);
    if (qtype == 8) gw_q8_0(perm, (size_t)numel, q);
    else if (qtype == 2) gw_q4_0(perm, (size_t)numel, q);
    else  // F16, little-endian halves
      for (int64_t k = 0; k < numel; k++) {
        uint16_t h = gw_f16(perm[k]);
        q[2 * k] = (unsigned char)(h & 0xff), q[2 * k + 1] = (unsigned char)(h >> 8);
      }
    bufs[i] = q, t[i].data = q, t[i].bytes = bytes;
    // what the file holds, in HF order, back into m
    gw_buf one_kv = {0}, one_f = {0};
    gw_tensor ot = {"x", qtype, 1, {(uint64_t)numel}, q, bytes};
    gw_file(&one_f, 3, 0, &one_kv, &ot, 1, 32);
    bcrt_gguf_file *gf;
    bcrt_error e;
    assert_int_equal(open_mem(&one_f, &gf, &e), BCRT_OK);
    assert_int_equal(bcrt_gguf_read_f32(gf, bcrt_gguf_find(gf, "x"), perm, &e), BCRT_OK);
    bcrt_gguf_close(gf);
    free(one_f.p);
    int heads = strstr(gn, "attn_q.weight") ? 4 : strstr(gn, "attn_k.weight") ? 2 : 0;
    if (heads) {  // undo the permutation: HF row h*dh + j*half + i = file row h*dh + 2i + j
      int rows = (int)p->shape.d[0], cols = (int)p->shape.d[1], dh = rows / heads, half = dh / 2;
      for (int h = 0; h < heads; h++)
        for (int ii = 0; ii < half; ii++)
          for (int j = 0; j < 2; j++)
            memcpy(x + (size_t)(h * dh + j * half + ii) * cols, perm + (size_t)(h * dh + 2 * ii + j) * cols,
                   (size_t)cols * sizeof *x);
    } else {
      memcpy(x, perm, (size_t)numel * sizeof *x);
    }
    free(perm);
  }
  gw_file(&f, 3, 9 + (uint64_t)nextra, &kv, t, g->nparams, 32);
  assert_int_equal(gw_save(path, &f), 0);
  for (int i = 0; i < g->nparams; i++) free(bufs[i]);
  free(bufs), free(names), free(t), free(kv.p), free(f.p);
}

static void save_safetensors(tu_model *m, const char *path) {
  const bc_graph *g = m->g;
  const char **names = calloc((size_t)g->nparams, sizeof *names);
  bc_shape *shapes = calloc((size_t)g->nparams, sizeof *shapes);
  for (int i = 0; i < g->nparams; i++) names[i] = g->params[i].name, shapes[i] = g->params[i].shape;
  assert_int_equal(bcS_write(m->ctx, path, g->nparams, names, shapes, (const float *const *)m->w.p), BC_OK);
  free(names), free(shapes);
}

static tu_model *llama_model(uint64_t seed) {
  size_t len;
  char *text = tu_slurp("graphs/llama_lm.blk", &len);
  assert_non_null(text);
  tu_model *m = tu_model_new(text, llama_defs, 6, seed);
  free(text);
  return m;
}

// Every parameter loaded from a and b is the same floats.
static void expect_same_weights(tu_model *m, const char *a, const char *b) {
  bc_weights wa, wb;
  assert_int_equal(bcW_load(m->ctx, m->g, a, &wa), BC_OK);
  assert_int_equal(bcW_load(m->ctx, m->g, b, &wb), BC_OK);
  for (int i = 0; i < m->g->nparams; i++)
    assert_memory_equal(wa.p[i], wb.p[i], (size_t)bc_shape_numel(&m->g->params[i].shape) * sizeof(float));
  bcW_free(&wa);
  bcW_free(&wb);
}

static void test_llama_view(void **state) {
  (void)state;
  const int types[] = {0, 8, 2, 1};  // F32, Q8_0, Q4_0, F16
  for (int k = 0; k < 4; k++) {
    tu_model *m = llama_model(11 + (uint64_t)k);
    char gg[256], st[256];
    tu_tmp_path(gg, sizeof gg, ".gguf");
    tu_tmp_path(st, sizeof st, ".safetensors");
    write_llama_gguf(m, gg, types[k], 1e-6f, 10000.0f, NULL, 0);
    save_safetensors(m, st);
    expect_same_weights(m, gg, st);
    if (types[k]) {  // --weight-dtype of the file's type: its blocks, not a value changed
      bc_weights w, r;
      assert_int_equal(bcW_load(m->ctx, m->g, gg, &w), BC_OK);
      assert_int_equal(bcW_load(m->ctx, m->g, gg, &r), BC_OK);
      int want = types[k] == 8 ? BC_WT_Q8_0 : types[k] == 2 ? BC_WT_Q4_0 : BC_WT_F16, wt;
      char note[256];
      assert_int_equal(bcF_gguf_weight_type(m->ctx, gg, m->g, NULL, &wt, note, sizeof note), BC_OK);
      assert_int_equal(wt, want);  // the file's matrices are kept in their type
      m->g->weight_type = want;
      assert_int_equal(bcY_round_weights(m->ctx, m->g, &r), BC_OK);
      m->g->weight_type = BC_WT_F32;
      for (int i = 0; i < m->g->nparams; i++)
        assert_memory_equal(w.p[i], r.p[i], (size_t)bc_shape_numel(&m->g->params[i].shape) * sizeof(float));
      bcW_free(&w);
      bcW_free(&r);
    }
    unlink(gg), unlink(st);
    tu_model_free(m);
  }
}

// A 40-token SentencePiece vocabulary: <unk> <s> </s>, ▁ and letters, then
// ll, ▁h, ▁he, llo, ▁hello (scores in that order), fillers; eos_token_id eos.
static int spm40(gw_buf *kv, uint32_t eos) {
  static char names[40][16];
  const char *tok[40];
  float score[40];
  int32_t type[40];
  static const char *const head[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "h", "e", "l", "o",
                                     "ll", "\xe2\x96\x81h", "\xe2\x96\x81he", "llo", "\xe2\x96\x81hello"};
  for (int i = 0; i < 40; i++) {
    if (i < 13) snprintf(names[i], sizeof names[i], "%s", head[i]);
    else snprintf(names[i], sizeof names[i], "<extra_%d>", i);
    tok[i] = names[i], score[i] = i >= 8 && i < 13 ? (float)(7 - i) : 0.0f, type[i] = i < 13 ? 1 : 5;
  }
  type[0] = 2, type[1] = type[2] = 3;
  gw_kv_str(kv, "tokenizer.ggml.model", "llama");
  gw_kv_strs(kv, "tokenizer.ggml.tokens", tok, 40);
  gw_kv_f32s(kv, "tokenizer.ggml.scores", score, 40);
  gw_kv_i32s(kv, "tokenizer.ggml.token_type", type, 40);
  gw_kv_u32(kv, "tokenizer.ggml.bos_token_id", 1);
  gw_kv_u32(kv, "tokenizer.ggml.eos_token_id", eos);
  gw_kv_bool(kv, "tokenizer.ggml.add_bos_token", 1);
  return 7;
}

// generate --prompt with the tokenizer of the GGUF --weights: the ids are
// those of --prompt-ids 1,12 (<s> ▁hello); an EOS id from the file stops it;
// plain: the same model's GGUF without a tokenizer.
static void gen_with_file_tokenizer(tu_run_result *r, const char *plain) {
  char gt[256], ge[256];
  tu_tmp_path(gt, sizeof gt, ".gguf");
  tu_tmp_path(ge, sizeof ge, ".gguf");
  gw_buf tk = {0};
  int n = spm40(&tk, 2);
  tu_model *m = llama_model(5);
  write_llama_gguf(m, gt, 8, 1e-6f, 10000.0f, &tk, n);
  tu_model_free(m);
  static char want[1 << 16];
  TU_RUN(r, "generate", "graphs/llama_lm.blk", "--weights", gt, "--prompt-ids", "1,12", "--max-new-tokens", "5",
         "--ids");
  tu_expect_run(r, 0, NULL, NULL);
  snprintf(want, sizeof want, "%s", r->out);
  TU_RUN(r, "generate", "graphs/llama_lm.blk", "--weights", gt, "--prompt", "hello", "--max-new-tokens", "5",
         "--ids");
  tu_expect_run(r, 0, NULL, "its tokenizer (llama SentencePiece, 40 tokens)");
  assert_string_equal(r->out, want);
  TU_RUN(r, "generate", "graphs/llama_lm.blk", "--weights", gt, "--prompt", "hello", "--max-new-tokens", "5",
         "--json");
  tu_expect_run(r, 0, "\"prompt_ids\": [1, 12]", NULL);
  // the first generated id as the file's EOS: generation stops there
  int first = atoi(want);
  free(tk.p), tk = (gw_buf){0};
  n = spm40(&tk, (uint32_t)first);
  m = llama_model(5);
  write_llama_gguf(m, ge, 8, 1e-6f, 10000.0f, &tk, n);
  tu_model_free(m);
  char stop[64];
  snprintf(stop, sizeof stop, "stopped at token %d (a stop id)", first);
  TU_RUN(r, "generate", "graphs/llama_lm.blk", "--weights", ge, "--prompt", "hello", "--max-new-tokens", "5");
  tu_expect_run(r, 0, NULL, stop);
  // --tokenizer wins over the file's; a GGUF without one and --prompt: a usage error
  TU_RUN(r, "generate", "graphs/llama_lm.blk", "--weights", plain, "--prompt", "hello", "--max-new-tokens", "5");
  tu_expect_run(r, 2, NULL, "--prompt needs --tokenizer (or --weights W.gguf that carries one)");
  TU_RUN(r, "generate", "graphs/llama_lm.blk", "--weights", plain, "--tokenizer", gt, "--prompt", "hello",
         "--max-new-tokens", "5", "--ids");
  tu_expect_run(r, 0, NULL, NULL);
  free(tk.p);
  unlink(gt), unlink(ge);
}

// `blockc run` on the GGUF file: dims from the file (no -D), the same
// logits as the safetensors file with -D; the file's eps and theta apply.
static void test_cli_run(void **state) {
  (void)state;
  tu_model *m = llama_model(5);
  char gg[256], gg2[256], st[256], ya[256], yb[256], yc[256];
  tu_tmp_path(gg, sizeof gg, ".gguf");
  tu_tmp_path(gg2, sizeof gg2, ".gguf");
  tu_tmp_path(st, sizeof st, ".safetensors");
  tu_tmp_path(ya, sizeof ya, ".npy");
  tu_tmp_path(yb, sizeof yb, ".npy");
  tu_tmp_path(yc, sizeof yc, ".npy");
  write_llama_gguf(m, gg, 8, 1e-6f, 10000.0f, NULL, 0);
  save_safetensors(m, st);
  tu_model_free(m);
  m = llama_model(5);
  write_llama_gguf(m, gg2, 8, 1e-5f, 500000.0f, NULL, 0);
  tu_model_free(m);
  tu_run_result *r = malloc(sizeof *r);
  char oa[300], ob[300], oc[300];
  snprintf(oa, sizeof oa, "logits=%s", ya);
  snprintf(ob, sizeof ob, "logits=%s", yb);
  snprintf(oc, sizeof oc, "logits=%s", yc);
  TU_RUN(r, "run", "graphs/llama_lm.blk", "--weights", gg, "--length", "T=5", "--output", oa);
  tu_expect_run(r, 0, "output [1, 5, 40]", "dims from the file: D=32 N=2 H=4 KV=2 F=64 V=40");
  // the file's Q8_0 blocks are the weight type (the kernels read them as
  // stored), and they compute what the same weights from safetensors do
  // at --weight-dtype q8_0, which quantizes them to the same blocks: the
  // same bits
  assert_non_null(strstr(r->err, "the matrices are Q8_0: kept so (--weight-dtype q8_0)"));
  TU_RUN(r, "run", "graphs/llama_lm.blk", "-D", "D=32", "-D", "H=4", "-D", "KV=2", "-D", "F=64", "-D", "N=2",
         "-D", "V=40", "--weights", st, "--weight-dtype", "q8_0", "--length", "T=5", "--output", ob);
  tu_expect_run(r, 0, "output [1, 5, 40]", NULL);
  {
    float *a = NULL, *b = NULL;
    long sa[BCRT_NPY_MAX_RANK], sb[BCRT_NPY_MAX_RANK];
    int ra = 0, rb = 0;
    char err[256];
    assert_int_equal(bcrt_npy_read(ya, &a, sa, &ra, err, sizeof err), BCRT_OK);
    assert_int_equal(bcrt_npy_read(yb, &b, sb, &rb, err, sizeof err), BCRT_OK);
    assert_true(ra == 3 && rb == 3 && sa[2] == 40 && sb[2] == 40 && sa[1] == 5 && sb[1] == 5);
    double mx = tu_max_abs(a, 5 * 40), d = tu_max_abs_diff(a, b, 5 * 40);
    if (!(d == 0)) fail_msg("GGUF Q8_0 vs the same weights quantized at load: logits differ by %g (max %g)", d, mx);
    bcrt_free(a);
    bcrt_free(b);
  }
  TU_RUN(r, "run", "graphs/llama_lm.blk", "--weights", gg2, "--length", "T=5", "--output", oc);
  tu_expect_run(r, 0, "output [1, 5, 40]",
                "the norms' eps 1e-05 from the file (the graph says 1e-06); rope theta 500000 from the file "
                "(the graph says 10000)");
  assert_false(tu_same_file(ya, yc));
  // generate decodes from the GGUF file as from the safetensors one
  static char ga[1 << 16];
  TU_RUN(r, "generate", "graphs/llama_lm.blk", "--weights", gg, "--prompt-ids", "1,2,3", "--max-new-tokens", "6",
         "--ids");
  tu_expect_run(r, 0, NULL, "dims from the file");
  snprintf(ga, sizeof ga, "%s", r->out);
  TU_RUN(r, "generate", "graphs/llama_lm.blk", "-D", "D=32", "-D", "H=4", "-D", "KV=2", "-D", "F=64", "-D", "N=2",
         "-D", "V=40", "--weights", st, "--prompt-ids", "1,2,3", "--max-new-tokens", "6", "--ids");
  tu_expect_run(r, 0, NULL, NULL);
  assert_string_equal(ga, r->out);
  assert_true(strlen(ga) > 6);
  // the file's tokenizer (tokenizer.ggml.*: a SentencePiece vocabulary of
  // V=40 tokens) turns --prompt into ids and the ids into text, no
  // --tokenizer; its EOS id stops the generation
  gen_with_file_tokenizer(r, gg);
  // a -D the user gives wins over the file's (and then the weights do not fit)
  TU_RUN(r, "run", "graphs/llama_lm.blk", "-D", "D=64", "--weights", gg, "--length", "T=5");
  tu_expect_run(r, 1, NULL, "model.embed_tokens.weight");
  free(r);
  unlink(gg), unlink(gg2), unlink(st), unlink(ya), unlink(yb), unlink(yc);
}

// GPT-2: llama.cpp's converter stores c_attn / c_proj / c_fc as (out, in);
// the view gives HF's Conv1D (in, out) back, which gpt2_lm.blk reads; the
// file's tokenizer (tokenizer.ggml.*) turns generate's --prompt into ids.
static void test_gpt2_view(void **state) {
  (void)state;
  size_t len;
  char *text = tu_slurp("graphs/gpt2_lm.blk", &len);
  const bc_define defs[] = {{"D", 8}, {"H", 2}, {"N", 1}, {"V", 20}, {"P", 16}};
  tu_model *m = tu_model_new(text, defs, 5, 3);
  free(text);
  gw_buf kv = {0}, f = {0};
  gw_kv_str(&kv, "general.architecture", "gpt2");
  gw_kv_u32(&kv, "gpt2.embedding_length", 8);
  gw_kv_u32(&kv, "gpt2.block_count", 1);
  gw_kv_u32(&kv, "gpt2.attention.head_count", 2);
  gw_kv_u32(&kv, "gpt2.feed_forward_length", 32);
  gw_kv_u32(&kv, "gpt2.context_length", 16);
  gw_kv_f32(&kv, "gpt2.attention.layer_norm_epsilon", 1e-5f);
  // its tokenizer: byte-level BPE of V=20 tokens (hello, Ġhello by merges; <|endoftext|> the EOS)
  static const char *const tok[20] = {"h", "e", "l", "o", "\xc4\xa0", "he", "ll", "hell", "hello",
                                      "\xc4\xa0hello", "a", "b", "c", "d", "f", "g", "i", "j", "k",
                                      "<|endoftext|>"};
  static const char *const merges[] = {"h e", "l l", "he ll", "hell o", "\xc4\xa0 hello"};
  int32_t type[20];
  for (int i = 0; i < 20; i++) type[i] = i == 19 ? 3 : 1;
  gw_kv_str(&kv, "tokenizer.ggml.model", "gpt2");
  gw_kv_str(&kv, "tokenizer.ggml.pre", "gpt-2");
  gw_kv_strs(&kv, "tokenizer.ggml.tokens", tok, 20);
  gw_kv_strs(&kv, "tokenizer.ggml.merges", merges, 5);
  gw_kv_i32s(&kv, "tokenizer.ggml.token_type", type, 20);
  gw_kv_u32(&kv, "tokenizer.ggml.eos_token_id", 19);
  const bc_graph *g = m->g;
  gw_tensor *t = calloc((size_t)g->nparams + 1, sizeof *t);
  float **bufs = calloc((size_t)g->nparams, sizeof *bufs);
  char (*names)[80] = calloc((size_t)g->nparams, 80);
  for (int i = 0; i < g->nparams; i++) {
    const bc_param *p = &g->params[i];
    const char *n = p->name;
    int64_t numel = bc_shape_numel(&p->shape);
    float *x = m->w.p[i], *y = malloc((size_t)numel * sizeof *y);
    memcpy(y, x, (size_t)numel * sizeof *y);
    const char *gn = !strcmp(n, "transformer.wte.weight") ? "token_embd.weight"
                   : !strcmp(n, "transformer.wpe.weight") ? "position_embd.weight"
                   : !strcmp(n, "transformer.ln_f.weight") ? "output_norm.weight"
                   : !strcmp(n, "transformer.ln_f.bias") ? "output_norm.bias" : NULL;
    bool transpose = false;
    if (!gn) {
      static const char *const map[][2] = {
          {"ln_1.weight", "attn_norm.weight"}, {"ln_1.bias", "attn_norm.bias"},
          {"attn.c_attn.weight", "attn_qkv.weight"}, {"attn.c_attn.bias", "attn_qkv.bias"},
          {"attn.c_proj.weight", "attn_output.weight"}, {"attn.c_proj.bias", "attn_output.bias"},
          {"ln_2.weight", "ffn_norm.weight"}, {"ln_2.bias", "ffn_norm.bias"},
          {"mlp.c_fc.weight", "ffn_up.weight"}, {"mlp.c_fc.bias", "ffn_up.bias"},
          {"mlp.c_proj.weight", "ffn_down.weight"}, {"mlp.c_proj.bias", "ffn_down.bias"}};
      for (size_t k = 0; k < sizeof map / sizeof map[0]; k++)
        if (!strcmp(n + strlen("transformer.h.0."), map[k][0])) {
          snprintf(names[i], 80, "blk.0.%s", map[k][1]);
          gn = names[i];
          transpose = strstr(map[k][0], ".weight") && p->shape.rank == 2;
        }
    }
    assert_non_null(gn);
    t[i].name = gn;
    t[i].type = 0;
    t[i].rank = p->shape.rank;
    if (transpose) {  // HF (in, out) -> file (out, in): ne = {in, out}
      int64_t in = p->shape.d[0], out = p->shape.d[1];
      for (int64_t a = 0; a < in; a++)
        for (int64_t b = 0; b < out; b++) y[b * in + a] = x[a * out + b];
      t[i].ne[0] = (uint64_t)in, t[i].ne[1] = (uint64_t)out;
    } else {
      for (int k = 0; k < p->shape.rank; k++) t[i].ne[k] = (uint64_t)p->shape.d[p->shape.rank - 1 - k];
    }
    bufs[i] = y, t[i].data = y, t[i].bytes = (size_t)numel * 4;
  }
  // the converter's copy of the tied head: a byte-identical output.weight
  int wte = -1;
  for (int i = 0; i < g->nparams; i++)
    if (!strcmp(g->params[i].name, "transformer.wte.weight")) wte = i;
  t[g->nparams] = t[wte];
  t[g->nparams].name = "output.weight";
  gw_file(&f, 3, 13, &kv, t, g->nparams + 1, 32);
  char gg[256], st[256];
  tu_tmp_path(gg, sizeof gg, ".gguf");
  tu_tmp_path(st, sizeof st, ".safetensors");
  assert_int_equal(gw_save(gg, &f), 0);
  save_safetensors(m, st);
  expect_same_weights(m, gg, st);
  // generate with gpt2_lm.blk and the file's tokenizer: "hello hello" is 8 9
  tu_run_result *r = malloc(sizeof *r);
  static char want[1 << 16];
  TU_RUN(r, "generate", "graphs/gpt2_lm.blk", "--weights", gg, "--prompt-ids", "8,9", "--stop", "19",
         "--max-new-tokens", "4", "--ids");
  tu_expect_run(r, 0, NULL, NULL);
  snprintf(want, sizeof want, "%s", r->out);
  TU_RUN(r, "generate", "graphs/gpt2_lm.blk", "--weights", gg, "--prompt", "hello hello", "--max-new-tokens", "4",
         "--ids");
  tu_expect_run(r, 0, NULL, "blockc: note: ");
  assert_non_null(strstr(r->err, ": its tokenizer (gpt2 BPE, 20 tokens)"));
  assert_string_equal(r->out, want);
  TU_RUN(r, "generate", "graphs/gpt2_lm.blk", "--weights", gg, "--prompt", "hello hello", "--max-new-tokens", "4",
         "--json");
  tu_expect_run(r, 0, "\"prompt_ids\": [8, 9]", NULL);
  free(r);
  unlink(gg), unlink(st);
  for (int i = 0; i < g->nparams; i++) free(bufs[i]);
  free(bufs), free(names), free(t), free(kv.p), free(f.p);
  tu_model_free(m);
}

// --- writing: `blockc weights ... -o W.gguf` (bcF_write_gguf) -----------------------
static const char *const wt_names4[] = {"f32", "bf16", "q8_0", "q4_0", "f16"};
static const char *const wt_file4[] = {"F32", "BF16", "Q8_0", "Q4_0", "F16"};
enum { NWT = sizeof wt_names4 / sizeof wt_names4[0] };
typedef char wt_names_are_bc_wt[(int)NWT == (int)BC_WT_COUNT ? 1 : -1];

// A family under test: its graph, -D values as flags and as defines.
typedef struct {
  const char *graph, *arch;
  const char *dflags[12];
  bc_define defs[6];
  int ndefs;
} fam;

static const fam fams[] = {
    {"graphs/llama_lm.blk", "llama",
     {"-D", "D=32", "-D", "H=4", "-D", "KV=2", "-D", "F=64", "-D", "N=2", "-D", "V=40"},
     {{"D", 32}, {"H", 4}, {"KV", 2}, {"F", 64}, {"N", 2}, {"V", 40}}, 6},
    {"graphs/gpt2_lm.blk", "gpt2",
     {"-D", "D=32", "-D", "H=2", "-D", "N=2", "-D", "V=40", "-D", "P=16", "-D", "F=96"},
     {{"D", 32}, {"H", 2}, {"N", 2}, {"V", 40}, {"P", 16}, {"F", 96}}, 6},
};

static tu_model *fam_model(const fam *f, uint64_t seed) {
  size_t len;
  char *text = tu_slurp(f->graph, &len);
  assert_non_null(text);
  tu_model *m = tu_model_new(text, f->defs, f->ndefs, seed);
  free(text);
  return m;
}

// `blockc weights` with the family's -D flags, then extra (NULL-ended).
static void run_weights(tu_run_result *r, const fam *f, const char *const *extra) {
  const char *a[40] = {"weights", f->graph};
  int n = 2;
  for (int i = 0; i < 12; i++) a[n++] = f->dflags[i];
  for (int i = 0; extra[i]; i++) a[n++] = extra[i];
  a[n] = NULL;
  tu_run(r, a);
}

// The params a weight-typed build packs (bcY_pack_layout), as flags.
static bool *packed_params(tu_model *m, int wt) {
  bool *p = calloc((size_t)m->g->nparams + 1, sizeof *p);
  bcY_pblock *b = malloc((size_t)m->g->nnodes * 5 * sizeof *b);
  int64_t total;
  int was = m->g->weight_type;
  m->g->weight_type = wt;
  int nb = bcY_pack_layout(m->g, b, &total);
  m->g->weight_type = was;
  assert_true(nb > 0);
  for (int i = 0; i < nb; i++) p[b[i].param] = true;
  free(b);
  return p;
}

static uint64_t meta_u(const bcrt_gguf_file *gf, const char *key) {
  const bcrt_gguf_kv *kv = bcrt_gguf_get(gf, key);
  if (!kv) print_error("no metadata %s\n", key);
  assert_non_null(kv);
  assert_true(kv->is_int);
  return kv->u;
}

// For both families and every weight type: the GGUF file loads as exactly
// the floats of the safetensors file written from the same seed (the
// matrices rounded through T in both), with llama.cpp's names, ne order and
// tensor types (T's for the matrices T packs, F32 for the rest); its
// metadata gives the dims, eps and theta back with no -D; `blockc run`
// gives the same logits from both (the GGUF file's T from its blocks).
static void test_write_families(void **state) {
  (void)state;
  tu_run_result *r = malloc(sizeof *r);
  for (size_t fi = 0; fi < sizeof fams / sizeof fams[0]; fi++)
    for (int wt = 0; wt < NWT; wt++) {
      const fam *f = &fams[fi];
      char gg[256], st[256], st32[256], ya[256], yb[256], oa[300], ob[300];
      tu_tmp_path(gg, sizeof gg, ".gguf");
      tu_tmp_path(st, sizeof st, ".safetensors");
      tu_tmp_path(st32, sizeof st32, ".safetensors");
      tu_tmp_path(ya, sizeof ya, ".npy");
      tu_tmp_path(yb, sizeof yb, ".npy");
      snprintf(oa, sizeof oa, "logits=%s", ya);
      snprintf(ob, sizeof ob, "logits=%s", yb);
      run_weights(r, f, (const char *[]){"--seed", "7", "--weight-dtype", wt_names4[wt], "-o", gg, NULL});
      tu_expect_run(r, 0, "GGUF", NULL);
      run_weights(r, f, (const char *[]){"--seed", "7", "--weight-dtype", wt_names4[wt], "-o", st, NULL});
      tu_expect_run(r, 0, "wrote", NULL);
      run_weights(r, f, (const char *[]){"--seed", "7", "-o", st32, NULL});
      tu_expect_run(r, 0, "wrote", NULL);
      tu_model *m = fam_model(f, 7);
      expect_same_weights(m, gg, st);
      // the safetensors file holds the T model: T changes none of its
      // values again, and (T not f32) they are not the f32 init's
      bc_weights ws, w32;
      assert_int_equal(bcW_load(m->ctx, m->g, st, &ws), BC_OK);
      assert_int_equal(bcW_load(m->ctx, m->g, st32, &w32), BC_OK);
      bc_weights again;
      assert_int_equal(bcW_load(m->ctx, m->g, st, &again), BC_OK);
      m->g->weight_type = wt;
      assert_int_equal(bcY_round_weights(m->ctx, m->g, &again), BC_OK);
      m->g->weight_type = BC_WT_F32;
      bool *packed = packed_params(m, wt ? wt : BC_WT_Q8_0);
      bool differs = false;
      for (int i = 0; i < m->g->nparams; i++) {
        size_t bytes = (size_t)bc_shape_numel(&m->g->params[i].shape) * sizeof(float);
        assert_memory_equal(ws.p[i], again.p[i], bytes);
        bool same = !memcmp(ws.p[i], w32.p[i], bytes);
        if (!packed[i] || !wt) assert_true(same);  // norms, biases, tables, or f32: the init
        differs |= !same;
      }
      assert_true(differs == (wt != 0));
      bcW_free(&ws), bcW_free(&w32), bcW_free(&again);
      // names, ne order, types
      bcrt_gguf_file *gf;
      bcrt_error e;
      assert_int_equal(bcrt_gguf_open(gg, &gf, &e), BCRT_OK);
      assert_int_equal(bcrt_gguf_version(gf), 3);
      assert_int_equal(bcrt_gguf_count(gf), m->g->nparams);
      assert_string_equal(bcrt_gguf_get(gf, "general.architecture")->str, f->arch);
      assert_string_equal(bcrt_gguf_get(gf, "general.name")->str, m->g->model);
      // no tokenizer given: llama.cpp's "no vocabulary", which it needs to load the file
      assert_string_equal(bcrt_gguf_get(gf, "tokenizer.ggml.model")->str, "none");
      assert_null(bcrt_gguf_get(gf, "tokenizer.ggml.tokens"));
      char key[96];
      snprintf(key, sizeof key, "%s.embedding_length", f->arch);
      assert_int_equal(meta_u(gf, key), 32);
      snprintf(key, sizeof key, "%s.block_count", f->arch);
      assert_int_equal(meta_u(gf, key), 2);
      snprintf(key, sizeof key, "%s.context_length", f->arch);
      assert_int_equal(meta_u(gf, key), fi == 0 ? 1024 : 16);  // llama: the T bound; gpt2: P
      const bcrt_gguf_tensor *emb = bcrt_gguf_find(gf, "token_embd.weight");
      assert_non_null(emb);
      assert_true(emb->rank == 2 && emb->ne[0] == 32 && emb->ne[1] == 40);
      const bcrt_gguf_tensor *mat = bcrt_gguf_find(gf, fi == 0 ? "blk.1.attn_k.weight" : "blk.1.attn_qkv.weight");
      assert_non_null(mat);  // llama k_proj (KV*dh, D) = ne {32, 16}; gpt2 c_attn (D, 3D) stored (3D, D)
      assert_true(mat->rank == 2 && mat->ne[0] == 32 && mat->ne[1] == (fi == 0 ? 16u : 96u));
      assert_string_equal(mat->type_name, wt_file4[wt]);
      assert_string_equal(bcrt_gguf_find(gf, "output_norm.weight")->type_name, "F32");
      for (int i = 0; i < m->g->nparams; i++) {
        bc_st_file *sf;
        assert_int_equal(bcS_open(m->ctx, gg, &sf), BC_OK);
        const bc_st_tensor *t = bcS_find(sf, m->g->params[i].name);
        assert_non_null(t);
        assert_string_equal(t->dtype_name, packed[i] ? wt_file4[wt] : "F32");
        bcS_close(sf);
        // the safetensors file: F32, but f16's matrices as F16 (the same values)
        assert_int_equal(bcS_open(m->ctx, st, &sf), BC_OK);
        t = bcS_find(sf, m->g->params[i].name);
        assert_non_null(t);
        assert_string_equal(t->dtype_name, packed[i] && wt == BC_WT_F16 ? "F16" : "F32");
        bcS_close(sf);
      }
      bcrt_gguf_close(gf);
      free(packed);
      // the metadata gives the dims back (a bare parse has the defaults)
      bc_graph *bare = bcP_parse_file(m->ctx, f->graph, NULL, 0);
      assert_non_null(bare);
      bc_define *d;
      int nd;
      assert_int_equal(bcF_gguf_defs(m->ctx, gg, bare, NULL, 0, &d, &nd), BC_OK);
      for (int k = 0; k < f->ndefs; k++) {
        bool found = false;
        for (int j = 0; j < nd; j++)
          if (!strcmp(d[j].name, f->defs[k].name)) found = true, assert_int_equal(d[j].value, f->defs[k].value);
        if (!found) print_error("%s: dim %s not in the file\n", f->graph, f->defs[k].name);
        assert_true(found);
      }
      char note[256];
      assert_int_equal(bcF_gguf_apply(m->ctx, gg, m->g, note, sizeof note), BC_OK);
      assert_string_equal(note, "");  // the file's eps and theta are the graph's
      // the same logits from both files
      TU_RUN(r, "run", f->graph, "--weights", gg, "--length", "T=5", "--output", oa);
      tu_expect_run(r, 0, "output [1, 5, 40]", "dims from the file");
      if (wt) {
        char want[96];
        snprintf(want, sizeof want, "the matrices are %s: kept so (--weight-dtype %s)", wt_file4[wt], wt_names4[wt]);
        assert_non_null(strstr(r->err, want));
      }
      const char *a[40] = {"run", f->graph};
      int n = 2;
      for (int i = 0; i < 12; i++) a[n++] = f->dflags[i];
      const char *rest[] = {"--weights", st, "--weight-dtype", wt_names4[wt], "--length", "T=5", "--output", ob};
      for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) a[n++] = rest[i];
      a[n] = NULL;
      tu_run(r, a);
      tu_expect_run(r, 0, "output [1, 5, 40]", NULL);
      if (!tu_same_file(ya, yb)) print_error("%s at %s: the logits differ\n", f->graph, wt_names4[wt]);
      assert_true(tu_same_file(ya, yb));
      tu_model_free(m);
      unlink(gg), unlink(st), unlink(st32), unlink(ya), unlink(yb);
    }
  free(r);
}

// The file's blocks are the runtime packer's: each quantized matrix,
// loaded back, is bcrt_unpack_wt(bcrt_pack_nt_wt(x)) of the (unrounded)
// weights written, and the raw Q8_0 / Q4_0 bytes of an un-permuted matrix
// are ggml's reference quantizers' (the test's gw_q8_0 / gw_q4_0) but for
// blocks whose scale is 0.  The
// weights have zero and tiny blocks and a block whose extremes tie.
static void test_write_blocks(void **state) {
  (void)state;
  for (int wt = 1; wt < NWT; wt++) {
    tu_model *m = fam_model(&fams[0], 3);
    const bc_graph *g = m->g;
    for (int i = 0; i < g->nparams; i++) {
      int64_t n = bc_shape_numel(&g->params[i].shape);
      tu_fill(m->w.p[i], n, 100 + (unsigned)i);
      if (g->params[i].shape.rank != 2) continue;
      for (int k = 0; k < 32 && k < n; k++) m->w.p[i][k] = 0;                 // a zero block
      for (int k = 32; k < 64 && k < n; k++) m->w.p[i][k] *= 1e-30f;          // a tiny one
      if (n >= 96) m->w.p[i][64] = -0.75f, m->w.p[i][65] = 0.75f;             // |max| tie
    }
    char gg[256];
    tu_tmp_path(gg, sizeof gg, ".gguf");
    m->g->weight_type = wt;
    assert_int_equal(bcF_write_gguf(m->ctx, gg, m->g, &m->w), BC_OK);
    bool *packed = packed_params(m, wt);
    m->g->weight_type = BC_WT_F32;
    bc_weights back;
    assert_int_equal(bcW_load(m->ctx, m->g, gg, &back), BC_OK);
    for (int i = 0; i < g->nparams; i++) {
      const bc_shape *s = &g->params[i].shape;
      size_t bytes = (size_t)bc_shape_numel(s) * sizeof(float);
      if (!packed[i]) {
        assert_memory_equal(back.p[i], m->w.p[i], bytes);
        continue;
      }
      int rows = (int)s->d[0], k = (int)s->d[1];
      void *pk = malloc(bcrt_pack_wt_bytes(wt, rows, k));
      float *want = malloc(bytes);
      bcrt_pack_nt_wt(wt, rows, k, m->w.p[i], pk);
      bcrt_unpack_wt(wt, rows, k, pk, want);
      if (memcmp(back.p[i], want, bytes)) print_error("%s at %s: not the packer's values\n", g->params[i].name, wt_names4[wt]);
      assert_memory_equal(back.p[i], want, bytes);
      free(pk), free(want);
    }
    // F16: the halves of the weights (the test's own conversion), for v_proj
    if (wt == BC_WT_F16) {
      const char *v = "model.layers.0.self_attn.v_proj.weight";
      int64_t n = tu_param_numel(m, v);
      const float *x = tu_param(m, v);
      unsigned char *raw = malloc((size_t)n * 2);
      bcrt_gguf_file *gf;
      bcrt_error e;
      assert_int_equal(bcrt_gguf_open(gg, &gf, &e), BCRT_OK);
      const bcrt_gguf_tensor *t = bcrt_gguf_find(gf, "blk.0.attn_v.weight");
      assert_true(t && t->bytes == (uint64_t)n * 2 && !strcmp(t->type_name, "F16"));
      assert_int_equal(bcrt_gguf_read_raw(gf, t, raw, &e), BCRT_OK);
      for (int64_t k = 0; k < n; k++)
        assert_int_equal(raw[2 * k] | raw[2 * k + 1] << 8, gw_f16(x[k]));
      bcrt_gguf_close(gf);
      free(raw);
    }
    // ggml's bytes, for a matrix the file stores as it is (v_proj)
    if (wt == BC_WT_Q8_0 || wt == BC_WT_Q4_0) {
      const char *v = "model.layers.0.self_attn.v_proj.weight";
      int64_t n = tu_param_numel(m, v);
      size_t nb = (size_t)n / 32 * (wt == 2 ? 34 : 18);
      unsigned char *ref = malloc(nb), *raw = malloc(nb);
      if (wt == 2) gw_q8_0(tu_param(m, v), (size_t)n, ref);
      else gw_q4_0(tu_param(m, v), (size_t)n, ref);
      bcrt_gguf_file *gf;
      bcrt_error e;
      assert_int_equal(bcrt_gguf_open(gg, &gf, &e), BCRT_OK);
      const bcrt_gguf_tensor *t = bcrt_gguf_find(gf, "blk.0.attn_v.weight");
      assert_true(t && t->bytes == nb && t->offset % 32 == 0);
      assert_int_equal(bcrt_gguf_read_raw(gf, t, raw, &e), BCRT_OK);
      // ggml's bytes, but a block whose FP16 scale is +-0 (the tiny one):
      // ggml keeps codes there that multiply 0, the packer stores zero
      // codes (the same weights, 0; blockc_rt.h, bcrt_pack_nt_wt)
      size_t bb = wt == 2 ? 34 : 18;
      for (size_t b = 0; b < nb / bb; b++) {
        const unsigned char *x = raw + b * bb, *y = ref + b * bb;
        bool zero = (y[0] | (y[1] & 0x7f)) == 0;
        if (zero) assert_true((x[0] | (x[1] & 0x7f)) == 0);
        else assert_memory_equal(x, y, bb);
      }
      bcrt_gguf_close(gf);
      free(ref), free(raw);
    }
    bcW_free(&back);
    free(packed);
    unlink(gg);
    tu_model_free(m);
  }
}

// Refusals leave no file: a graph whose parameters have no llama.cpp
// names, and quantized rows that are not whole blocks of 32 (D=48); the
// same graph writes f32 GGUF.  The default safetensors output is the seeded
// init's bytes, as before --weight-dtype; -o's other checks are kept.
static void test_write_refused(void **state) {
  (void)state;
  tu_run_result *r = malloc(sizeof *r);
  char gg[256], st[256], st2[256];
  tu_tmp_path(gg, sizeof gg, ".gguf");
  TU_RUN(r, "weights", "graphs/tiny.blk", "-o", gg);
  tu_expect_run(r, 1, NULL, "has no GGUF tensor name in the");
  assert_non_null(strstr(r->err, "write a .safetensors file instead"));
  assert_false(tu_exists(gg));
  TU_RUN(r, "weights", "graphs/llama_lm.blk", "-D", "D=48", "-D", "H=4", "-D", "KV=2", "-D", "F=64", "-D", "N=1",
         "-D", "V=40", "--weight-dtype", "q4_0", "-o", gg);
  tu_expect_run(r, 1, NULL, "rows of 48 weights are not whole Q4_0 blocks of 32");
  assert_false(tu_exists(gg));
  TU_RUN(r, "weights", "graphs/llama_lm.blk", "-D", "D=48", "-D", "H=4", "-D", "KV=2", "-D", "F=64", "-D", "N=1",
         "-D", "V=40", "--weight-dtype", "bf16", "-o", gg);
  tu_expect_run(r, 0, "GGUF", NULL);
  assert_true(tu_exists(gg));
  unlink(gg);
  // today's file, byte for byte
  tu_tmp_path(st, sizeof st, ".safetensors");
  tu_tmp_path(st2, sizeof st2, ".safetensors");
  TU_RUN(r, "weights", "graphs/llama_lm.blk", "-D", "D=32", "-D", "H=4", "-D", "KV=2", "-D", "F=64", "-D", "N=2",
         "-D", "V=40", "--seed", "9", "-o", st);
  tu_expect_run(r, 0, "(seed 9)", NULL);
  tu_model *m = llama_model(9);
  save_safetensors(m, st2);
  assert_true(tu_same_file(st, st2));
  tu_model_free(m);
  unlink(st), unlink(st2);
  free(r);
}

// Converting a checkpoint: --weights IN.safetensors --weight-dtype q8_0
// -o out.gguf holds IN's weights rounded through q8_0; and that file, read
// back with --weights (its Q8_0 kept) into .safetensors, is the same floats.
static void test_write_convert(void **state) {
  (void)state;
  tu_run_result *r = malloc(sizeof *r);
  const fam *f = &fams[1];
  char in[256], gg[256], back[256];
  tu_tmp_path(in, sizeof in, ".safetensors");
  tu_tmp_path(gg, sizeof gg, ".gguf");
  tu_tmp_path(back, sizeof back, ".safetensors");
  tu_model *m = fam_model(f, 21);
  for (int i = 0; i < m->g->nparams; i++)  // not the init: biases and norms too
    tu_fill(m->w.p[i], bc_shape_numel(&m->g->params[i].shape), 7 + (unsigned)i);
  save_safetensors(m, in);
  run_weights(r, f, (const char *[]){"--weights", in, "--weight-dtype", "q8_0", "-o", gg, NULL});
  tu_expect_run(r, 0, "(from ", NULL);
  assert_non_null(strstr(r->out, "matrices as q8_0"));
  TU_RUN(r, "weights", f->graph, "--weights", gg, "-o", back);
  tu_expect_run(r, 0, "wrote", "dims from the file");
  m->g->weight_type = BC_WT_Q8_0;
  assert_int_equal(bcY_round_weights(m->ctx, m->g, &m->w), BC_OK);
  m->g->weight_type = BC_WT_F32;
  bc_weights wg, wb;
  assert_int_equal(bcW_load(m->ctx, m->g, gg, &wg), BC_OK);
  assert_int_equal(bcW_load(m->ctx, m->g, back, &wb), BC_OK);
  for (int i = 0; i < m->g->nparams; i++) {
    size_t bytes = (size_t)bc_shape_numel(&m->g->params[i].shape) * sizeof(float);
    assert_memory_equal(wg.p[i], m->w.p[i], bytes);
    assert_memory_equal(wb.p[i], m->w.p[i], bytes);
  }
  bcW_free(&wg), bcW_free(&wb);
  tu_model_free(m);
  unlink(in), unlink(gg), unlink(back);
  free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_metadata),    cmocka_unit_test(test_string_array), cmocka_unit_test(test_block_types),
      cmocka_unit_test(test_quantizers),  cmocka_unit_test(test_bad_files),    cmocka_unit_test(test_llama_view),
      cmocka_unit_test(test_cli_run),     cmocka_unit_test(test_gpt2_view),    cmocka_unit_test(test_write_families),
      cmocka_unit_test(test_write_blocks), cmocka_unit_test(test_write_refused), cmocka_unit_test(test_write_convert),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
