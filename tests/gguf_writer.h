// gguf_writer.h — GGUF files by hand, for tests and tools (not the shipped
// writer): a byte buffer, metadata entries, tensors laid out at the
// alignment, a reader from memory (gw_open), and ggml's reference quantizers for Q8_0 and Q4_0
// (quantize_row_q8_0_reference / quantize_row_q4_0_reference: d = amax/127
// rounded; d = (the signed value of largest magnitude) / -8, q = min(15,
// (int)(x/d + 8.5))).  Header-only: static functions.
#ifndef GGUF_WRITER_H
#define GGUF_WRITER_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockc_rt.h"

typedef struct {
  unsigned char *p;
  size_t n, cap;
} gw_buf;

static void gw_put(gw_buf *b, const void *d, size_t n) {
  if (b->n + n > b->cap) {
    size_t c = b->cap ? b->cap : 256;
    while (c < b->n + n) c *= 2;
    unsigned char *q = realloc(b->p, c);
    if (!q) abort();
    b->p = q, b->cap = c;
  }
  if (n) memcpy(b->p + b->n, d, n);
  b->n += n;
}
static void gw_u8(gw_buf *b, unsigned v) {
  unsigned char c = (unsigned char)v;
  gw_put(b, &c, 1);
}
static void gw_u32(gw_buf *b, uint32_t v) {
  for (int i = 0; i < 4; i++) gw_u8(b, (v >> (8 * i)) & 0xff);
}
static void gw_u64(gw_buf *b, uint64_t v) {
  for (int i = 0; i < 8; i++) gw_u8(b, (unsigned)((v >> (8 * i)) & 0xff));
}
static void gw_str(gw_buf *b, const char *s) {
  gw_u64(b, strlen(s));
  gw_put(b, s, strlen(s));
}
static void gw_f32(gw_buf *b, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  gw_u32(b, u);
}

// Metadata entries (the kv section), counted in b->count by the caller.
static void gw_kv_u32(gw_buf *b, const char *key, uint32_t v) { gw_str(b, key), gw_u32(b, 4), gw_u32(b, v); }
static void gw_kv_f32(gw_buf *b, const char *key, float v) { gw_str(b, key), gw_u32(b, 6), gw_f32(b, v); }
static void gw_kv_str(gw_buf *b, const char *key, const char *v) { gw_str(b, key), gw_u32(b, 8), gw_str(b, v); }
static void gw_kv_bool(gw_buf *b, const char *key, int v) { gw_str(b, key), gw_u32(b, 7), gw_u8(b, v ? 1u : 0u); }
// Arrays: of n strings, float32s, int32s (llama.cpp's tokenizer.ggml.tokens, .scores, .token_type).
static void gw_kv_strs(gw_buf *b, const char *key, const char *const *v, size_t n) {
  gw_str(b, key), gw_u32(b, 9), gw_u32(b, 8), gw_u64(b, n);
  for (size_t i = 0; i < n; i++) gw_str(b, v[i]);
}
static void gw_kv_f32s(gw_buf *b, const char *key, const float *v, size_t n) {
  gw_str(b, key), gw_u32(b, 9), gw_u32(b, 6), gw_u64(b, n);
  for (size_t i = 0; i < n; i++) gw_f32(b, v[i]);
}
static void gw_kv_i32s(gw_buf *b, const char *key, const int32_t *v, size_t n) {
  gw_str(b, key), gw_u32(b, 9), gw_u32(b, 5), gw_u64(b, n);
  for (size_t i = 0; i < n; i++) gw_u32(b, (uint32_t)v[i]);
}

typedef struct {
  const char *name;
  int type;              // ggml type id
  int rank;
  uint64_t ne[8];        // GGUF order (ne[0] fastest); past 4 only for bad files
  const void *data;
  size_t bytes;
} gw_tensor;

// The whole file: header, nkv entries from kv, tensor infos, padding, data.
static void gw_file(gw_buf *out, uint32_t version, uint64_t nkv, const gw_buf *kv, const gw_tensor *t, int nt,
                    unsigned align) {
  gw_put(out, "GGUF", 4);
  gw_u32(out, version);
  gw_u64(out, (uint64_t)nt);
  gw_u64(out, nkv);
  gw_put(out, kv->p, kv->n);
  uint64_t off = 0;
  for (int i = 0; i < nt; i++) {
    gw_str(out, t[i].name);
    gw_u32(out, (uint32_t)t[i].rank);
    for (int k = 0; k < t[i].rank; k++) gw_u64(out, t[i].ne[k]);
    gw_u32(out, (uint32_t)t[i].type);
    gw_u64(out, off);
    off += (t[i].bytes + align - 1) / align * align;
  }
  while (out->n % align) gw_u8(out, 0);
  for (int i = 0; i < nt; i++) {
    gw_put(out, t[i].data, t[i].bytes);
    while ((out->n) % align) gw_u8(out, 0);
  }
}

static int gw_save(const char *path, const gw_buf *b) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int ok = fwrite(b->p, 1, b->n, f) == b->n;
  return fclose(f) == 0 && ok ? 0 : -1;
}

// float -> IEEE half, round to nearest even (finite inputs in half's range).
static uint16_t gw_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xff, m = x & 0x7fffffu;
  if (e == 0xff) return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0));
  int ee = (int)e - 127 + 15;
  if (ee >= 31) return (uint16_t)(sign | 0x7c00u);
  if (ee <= 0) {
    if (ee < -10) return (uint16_t)sign;
    m |= 0x800000u;
    int shift = 14 - ee;
    uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)ee << 10) | (m >> 13), rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
  return (uint16_t)(sign | h);
}
static float gw_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu;
  float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 0x400u), (int)e - 25);
  return sign ? -v : v;
}

// ggml's reference Q8_0 of n floats (n a multiple of 32) into out (n/32*34 bytes).
static void gw_q8_0(const float *x, size_t n, unsigned char *out) {
  for (size_t b = 0; b < n / 32; b++, out += 34) {
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
    float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
    uint16_t h = gw_f16(d);
    out[0] = (unsigned char)(h & 0xff), out[1] = (unsigned char)(h >> 8);
    for (int j = 0; j < 32; j++) out[2 + j] = (unsigned char)(signed char)roundf(x[b * 32 + j] * id);
  }
}

// ggml's reference Q4_0 into out (n/32*18 bytes).
static void gw_q4_0(const float *x, size_t n, unsigned char *out) {
  for (size_t b = 0; b < n / 32; b++, out += 18) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++) {
      float v = x[b * 32 + j];
      if (fabsf(v) > amax) amax = fabsf(v), max = v;
    }
    float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
    uint16_t h = gw_f16(d);
    out[0] = (unsigned char)(h & 0xff), out[1] = (unsigned char)(h >> 8);
    for (int j = 0; j < 16; j++) {
      int q0 = (int)(x[b * 32 + j] * id + 8.5f), q1 = (int)(x[b * 32 + 16 + j] * id + 8.5f);
      q0 = q0 > 15 ? 15 : q0, q1 = q1 > 15 ? 15 : q1;
      out[2 + j] = (unsigned char)(q0 | q1 << 4);
    }
  }
}

// Opens the file in b with the runtime's reader, from memory (b must
// outlive the file; one such file at a time).
static int gw_mem_read(void *h, unsigned long long off, void *buf, unsigned long n) {
  const gw_buf *m = h;
  if (off > m->n || n > m->n - off) return -1;
  memcpy(buf, m->p + off, n);
  return 0;
}
static int gw_open(const gw_buf *b, bcrt_gguf_file **f, bcrt_error *e) {
  static gw_buf m;
  m = *b;
  bcrt_source src = {&m, b->n, gw_mem_read};
  return bcrt_gguf_open_source(&src, f, e);
}
#endif
