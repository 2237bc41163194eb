#!/usr/bin/python3
"""families.py - BERT, GPT-2 and LLaMA-style stacks in plain PyTorch, the
references for graphs/bert.blk, graphs/gpt2.blk and graphs/llama.blk.

The modules below are written from the families' published reference code
(Hugging Face transformers' BertLayer, GPT2Block and LlamaDecoderLayer, read
for their equations and parameter names), not from blockc: the transformers
package itself is not available here, and the point is an independent
implementation.  Their state_dict keys are exactly the Hugging Face keys of
the stack without the family prefix (`bert.`, `transformer.`, `model.`):

  bert   encoder.layer.{i}.attention.self.{query,key,value}.{weight,bias}
         encoder.layer.{i}.attention.output.dense.{weight,bias}
         encoder.layer.{i}.attention.output.LayerNorm.{weight,bias}
         encoder.layer.{i}.intermediate.dense.{weight,bias}
         encoder.layer.{i}.output.dense.{weight,bias}
         encoder.layer.{i}.output.LayerNorm.{weight,bias}
         Post-LN, exact GELU, LayerNorm eps 1e-12, no final norm.
  gpt2   h.{i}.ln_1, h.{i}.attn.c_attn ([D, 3D] Conv1D), h.{i}.attn.c_proj
         ([D, D]), h.{i}.ln_2, h.{i}.mlp.c_fc ([D, F]), h.{i}.mlp.c_proj
         ([F, D]), ln_f  (each .weight and .bias; Conv1D weights are [in, out]).
         Pre-LN, causal, tanh GELU, eps 1e-5.
  llama  layers.{i}.input_layernorm.weight, layers.{i}.self_attn.{q,k,v,o}_proj
         .weight (no biases; k/v are [KV*dh, D]), layers.{i}
         .post_attention_layernorm.weight, layers.{i}.mlp.{gate,up,down}_proj
         .weight, norm.weight.  RMSNorm eps 1e-6, RoPE (rotate_half, theta
         10000), grouped-query attention (repeat_kv), SwiGLU, causal.

Padding: `lengths` (one valid length per batch row, right
padding) becomes Hugging Face's additive attention mask - keys at positions
>= len[b] get the dtype's most negative value.  Outputs at padded positions
are whatever the model computes there; they are not meaningful and
conformance compares only the valid rows.

Usage (Debian's /usr/bin/python3: torch 1.13 + numpy, no pip packages):

    families.py --family llama --B 1 --T 7 --D 48 --H 6 --KV 2 --F 128 --N 2 \\
        [--lengths 7,3] --seed 1 --out DIR
        writes DIR/weights.safetensors (HF names, float32), input.npy,
        [len.npy], expected.npy (PyTorch float32), expected64.npy (the
        same model in float64) and meta.json - as tools/torch_export.py does
        for the nn.TransformerEncoder wirings.
    families.py --self-check
        checks invariants of the modules without blockc (see self_check()).
    families.py --from-state-dict model.pt --out weights.safetensors
        [--config config.json] [--strip-prefix P]
        converts a torch.save'd state_dict (e.g. a Hugging Face model's) to
        float32 safetensors with its names unchanged, recognises the family
        and prints a ready-to-run blockc command line (docs/checkpoints.md).

Random init (seeded, non-trivial): matrices N(0, 1/fan_in) (fan_in is the
input width: shape[1] for nn.Linear, shape[0] for GPT-2's Conv1D), biases
0.1*N(0,1), norm weights 1 + 0.1*N(0,1), LayerNorm biases 0.1*N(0,1).
"""

import argparse
import copy
import json
import math
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_export as te  # noqa: E402  (exits with a message without torch/numpy)

np, torch, nn, Fn = te.np, te.torch, te.nn, te.F

FAMILIES = ("bert", "gpt2", "llama")
# Published base sizes: bert-base, gpt2 (124M), and a small LLaMA-style model.
DEFAULT_DIMS = {
    "bert": dict(B=1, T=128, D=768, H=12, F=3072, N=12, KV=12),
    "gpt2": dict(B=1, T=128, D=768, H=12, F=3072, N=12, KV=12),
    "llama": dict(B=1, T=128, D=512, H=8, F=1376, N=6, KV=2),
}
NORM_EPS = {"bert": 1e-12, "gpt2": 1e-5, "llama": 1e-6}
ROPE_THETA = 10000.0
PREFIX = {"bert": "bert.", "gpt2": "transformer.", "llama": "model."}


# ---------------------------------------------------------------------------
# Shared pieces
# ---------------------------------------------------------------------------
def to_heads(t, heads):
    """[B, T, heads*dh] -> [B, heads, T, dh]."""
    b, n, w = t.shape
    return t.view(b, n, heads, w // heads).transpose(1, 2)


def from_heads(t):
    """[B, heads, T, dh] -> [B, T, heads*dh]."""
    b, h, n, dh = t.shape
    return t.transpose(1, 2).reshape(b, n, h * dh)


def allowed_keys(B, T, causal, lengths, device=None):
    """Boolean [B, 1, T, T]: True where query i may look at key j."""
    ok = torch.ones((B, 1, T, T), dtype=torch.bool, device=device)
    if causal:
        ok = ok & torch.tril(torch.ones((T, T), dtype=torch.bool))
    if lengths is not None:
        L = torch.as_tensor(lengths, dtype=torch.int64).view(B, 1, 1, 1)
        ok = ok & (torch.arange(T).view(1, 1, 1, T) < L)
    return ok


def scaled_dot_attention(q, k, v, ok):
    """softmax(q k^T / sqrt(dh) masked) v per head, in q's dtype.  Masked
    scores become the dtype's most negative value, as Hugging Face's additive
    masks do (a row always has key 0 allowed, so no row is all-masked)."""
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    scores = torch.where(ok, scores, torch.tensor(torch.finfo(q.dtype).min, dtype=q.dtype))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def gelu_exact(z):
    return 0.5 * z * (1.0 + torch.erf(z / math.sqrt(2.0)))


def gelu_tanh(z):  # Hugging Face's "gelu_new"
    return 0.5 * z * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z.pow(3))))


# ---------------------------------------------------------------------------
# BERT (BertLayer = BertAttention(BertSelfAttention + BertSelfOutput)
#       + BertIntermediate + BertOutput; Post-LN)
# ---------------------------------------------------------------------------
class BertSelfAttention(nn.Module):
    def __init__(self, D, H):
        super().__init__()
        self.heads = H
        self.query = nn.Linear(D, D)
        self.key = nn.Linear(D, D)
        self.value = nn.Linear(D, D)

    def forward(self, x, ok):
        q, k, v = (to_heads(p(x), self.heads) for p in (self.query, self.key, self.value))
        return from_heads(scaled_dot_attention(q, k, v, ok))


class BertAddNorm(nn.Module):
    """BertSelfOutput / BertOutput: LayerNorm(dense(h) + residual)."""

    def __init__(self, n_in, D):
        super().__init__()
        self.dense = nn.Linear(n_in, D)
        self.LayerNorm = nn.LayerNorm(D, eps=NORM_EPS["bert"])

    def forward(self, h, residual):
        return self.LayerNorm(self.dense(h) + residual)


class BertAttention(nn.Module):
    def __init__(self, D, H):
        super().__init__()
        self.self = BertSelfAttention(D, H)     # key prefix attention.self.*
        self.output = BertAddNorm(D, D)         # attention.output.dense / .LayerNorm

    def forward(self, x, ok):
        return self.output(self.self(x, ok), x)


class BertIntermediate(nn.Module):
    def __init__(self, D, F_):
        super().__init__()
        self.dense = nn.Linear(D, F_)

    def forward(self, x):
        return gelu_exact(self.dense(x))


class BertLayer(nn.Module):
    def __init__(self, D, H, F_):
        super().__init__()
        self.attention = BertAttention(D, H)
        self.intermediate = BertIntermediate(D, F_)
        self.output = BertAddNorm(F_, D)

    def forward(self, x, ok):
        x = self.attention(x, ok)
        return self.output(self.intermediate(x), x)


class BertEncoder(nn.Module):
    def __init__(self, D, H, F_, N):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(D, H, F_) for _ in range(N)])


class BertStack(nn.Module):
    causal = False

    def __init__(self, D, H, F_, N):
        super().__init__()
        self.encoder = BertEncoder(D, H, F_, N)

    def forward(self, x, lengths=None):
        ok = allowed_keys(x.shape[0], x.shape[1], False, lengths)
        for layer in self.encoder.layer:
            x = layer(x, ok)
        return x


# ---------------------------------------------------------------------------
# GPT-2 (GPT2Block: ln_1, GPT2Attention(c_attn, c_proj), ln_2, GPT2MLP(c_fc,
#        c_proj); GPT2Model's ln_f; Conv1D weights [in, out])
# ---------------------------------------------------------------------------
class Conv1D(nn.Module):
    """GPT-2's "Conv1D": a linear map whose weight is stored [in, out]:
    y = x W + b."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        return torch.addmm(self.bias, flat, self.weight).view(*x.shape[:-1], self.weight.shape[1])


class GPT2Attention(nn.Module):
    def __init__(self, D, H):
        super().__init__()
        self.heads = H
        self.c_attn = Conv1D(D, 3 * D)
        self.c_proj = Conv1D(D, D)

    def forward(self, x, ok):
        D = x.shape[-1]
        q, k, v = (to_heads(t, self.heads) for t in self.c_attn(x).split(D, dim=2))
        return self.c_proj(from_heads(scaled_dot_attention(q, k, v, ok)))


class GPT2MLP(nn.Module):
    def __init__(self, D, F_):
        super().__init__()
        self.c_fc = Conv1D(D, F_)
        self.c_proj = Conv1D(F_, D)

    def forward(self, x):
        return self.c_proj(gelu_tanh(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, D, H, F_):
        super().__init__()
        eps = NORM_EPS["gpt2"]
        self.ln_1 = nn.LayerNorm(D, eps=eps)
        self.attn = GPT2Attention(D, H)
        self.ln_2 = nn.LayerNorm(D, eps=eps)
        self.mlp = GPT2MLP(D, F_)

    def forward(self, x, ok):
        x = x + self.attn(self.ln_1(x), ok)
        return x + self.mlp(self.ln_2(x))


class GPT2Stack(nn.Module):
    causal = True

    def __init__(self, D, H, F_, N):
        super().__init__()
        self.h = nn.ModuleList([GPT2Block(D, H, F_) for _ in range(N)])
        self.ln_f = nn.LayerNorm(D, eps=NORM_EPS["gpt2"])

    def forward(self, x, lengths=None):
        ok = allowed_keys(x.shape[0], x.shape[1], True, lengths)
        for block in self.h:
            x = block(x, ok)
        return self.ln_f(x)


# ---------------------------------------------------------------------------
# LLaMA (LlamaDecoderLayer: input_layernorm, LlamaAttention with RoPE and
#        repeat_kv, post_attention_layernorm, LlamaMLP (SwiGLU); final norm)
# ---------------------------------------------------------------------------
class RMSNorm(nn.Module):
    def __init__(self, D, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(D))

    def forward(self, x):
        ms = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(ms + self.eps))


def rope_tables(T, dh, theta, dtype):
    """cos, sin [T, dh] at positions 0..T-1: angle(t, j) = t * theta^(-2j/dh)
    for j < dh/2, repeated for the second half (Hugging Face's layout)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, dh, 2, dtype=dtype) / dh))
    ang = torch.outer(torch.arange(T, dtype=dtype), inv_freq)
    emb = torch.cat((ang, ang), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    """(x1, x2) -> (-x2, x1) over the two halves of the last dim."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x, cos, sin):
    """x [B, heads, T, dh] rotated in place of position."""
    return x * cos + rotate_half(x) * sin


def repeat_kv(x, n_rep):
    """[B, KV, T, dh] -> [B, KV*n_rep, T, dh]: kv head g serves query heads
    g*n_rep .. g*n_rep + n_rep - 1."""
    if n_rep == 1:
        return x
    b, kv, n, dh = x.shape
    return x[:, :, None].expand(b, kv, n_rep, n, dh).reshape(b, kv * n_rep, n, dh)


class LlamaAttention(nn.Module):
    def __init__(self, D, H, KV, rope=True):
        super().__init__()
        if D % H or H % KV:
            raise ValueError("need D %% H == 0 and H %% KV == 0 (D=%d H=%d KV=%d)" % (D, H, KV))
        self.heads, self.kv_heads, self.dh, self.rope = H, KV, D // H, rope
        self.q_proj = nn.Linear(D, H * self.dh, bias=False)
        self.k_proj = nn.Linear(D, KV * self.dh, bias=False)
        self.v_proj = nn.Linear(D, KV * self.dh, bias=False)
        self.o_proj = nn.Linear(H * self.dh, D, bias=False)

    def forward(self, x, ok):
        q = to_heads(self.q_proj(x), self.heads)
        k = to_heads(self.k_proj(x), self.kv_heads)
        v = to_heads(self.v_proj(x), self.kv_heads)
        if self.rope:
            cos, sin = rope_tables(x.shape[1], self.dh, ROPE_THETA, x.dtype)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        rep = self.heads // self.kv_heads
        o = scaled_dot_attention(q, repeat_kv(k, rep), repeat_kv(v, rep), ok)
        return self.o_proj(from_heads(o))


class LlamaMLP(nn.Module):
    def __init__(self, D, F_):
        super().__init__()
        self.gate_proj = nn.Linear(D, F_, bias=False)
        self.up_proj = nn.Linear(D, F_, bias=False)
        self.down_proj = nn.Linear(F_, D, bias=False)

    def forward(self, x):
        return self.down_proj(Fn.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, D, H, F_, KV):
        super().__init__()
        eps = NORM_EPS["llama"]
        self.input_layernorm = RMSNorm(D, eps)
        self.self_attn = LlamaAttention(D, H, KV)
        self.post_attention_layernorm = RMSNorm(D, eps)
        self.mlp = LlamaMLP(D, F_)

    def forward(self, x, ok):
        x = x + self.self_attn(self.input_layernorm(x), ok)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaStack(nn.Module):
    causal = True

    def __init__(self, D, H, F_, N, KV):
        super().__init__()
        self.layers = nn.ModuleList([LlamaDecoderLayer(D, H, F_, KV) for _ in range(N)])
        self.norm = RMSNorm(D, NORM_EPS["llama"])

    def forward(self, x, lengths=None):
        ok = allowed_keys(x.shape[0], x.shape[1], True, lengths)
        for layer in self.layers:
            x = layer(x, ok)
        return self.norm(x)


# ---------------------------------------------------------------------------
# Build, init, run, export
# ---------------------------------------------------------------------------
def build(family, D, H, F_, N, KV=None):
    if D % H:
        raise ValueError("D=%d is not a multiple of H=%d" % (D, H))
    if family == "bert":
        return BertStack(D, H, F_, N)
    if family == "gpt2":
        return GPT2Stack(D, H, F_, N)
    if family == "llama":
        if (D // H) % 2:
            raise ValueError("RoPE needs an even head dim (D/H = %d)" % (D // H))
        return LlamaStack(D, H, F_, N, H if KV is None else KV)
    raise ValueError("unknown family %r (want one of %s)" % (family, ", ".join(FAMILIES)))


def init_params(model, seed):
    """Seeded non-trivial init (see the module docstring)."""
    g = torch.Generator().manual_seed(seed)
    mods = dict(model.named_modules())
    with torch.no_grad():
        for name, p in model.named_parameters():
            owner = mods[name.rsplit(".", 1)[0]] if "." in name else model
            n = torch.randn(p.shape, generator=g, dtype=torch.float64)
            if isinstance(owner, (nn.LayerNorm, RMSNorm)):
                v = 1.0 + 0.1 * n if name.endswith(".weight") else 0.1 * n
            elif p.dim() == 2:
                fan_in = p.shape[0] if isinstance(owner, Conv1D) else p.shape[1]
                v = n / math.sqrt(fan_in)
            else:
                v = 0.1 * n
            p.copy_(v.to(p.dtype))
    return model


def run(model, x, lengths=None):
    """Runs model on numpy x in the model's dtype; returns numpy."""
    dtype = next(model.parameters()).dtype
    xt = torch.from_numpy(np.ascontiguousarray(x)).to(dtype)
    with torch.no_grad():
        return model(xt, lengths).numpy()


def valid_rows(y, lengths):
    """Rows of y [B, T, D] that are not padding, stacked: [sum(len), D]."""
    if lengths is None:
        return y.reshape(-1, y.shape[-1])
    return np.concatenate([y[b, :int(n)] for b, n in enumerate(lengths)], axis=0)


def full_checkpoint(family, stack_sd, D, seed):
    """The stack's state_dict as a whole Hugging Face model stores it: the
    family prefix (BertModel inside BertFor*: `bert.`, GPT2LMHeadModel:
    `transformer.`, LlamaForCausalLM: `model.`) plus tensors blockc does not
    use - embeddings, BERT's pooler, the LM head (vocabulary 97)."""
    g = torch.Generator().manual_seed(seed ^ 0xC4EC)
    P = PREFIX[family]

    def r(*shape):
        return torch.randn(shape, generator=g)

    sd = {P + k: v for k, v in stack_sd.items()}
    if family == "bert":
        sd.update({P + "embeddings.word_embeddings.weight": r(97, D),
                   P + "embeddings.position_embeddings.weight": r(64, D),
                   P + "embeddings.LayerNorm.weight": r(D), P + "pooler.dense.weight": r(D, D)})
    elif family == "gpt2":
        sd.update({P + "wte.weight": r(97, D), P + "wpe.weight": r(64, D), "lm_head.weight": r(97, D)})
    else:
        sd.update({P + "embed_tokens.weight": r(97, D), "lm_head.weight": r(97, D)})
    return sd


def export_case(out, family, B, T, D, H, F, N, KV=None, seed=0, lengths=None, full=False):
    """Writes weights.safetensors, input.npy, [len.npy (int64)], expected.npy,
    expected64.npy and meta.json into `out`; returns the meta dict, in
    tools/torch_export.py's format ("inputs": [[graph input, file], ...],
    "lengths": {"len": [...]}, "out_lengths": "len" or None).  full=True
    writes the weights as a whole model's checkpoint (full_checkpoint():
    family prefix, embeddings, head), meta "weights_prefix" says the prefix."""
    torch.set_num_threads(1)
    if lengths is not None:
        lengths = [int(n) for n in lengths]
        if len(lengths) != B or not all(1 <= n <= T for n in lengths):
            raise ValueError("lengths %s: need %d values in 1..%d" % (lengths, B, T))
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(seed)
    model = init_params(build(family, D, H, F, N, KV), seed).float().eval()
    x = te.make_input(B, T, D, seed)
    y32 = run(model, x, lengths).astype(np.float32)
    model64 = copy.deepcopy(model).double().eval()
    y64 = run(model64, x.astype(np.float64), lengths)
    v64 = valid_rows(y64, lengths)
    scale = float(np.max(np.abs(v64)))
    err = float(np.max(np.abs(valid_rows(y32, lengths).astype(np.float64) - v64)))
    KV = H if KV is None else KV
    inputs = [["x", "input.npy"]] + ([["len", "len.npy"]] if lengths is not None else [])
    meta = {"family": family, "wiring": family, "B": B, "T": T, "D": D, "H": H, "F": F, "N": N,
            "KV": KV, "seed": seed, "torch_version": torch.__version__, "inputs": inputs,
            "out_lengths": "len" if lengths is not None else None,
            "max_abs_expected64": scale, "torch_fp32_max_abs_err_vs_fp64": err}
    if lengths is not None:
        meta["lengths"] = {"len": lengths}
    dims = "B=%d T=%d D=%d H=%d F=%d N=%d" % (B, T, D, H, F, N)
    if family == "llama":
        dims += " KV=%d" % KV
    sd = model.state_dict()
    if full:
        sd = full_checkpoint(family, sd, D, seed)
        meta["weights_prefix"] = PREFIX[family]
    te.write_safetensors(os.path.join(out, "weights.safetensors"), sd,
                         {"format": "pt", "producer": "blockc tools/families.py",
                          "family": family, "dims": dims, "seed": seed})
    te._save_npy(os.path.join(out, "input.npy"), x.astype(np.float32))
    if lengths is not None:
        te._save_npy(os.path.join(out, "len.npy"), np.array(lengths, dtype=np.int64))
    te._save_npy(os.path.join(out, "expected.npy"), y32)
    te._save_npy(os.path.join(out, "expected64.npy"), y64.astype(np.float64))
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    return meta


def expected_names(family, N):
    """The Hugging Face state_dict keys of the stack, in module order."""
    if family == "bert":
        per = ["attention.self.query", "attention.self.key", "attention.self.value",
               "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense",
               "output.dense", "output.LayerNorm"]
        return ["encoder.layer.%d.%s.%s" % (i, m, w) for i in range(N) for m in per
                for w in ("weight", "bias")]
    if family == "gpt2":
        per = ["ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"]
        return (["h.%d.%s.%s" % (i, m, w) for i in range(N) for m in per for w in ("weight", "bias")]
                + ["ln_f.weight", "ln_f.bias"])
    per = ["input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
           "self_attn.o_proj", "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj",
           "mlp.down_proj"]
    return ["layers.%d.%s.weight" % (i, m) for i in range(N) for m in per] + ["norm.weight"]


# ---------------------------------------------------------------------------
# --from-state-dict: convert a checkpoint, recognise the family
# ---------------------------------------------------------------------------
FAMILY_KEYS = {  # a key that only this family's stack has, layer 0
    "bert": "encoder.layer.0.attention.self.query.weight",
    "gpt2": "h.0.attn.c_attn.weight",
    "llama": "layers.0.self_attn.q_proj.weight",
}


def detect_family(keys):
    """Returns (family, prefix) from a state_dict's keys, or (None, None)."""
    for fam, k in FAMILY_KEYS.items():
        for key in keys:
            if key.endswith(k) and (len(key) == len(k) or key[-len(k) - 1] == "."):
                return fam, key[:-len(k)]
    return None, None


def checkpoint_dims(family, prefix, sd):
    """D, F, N (and kv rows for llama) read off the shapes."""
    stack = {"bert": r"encoder\.layer\.(\d+)\.", "gpt2": r"h\.(\d+)\.", "llama": r"layers\.(\d+)\."}
    pat = re.compile("^" + re.escape(prefix) + stack[family])
    N = len({m.group(1) for m in (pat.match(k) for k in sd) if m})
    p = prefix + {"bert": "encoder.layer.0.", "gpt2": "h.0.", "llama": "layers.0."}[family]
    if family == "bert":
        return dict(D=sd[p + "attention.self.query.weight"].shape[1],
                    F=sd[p + "intermediate.dense.weight"].shape[0], N=N)
    if family == "gpt2":
        return dict(D=sd[p + "attn.c_attn.weight"].shape[0], F=sd[p + "mlp.c_fc.weight"].shape[1], N=N)
    return dict(D=sd[p + "self_attn.q_proj.weight"].shape[1], F=sd[p + "mlp.gate_proj.weight"].shape[0],
                N=N, kv_rows=sd[p + "self_attn.k_proj.weight"].shape[0])


def heads_from_config(path):
    """(H, KV) from a Hugging Face config.json (None where absent)."""
    with open(path) as f:
        cfg = json.load(f)
    H = cfg.get("num_attention_heads", cfg.get("n_head"))
    return H, cfg.get("num_key_value_heads", H)


ST_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8"}


def read_safetensors_any(path):
    """{name: float32 torch tensor} from a safetensors file with F32, F16,
    BF16 or F64 tensors (integer tensors are skipped, like a state_dict's
    integer buffers).  Hugging Face hub checkpoints are stored this way."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise SystemExit("%s: error: not a safetensors file (too short)" % path)
    n = int.from_bytes(raw[:8], "little")
    if n > len(raw) - 8:
        raise SystemExit("%s: error: not a safetensors file (header length %d)" % (path, n))
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    header.pop("__metadata__", None)
    data = memoryview(raw)[8 + n:]
    out = {}
    for name, info in header.items():
        dt = ST_DTYPES.get(info["dtype"])
        if dt is None:
            continue
        b, e = info["data_offsets"]
        a = np.frombuffer(data[b:e], dtype=dt)
        if info["dtype"] == "BF16":  # the top half of a float32
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = torch.from_numpy(a.astype(np.float32).reshape(info["shape"]))
    return out


def load_checkpoint(path):
    """A state_dict from a .safetensors file or a torch.save'd file."""
    if path.endswith(".safetensors"):
        return read_safetensors_any(path)
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - a pickled module needs full unpickling
        obj = torch.load(path, map_location="cpu")
    if isinstance(obj, nn.Module):
        obj = obj.state_dict()
    if not isinstance(obj, dict):
        raise SystemExit("%s: error: expected a state_dict (a dict of tensors), got %s"
                         % (path, type(obj).__name__))
    return obj


def convert_state_dict(pt_path, out, strip_prefix="", config=None, stack_only=False):
    """pt_path: one checkpoint file or a list of them (the shards of a
    sharded checkpoint, merged)."""
    paths = [pt_path] if isinstance(pt_path, str) else list(pt_path)
    obj = {}
    for p in paths:
        for k, v in load_checkpoint(p).items():
            if k in obj:
                raise SystemExit("%s: error: tensor %s is also in an earlier file" % (p, k))
            obj[k] = v
    pt_path = paths[0] if len(paths) == 1 else "%s (+%d more)" % (paths[0], len(paths) - 1)
    sd = {}
    for k, v in obj.items():
        if isinstance(v, torch.Tensor) and torch.is_floating_point(v) and k.startswith(strip_prefix):
            sd[k[len(strip_prefix):]] = v
    if not sd:
        raise SystemExit("%s: error: no floating-point tensors%s" % (
            pt_path, " under prefix %r" % strip_prefix if strip_prefix else ""))
    if os.path.isdir(out):
        out = os.path.join(out, "weights.safetensors")
    fam, prefix = detect_family(sd)
    if fam is None:
        if stack_only:
            raise SystemExit("%s: error: --stack-only: no BERT, GPT-2 or LLaMA stack recognised "
                             "(looked for keys ending in %s)" % (pt_path, ", ".join(FAMILY_KEYS.values())))
        print("note: no BERT, GPT-2 or LLaMA stack recognised (looked for keys ending in %s)"
              % ", ".join(FAMILY_KEYS.values()))
    else:
        d = checkpoint_dims(fam, prefix, sd)
    if stack_only:
        want = expected_names(fam, d["N"])
        missing = [k for k in want if prefix + k not in sd]
        if missing:
            raise SystemExit("%s: error: --stack-only: %d %s stack tensors missing, e.g. %s"
                             % (pt_path, len(missing), fam, ", ".join(prefix + k for k in missing[:3])))
        dropped = len(sd) - len(want)
        sd = {k: sd[prefix + k] for k in want}
        print("--stack-only: kept the %d %s stack tensors, prefix %r stripped; dropped %d others"
              % (len(sd), fam, prefix, dropped))
        prefix = ""
    te.write_safetensors(out, sd, {"format": "pt", "producer": "blockc tools/families.py",
                                   "source": os.path.basename(paths[0])})
    print("wrote %s: %d float tensors (float32%s)" % (out, len(sd), "" if stack_only else ", names unchanged"))
    if fam is None:
        return out, None
    H, KV = heads_from_config(config) if config else (None, None)
    extra = len([k for k in sd if not k.startswith(prefix) or
                 k[len(prefix):] not in set(expected_names(fam, d["N"]))])
    print("family %s, stack prefix %r: D=%d F=%d N=%d%s; %d other tensors (embeddings, heads, "
          "buffers)" % (fam, prefix, d["D"], d["F"], d["N"],
                        " (k_proj rows = KV*D/H = %d)" % d["kv_rows"] if fam == "llama" else "", extra))
    hs = str(H) if H else "<num_attention_heads>"
    cmd = "build/blockc run graphs/%s.blk -D B=<batch> -D D=%d -D H=%s -D F=%d -D N=%d" % (
        fam, d["D"], hs, d["F"], d["N"])
    if fam == "llama":
        kv = str(KV) if KV else ("<num_key_value_heads = %d*H/%d>" % (d["kv_rows"], d["D"]))
        cmd += " -D KV=%s" % kv
    if not H:
        print("the head count is not stored in a state_dict: take it from the model's config.json "
              "(or pass --config)")
    flags = (" --weights-prefix %s" % prefix if prefix else "") + (" --allow-extra" if extra else "")
    print("run it (x.npy: float32 [B, T, D] hidden states after the embeddings; T <= 128 is taken "
          "from its shape, -D T=N raises the bound):")
    print("  %s \\\n      --weights %s%s --input x.npy --output y.npy" % (cmd, out, flags))
    return out, dict(family=fam, prefix=prefix, extra=extra, H=H, KV=KV, **d)


# ---------------------------------------------------------------------------
# Self-check: invariants of the modules above, without blockc
# ---------------------------------------------------------------------------
def _np_llama(p, x, H, KV, N, eps=1e-6, theta=ROPE_THETA):
    """Direct float64 numpy LLaMA stack: explicit pair rotation of (j, j+dh/2)
    and explicit kv group g = h // (H/KV) - no rotate_half, no repeat_kv."""
    p = {k: np.asarray(v, dtype=np.float64) for k, v in p.items()}
    x = np.asarray(x, dtype=np.float64)
    B, T, D = x.shape
    dh, rep = D // H, H // KV

    def rms(z, w):
        return z / np.sqrt((z * z).mean(-1, keepdims=True) + eps) * w

    def rot(z):  # z [T, dh]
        out = z.copy()
        for t in range(T):
            for j in range(dh // 2):
                a = t * theta ** (-2.0 * j / dh)
                c, s = math.cos(a), math.sin(a)
                out[t, j] = z[t, j] * c - z[t, j + dh // 2] * s
                out[t, j + dh // 2] = z[t, j + dh // 2] * c + z[t, j] * s
        return out

    for i in range(N):
        pre = "layers.%d." % i
        u = rms(x, p[pre + "input_layernorm.weight"])
        q = u @ p[pre + "self_attn.q_proj.weight"].T
        k = u @ p[pre + "self_attn.k_proj.weight"].T
        v = u @ p[pre + "self_attn.v_proj.weight"].T
        o = np.zeros((B, T, H * dh))
        for b in range(B):
            for h in range(H):
                g = h // rep
                qh = rot(q[b, :, h * dh:(h + 1) * dh])
                kh = rot(k[b, :, g * dh:(g + 1) * dh])
                s = qh @ kh.T / math.sqrt(dh)
                s[np.triu_indices(T, 1)] = -np.inf
                s = np.exp(s - s.max(-1, keepdims=True))
                o[b, :, h * dh:(h + 1) * dh] = (s / s.sum(-1, keepdims=True)) @ v[b, :, g * dh:(g + 1) * dh]
        x = x + o @ p[pre + "self_attn.o_proj.weight"].T
        u = rms(x, p[pre + "post_attention_layernorm.weight"])
        gt = u @ p[pre + "mlp.gate_proj.weight"].T
        x = x + (gt / (1.0 + np.exp(-gt)) * (u @ p[pre + "mlp.up_proj.weight"].T)) @ p[pre + "mlp.down_proj.weight"].T
    return rms(x, p["norm.weight"])


def _torch_encoder_from(family, stack, D, H, F_, N):
    """An nn.TransformerEncoder holding the same weights as a BERT (Post-LN,
    exact GELU) or GPT-2 (Pre-LN, tanh GELU, final ln_f) stack - torch's own
    implementation, independent of the modules above."""
    post = family == "bert"
    layer = nn.TransformerEncoderLayer(D, H, F_, dropout=0.0, batch_first=True, norm_first=not post,
                                       activation="gelu" if post else te.gelu_tanh,
                                       layer_norm_eps=NORM_EPS[family])
    enc = nn.TransformerEncoder(layer, N, norm=None if post else nn.LayerNorm(D, eps=NORM_EPS[family]))
    enc = enc.double().eval()
    with torch.no_grad():
        for i, L in enumerate(enc.layers):
            if post:
                S = stack.encoder.layer[i]
                a = S.attention
                L.self_attn.in_proj_weight.copy_(torch.cat([a.self.query.weight, a.self.key.weight,
                                                            a.self.value.weight]))
                L.self_attn.in_proj_bias.copy_(torch.cat([a.self.query.bias, a.self.key.bias,
                                                          a.self.value.bias]))
                pairs = [(L.self_attn.out_proj, a.output.dense), (L.linear1, S.intermediate.dense),
                         (L.linear2, S.output.dense), (L.norm1, a.output.LayerNorm),
                         (L.norm2, S.output.LayerNorm)]
                for dst, src in pairs:
                    dst.weight.copy_(src.weight)
                    dst.bias.copy_(src.bias)
            else:
                S = stack.h[i]
                L.self_attn.in_proj_weight.copy_(S.attn.c_attn.weight.t())
                L.self_attn.in_proj_bias.copy_(S.attn.c_attn.bias)
                for dst, src in ((L.self_attn.out_proj, S.attn.c_proj), (L.linear1, S.mlp.c_fc),
                                 (L.linear2, S.mlp.c_proj)):
                    dst.weight.copy_(src.weight.t())
                    dst.bias.copy_(src.bias)
                for dst, src in ((L.norm1, S.ln_1), (L.norm2, S.ln_2)):
                    dst.weight.copy_(src.weight)
                    dst.bias.copy_(src.bias)
        if not post:
            enc.norm.weight.copy_(stack.ln_f.weight)
            enc.norm.bias.copy_(stack.ln_f.bias)
    return enc


def self_check(verbose=True):
    """Returns the number of failed checks."""
    torch.set_num_threads(1)
    fails = 0

    def check(ok, what):
        nonlocal fails
        fails += 0 if ok else 1
        if verbose or not ok:
            print("  %s  %s" % ("ok  " if ok else "FAIL", what))

    def maxdiff(a, b):
        return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))

    tmp = tempfile.mkdtemp(prefix="families_check.")
    print("self-check in %s" % tmp)
    D, H, KV, F_, N, T, B = 48, 6, 2, 101, 2, 7, 2

    # 1. Names, shapes and the written files.
    for fam in FAMILIES:
        d = os.path.join(tmp, fam)
        lengths = [7, 3]
        meta = export_case(d, fam, B, T, D, H, F_, N, KV, seed=5, lengths=lengths)
        w, md = te.read_safetensors_independent(os.path.join(d, "weights.safetensors"))
        check(list(w) == expected_names(fam, N), "%-5s state_dict keys are the Hugging Face names (%d)"
              % (fam, len(w)))
        m = init_params(build(fam, D, H, F_, N, KV), 5).float()
        sd = m.state_dict()
        check(all(np.array_equal(w[k], sd[k].numpy()) for k in sd) and md.get("family") == fam,
              "%-5s safetensors holds the model's float32 weights bit for bit" % fam)
        shp = {"bert": ("encoder.layer.0.attention.self.query.weight", (D, D)),
               "gpt2": ("h.0.attn.c_attn.weight", (D, 3 * D)),
               "llama": ("layers.0.self_attn.k_proj.weight", (KV * D // H, D))}[fam]
        check(tuple(w[shp[0]].shape) == shp[1], "%-5s %s is %s" % (fam, shp[0], shp[1]))
        x = np.load(os.path.join(d, "input.npy"))
        y32, y64 = np.load(os.path.join(d, "expected.npy")), np.load(os.path.join(d, "expected64.npy"))
        ok = (x.dtype == np.float32 and x.shape == (B, T, D) and y32.dtype == np.float32
              and y64.dtype == np.float64 and y32.shape == y64.shape == x.shape
              and np.all(np.isfinite(y64)) and meta["torch_fp32_max_abs_err_vs_fp64"] < 1e-4)
        if lengths:
            ok = ok and np.array_equal(np.load(os.path.join(d, "len.npy")), np.array(lengths, np.int64))
            ok = ok and meta["inputs"] == [["x", "input.npy"], ["len", "len.npy"]]
            ok = ok and meta["out_lengths"] == "len" and meta["lengths"] == {"len": lengths}
        check(ok, "%-5s input/lengths/expected files: dtypes, shapes; fp32 vs fp64 %.1e"
              % (fam, meta["torch_fp32_max_abs_err_vs_fp64"]))
        distinct = not np.array_equal(w[expected_names(fam, N)[2]],
                                      w[expected_names(fam, N)[2 + len(expected_names(fam, N)) // N]])
        check(distinct, "%-5s layers get different weights" % fam)

    # The whole-model checkpoints conformance's "ckpt" cases write are
    # recognised with the right prefix, and hold more than the stack.
    for fam in FAMILIES:
        m = init_params(build(fam, 16, 2, 24, 2, 2), 3)
        full = full_checkpoint(fam, m.state_dict(), 16, 3)
        f, pre = detect_family(full)
        check(f == fam and pre == PREFIX[fam] and len(full) > len(m.state_dict())
              and all(torch.equal(full[pre + k], v) for k, v in m.state_dict().items()),
              "%-5s whole-model checkpoint: prefix %r found, %d extra tensors"
              % (fam, pre, len(full) - len(m.state_dict())))

    # 2. BERT and GPT-2 == torch's own nn.TransformerEncoder on the same weights.
    x = te.make_input(B, T, D, 3).astype(np.float64)
    for fam in ("bert", "gpt2"):
        s = init_params(build(fam, D, H, F_, N), 8).double().eval()
        enc = _torch_encoder_from(fam, s, D, H, F_, N)
        mask = te.causal_mask(T, torch.float64) if fam == "gpt2" else None
        with torch.no_grad():
            ref = enc(torch.from_numpy(x), mask=mask).numpy()
        e = maxdiff(run(s, x), ref)
        check(e < 1e-10, "%-5s stack == nn.TransformerEncoder(%s) with the weights mapped (%.1e)"
              % (fam, "norm_first=False, gelu, eps 1e-12" if fam == "bert"
                 else "norm_first=True, gelu_tanh, eps 1e-5, ln_f, causal", e))

    # Padding: valid rows of a padded batch == each row run alone, truncated.
    for fam in FAMILIES:
        s = init_params(build(fam, D, H, F_, N, KV), 8).double().eval()
        lens = [T, 3]
        yp = run(s, x, lens)
        e = max(maxdiff(yp[b, :n], run(s, x[b:b + 1, :n])[0]) for b, n in enumerate(lens))
        differs = maxdiff(yp[1, :3], run(s, x)[1, :3]) > 1e-6 or fam != "bert"
        check(e < 1e-10 and differs, "%-5s lengths: valid rows == the truncated sequence run alone (%.1e)%s"
              % (fam, e, "; padding changes them" if fam == "bert" else " (causal: unaffected)"))

    # 3. Conv1D [in, out] == nn.Linear with the transposed weight.
    c = init_params(Conv1D(5, 9), 2).double()
    lin = nn.Linear(5, 9).double()
    with torch.no_grad():
        lin.weight.copy_(c.weight.t())
        lin.bias.copy_(c.bias)
        z = torch.randn(3, 4, 5, dtype=torch.float64)
        e = maxdiff(c(z), lin(z))
    check(e < 1e-13, "Conv1D(in=5, out=9) == nn.Linear with weight^T (%.1e)" % e)

    # 4. RoPE: position 0 is the identity; dot products depend only on m - n;
    #    rotate_half == explicit rotation of the pair (j, j + dh/2).
    dh = 8
    cos, sin = rope_tables(12, dh, ROPE_THETA, torch.float64)
    q = torch.randn(1, 1, 12, dh, dtype=torch.float64)
    k = torch.randn(1, 1, 12, dh, dtype=torch.float64)
    rq = apply_rope(q, cos, sin)
    check(torch.equal(rq[0, 0, 0], q[0, 0, 0]), "RoPE at position 0 is the identity (bit-exact)")
    qs = q[0, 0, 0].expand(12, dh).reshape(1, 1, 12, dh)
    ks = k[0, 0, 0].expand(12, dh).reshape(1, 1, 12, dh)
    rq2, rk2 = apply_rope(qs, cos, sin), apply_rope(ks, cos, sin)
    dots = [float(rq2[0, 0, m] @ rk2[0, 0, m - 3]) for m in range(3, 12)]
    check(max(dots) - min(dots) < 1e-12, "RoPE: <R_m q, R_(m-3) k> is the same for every m (spread %.1e)"
          % (max(dots) - min(dots)))
    e = maxdiff(torch.linalg.norm(rq, dim=-1), torch.linalg.norm(q, dim=-1))
    manual = q.clone()
    for t in range(12):
        for j in range(dh // 2):
            a = t * ROPE_THETA ** (-2.0 * j / dh)
            x1, x2 = q[0, 0, t, j], q[0, 0, t, j + dh // 2]
            manual[0, 0, t, j] = x1 * math.cos(a) - x2 * math.sin(a)
            manual[0, 0, t, j + dh // 2] = x2 * math.cos(a) + x1 * math.sin(a)
    e2 = maxdiff(rq, manual)
    check(e < 1e-13 and e2 < 1e-13, "RoPE keeps norms (%.1e) and == rotating pairs (j, j+dh/2) by "
          "t*theta^(-2j/dh) (%.1e)" % (e, e2))

    # 5. GQA: KV = H is plain multi-head attention; KV < H == MHA with each
    #    kv head's weights repeated for its H/KV query heads.
    ok = allowed_keys(B, T, True, None)
    xt = torch.from_numpy(x)
    for kv in (H, 2, 1):
        a = init_params(LlamaAttention(D, H, kv, rope=False), 4).double()
        rep = H // kv
        dh = D // H
        idx = torch.cat([torch.arange(g * dh, (g + 1) * dh) for h in range(H) for g in [h // rep]])
        mha = nn.MultiheadAttention(D, H, bias=False, batch_first=True).double().eval()
        with torch.no_grad():
            mha.in_proj_weight.copy_(torch.cat([a.q_proj.weight, a.k_proj.weight[idx], a.v_proj.weight[idx]]))
            mha.out_proj.weight.copy_(a.o_proj.weight)
            ref = mha(xt, xt, xt, attn_mask=te.causal_mask(T, torch.float64), need_weights=False)[0]
            e = maxdiff(a(xt, ok), ref)
        check(e < 1e-12, "GQA H=%d KV=%d (no rope) == nn.MultiheadAttention with k/v rows repeated "
              "per group (%.1e)" % (H, kv, e))

    # 6. RMSNorm and SwiGLU against their formulas; the whole LLaMA stack
    #    against a direct numpy implementation (explicit pair rotation, kv group
    #    index h // (H/KV)).
    r = init_params(RMSNorm(D, 1e-6), 6).double()
    z = torch.randn(3, D, dtype=torch.float64)
    with torch.no_grad():
        want = z / torch.sqrt((z * z).mean(-1, keepdim=True) + 1e-6) * r.weight
        e = maxdiff(r(z), want)
        mlp = init_params(LlamaMLP(D, F_), 6).double()
        gt = z @ mlp.gate_proj.weight.t()
        e2 = maxdiff(mlp(z), (gt * torch.sigmoid(gt) * (z @ mlp.up_proj.weight.t())) @ mlp.down_proj.weight.t())
    check(e < 1e-13 and e2 < 1e-12, "RMSNorm (%.1e) and SwiGLU down(silu(gate) * up) (%.1e)" % (e, e2))
    for kv in (KV, H):
        s = init_params(build("llama", D, H, F_, N, kv), 9).double().eval()
        p = {k: v.numpy() for k, v in s.state_dict().items()}
        e = maxdiff(run(s, x), _np_llama(p, x, H, kv, N))
        check(e < 1e-10, "llama stack (KV=%d) == direct numpy float64 implementation (%.1e)" % (kv, e))

    # 7. Causality: outputs before the last position ignore the last input.
    for fam in ("gpt2", "llama"):
        s = init_params(build(fam, D, H, F_, N, KV), 10).double().eval()
        x2 = x.copy()
        x2[:, -1] += np.linspace(-1.0, 1.0, D)
        y1, y2 = run(s, x), run(s, x2)
        check(np.array_equal(y1[:, :-1], y2[:, :-1]) and maxdiff(y1[:, -1], y2[:, -1]) > 1e-3,
              "%-5s causal: no dependence on later positions" % fam)

    # 8. Determinism and --from-state-dict on a full GPT-2 LM checkpoint.
    dA, dB = os.path.join(tmp, "detA"), os.path.join(tmp, "detB")
    for dd in (dA, dB):
        export_case(dd, "llama", 1, 5, 16, 2, 24, 2, 1, seed=3)
    same = all(open(os.path.join(dA, f), "rb").read() == open(os.path.join(dB, f), "rb").read()
               for f in ("weights.safetensors", "input.npy", "expected.npy", "expected64.npy"))
    check(same, "same seed gives byte-identical files")
    g = init_params(build("gpt2", 16, 2, 24, 3), 12)
    full = {"transformer.wte.weight": torch.randn(50, 16), "transformer.wpe.weight": torch.randn(20, 16)}
    full.update({"transformer." + k: v for k, v in g.state_dict().items()})
    full["transformer.h.0.attn.bias"] = torch.tril(torch.ones(1, 1, 20, 20))  # old GPT-2 buffer
    full["lm_head.weight"] = full["transformer.wte.weight"]
    pt = os.path.join(tmp, "gpt2_full.pt")
    torch.save(full, pt)
    cfg = os.path.join(tmp, "config.json")
    with open(cfg, "w") as f:
        json.dump({"n_head": 2, "n_embd": 16}, f)
    st, info = convert_state_dict(pt, os.path.join(tmp, "gpt2_full.safetensors"), config=cfg)
    w, _ = te.read_safetensors_independent(st)
    check(info is not None and info["family"] == "gpt2" and info["prefix"] == "transformer."
          and (info["D"], info["F"], info["N"], info["H"], info["extra"]) == (16, 24, 3, 2, 4)
          and set(w) == set(full) and np.array_equal(w["transformer.h.2.mlp.c_fc.weight"],
                                                      g.state_dict()["h.2.mlp.c_fc.weight"].numpy()),
          "--from-state-dict: full GPT-2 LM checkpoint -> gpt2, prefix transformer., D F N H, "
          "4 extra tensors, names and bits kept")
    # The same checkpoint as two hub-style safetensors shards, F16 and BF16.
    names = list(full)
    half = len(names) // 2
    for shard, dt, keys in (("a", "F16", names[:half]), ("b", "BF16", names[half:])):
        header, blobs, off = {}, [], 0
        for k in keys:
            a = full[k].to(torch.float32).numpy()
            b = (a.astype("<f2").tobytes() if dt == "F16"
                 else (a.view(np.uint32) >> 16).astype("<u2").tobytes())
            header[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
            blobs.append(b)
            off += len(b)
        h = json.dumps(header).encode()
        with open(os.path.join(tmp, "shard_%s.safetensors" % shard), "wb") as f:
            f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))
    st3, info3 = convert_state_dict([os.path.join(tmp, "shard_a.safetensors"),
                                     os.path.join(tmp, "shard_b.safetensors")],
                                    os.path.join(tmp, "gpt2_shards.safetensors"), config=cfg)
    w3, _ = te.read_safetensors_independent(st3)
    f16 = [k for k in names[:half]]
    e16 = max(float(np.max(np.abs(w3[k] - full[k].numpy()) / (1e-3 + np.abs(full[k].numpy()))))
              for k in f16)
    ebf = max(float(np.max(np.abs(w3[k] - full[k].numpy()) / (1e-3 + np.abs(full[k].numpy()))))
              for k in names[half:])
    check(set(w3) == set(full) and info3["family"] == "gpt2" and info3["N"] == 3
          and e16 < 2 ** -10 and ebf < 2 ** -7 and ebf > 0,
          "--from-state-dict: two safetensors shards (F16, BF16) merged, widened to F32 "
          "(rel err %.1e, %.1e)" % (e16, ebf))

    st2, info2 = convert_state_dict(pt, os.path.join(tmp, "gpt2_stack.safetensors"), stack_only=True)
    w2, _ = te.read_safetensors_independent(st2)
    check(list(w2) == expected_names("gpt2", 3) and info2["extra"] == 0 and
          all(np.array_equal(w2[k], g.state_dict()[k].numpy()) for k in w2),
          "--stack-only: exactly the stack's tensors, prefix stripped, bits kept")

    return te.self_check_result(fails, tmp)


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(description="BERT / GPT-2 / LLaMA reference stacks for blockc "
                                             "(see the module docstring).")
    ap.add_argument("--family", choices=FAMILIES)
    for d in ("B", "T", "D", "H", "F", "N", "KV"):
        ap.add_argument("--" + d, type=int, help="default: the family's default dims")
    ap.add_argument("--lengths", help="comma list of B valid lengths (right padding)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="output directory (or .safetensors with --from-state-dict)")
    ap.add_argument("--self-check", action="store_true", help="verify the modules and exit")
    ap.add_argument("--from-state-dict", metavar="MODEL_PT", nargs="+",
                    help="convert a torch.save'd state_dict (.pt/.bin) or .safetensors file(s) "
                         "(several: the shards of one checkpoint) to OUT and print a blockc command")
    ap.add_argument("--config", help="with --from-state-dict: the model's config.json (head counts)")
    ap.add_argument("--strip-prefix", default="", help="with --from-state-dict: drop this key prefix "
                    "(default: keep names; blockc's --weights-prefix strips it at load time)")
    ap.add_argument("--stack-only", action="store_true",
                    help="with --from-state-dict: write only the family's stack tensors, prefix "
                         "stripped (runs without --weights-prefix / --allow-extra; smaller file)")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    if a.self_check:
        return 1 if self_check() else 0
    if not a.out:
        ap.error("--out is required")
    if a.from_state_dict:
        convert_state_dict(a.from_state_dict, a.out, a.strip_prefix, a.config, a.stack_only)
        return 0
    if not a.family:
        ap.error("--family is required")
    dims = dict(DEFAULT_DIMS[a.family])
    for k in dims:
        if getattr(a, k) is not None:
            dims[k] = getattr(a, k)
    if a.family != "llama" and a.KV is None:
        dims["KV"] = dims["H"]
    if any(v < 1 for v in dims.values()):
        ap.error("dimensions must be >= 1")
    lengths = [int(v) for v in a.lengths.split(",")] if a.lengths else None
    try:
        meta = export_case(a.out, a.family, dims["B"], dims["T"], dims["D"], dims["H"], dims["F"],
                           dims["N"], dims["KV"], a.seed, lengths)
    except ValueError as e:
        ap.error(str(e))
    print("wrote %s: %s %s (max|y| %.3g, PyTorch fp32 vs fp64 max abs err %.2e)"
          % (a.out, a.family, " ".join("%s=%d" % kv for kv in dims.items()),
             meta["max_abs_expected64"], meta["torch_fp32_max_abs_err_vs_fp64"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
