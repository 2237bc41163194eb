#!/usr/bin/python3
"""make_bad_inputs.py — writes the hostile-input catalogue and fuzz seeds.

    /usr/bin/python3 tools/make_bad_inputs.py      (from the project root)

Outputs (all committed; rerunning rewrites them byte-for-byte):

  tests/bad/*.blk, *.safetensors, *.npy   hostile inputs for tests/test_hostile.c,
                                          catalogued in docs/hostile-inputs.md
  tests/fuzz/corpus/safetensors/*         small valid and invalid seeds
  tests/fuzz/corpus/npy/*
  tests/fuzz/corpus/gguf/*                small GGUF seeds (tests/bad/gguf_*: bad ones)
  tests/fuzz/corpus/parse/*               graphs/*.blk copies and small variants

The weights and arrays target tests/bad/ln.blk: one LayerNorm over D = 4
(parameters ln.weight [4], ln.bias [4]; input and output [1, 2, 4]).
Standard library only.
"""
import json
import os
import shutil
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BAD = os.path.join(ROOT, "tests", "bad")
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(path, "wb") as f:
        f.write(data)


# --- safetensors -----------------------------------------------------------
def f32(vals):
    return struct.pack("<%df" % len(vals), *vals)


def st_bytes(tensors, header_extra=None, raw_header=None, pad=True):
    """tensors: list of (name, dtype, shape, bytes). Offsets are laid out in order."""
    hdr, off, data = {}, 0, b""
    for name, dtype, shape, payload in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(payload)]}
        off += len(payload)
        data += payload
    if header_extra:
        hdr.update(header_extra)
    h = raw_header if raw_header is not None else json.dumps(hdr, separators=(",", ":")).encode()
    if pad and raw_header is None:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


W4 = f32([1.0, 1.0, 1.0, 1.0])
B4 = f32([0.0, 0.0, 0.0, 0.0])
GOOD = [("ln.weight", "F32", [4], W4), ("ln.bias", "F32", [4], B4)]


def st_raw(header_obj, data):
    h = json.dumps(header_obj, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + data


# --- npy --------------------------------------------------------------------
def npy_bytes(descr="<f4", fortran=False, shape=(1, 2, 4), data=None, magic=b"\x93NUMPY",
              version=(1, 0), raw_header=None):
    h = raw_header if raw_header is not None else (
        "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }"
        % (descr, "True" if fortran else "False",
           "(%s)" % (", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else ""))))
    h = h.encode("latin-1") if isinstance(h, str) else h
    pre = len(magic) + 2 + (2 if version[0] == 1 else 4)
    h += b" " * (-(pre + len(h) + 1) % 64) + b"\n"
    lenf = struct.pack("<H", len(h)) if version[0] == 1 else struct.pack("<I", len(h))
    if data is None:
        n = 1
        for d in shape:
            n *= d
        size = int(descr[2:]) if descr[2:].isdigit() else 4
        data = b"\x00\x00\x80\x3f" * n if descr == "<f4" else b"\x01" * (n * size)
    return magic + bytes(version) + lenf + h + data


X8 = f32([0.5, -1.0, 2.0, 0.25, 1.5, -0.75, 3.0, -2.0])


# ---- GGUF (issue 25) ----------------------------------------------------------------
def gg_s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def gg_kv_u32(k, v):
    return gg_s(k) + struct.pack("<II", 4, v)


def gg_kv_str(k, v):
    return gg_s(k) + struct.pack("<I", 8) + gg_s(v)


def gg_file(kvs, tensors, align=32, version=3, ntensors=None):
    """tensors: (name, ggml type, ne, data bytes); offsets laid out at align."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors) if ntensors is None else ntensors, len(kvs))
    out += b"".join(kvs)
    off, datas = 0, []
    for name, typ, ne, data in tensors:
        out += gg_s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", x) for x in ne)
        out += struct.pack("<IQ", typ, off)
        off += (len(data) + align - 1) // align * align
        datas.append(data)
    out += b"\0" * ((-len(out)) % align)
    for d in datas:
        out += d + b"\0" * ((-len(d)) % align)
    return out


def gguf_files():
    q8 = b"".join(struct.pack("<e", 0.01) + bytes(range(32)) for _ in range(8))
    llama = [gg_kv_str("general.architecture", "llama")]
    ok = gg_file(llama, [("token_embd.weight", 0, [4, 2], f32([1] * 8))])
    bad = {
        "gguf_truncated.gguf": ok[:40],
        "gguf_count_huge.gguf": b"GGUF" + struct.pack("<IQQ", 3, 1 << 40, 0),
        "gguf_nested_array.gguf": gg_file(llama + [gg_s("a") + struct.pack("<IIQ", 9, 9, 1)], []),
        "gguf_past_end.gguf": ok[:-4],
        "gguf_unknown_type.gguf": gg_file(llama, [("token_embd.weight", 17, [4, 2], b"\0" * 32)]),
        "gguf_no_heads.gguf": gg_file(llama, [("blk.0.attn_q.weight", 8, [32, 8], q8)]),
        "gguf_q2k.gguf": gg_file(llama, [("token_embd.weight", 10, [256, 1], b"\0" * 84)]),
    }
    seeds = {
        "meta_f32.gguf": gg_file([gg_kv_str("general.architecture", "x"), gg_kv_u32("a", 1),
                                  gg_s("b") + struct.pack("<If", 6, 2.5),
                                  gg_s("arr") + struct.pack("<IIQ", 9, 5, 3) + struct.pack("<iii", 1, -2, 3),
                                  gg_s("toks") + struct.pack("<IIQ", 9, 8, 2) + gg_s("ab") + gg_s("c")],
                                 [("w", 0, [4, 2], f32(range(8))), ("h", 1, [4], struct.pack("<4H", *[0x3C00] * 4))]),
        "llama_q8.gguf": gg_file(llama + [gg_kv_u32("llama.attention.head_count", 2),
                                          gg_kv_u32("llama.attention.head_count_kv", 2),
                                          gg_kv_u32("llama.embedding_length", 32)],
                                 [("blk.0.attn_q.weight", 8, [32, 8], q8), ("blk.0.attn_k.weight", 8, [32, 8], q8),
                                  ("token_embd.weight", 0, [32, 2], f32([1] * 64))]),
        "gpt2_f16.gguf": gg_file([gg_kv_str("general.architecture", "gpt2"), gg_kv_u32("gpt2.attention.head_count", 2)],
                                 [("blk.0.attn_qkv.weight", 1, [4, 12], struct.pack("<48H", *[0x3C00] * 48)),
                                  ("blk.0.attn_qkv.bias", 0, [12], f32([0] * 12))], align=64),
    }
    return bad, seeds


def main():
    # ---- graphs ------------------------------------------------------------
    ln = ("# One LayerNorm over D = 4: the graph every weights/array entry of the\n"
          "# hostile-input catalogue is run against.\n"
          "model ln\ndim D = 4\ninput x : [1, 2, D]\n"
          "y = LayerNorm(x, params=ln)\noutput y\n")
    write(os.path.join(BAD, "ln.blk"), ln)

    head = "model m\ndim D = 4\ninput x : [1, 2, D]\n"
    xhead = "model m\ndim D = 4\ninput x : [2, 3, D]\ninput mem : [2, 5, D]\ninput len : lengths[2]\n"
    graphs = {
        # C injection through names: rejected by the lexer before anything else.
        "inject_semicolon.blk": head + 'y = LayerNorm(x, params=ln); system("touch /tmp/pwned")\noutput y\n',
        "inject_quote_param.blk": head + 'y = LayerNorm(x, params="ln\\"); system(\\"id")\noutput y\n',
        "inject_comment_close.blk": head + "y = LayerNorm(x, params=ln) */ int z;\noutput y\n",
        "inject_preprocessor.blk": "#include <stdio.h>\n" + head + "y = LayerNorm(x, affine=false)\noutput y\n#define x 1\n@pragma\n",
        "inject_model_name.blk": 'model m(void){system("id");} int f\ndim D = 4\ninput x : [1, 2, D]\ny = LayerNorm(x, affine=false)\noutput y\n',
        # Comments: backslash-newline would continue a C // comment; unicode is allowed.
        "comment_backslash.blk": "# a comment ending in a backslash \\\n" + head
                                 + "y = LayerNorm(x, params=ln)  # and here too \\\noutput y\n",
        "comment_unicode.blk": "# Ünïcödé ☃ 𝔘 — comments may hold any UTF-8 */ /* \"\n" + head
                               + "y = LayerNorm(x, params=ln)  # λ → μ\noutput y\n",
        "comment_bad_utf8.blk": "# raw bytes \xff\xfe in a comment\n" + head + "y = LayerNorm(x, affine=false)\noutput y\n",
        "ident_unicode.blk": head + "caf\u00e9 = LayerNorm(x, affine=false)\noutput caf\u00e9\n",
        "ident_too_long.blk": head + ("v" * 65) + " = LayerNorm(x, affine=false)\noutput " + ("v" * 65) + "\n",
        "param_too_long.blk": head + "y = LayerNorm(x, params=" + ".".join(["p" * 60] * 5) + ")\noutput y\n",
        "nul_byte.blk": head + "y = LayerNorm(x, affine=false)\x00\noutput y\n",
        "control_char.blk": head + "y = LayerNorm(x, affine=false)\x1b[2J\noutput y\n",
        "empty.blk": "",
        "dim_huge.blk": "model m\ndim D = 16777217\ninput x : [1, 2, D]\ny = LayerNorm(x, affine=false)\noutput y\n",
        "dim_zero.blk": "model m\ndim D = 0\ninput x : [1, 2, D]\ny = LayerNorm(x, affine=false)\noutput y\n",
        "dim_negative.blk": "model m\ndim D = -4\ninput x : [1, 2, D]\ny = LayerNorm(x, affine=false)\noutput y\n",
        "dim_overflow.blk": "model m\ndim D = 9223372036854775807 + 1\ninput x : [1, 2, D]\ny = LayerNorm(x, affine=false)\noutput y\n",
        "dim_literal_overflow.blk": "model m\ndim D = 99999999999999999999\ninput x : [1, 2, D]\ny = LayerNorm(x, affine=false)\noutput y\n",
        "dim_div_zero.blk": "model m\ndim D = 4 / (2 - 2)\ninput x : [1, 2, D]\ny = LayerNorm(x, affine=false)\noutput y\n",
        "elems_overflow.blk": "model m\ndim B = 16777216\ndim T = 16777216\ndim D = 16777216\ninput x : [B, T, D]\ny = LayerNorm(x, affine=false)\noutput y\n",
        "nest_calls.blk": head + "y = " + "LayerNorm(" * 200 + "x" + ", affine=false)" * 200 + "\noutput y\n",
        "nest_parens.blk": "model m\ndim D = " + "(" * 1000 + "4" + ")" * 1000 + "\ninput x : [1, 2, D]\ny = LayerNorm(x, affine=false)\noutput y\n",
        "nest_loops.blk": head + "y = x\n" + "".join("for i%d in 0..1 {\n" % k for k in range(200)) + "y = LayerNorm(y, affine=false)\n" + "}\n" * 200 + "output y\n",
        "loop_million.blk": head + "y = x\nfor i in 0..1000000 as l.{i} {\n  y = LayerNorm(y, params=n)\n}\noutput y\n",
        "loop_nodes.blk": head + "y = x\nfor i in 0..1000 {\n for j in 0..1000 {\n  y = Add(y, y)\n }\n}\noutput y\n",
        "loop_negative.blk": head + "y = x\nfor i in 5..0 {\n  y = LayerNorm(y, affine=false)\n}\noutput y\n",
        "unused_binding.blk": head + "a = LayerNorm(x, affine=false)\ny = LayerNorm(x, affine=false)\noutput y\n",
        "cycle.blk": head + "y = Add(x, y)\noutput y\n",
        "heads_indivisible.blk": head + "y = Attention(x, heads=3, params=a)\noutput y\n",
        "keyword_as_name.blk": head + "output = LayerNorm(x, affine=false)\noutput output\n",
        "two_outputs.blk": head + "y = LayerNorm(x, affine=false)\noutput y\noutput x\n",
        "huge_float.blk": head + "y = LayerNorm(x, eps=1e999)\noutput y\n",
        "eps_negative.blk": head + "y = LayerNorm(x, eps=-1)\noutput y\n",
        "eps_nan.blk": head + "y = LayerNorm(x, eps=0/0)\noutput y\n",
        "alpha_inf.blk": head + "y = Add(x, x, alpha=10^400)\noutput y\n",
        # Issue 12: line ends, BOM, escapes in echoed lines, total parameter memory.
        "cr_only.blk": "# old Mac line ends\rmodel m\rdim D = 4\rinput x : [1, 2, D]\ry = LayerNorm(x, params=ln)\routput y\r",
        "bom.blk": "\ufeff# a UTF-8 byte order mark first\r\nmodel m\r\ndim D = 4\r\ninput x : [1, 2, D]\r\ny = LayerNorm(x, params=ln)\r\noutput y\r\n",
        "escape_in_comment.blk": head + "y = LayerNorm(q, params=ln)  # \x1b[2J\x1b[H\x07all good\noutput y\n",
        "params_huge.blk": "model m\ndim D = 4096\ninput x : [1, D]\nfor i in 0..1000 as l.{i} {\n  x = Linear(x, out=D, params=p)\n}\noutput x\n",
        # Issue 22: dropout probabilities outside [0, 1).
        "dropout_p.blk": head + "y = Dropout(x, p=1)\noutput y\n",
        "dropout_ffn.blk": head + "y = FFN(x, hidden=8, params=(a, b), dropout=-0.1)\noutput y\n",
        "dropout_attn.blk": head + "y = Attention(x, heads=2, params=a, dropout=1.5)\noutput y\n",
        # Issue 9: several inputs, cross-attention, lengths, run-time dims.
        "xattn_causal.blk": xhead + "y = Attention(x, kv=mem, heads=2, causal=true, params=a)\noutput y\n",
        "xattn_shape.blk": "model m\ninput x : [2, 3, 4]\ninput mem : [2, 5, 6]\n"
                           "y = Attention(x, kv=mem, heads=2, params=a)\noutput y\n",
        "kv_lengths_self.blk": xhead + "y = Attention(x, heads=2, kv_lengths=len, params=a)\noutput y\nz = Add(mem, mem)\noutput z\n",
        "lengths_float.blk": xhead + "y = Attention(x, heads=2, lengths=mem, params=a)\noutput y\nz = Add(Attention(x, kv=mem, heads=2, lengths=len, params=c), x)\noutput z\n",
        "lengths_as_value.blk": xhead + "y = Add(x, len)\noutput y\n",
        "rt_dim_expr.blk": "model m\ndim T <= 8\ndim U = T * 2\ninput x : [1, U, 4]\ny = LayerNorm(x, affine=false)\noutput y\n",
        "rt_dim_param.blk": "model m\ndim D <= 8\ninput x : [1, 2, D]\ny = Linear(x, out=4, params=l)\noutput y\n",
        "rt_dim_in_loop.blk": head + "for i in 0..2 { dim T <= 4 }\ny = LayerNorm(x, affine=false)\noutput y\n",
        "lens.blk": "# A padded batch: x [2, T<=4, 4] with valid lengths len.\n"
                    "model lens\ndim T <= 4\ninput x : [2, T, 4]\ninput len : lengths[2]\n"
                    "y = Attention(x, heads=2, lengths=len, params=a)\noutput y\n",
        # Issue 10: checkpoint families' attributes.
        "kv_heads_indivisible.blk": "model m\ndim D = 12\ninput x : [1, 2, D]\n"
                                    "y = Attention(x, heads=6, kv_heads=4, q=q, k=k, v=v, o=o)\noutput y\n",
        "rope_cross.blk": xhead + "y = Attention(x, kv=mem, heads=2, rope=true, q=q, k=k, v=v, o=o)\noutput y\n",
        "layout_on_norm.blk": head + "y = LayerNorm(x, params=n, layout=in_out)\noutput y\n",
        "gated_no_gate.blk": head + "y = FFN(x, hidden=8, act=swiglu, up=u, down=d)\noutput y\n",
        "linear_nobias.blk": head + "y = Linear(x, out=4, params=l, bias=false)\noutput y\n",
        # Issue 21: token ids (tok.blk: V = 50257, as GPT-2's) and their misuse.
        "tok.blk": "# Token ids [2, T<=8] through a GPT-2-sized vocabulary (V = 50257, D = 4).\n"
                   "model tok\ndim T <= 8\ninput ids : tokens[2, T]\n"
                   "y = Embedding(ids, vocab=50257, dim=4, params=wte)\noutput y\n",
        "tokens_as_value.blk": "model m\ninput ids : tokens[2, 3]\ny = LayerNorm(ids, affine=false)\noutput y\n",
        "embedding_float.blk": head + "y = Embedding(x, vocab=8, dim=4, params=wte)\noutput y\n",
    }
    for name, text in graphs.items():
        write(os.path.join(BAD, name), text.encode("latin-1") if "bad_utf8" in name else text)
    # Over 16 MiB: generated at test time would be slow to commit; write a
    # sparse-looking file of comment lines instead (kept out of git by size).
    # (Not generated: tests/test_hostile.c creates it in a temp dir.)

    # ---- safetensors (against ln.blk) -----------------------------------------
    st = {
        "st_valid.safetensors": st_bytes(GOOD),
        "st_empty.safetensors": b"",
        "st_short.safetensors": b"\x10\x00\x00",
        "st_garbage.safetensors": bytes((i * 97 + 13) & 0xFF for i in range(64)),
        "st_truncated.safetensors": st_bytes(GOOD)[:-5],
        "st_header_past_end.safetensors": struct.pack("<Q", 4096) + b'{"a":1}',
        "st_header_huge.safetensors": struct.pack("<Q", 2 ** 63 + 5) + b"{}",
        "st_bad_json.safetensors": st_bytes([], raw_header=b'{"ln.weight": {"dtype": "F32",'),
        "st_not_object.safetensors": st_bytes([], raw_header=b"[1, 2, 3]"),
        "st_trailing.safetensors": st_bytes([], raw_header=b"{} {}"),
        "st_bad_utf8.safetensors": st_bytes([], raw_header=b'{"\xff\xfe": 1}'),
        "st_offsets_past_end.safetensors": st_raw(
            {"ln.weight": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
             "ln.bias": {"dtype": "F32", "shape": [4], "data_offsets": [16, 4096]}}, W4 + B4),
        "st_offsets_reversed.safetensors": st_raw(
            {"ln.weight": {"dtype": "F32", "shape": [4], "data_offsets": [16, 0]},
             "ln.bias": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]}}, W4 + B4),
        "st_overlap.safetensors": st_raw(
            {"ln.weight": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
             "ln.bias": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, W4 + B4),
        "st_size_mismatch.safetensors": st_raw(
            {"ln.weight": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]},
             "ln.bias": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]}}, W4 + B4),
        "st_offsets_overflow.safetensors": st_raw(
            {"ln.weight": {"dtype": "F32", "shape": [4], "data_offsets": [18446744073709551600, 18446744073709551615]},
             "ln.bias": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]}}, W4 + B4),
        "st_shape_overflow.safetensors": st_raw(
            {"ln.weight": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 16]},
             "ln.bias": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]}}, W4 + B4),
        "st_shape_negative.safetensors": st_raw(
            {"ln.weight": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]},
             "ln.bias": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]}}, W4 + B4),
        "st_duplicate.safetensors": st_bytes([], raw_header=(
            b'{"ln.weight":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},'
            b'"ln.weight":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}}')) + W4 + B4,
        "st_wrong_dtype.safetensors": st_bytes([("ln.weight", "F64", [4], W4 + W4), ("ln.bias", "F32", [4], B4)]),
        "st_int_dtype.safetensors": st_bytes([("ln.weight", "I32", [4], W4), ("ln.bias", "F32", [4], B4)]),
        "st_unknown_dtype.safetensors": st_bytes([("ln.weight", "Q4", [4], W4), ("ln.bias", "F32", [4], B4)]),
        "st_wrong_shape.safetensors": st_bytes([("ln.weight", "F32", [2, 2], W4), ("ln.bias", "F32", [4], B4)]),
        "st_missing.safetensors": st_bytes([("ln.weight", "F32", [4], W4)]),
        "st_extra.safetensors": st_bytes(GOOD + [("ln.extra", "F32", [1], f32([0.0]))]),
        "st_nan.safetensors": st_bytes([("ln.weight", "F32", [4], f32([1.0, float("nan"), 1.0, 1.0])),
                                        ("ln.bias", "F32", [4], B4)]),
        "st_metadata_bad.safetensors": st_bytes(GOOD, header_extra={"__metadata__": {"k": 5}}),
        # Issue 12: the data section must be tiled exactly; names are escaped/checked.
        "st_gap.safetensors": st_raw(
            {"ln.weight": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
             "ln.bias": {"dtype": "F32", "shape": [4], "data_offsets": [20, 36]}}, W4 + b"\0" * 4 + B4),
        "st_tail.safetensors": st_bytes(GOOD) + b"\0" * 1000,
        "st_nul_name.safetensors": st_bytes([], raw_header=(
            b'{"ln.weight":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},'
            b'"ln.bias\\u0000evil":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}}')) + W4 + B4,
        "st_escape_name.safetensors": st_bytes(GOOD + [("ln.\x1b[2J\x1b[Hall good\n", "F32", [1], f32([0.0]))]),
        "st_float_shape.safetensors": st_bytes([], raw_header=(
            b'{"ln.weight":{"dtype":"F32","shape":[4.0],"data_offsets":[0,16]},'
            b'"ln.bias":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}}')) + W4 + B4,
        "st_many_extra.safetensors": st_bytes(GOOD + [("extra.%d" % i, "F32", [1], f32([0.0])) for i in range(100)]),
    }
    # Issue 10: a bias in the checkpoint of a bias=false Linear (linear_nobias.blk).
    st["st_bias_present.safetensors"] = st_bytes([
        ("l.weight", "F32", [4, 4], f32([0.25] * 16)), ("l.bias", "F32", [4], f32([0.0] * 4))])
    for name, data in st.items():
        write(os.path.join(BAD, name), data)

    # ---- npy (input for ln.blk: [1, 2, 4]) -----------------------------------
    npy = {
        "npy_valid.npy": npy_bytes(data=X8),
        "npy_f8.npy": npy_bytes(descr="<f8", data=struct.pack("<8d", *([1.0] * 8))),
        "npy_big_endian.npy": npy_bytes(descr=">f4", data=struct.pack(">8f", *([1.0] * 8))),
        "npy_i4.npy": npy_bytes(descr="<i4", data=struct.pack("<8i", *range(8))),
        # found by fuzz_npy: the item size overflowed int in the error message
        "npy_descr_overflow.npy": npy_bytes(descr="<f472949496", data=X8),
        "npy_wrong_shape.npy": npy_bytes(shape=(1, 2, 5), data=f32([0.0] * 10)),
        "npy_fortran.npy": npy_bytes(fortran=True, data=X8),
        "npy_truncated.npy": npy_bytes(data=X8)[:-6],
        "npy_extra_bytes.npy": npy_bytes(data=X8) + b"\0\0\0\0",
        "npy_bad_magic.npy": b"\x93NUMPZ" + npy_bytes(data=X8)[6:],
        "npy_bad_version.npy": npy_bytes(data=X8, version=(9, 0)),
        "npy_header_past_end.npy": b"\x93NUMPY\x01\x00\xff\xff{'descr'",
        "npy_bad_header.npy": npy_bytes(raw_header="{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 4 }", data=X8),
        "npy_structured.npy": npy_bytes(raw_header="{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (8,), }", data=X8),
        "npy_scalar.npy": npy_bytes(shape=(), data=f32([1.0])),
        "npy_rank5.npy": npy_bytes(shape=(1, 1, 1, 2, 4), data=X8),
        "npy_huge_shape.npy": npy_bytes(shape=(4294967296, 4294967296), data=X8),
        "npy_nan.npy": npy_bytes(data=f32([0.0, float("nan"), 0, 0, 0, 0, 0, float("inf")])),
        # Issue 12: a header promising 64 MiB, no data: the shape is refused first.
        "npy_shape_first.npy": npy_bytes(shape=(4096, 4096), data=b""),
        # Issue 9: lengths files and a sequence longer than its bound (for lens.blk).
        "lengths_range.npy": npy_bytes(descr="<i8", shape=(2,), data=struct.pack("<2q", 5, 1)),
        "lengths_zero.npy": npy_bytes(descr="<i8", shape=(2,), data=struct.pack("<2q", 0, 2)),
        "lengths_f4.npy": npy_bytes(descr="<f4", shape=(2,), data=f32([1.0, 2.0])),
        "x_over_bound.npy": npy_bytes(shape=(2, 5, 4), data=f32([0.5] * 40)),
        # Issue 21: token ids for tok.blk (V = 50257).
        "ids_range.npy": npy_bytes(descr="<i4", shape=(2, 6),
                                   data=struct.pack("<12i", 1, 2, 3, 4, 5, 50300, 0, 0, 0, 0, 0, 0)),
        "ids_negative.npy": npy_bytes(descr="<i8", shape=(2, 3), data=struct.pack("<6q", 0, 1, 2, 3, -1, 5)),
        "ids_int64_huge.npy": npy_bytes(descr="<i8", shape=(2, 1), data=struct.pack("<2q", 7, 1 << 40)),
        "ids_f4.npy": npy_bytes(descr="<f4", shape=(1, 2), data=f32([1.0, 2.0])),
        "ids_rank1.npy": npy_bytes(descr="<i4", shape=(3,), data=struct.pack("<3i", 1, 2, 3)),
        # Issue 22: CrossEntropy targets for ce_targets.blk: every one ignore_index (-100).
        "targets_ignored.npy": npy_bytes(descr="<i4", shape=(2, 6), data=struct.pack("<12i", *[-100] * 12)),
    }
    for name, data in npy.items():
        write(os.path.join(BAD, name), data)

    # Issue 22: token files for `blockc train examples/train/char_lm.blk` (V = 256, T <= 128).
    def llmc_bin(tokens, count=None):
        n = len(tokens) if count is None else count
        return struct.pack("<256i", 20240520, 1, n, *([0] * 253)) + struct.pack("<%dH" % len(tokens), *tokens)
    train = {
        "train_empty.bin": b"",
        "train_short.bin": llmc_bin(list(range(8))),                 # 8 tokens: --seq 8 needs 10
        "train_truncated.bin": llmc_bin(list(range(40)), count=1000),  # the header says 1000
        "train_ids_past_v.bin": llmc_bin([i % 256 for i in range(60)] + [300] + [1] * 39),
        "train_ok.bin": llmc_bin([(i * 7) % 256 for i in range(300)]),
    }
    for name, data in train.items():
        write(os.path.join(BAD, name), data)

    # Issue 22: pair files for `blockc train examples/train/s2s.blk` (V = 32, S, T <= 64,
    # --pad-id 0): 2-D int32 [pairs, L], right-padded with 0.
    def pairs(rows, cols):
        flat = [v for r in rows for v in r + [0] * (cols - len(r))]
        return npy_bytes(descr="<i4", shape=(len(rows), cols), data=struct.pack("<%di" % len(flat), *flat))
    src = [[3, 4, 5, 2], [6, 7, 2], [8, 9, 10, 11, 2], [12, 2]]
    tgt = [[1, 5, 4, 3, 2], [1, 7, 6, 2], [1, 11, 10, 9, 8, 2], [1, 12, 2]]
    s2s = {
        "s2s_src.npy": pairs(src, 6),
        "s2s_tgt.npy": pairs(tgt, 7),
        "s2s_tgt_3rows.npy": pairs(tgt[:3], 7),
        "s2s_1d.npy": npy_bytes(descr="<i4", shape=(8,), data=struct.pack("<8i", *range(3, 11))),
        "s2s_src_past_v.npy": pairs([src[0], [6, 40, 2]] + src[2:], 6),
        "s2s_src_long.npy": pairs(src[:3] + [[5] * 65 + [2]], 70),
        "s2s_src_allpad.npy": pairs(src[:2] + [[]] + src[3:], 6),
        "s2s_src_gap.npy": pairs([src[0], [6, 7, 0, 9, 2]] + src[2:], 6),
        "s2s_tgt_short.npy": pairs(tgt[:3] + [[1]], 7),
    }
    for name, data in s2s.items():
        write(os.path.join(BAD, name), data)

    gbad, gseeds = gguf_files()
    for name, data in gbad.items():
        write(os.path.join(BAD, name), data)
    for name, data in gseeds.items():
        write(os.path.join(CORPUS, "gguf", name), data)

    # ---- fuzz seeds -------------------------------------------------------------
    for name, data in st.items():
        if len(data) <= 4096:
            write(os.path.join(CORPUS, "safetensors", name), data)
    write(os.path.join(CORPUS, "safetensors", "f16_bf16.safetensors"),
          st_bytes([("a", "F16", [2, 2], struct.pack("<4H", 0x3C00, 0x0001, 0x7C00, 0xFE00)),
                    ("b", "BF16", [3], struct.pack("<3H", 0x3F80, 0x0001, 0xFF81)),
                    ("c", "F32", [0], b""), ("d", "I64", [1], b"\0" * 8)],
                   header_extra={"__metadata__": {"format": "pt"}}))
    for name, data in npy.items():
        if len(data) <= 1024:
            write(os.path.join(CORPUS, "npy", name), data)
    write(os.path.join(CORPUS, "npy", "v2.npy"), npy_bytes(version=(2, 0), shape=(8,), data=X8))
    write(os.path.join(CORPUS, "npy", "v3.npy"), npy_bytes(version=(3, 0), shape=(2, 4), data=X8))
    write(os.path.join(CORPUS, "npy", "empty.npy"), npy_bytes(shape=(0, 4), data=b""))
    # Regressions found by fuzzing (each also explained in tests/fuzz/fuzz.mk).
    write(os.path.join(CORPUS, "parse", "regress-eps-float-overflow.blk"),
          "model m\ndim D = 4\ninput x : [1, 2, D]\ny = LayerNorm(x, eps=1e39, affine=false)\noutput y\n")
    write(os.path.join(CORPUS, "parse", "regress-quadratic-params.blk"),
          "model m\ndim D = 4\ninput x : [1, 2, D]\ny = x\nfor i in 0..20000 as layers.{i} {\n"
          "  y = LayerNorm(y, params=n)\n}\noutput y\n")
    graphs_dir = os.path.join(ROOT, "graphs")
    for g in sorted(os.listdir(graphs_dir)):
        if g.endswith(".blk"):
            shutil.copyfile(os.path.join(graphs_dir, g), os.path.join(CORPUS, "parse", g))
    variants = {
        "linear.blk": "model l\ndim D = 6\ninput x : [3, D]\nh = Linear(x, out=10, params=p)\n"
                      "y = Linear(h, out=D, params=q)\noutput y\n",
        "prenorm.blk": "model p\ndim B = 2\ndim T = 3\ndim D = 6\ninput x : [B, T, D]\n"
                       "for i in 0..2 as l.{i} {\n x = Add(x, Attention(LayerNorm(x, params=n1), heads=2, causal=true, params=a))\n"
                       " x = Add(x, FFN(LayerNorm(x, affine=false), hidden=2*D+1, act=gelu_tanh, params=(f1, f2)), alpha=0.5, beta=2^0.5)\n}\n"
                       "output x\n",
        "dims.blk": "model d\ndim A = (7 % 4) * 2 - 1\ndim D = A * sqrt\ninput x : [A, D]\noutput x\n",
        "fexpr.blk": "model f\ndim D = 4\ninput x : [1, D]\ny = Add(x, x, alpha=sqrt(2*D)^-0.5, beta=-1e-3)\n"
                     "z = LayerNorm(y, eps=1e-6 * D)\noutput z\n",
        "tying.blk": "model t\ndim D = 4\ninput x : [2, D]\nfor i in 0..3 {\n x = LayerNorm(x, params=shared)\n}\noutput x\n",
        "dual.blk": "model r\ndim D = 4\ninput x : [2, D]\nxa = x\nxd = x\nu = Linear(xa, out=D, params=p)\n"
                    "xd = Add(xd, u)\nxa = LayerNorm(Add(xa, u), params=n)\ny = Add(xa, xd)\noutput y\n",
        "tokens.blk": "model t\ndim T <= 6\ndim V = 11\ndim D = 4\ninput ids : tokens[2, T]\n"
                      "e = Embedding(ids, vocab=V, dim=D, params=wte, scale=sqrt(D))\n"
                      "y = Linear(LayerNorm(e, params=n), out=V, bias=false, params=wte)\noutput y\n",
    }
    for name, text in variants.items():
        write(os.path.join(CORPUS, "parse", name), text)
    for name in ("inject_semicolon.blk", "comment_backslash.blk", "nest_calls.blk", "loop_million.blk",
                 "elems_overflow.blk", "dim_overflow.blk", "cycle.blk", "unused_binding.blk"):
        shutil.copyfile(os.path.join(BAD, name), os.path.join(CORPUS, "parse", name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
