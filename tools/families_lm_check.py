#!/usr/bin/python3
"""families_lm_check.py - conformance of the issue-23 families graphs/olmo2_lm.blk,
graphs/qwen3_lm.blk and graphs/gemma2_lm.blk: token ids in, logits, gradients
and (Gemma 2) greedy generated ids out, against PyTorch reference modules
written here from each model's equations (Hugging Face's modeling_olmo2,
modeling_qwen3 and modeling_gemma2 were read for the equations and the
state_dict names; the transformers package is not imported):

  Olmo2ForCausalLM   no pre-norm: x += RMS(attn(x)); x += RMS(mlp(x)) with
                     post_attention_layernorm / post_feedforward_layernorm;
                     q_norm [D] and k_norm [KV*dh] over the whole projections
                     (before RoPE); SwiGLU; RoPE theta 5e5.
  Qwen3ForCausalLM   LLaMA's Pre-RMSNorm block with q_norm / k_norm [dh] per
                     head before RoPE; GQA; SwiGLU; RoPE theta 1e6.
  Gemma2ForCausalLM  x = sqrt(D) E[ids] (sqrt(D) rounded to float32, as HF's
                     normalizer); RMSNorm with (1 + w) before and after both
                     sublayers; scores * query_pre_attn_scalar^-1/2, soft-capped
                     c tanh(s / c) (c = 50); even layers sliding-window
                     (keys j > i - W), odd global; GeGLU with tanh GELU; the
                     head tied to the embeddings; final logits soft-capped (30).

Dims are odd (D=36, dh=6, F=97, V=101, kv heads 2 or 3), the graphs run with
B > 1 and `len` lengths (right-padded rows: only valid rows compared; the
gradient's dy is zero on padded rows) and a run-time T below its bound.

Checked on every backend asked for (interp, jit, aot):
  1. logits: jit, aot: max|y - y64| <= max(1e-5 max(1, max|y64|), 4 max|y32 - y64|);
     interp <= 1e-6 max(1, max|y64|)   (tools/lm_check.py's tolerances).
  2. gradients of sum(logits * dy) for every parameter (`blockc grad`), per
     tensor: jit, aot: max|g - g64| <= max(1e-4 max(1, max|g64|), 8 max|g32 - g64|);
     interp <= 1e-6 max(1, max|g64|).
  Also opts_lm, Qwen3's wiring with the options no family uses (LayerNorm
  QK-norm over the projections with biases, head scales - NormFormer's - with
  a window of 3, a soft-cap and scale=), a graph written by this script.
  head_dim=: qwen3_lm with -D K=10 and gemma2_lm with -D K=4 (heads wider and
  narrower than D/H = 6, as Qwen3's and Gemma 2's released head_dim are), the
  reference's Hugging Face layout q_proj [H*K, D], o_proj [D, H*K], q_norm [K].
  3. Gemma 2 (window + both soft-caps), opts_lm and the head_dim= cases: the reference's greedy loop (float64,
     whole sequence each step) for 32 tokens vs `blockc generate` (the step
     entry with its KV cache) - identical ids; the seed is chosen so every
     step's top-1 logit leads by >= 1e-3.

Usage:  families_lm_check.py --blockc build/blockc [--backends interp,jit,aot]
        families_lm_check.py --self-check     the modules alone
"""

import argparse
import math
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import families as fam  # noqa: E402  (exits with a message without torch/numpy)
import lm_check as lm  # noqa: E402

te, np, torch, nn = fam.te, fam.np, fam.torch, fam.nn
Fn = torch.nn.functional
GTOL, GFACTOR, GINTERP = 1e-4, 8.0, 1e-6


# ---------------------------------------------------------------------------
# Reference modules
# ---------------------------------------------------------------------------
class RMSNorm(fam.RMSNorm):
    """x / sqrt(mean(x^2) + eps) * (offset + w); Gemma's offset is 1."""

    def __init__(self, D, eps, offset=0.0):
        super().__init__(D, eps)
        self.offset = offset

    def forward(self, x):
        ms = x.pow(2).mean(-1, keepdim=True)
        return (self.offset + self.weight) * (x * torch.rsqrt(ms + self.eps))


class Attention(nn.Module):
    """q/k/v/o projections (no biases), optional QK-norm (per head or over the
    projection), RoPE, GQA, optional score scale, soft-cap and sliding window."""

    def __init__(self, D, H, KV, theta, qk=None, eps=1e-6, scale=None, softcap=None, window=None,
                 head_scale=False, dh=None):
        super().__init__()
        # dh: HF's head_dim (Qwen3, Gemma 2: independent of D), default D / H
        self.H, self.KV, self.dh, self.theta = H, KV, dh or D // H, theta
        self.qk, self.scale, self.softcap, self.window = qk, scale, softcap, window
        self.q_proj = nn.Linear(D, H * self.dh, bias=False)
        self.k_proj = nn.Linear(D, KV * self.dh, bias=False)
        self.v_proj = nn.Linear(D, KV * self.dh, bias=False)
        self.o_proj = nn.Linear(H * self.dh, D, bias=False)
        if qk == "head":
            self.q_norm, self.k_norm = RMSNorm(self.dh, eps), RMSNorm(self.dh, eps)
        elif qk == "full":
            self.q_norm, self.k_norm = RMSNorm(H * self.dh, eps), RMSNorm(KV * self.dh, eps)
        elif qk == "ln_full":
            self.q_norm = nn.LayerNorm(H * self.dh, eps=1e-5)
            self.k_norm = nn.LayerNorm(KV * self.dh, eps=1e-5)
        self.head_scale = nn.Parameter(torch.ones(H)) if head_scale else None

    def forward(self, x, ok):
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        if self.qk in ("full", "ln_full"):
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = fam.to_heads(q, self.H), fam.to_heads(k, self.KV), fam.to_heads(v, self.KV)
        if self.qk == "head":
            q, k = self.q_norm(q), self.k_norm(k)
        T = x.shape[1]
        cos, sin = fam.rope_tables(T, self.dh, self.theta, x.dtype)
        q, k = fam.apply_rope(q, cos, sin), fam.apply_rope(k, cos, sin)
        rep = self.H // self.KV
        k, v = fam.repeat_kv(k, rep), fam.repeat_kv(v, rep)
        s = torch.matmul(q, k.transpose(-1, -2)) * (self.scale or 1.0 / math.sqrt(self.dh))
        if self.softcap:
            s = self.softcap * torch.tanh(s / self.softcap)
        if self.window:
            i = torch.arange(T).view(T, 1)
            j = torch.arange(T).view(1, T)
            ok = ok & (j > i - self.window)
        s = torch.where(ok, s, torch.tensor(torch.finfo(s.dtype).min, dtype=s.dtype))
        o = torch.matmul(torch.softmax(s, -1), v)            # [B, H, T, dh]
        if self.head_scale is not None:                      # NormFormer's head scales
            o = o * self.head_scale.view(1, self.H, 1, 1)
        return self.o_proj(fam.from_heads(o))


class MLP(nn.Module):
    def __init__(self, D, F_, act):
        super().__init__()
        self.act = act
        self.gate_proj = nn.Linear(D, F_, bias=False)
        self.up_proj = nn.Linear(D, F_, bias=False)
        self.down_proj = nn.Linear(F_, D, bias=False)

    def forward(self, x):
        g = self.gate_proj(x)
        a = Fn.silu(g) if self.act == "silu" else Fn.gelu(g, approximate="tanh")
        return self.down_proj(a * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, kind, c, idx):
        super().__init__()
        D, H, KV, F_, K = c["D"], c["H"], c["KV"], c["F"], c.get("K")
        self.kind = kind
        if kind == "olmo2":
            self.self_attn = Attention(D, H, KV, 5e5, qk="full")
            self.mlp = MLP(D, F_, "silu")
            self.post_attention_layernorm = RMSNorm(D, 1e-6)
            self.post_feedforward_layernorm = RMSNorm(D, 1e-6)
        elif kind in ("qwen3", "opts"):
            self.input_layernorm = RMSNorm(D, 1e-6)
            if kind == "qwen3":
                self.self_attn = Attention(D, H, KV, 1e6, qk="head", dh=K)
            else:  # LayerNorm QK-norm over the projections, window, soft-cap, scale, head scales
                self.self_attn = Attention(D, H, KV, 1e4, qk="ln_full", scale=0.3, softcap=5.0,
                                           window=3, head_scale=True)
            self.post_attention_layernorm = RMSNorm(D, 1e-6)
            self.mlp = MLP(D, F_, "silu")
        else:  # gemma2
            self.input_layernorm = RMSNorm(D, 1e-6, 1.0)
            self.self_attn = Attention(D, H, KV, 1e4, scale=c["Q"] ** -0.5, softcap=50.0,
                                       window=c["W"] if idx % 2 == 0 else None, dh=K)
            self.post_attention_layernorm = RMSNorm(D, 1e-6, 1.0)
            self.pre_feedforward_layernorm = RMSNorm(D, 1e-6, 1.0)
            self.mlp = MLP(D, F_, "gelu_tanh")
            self.post_feedforward_layernorm = RMSNorm(D, 1e-6, 1.0)

    def forward(self, x, ok):
        if self.kind == "olmo2":
            x = x + self.post_attention_layernorm(self.self_attn(x, ok))
            return x + self.post_feedforward_layernorm(self.mlp(x))
        if self.kind in ("qwen3", "opts"):
            x = x + self.self_attn(self.input_layernorm(x), ok)
            return x + self.mlp(self.post_attention_layernorm(x))
        x = x + self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), ok))
        return x + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))


class Model(nn.Module):
    def __init__(self, kind, c):
        super().__init__()
        self.kind = kind
        self.embed_tokens = nn.Embedding(c["V"], c["D"])
        self.layers = nn.ModuleList([Layer(kind, c, i) for i in range(c["N"])])
        self.norm = RMSNorm(c["D"], 1e-6, 1.0 if kind == "gemma2" else 0.0)
        # HF's normalizer: sqrt(D) as a tensor of the hidden dtype (float32 in the checkpoint).
        self.scale = float(np.float32(math.sqrt(c["D"]))) if kind == "gemma2" else 1.0

    def forward(self, ids, lengths=None):
        B, T = ids.shape
        x = self.embed_tokens(ids) * self.scale
        ok = fam.allowed_keys(B, T, True, lengths)
        for layer in self.layers:
            x = layer(x, ok)
        return self.norm(x)


class ForCausalLM(nn.Module):
    def __init__(self, kind, c):
        super().__init__()
        self.kind = kind
        self.model = Model(kind, c)
        if kind != "gemma2":
            self.lm_head = nn.Linear(c["D"], c["V"], bias=False)

    def forward(self, ids, lengths=None):
        h = self.model(ids, lengths)
        if self.kind != "gemma2":
            return self.lm_head(h)
        y = torch.matmul(h, self.model.embed_tokens.weight.t())   # tied head
        return 30.0 * torch.tanh(y / 30.0)                         # final_logit_softcapping


def hf_names(kind, N):
    if kind == "opts":
        names = [n for n in hf_names("qwen3", N) if "_norm" not in n or "self_attn" not in n]
        return names + ["model.layers.%d.self_attn.%s" % (i, w) for i in range(N)
                        for w in ("q_norm.weight", "q_norm.bias", "k_norm.weight", "k_norm.bias",
                                  "head_scale")]
    per = {"olmo2": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                     "self_attn.q_norm", "self_attn.k_norm", "mlp.gate_proj", "mlp.up_proj",
                     "mlp.down_proj", "post_attention_layernorm", "post_feedforward_layernorm"],
           "qwen3": ["input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                     "self_attn.o_proj", "self_attn.q_norm", "self_attn.k_norm",
                     "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"],
           "gemma2": ["input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                      "self_attn.o_proj", "post_attention_layernorm", "pre_feedforward_layernorm",
                      "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
                      "post_feedforward_layernorm"]}[kind]
    names = ["model.embed_tokens.weight"] + ["model.layers.%d.%s.weight" % (i, m)
                                             for i in range(N) for m in per] + ["model.norm.weight"]
    return names + ([] if kind == "gemma2" else ["lm_head.weight"])


# ---------------------------------------------------------------------------
# Cases and blockc
# ---------------------------------------------------------------------------
def cases():
    base = dict(D=36, H=6, F=97, N=2, V=101, Tbound=48)
    return [dict(base, name="olmo2_lm", kind="olmo2", KV=3, shapes=[(2, 11, [11, 4]), (1, 6, None)]),
            dict(base, name="qwen3_lm", kind="qwen3", KV=2, shapes=[(2, 11, [11, 5]), (1, 7, None)]),
            dict(base, name="gemma2_lm", kind="gemma2", KV=2, W=5, Q=10,
                 shapes=[(2, 13, [13, 6]), (1, 9, None)], generate=True),
            dict(base, name="opts_lm", kind="opts", KV=2, text=OPTS_LM, W=3,
                 shapes=[(2, 12, [12, 7]), (1, 8, None)], generate=True),
            # head_dim= (-D K=...): heads wider (Qwen3's 128 at D=1024, H=16) and
            # narrower than D/H = 6, through the step entry as well.
            dict(base, name="qwen3_lm K=10", graph="qwen3_lm", kind="qwen3", KV=2, K=10,
                 shapes=[(2, 11, [11, 5]), (1, 7, None)], generate=True),
            dict(base, name="gemma2_lm K=4", graph="gemma2_lm", kind="gemma2", KV=3, K=4, W=4, Q=7,
                 shapes=[(2, 13, [13, 6]), (1, 9, None)], generate=True)]


# The options no family above uses (LayerNorm QK-norm over the projections
# with biases, head scales) with a window, a soft-cap and scale=, on
# Qwen3's wiring: a graph of its own (written to the run's directory).
OPTS_LM = """model opts_lm
dim B = 1
dim T <= 48
dim D = 36
dim H = 6
dim KV = 2
dim F = 97
dim N = 2
dim V = 101
input ids : tokens[B, T]
input len : lengths[B]
x = Embedding(ids, vocab=V, dim=D, params=model.embed_tokens)
for i in 0..N as model.layers.{i} {
    a = Attention(RMSNorm(x, eps=1e-6, params=input_layernorm), heads=H, kv_heads=KV,
                  causal=true, lengths=len, rope=true, bias=false,
                  q=self_attn.q_proj, k=self_attn.k_proj, v=self_attn.v_proj, o=self_attn.o_proj,
                  qk_norm=layernorm, qk_norm_per_head=false, window=3, softcap=5.0, scale=0.3,
                  head_scale=true)
    x = Add(x, a)
    f = FFN(RMSNorm(x, eps=1e-6, params=post_attention_layernorm), hidden=F, act=swiglu,
            bias=false, gate=mlp.gate_proj, up=mlp.up_proj, down=mlp.down_proj)
    x = Add(x, f)
}
y = RMSNorm(x, eps=1e-6, params=model.norm)
logits = Linear(y, out=V, bias=false, params=lm_head)
output logits
"""


def dim_flags(c, T, B):
    ks = ["D", "H", "KV", "F", "N", "V"] + (["W", "Q"] if c["kind"] == "gemma2" else [])
    ks += ["K"] if "K" in c else []
    out = ["-D", "B=%d" % B, "-D", "T=%d" % T]
    for k in ks:
        out += ["-D", "%s=%d" % (k, c[k])]
    return out


def build(c, seed):
    torch.manual_seed(seed)
    m = fam.init_params(ForCausalLM(c["kind"], c), seed).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():  # head scales around 1, not init_params' 0.1 n of a vector
        for layer in m.model.layers:
            hs = layer.self_attn.head_scale
            if hs is not None:
                hs.copy_(1.0 + 0.3 * torch.randn(hs.shape, generator=g, dtype=torch.float64))
    return m


def state32(model):
    return {k: v.detach().to(torch.float32).clone() for k, v in model.state_dict().items()}


def graph_of(c, d):
    if "text" not in c:
        return os.path.join(ROOT, "graphs", c.get("graph", c["name"]) + ".blk")
    path = os.path.join(d, c["name"] + ".blk")
    with open(path, "w") as f:
        f.write(c["text"])
    return path


def run_blockc(a, c, d, backend, cmd_name, ids, lengths, extra):
    graph = graph_of(c, d)
    ids_p = os.path.join(d, "ids.npy")
    te._save_npy(ids_p, np.asarray(ids, dtype=np.int32))
    cmd = [a.blockc, cmd_name, graph, "--backend", backend, "--weights", os.path.join(d, "w.safetensors"),
           "--input", "ids=" + ids_p] + list(extra)
    if lengths is not None:
        len_p = os.path.join(d, "len.npy")
        te._save_npy(len_p, np.asarray(lengths, dtype=np.int64))
        cmd += ["--input", "len=" + len_p]
    cmd += dim_flags(c, c["Tbound"], np.asarray(ids).shape[0])
    rc, out, err, _ = lm.spawn(cmd)
    if rc != 0:
        return "blockc %s exit %s: %s\n    %s" % (cmd_name, rc, err.strip()[:600], " ".join(cmd))
    return None


def torch_logits_grads(model, ids, lengths, dy, dtype):
    m = model.to(dtype)
    for p in m.parameters():
        p.grad = None
    y = m(torch.as_tensor(np.asarray(ids, dtype=np.int64)), lengths)
    (y * torch.as_tensor(dy, dtype=dtype)).sum().backward()
    g = {k: p.grad.detach().to(torch.float64).numpy().copy() for k, p in m.named_parameters()}
    return y.detach().to(torch.float64).numpy(), g


def mask_dy(dy, lengths):
    if lengths is not None:
        for b, n in enumerate(lengths):
            dy[b, n:] = 0
    return dy


def check_case(a, R, c, model, d, backends):
    rng = np.random.default_rng(c["seed"] + 11)
    te.write_safetensors(os.path.join(d, "w.safetensors"), state32(model))
    for B, T, lengths in c["shapes"]:
        ids = rng.integers(0, c["V"], size=(B, T))
        dy = mask_dy(rng.standard_normal((B, T, c["V"])), lengths)
        y64, g64 = torch_logits_grads(model, ids, lengths, dy, torch.float64)
        y32, g32 = torch_logits_grads(model, ids, lengths, dy, torch.float32)
        v64 = lm.valid(y64, lengths)
        scale = float(np.max(np.abs(v64)))
        t64 = float(np.max(np.abs(lm.valid(y32, lengths) - v64)))
        tag = "B=%d T=%d%s" % (B, T, " len=%s" % ",".join(map(str, lengths)) if lengths else "")
        dy_p = os.path.join(d, "dy.npy")
        te._save_npy(dy_p, dy.astype(np.float32))
        for b in backends:
            out = os.path.join(d, "logits_%s.npy" % b)
            why = run_blockc(a, c, d, b, "run", ids, lengths, ["--output", "logits=" + out])
            what = "%s logits %s %s" % (c["name"], b, tag)
            if why:
                R.row(False, what, why)
            else:
                y = np.load(out).astype(np.float64)
                err = float(np.max(np.abs(lm.valid(y, lengths) - v64)))
                bound = (lm.INTERP_TOL * max(1.0, scale) if b == "interp"
                         else max(lm.TOL * max(1.0, scale), lm.FACTOR * t64))
                ok = bool(np.all(np.isfinite(y))) and err <= bound
                R.row(ok, what, "err %.2e %s %.2e (max|y| %.2f, torch32 %.1e)"
                      % (err, "<=" if ok else ">", bound, scale, t64))
            gp = os.path.join(d, "grads_%s.safetensors" % b)
            why = run_blockc(a, c, d, b, "grad", ids, lengths, ["--dy", "logits=" + dy_p, "-o", gp])
            what = "%s gradients %s %s" % (c["name"], b, tag)
            if why:
                R.row(False, what, why)
                continue
            got = {k: v.numpy().astype(np.float64) for k, v in fam.read_safetensors_any(gp).items()}
            worst, wname, bad = 0.0, "", []
            for k, ref in g64.items():
                if k not in got or got[k].shape != ref.shape:
                    bad.append(k)
                    continue
                gs = float(np.max(np.abs(ref)))
                e = float(np.max(np.abs(got[k] - ref)))
                t = float(np.max(np.abs(g32[k] - ref)))
                bound = GINTERP * max(1.0, gs) if b == "interp" else max(GTOL * max(1.0, gs), GFACTOR * t)
                if e > bound:
                    bad.append("%s (err %.1e > %.1e)" % (k, e, bound))
                r = e / max(1.0, gs)
                if r >= worst:
                    worst, wname = r, k
            R.row(not bad, what + " (%d tensors)" % len(g64),
                  "worst rel %.1e at %s" % (worst, wname) if not bad else "; ".join(bad)[:400])


def pick_seed(c, start):
    rng = np.random.default_rng(start)
    prompt = [int(v) for v in rng.integers(0, c["V"], size=5)]
    for seed in range(start, start + 40):
        m = build(c, seed)
        ids, lead = lm.greedy_ref(m, prompt, lm.NEW_TOKENS)
        if lead >= lm.MARGIN:
            c.update(seed=seed, prompt=prompt, greedy=ids, lead=lead)
            return m
    raise SystemExit("families_lm_check: no seed gives top-1 leads >= %g" % lm.MARGIN)


def check_generate(a, R, c, model, d, backends):
    graph = graph_of(c, d)
    for b in backends:
        cmd = [a.blockc, "generate", graph, "--backend", b, "--weights", os.path.join(d, "w.safetensors"),
               "--prompt-ids", ",".join(map(str, c["prompt"])), "--max-new-tokens",
               str(lm.NEW_TOKENS), "--ids"] + dim_flags(c, c["Tbound"], 1)
        rc, out, err, secs = lm.spawn(cmd)
        what = "%s greedy %d tokens (generate%s) %s" % (
            c["name"], lm.NEW_TOKENS, ", window W=%d" % c["W"] if "W" in c else "", b)
        if rc != 0:
            R.row(False, what, err.strip()[:400])
            continue
        got = lm.parse_ids(out, c["prompt"])
        R.row(got == c["greedy"], what, "identical (min lead %.2e, %.1fs)" % (c["lead"], secs)
              if got == c["greedy"] else "%s vs %s" % (got, c["greedy"]))


def self_check():
    R = lm.Report()
    for c in cases():
        m = build(c, 3).double()
        R.row(sorted(m.state_dict()) == sorted(hf_names(c["kind"], c["N"])),
              "%s state_dict keys are Hugging Face's (%d)" % (c["name"], len(m.state_dict())))
        ids = np.random.default_rng(1).integers(0, c["V"], size=(2, 9))
        with torch.no_grad():
            y = m(torch.as_tensor(ids), [9, 4]).numpy()
            y1 = m(torch.as_tensor(ids[1:, :4])).numpy()
        R.row(np.allclose(y[1, :4], y1[0], rtol=0, atol=1e-10), "%s padded row = unpadded run" % c["name"])
        if c["kind"] == "gemma2":
            R.row(bool(np.all(np.abs(y) < 30.0)), "gemma2_lm final logits inside the soft-cap")
            # The window: a token more than W back changes nothing on a model of sliding layers only.
            c1 = dict(c, N=1)
            m1 = build(c1, 4).double()
            ids2 = ids[:1].copy()
            ids2[0, 0] = (ids2[0, 0] + 1) % c["V"]
            with torch.no_grad():
                a1 = m1(torch.as_tensor(ids[:1])).numpy()
                a2 = m1(torch.as_tensor(ids2)).numpy()
            W = c["W"]
            R.row(np.allclose(a1[0, W:], a2[0, W:], rtol=0, atol=1e-12) and
                  not np.allclose(a1[0, :W], a2[0, :W]), "gemma2 sliding layer sees only W keys")
    return R.fails


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blockc", default=os.path.join(ROOT, "build", "blockc"))
    ap.add_argument("--backends", default="interp,jit,aot")
    ap.add_argument("--self-check", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    if a.self_check:
        return 1 if self_check() else 0
    backends = [b for b in a.backends.split(",") if b]
    if not backends or any(b not in ("interp", "jit", "aot") for b in backends):
        ap.error("--backends: interp, jit and/or aot (got %s)" % a.backends)
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="families_lm_check.")
    print("families_lm_check: %s, backends %s, in %s" % (a.blockc, ",".join(backends), tmp))
    R = lm.Report()
    for i, c in enumerate(cases()):
        d = os.path.join(tmp, "case%d" % i)
        os.makedirs(d)
        if c.get("generate"):
            model = pick_seed(c, a.seed + 100 * i)
        else:
            c["seed"] = a.seed + 100 * i
            model = build(c, c["seed"])
        print("%s: D=%d H=%d KV=%d head_dim=%d N=%d F=%d V=%d seed %d"
              % (c["name"], c["D"], c["H"], c["KV"], c.get("K", c["D"] // c["H"]), c["N"], c["F"],
                 c["V"], c["seed"]))
        check_case(a, R, c, model, d, backends)
        if c.get("generate"):
            check_generate(a, R, c, model.double(), d, backends)
    print("families_lm_check: %d failure%s (%.0fs)" % (R.fails, "" if R.fails == 1 else "s", time.time() - t0))
    if a.keep or R.fails:
        print("families_lm_check: files kept in %s" % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if R.fails else 0


if __name__ == "__main__":
    sys.exit(main())
