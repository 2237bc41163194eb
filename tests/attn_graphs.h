// attn_graphs.h — small graphs with issue 23's options, shared by the tests
// that compare stages (test_grad: finite differences; test_grad_emit: the
// emitted backward; test_jit_ops: the compiled forward; test_interp_ops).
//
//   ATTN_OPTS_SELF   grouped-query self-attention with per-head RMS QK-norm,
//                    RoPE, a sliding window, a score soft-cap, scale= and
//                    head scales, lengths, a run-time T
//   ATTN_OPTS_PACKED packed params= with full-width LayerNorm QK-norm (bias),
//                    a window of 2 and head scales, then a cross-attention
//                    with per-head RMS QK-norm, a soft-cap and head scales
//   NORM_OFFSET      RMSNorm(offset=1) alone and fused with its residual Add,
//                    a geglu_tanh FFN, Softcap on a Linear head; the norm's
//                    output is a second output
//   HEAD_DIM_SELF    head_dim= wider than D/H (D = 10 is not even divisible
//                    by H = 4): grouped-query, RoPE, per-head RMS QK-norm,
//                    a window, a soft-cap, head scales, biases, lengths, a
//                    run-time T (Qwen3 / Gemma 2's head_dim)
//   HEAD_DIM_CROSS   head_dim= narrower than D/H: a non-causal self-attention
//                    with full-width LayerNorm QK-norm ([H*dh], [KV*dh]) and
//                    layout=in_out, then a grouped-query cross-attention
#ifndef ATTN_GRAPHS_H
#define ATTN_GRAPHS_H

#define ATTN_OPTS_SELF                                                                        \
  "model o1\ndim B = 2\ndim T <= 7\ndim D = 12\ninput x : [B, T, D]\ninput len : lengths[B]\n" \
  "a = Attention(x, heads=3, kv_heads=1, causal=true, rope=true, lengths=len, bias=false,\n"  \
  "              q=q, k=k, v=v, o=o, qk_norm=rms, window=3, softcap=2.5, scale=0.4,\n"        \
  "              head_scale=true)\n"                                                          \
  "y = Add(x, a)\noutput y\n"

#define ATTN_OPTS_PACKED                                                                     \
  "model o2\ndim B = 2\ndim T = 6\ndim S = 5\ndim D = 12\ninput x : [B, T, D]\n"            \
  "input mem : [B, S, D]\n"                                                                  \
  "a = Attention(x, heads=2, causal=true, params=sa, qk_norm=layernorm,\n"                   \
  "              qk_norm_per_head=false, qk_norm_eps=1e-5, window=2, head_scale=true)\n"     \
  "x = Add(x, a)\n"                                                                          \
  "c = Attention(x, kv=mem, heads=3, params=ca, qk_norm=rms, softcap=1.5, head_scale=true)\n" \
  "y = Add(x, c)\noutput y\n"

#define HEAD_DIM_SELF                                                                        \
  "model hd1\ndim B = 2\ndim T <= 7\ndim D = 10\ndim K = 6\ninput x : [B, T, D]\n"            \
  "input len : lengths[B]\n"                                                                  \
  "a = Attention(x, heads=4, kv_heads=2, head_dim=K, causal=true, rope=true, lengths=len,\n"   \
  "              q=q, k=k, v=v, o=o, qk_norm=rms, window=4, softcap=2.5, head_scale=true)\n"   \
  "y = Add(x, a)\noutput y\n"

#define HEAD_DIM_CROSS                                                                       \
  "model hd2\ndim B = 2\ndim T = 6\ndim S = 5\ndim D = 12\ninput x : [B, T, D]\n"            \
  "input mem : [B, S, D]\n"                                                                  \
  "a = Attention(x, heads=2, head_dim=4, q=sa.q, k=sa.k, v=sa.v, o=sa.o, layout=in_out,\n"            \
  "              qk_norm=layernorm, qk_norm_per_head=false, bias=false)\n"                    \
  "x = Add(x, a)\n"                                                                          \
  "c = Attention(x, kv=mem, heads=4, kv_heads=2, head_dim=5, q=ca.q, k=ca.k, v=ca.v, o=ca.o,\n"       \
  "              qk_norm=rms, head_scale=true)\n"                                             \
  "y = Add(x, c)\noutput y\n"

#define NORM_OFFSET                                                                          \
  "model o3\ndim B = 2\ndim T = 5\ndim D = 8\ninput x : [B, T, D]\n"                        \
  "h = RMSNorm(x, offset=1, params=n0)\n"                                                    \
  "f = FFN(h, hidden=11, act=geglu_tanh, gate=g, up=u, down=d, bias=false)\n"               \
  "x = Add(x, f)\n"                                                                          \
  "z = RMSNorm(x, eps=1e-5, offset=1, params=n1)\n"                                          \
  "y = Softcap(Linear(z, out=6, params=head), cap=1.5)\noutput y\noutput z\n"

#endif
