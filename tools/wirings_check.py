#!/usr/bin/python3
"""wirings_check.py - the research wirings of graphs/ against PyTorch modules
written from each paper's equations: forward output and gradients, on every
backend.

    /usr/bin/python3 tools/wirings_check.py --blockc build/blockc
        [--backends interp,jit,aot] [--graphs-only rezero,...] [--filter REGEX] [-v]
    /usr/bin/python3 tools/wirings_check.py --self-check

(`make conformance` runs both.)  The graphs (graphs/<name>.blk) and the
paper each reference module follows:

    sandwich           Ding et al. 2021 (CogView)        x + LN(f(LN(x))), final LN
    parallel           GPT-J / PaLM (Chowdhery 2022)     x + attn(LN(x)) + ffn(LN(x))
    gated              Srivastava et al. 2015 (Highway)  g*f + (1-g)*x, g = sigmoid(W LN(x) + b)
    normformer         Shleifer et al. 2021              Pre-LN + LN after attention, head scales,
                                                         LN after the FFN activation
    hyper_connections  Zhu et al. 2024                   n = 2 static hyper-connections
    rezero             Bachlechner et al. 2020           x + alpha * f(x)
    layerscale         Touvron et al. 2021 (CaiT)        x + diag(gamma) f(LN(x))
    admin              Liu et al. 2020                   LN(x * omega + f(x))

Each reference module is written here from the paper's equations - its own
multi-head attention (packed in_proj, per-head softmax(q k^T / sqrt(dh)),
optional per-head scale, out_proj), its own LayerNorm arithmetic through
nn.LayerNorm modules only for the parameter names - with the graph's
parameter names as its named_parameters(), so its state_dict is the weights
file blockc reads.  A graph whose file is missing (a wiring not merged yet)
is reported as NOT RUN and fails the sweep unless --allow-missing.

Cases per graph (attention is the only sequence mixer, so "causal" swaps
`causal=false` for `causal=true` in a copy of the graph):

    odd      B=1 T=7 D=12 H=3 F=20 N=2            bidirectional
    causal   B=1 T=7 D=12 H=3 F=20 N=2            causal
    padded   B=3 T=6 (bound 6) D=8 H=2 F=14 N=3   causal, lengths input (row 0 full)

Per case and backend: `blockc run` (the output against the float64 module)
and `blockc grad --dy --dx` (every parameter's gradient and the input's
against float64 autograd of sum(y * dy)).  Padded output rows are not
compared and have dy = 0 (PyTorch's are unspecified; blockc's attention
writes zeros there).  Parameters are drawn away from their identity
initialisation (alpha, gamma, omega, the hyper-connection scalars ~ 0.5 +-
0.3, matrices N(0, 1/fan_in), LN gains 1 + 0.1 N(0, 1)) so that every term
of every equation moves the output: at ReZero's alpha = 0 a wrong branch
would be invisible.

Tolerances (stated as in tools/conformance.py and tools/grad_check.py, and
for the same reasons):

  forward, interp:   max|y - y64| <= 1e-6 * max(1, max|y64|)
      the interpreter accumulates in double and stores float32 values; its
      error is the float32 rounding of intermediates (measured worst below).
  forward, jit/aot:  max|y - y64| <= max(1e-5 * max(1, max|y64|), 4 * max|y32 - y64|)
      float32 end to end like PyTorch's own float32 forward (y32), whose error
      at these sizes is 1e-7..1e-6; a wrong wiring term (a missing norm, a
      scale on the wrong operand, a gate of 1 - g instead of g) moves y by
      1e-2 or more.
  gradients, interp: max|g - g64| <= 1e-6 * s per tensor, s = max(max|g64|, 1e-3 G)
      (G the largest gradient of any tensor: a gradient that is zero in exact
      arithmetic - the scale of a LayerNorm's input, which it divides out -
      is rounding, and PyTorch's own float32 gets it wrong by 100%)
      the double reference backward written as float32 (6e-8 relative).
  gradients, jit/aot: max|g - g64| <= max(2e-4, 4 e32) * s per tensor
      (e32: PyTorch float32 autograd's own error on that tensor, the same
      factor term as the forward's)
      the emitted float32 backward, like PyTorch's float32 autograd (the
      "torch32" column, 1e-7..1e-5 here); a wrong backward term is >= 1e-3.

Admin's omega: `blockc analyze graphs/admin.blk --admin-omega -o W` (a
padded batch B=3 with --weights and --input) against Admin's profiling done
here on the PyTorch module - omega_i = sqrt(Var[x_0] + sum_{j<i} Var[f_j]),
population variances over the valid rows - within 1e-6 relative (float32
storage of omega is 6e-8), every other tensor of W unchanged bit for bit.

The summary prints the worst error per graph and backend; docs/wirings.md
records the numbers of a full run.
"""

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import torch_export as te  # noqa: E402  (exits with a message if torch is missing)

np = te.np
torch = te.torch
nn = torch.nn
F = torch.nn.functional

LN_EPS = 1e-5

# name, B, T, D, H, F, N, causal, padded
CASES = [
    ("odd", 1, 7, 12, 3, 20, 2, False, False),
    ("causal", 1, 7, 12, 3, 20, 2, True, False),
    ("padded", 3, 6, 8, 2, 14, 3, True, True),
]


# ---------------------------------------------------------------------------
# Building blocks, from the equations
# ---------------------------------------------------------------------------
class MHA(nn.Module):
    """Multi-head attention as blockc's Attention(params=P) computes it
    (Vaswani et al. 2017): [q|k|v] = x W_in^T + b_in, per head
    softmax(q k^T / sqrt(dh) + mask) v, heads concatenated, optionally each
    head scaled by a learned scalar (NormFormer's head_scale, before the
    output projection), then x W_out^T + b_out.  Keys t >= len[b] and (causal)
    keys after the query get weight exactly 0.  Parameter names are
    nn.MultiheadAttention's."""

    def __init__(self, D, H, head_scale=False):
        super().__init__()
        self.D, self.H = D, H
        self.in_proj_weight = nn.Parameter(torch.empty(3 * D, D))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * D))
        self.out_proj = nn.Linear(D, D)
        self.head_scale = nn.Parameter(torch.ones(H)) if head_scale else None

    def forward(self, x, causal, lengths):
        B, T, D = x.shape
        H, dh = self.H, D // self.H
        qkv = x @ self.in_proj_weight.t() + self.in_proj_bias
        q, k, v = (qkv[..., i * D:(i + 1) * D].reshape(B, T, H, dh).transpose(1, 2) for i in range(3))
        s = (q @ k.transpose(-1, -2)) / math.sqrt(dh)           # [B, H, T, T]
        keep = torch.ones(B, 1, T, T, dtype=torch.bool)
        if causal:
            keep = keep & torch.tril(torch.ones(T, T, dtype=torch.bool))
        if lengths is not None:
            valid = torch.arange(T)[None, :] < lengths[:, None]  # [B, T] keys
            keep = keep & valid[:, None, None, :]
        s = s.masked_fill(~keep, float("-inf"))
        o = torch.softmax(s, dim=-1) @ v                        # [B, H, T, dh]
        if self.head_scale is not None:
            o = o * self.head_scale[None, :, None, None]
        o = o.transpose(1, 2).reshape(B, T, D)
        return self.out_proj(o)


def ffn(l1, l2, x):
    """FFN(x) = linear2(relu(linear1(x))) (Vaswani et al. 2017, eq. 2)."""
    return l2(torch.relu(l1(x)))


def special(p, mean, std):
    """Marks a parameter to be drawn as mean + std * N(0, 1) (see init_params)."""
    p._draw = (mean, std)
    return p


def scalar(value=1.0):
    return nn.Parameter(torch.full((1,), float(value)))


# ---------------------------------------------------------------------------
# The reference modules (one per graph); forward(x, causal, lengths) -> y
# ---------------------------------------------------------------------------
class EncLayer(nn.Module):
    """nn.TransformerEncoderLayer's submodules by name: self_attn, linear1,
    linear2, norm1, norm2 (and whatever a wiring adds)."""

    def __init__(self, D, H, F_, head_scale=False):
        super().__init__()
        self.self_attn = MHA(D, H, head_scale)
        self.linear1 = nn.Linear(D, F_)
        self.linear2 = nn.Linear(F_, D)
        self.norm1 = nn.LayerNorm(D, eps=LN_EPS)
        self.norm2 = nn.LayerNorm(D, eps=LN_EPS)

    def attn(self, x, causal, lengths):
        return self.self_attn(x, causal, lengths)

    def ff(self, x):
        return ffn(self.linear1, self.linear2, x)


class Sandwich(nn.Module):
    """CogView's Sandwich-LN (Ding et al. 2021, sec. 2.4):
    x = x + LN3(Attn(LN1(x))); x = x + LN4(FFN(LN2(x))); y = LN(x)."""

    def __init__(self, D, H, F_, N):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(N):
            L = EncLayer(D, H, F_)
            L.norm3 = nn.LayerNorm(D, eps=LN_EPS)
            L.norm4 = nn.LayerNorm(D, eps=LN_EPS)
            self.layers.append(L)
        self.norm = nn.LayerNorm(D, eps=LN_EPS)

    def forward(self, x, causal, lengths):
        for L in self.layers:
            x = x + L.norm3(L.attn(L.norm1(x), causal, lengths))
            x = x + L.norm4(L.ff(L.norm2(x)))
        return self.norm(x)


class Parallel(nn.Module):
    """GPT-J / PaLM parallel block: h = LN1(x); x = x + Attn(h) + FFN(h); y = LN(x)."""

    def __init__(self, D, H, F_, N):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(N):
            L = EncLayer(D, H, F_)
            del L.norm2
            self.layers.append(L)
        self.norm = nn.LayerNorm(D, eps=LN_EPS)

    def forward(self, x, causal, lengths):
        for L in self.layers:
            h = L.norm1(x)
            x = x + L.attn(h, causal, lengths) + L.ff(h)
        return self.norm(x)


class Gated(nn.Module):
    """Highway-style gated residual (Srivastava et al. 2015: y = H(x) T(x) +
    x (1 - T(x)), T = sigmoid(W_T x + b_T)) around each Pre-LN sublayer:
    h = LN(x); g = sigmoid(gate(h)); x = g * f(h) + (1 - g) * x; y = LN(x)."""

    def __init__(self, D, H, F_, N):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(N):
            L = EncLayer(D, H, F_)
            L.attn_gate = nn.Linear(D, D)
            L.ffn_gate = nn.Linear(D, D)
            self.layers.append(L)
        self.norm = nn.LayerNorm(D, eps=LN_EPS)

    def forward(self, x, causal, lengths):
        for L in self.layers:
            h = L.norm1(x)
            g = torch.sigmoid(L.attn_gate(h))
            x = g * L.attn(h, causal, lengths) + (1 - g) * x
            h = L.norm2(x)
            g = torch.sigmoid(L.ffn_gate(h))
            x = g * L.ff(h) + (1 - g) * x
        return self.norm(x)


class NormFormer(nn.Module):
    """NormFormer (Shleifer et al. 2021, sec. 2): Pre-LN plus
    x = x + LN_attn(HeadScale(MHA(LN1(x))));  x = x + W2 LN_ffn(gelu(W1 LN2(x) + b1)) + b2;
    y = LN(x)."""

    def __init__(self, D, H, F_, N):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(N):
            L = EncLayer(D, H, F_, head_scale=True)
            L.attn_ln = nn.LayerNorm(D, eps=LN_EPS)
            L.ffn_ln = nn.LayerNorm(F_, eps=LN_EPS)
            special(L.self_attn.head_scale, 0.8, 0.3)
            self.layers.append(L)
        self.norm = nn.LayerNorm(D, eps=LN_EPS)

    def forward(self, x, causal, lengths):
        for L in self.layers:
            x = x + L.attn_ln(L.attn(L.norm1(x), causal, lengths))
            x = x + L.linear2(L.ffn_ln(F.gelu(L.linear1(L.norm2(x)))))
        return self.norm(x)


class HyperConnections(nn.Module):
    """Static hyper-connections, expansion rate n = 2 (Zhu et al. 2024, eqs.
    1-5): streams H = [h_1; h_2] (both x at the start); for each sublayer
    T_k (attention, then FFN, each Pre-LN) with scalars A_m in R^n, A_r in
    R^{n x n}, B in R^n:
        h_in = sum_i A_m[i] h_i
        h_j' = B[j] T_k(h_in) + sum_i A_r[i, j] h_i
    and y = LN(h_1 + h_2).  Initialised (the paper's Pre-Norm-equivalent
    choice) A_m = e_{k mod n}, A_r = I, B = 1; drawn away from it here."""

    def __init__(self, D, H, F_, N):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(N):
            L = EncLayer(D, H, F_)
            for k, hc in enumerate(("attn_hc", "ffn_hc")):
                m = nn.Module()
                for i in range(2):
                    setattr(m, "am_%d" % i, special(scalar(), 1.0 if i == k % 2 else 0.0, 0.3))
                    setattr(m, "b_%d" % i, special(scalar(), 1.0, 0.3))
                    for j in range(2):
                        setattr(m, "ar_%d_%d" % (i, j), special(scalar(), 1.0 if i == j else 0.0, 0.3))
                setattr(L, hc, m)
            self.layers.append(L)
        self.norm = nn.LayerNorm(D, eps=LN_EPS)

    @staticmethod
    def hc(m, hs, f):
        h_in = m.am_0 * hs[0] + m.am_1 * hs[1]
        y = f(h_in)
        return [m.b_0 * y + m.ar_0_0 * hs[0] + m.ar_1_0 * hs[1],
                m.b_1 * y + m.ar_0_1 * hs[0] + m.ar_1_1 * hs[1]]

    def forward(self, x, causal, lengths):
        hs = [x, x]
        for L in self.layers:
            hs = self.hc(L.attn_hc, hs, lambda h: L.attn(L.norm1(h), causal, lengths))
            hs = self.hc(L.ffn_hc, hs, lambda h: L.ff(L.norm2(h)))
        return self.norm(hs[0] + hs[1])


class ReZero(nn.Module):
    """ReZero (Bachlechner et al. 2020, eq. 2): x = x + alpha * F(x) for each
    sublayer, one scalar alpha per layer (initialised 0; `resweight`, the
    name of the authors' code), no norms."""

    def __init__(self, D, H, F_, N):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(N):
            L = EncLayer(D, H, F_)
            del L.norm1, L.norm2
            L.resweight = special(scalar(0.0), 0.5, 0.3)   # alpha; the reference code's name
            self.layers.append(L)

    def forward(self, x, causal, lengths):
        for L in self.layers:
            x = x + L.resweight * L.attn(x, causal, lengths)
            x = x + L.resweight * L.ff(x)
        return x


class LayerScale(nn.Module):
    """LayerScale (Touvron et al. 2021, "Going deeper with Image
    Transformers", eq. 4): Pre-LN with a learned per-channel diagonal:
    x = x + diag(gamma_1) Attn(LN1(x)); x = x + diag(gamma_2) FFN(LN2(x)); y = LN(x)."""

    def __init__(self, D, H, F_, N):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(N):
            L = EncLayer(D, H, F_)
            L.gamma_1 = special(nn.Parameter(torch.full((D,), 1e-4)), 0.5, 0.3)
            L.gamma_2 = special(nn.Parameter(torch.full((D,), 1e-4)), 0.5, 0.3)
            self.layers.append(L)
        self.norm = nn.LayerNorm(D, eps=LN_EPS)

    def forward(self, x, causal, lengths):
        for L in self.layers:
            x = x + L.gamma_1 * L.attn(L.norm1(x), causal, lengths)
            x = x + L.gamma_2 * L.ff(L.norm2(x))
        return self.norm(x)


class Admin(nn.Module):
    """Admin (Liu et al. 2020, "Understanding the Difficulty of Training
    Transformers", eq. 6): Post-LN with the residual scaled per dimension,
    x = LN1(x * omega1 + Attn(x)); x = LN2(x * omega2 + FFN(x))."""

    def __init__(self, D, H, F_, N):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(N):
            L = EncLayer(D, H, F_)
            L.omega1 = special(nn.Parameter(torch.ones(D)), 1.0, 0.3)
            L.omega2 = special(nn.Parameter(torch.ones(D)), 1.0, 0.3)
            self.layers.append(L)

    def forward(self, x, causal, lengths):
        for L in self.layers:
            x = L.norm1(x * L.omega1 + L.attn(x, causal, lengths))
            x = L.norm2(x * L.omega2 + L.ff(x))
        return x


MODELS = {
    "sandwich": Sandwich, "parallel": Parallel, "gated": Gated, "normformer": NormFormer,
    "hyper_connections": HyperConnections, "rezero": ReZero, "layerscale": LayerScale,
    "admin": Admin,
}
# Optional name changes, graph name -> module name, when a graph's owner chose
# other names than the ones above (kept empty when they agree).
RENAME = {}


def init_params(model, seed):
    """Every parameter from `seed`: LayerNorm gains 1 + 0.1 n, matrices
    n / sqrt(fan_in), parameters marked by special() mean + std n, other
    vectors (biases) 0.1 n; n ~ N(0, 1) drawn in float64."""
    g = torch.Generator().manual_seed(seed)
    mods = dict(model.named_modules())
    with torch.no_grad():
        for name, p in model.named_parameters():
            owner = mods[name.rsplit(".", 1)[0]] if "." in name else model
            n = torch.randn(p.shape, generator=g, dtype=torch.float64)
            if hasattr(p, "_draw"):
                v = p._draw[0] + p._draw[1] * n
            elif isinstance(owner, nn.LayerNorm):
                v = 1.0 + 0.1 * n if name.endswith(".weight") else 0.1 * n
            elif p.dim() >= 2:
                v = n / math.sqrt(p.shape[1])
            else:
                v = 0.1 * n
            p.copy_(v.to(p.dtype))
    return model


# ---------------------------------------------------------------------------
# One case
# ---------------------------------------------------------------------------
def lengths_for(B, T, seed):
    return te.make_lengths(B, T, seed, 7) if B > 1 else None


def torch_case(model, x, lens, dy, dtype):
    """y and the gradients of sum(y * dy) (every parameter and x) in dtype."""
    import copy
    m = copy.deepcopy(model).to(dtype)
    xt = torch.from_numpy(x).to(dtype).requires_grad_(True)
    lt = None if lens is None else torch.as_tensor(lens)
    y = m(xt, m._causal, lt)
    (y * torch.from_numpy(dy).to(dtype)).sum().backward()
    g = {n: p.grad.detach().numpy().astype(np.float64) for n, p in m.named_parameters()}
    g["d:x"] = xt.grad.detach().numpy().astype(np.float64)
    return y.detach().numpy().astype(np.float64), g


def prepare_graph(src, causal, path):
    if causal:
        n = src.count("causal=false")
        if n == 0:
            raise RuntimeError("graph has no `causal=false` to switch")
        src = src.replace("causal=false", "causal=true")
    with open(path, "w") as f:
        f.write(src)


def run(cmd, timeout=600):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    return p.returncode, p.stderr.decode("utf-8", "replace").strip()


def check_case(blockc, gpath, graph, case, seed, backends, d):
    """Returns a list of result dicts (one per backend, each with fwd and
    grad errors)."""
    cname, B, T, D, H, F_, N, causal, padded = case
    torch.manual_seed(seed)
    model = init_params(MODELS[graph](D, H, F_, N), seed).float()
    model._causal = causal
    x = te.make_input(B, T, D, seed)
    lens = lengths_for(B, T, seed) if padded else None
    rng = np.random.default_rng(seed + 4242)
    dy = rng.standard_normal((B, T, D)).astype(np.float32)
    valid = np.ones((B, T), dtype=bool)
    if lens is not None:
        valid = np.arange(T)[None, :] < np.asarray(lens)[:, None]
        dy[~valid] = 0
    y64, g64 = torch_case(model, x.astype(np.float64), lens, dy, torch.float64)
    y32, g32 = torch_case(model, x, lens, dy, torch.float32)
    os.makedirs(d, exist_ok=True)
    sd = {RENAME.get((graph, k), k): v for k, v in model.state_dict().items()}
    te.write_safetensors(os.path.join(d, "w.safetensors"), sd)
    np.save(os.path.join(d, "x.npy"), x)
    np.save(os.path.join(d, "dy.npy"), dy)
    ins = ["--input", "x=" + os.path.join(d, "x.npy")]
    if lens is not None:
        np.save(os.path.join(d, "len.npy"), np.asarray(lens, dtype=np.int32))
        ins += ["--input", "len=" + os.path.join(d, "len.npy")]
    with open(gpath) as f:
        prepare_graph(f.read(), causal, os.path.join(d, "g.blk"))
    dims = []
    for k, v in (("B", B), ("T", T), ("D", D), ("H", H), ("F", F_), ("N", N)):
        dims += ["-D", "%s=%d" % (k, v)]
    scale_y = float(np.max(np.abs(y64[valid])))
    torch32 = float(np.max(np.abs(y32[valid] - y64[valid])))
    out = []
    for b in backends:
        r = dict(graph=graph, case=cname, backend=b, ok=False)
        yf = os.path.join(d, "y_%s.npy" % b)
        cmd = [blockc, "run", os.path.join(d, "g.blk"), "--backend", b, "--weights",
               os.path.join(d, "w.safetensors"), "--output", yf] + ins + dims
        r["cmd"] = " ".join(cmd)
        rc, err = run(cmd)
        if rc != 0:
            r["why"] = "run: exit %s: %s" % (rc, err.splitlines()[-1] if err else "")
            out.append(r)
            continue
        y = np.load(yf).astype(np.float64)
        if y.shape != y64.shape:
            r["why"] = "output shape %s, expected %s" % (y.shape, y64.shape)
            out.append(r)
            continue
        e = float(np.max(np.abs(y[valid] - y64[valid])))
        bound = (1e-6 * max(1.0, scale_y) if b == "interp"
                 else max(1e-5 * max(1.0, scale_y), 4 * torch32))
        r["fwd"] = e / max(1.0, scale_y)
        r["fwd_t32"] = torch32 / max(1.0, scale_y)
        fwd_ok = bool(np.all(np.isfinite(y[valid]))) and e <= bound
        gf = os.path.join(d, "g_%s.safetensors" % b)
        dxf = os.path.join(d, "dx_%s.npy" % b)
        cmd = [blockc, "grad", os.path.join(d, "g.blk"), "--backend", b, "--weights",
               os.path.join(d, "w.safetensors"), "--dy", os.path.join(d, "dy.npy"), "-o", gf,
               "--dx", "x=" + dxf] + ins + dims
        r["gcmd"] = " ".join(cmd)
        rc, err = run(cmd)
        if rc != 0:
            r["why"] = "grad: exit %s: %s" % (rc, err.splitlines()[-1] if err else "")
            out.append(r)
            continue
        got, _ = te.read_safetensors_independent(gf)
        got = {RENAME.get((graph, k), k): v.astype(np.float64) for k, v in got.items()}
        inv = {v: k for (gr, k), v in RENAME.items() if gr == graph}
        got = {inv.get(k, k): v for k, v in got.items()}
        got["d:x"] = np.load(dxf).astype(np.float64)
        if set(got) != set(g64):
            r["why"] = "parameter names differ: graph only %s, module only %s" % (
                sorted(set(got) - set(g64))[:6], sorted(set(g64) - set(got))[:6])
            out.append(r)
            continue
        worst, w32, wname, grad_bad = 0.0, 0.0, "", None
        gmax = max(float(np.max(np.abs(v))) for v in g64.values())
        for name, ref in g64.items():
            # A gradient that vanishes in exact arithmetic (a scale on the
            # input of a LayerNorm, which the norm divides out: the first
            # hyper-connection's A_m, whose two streams are both x) is pure
            # rounding; it is measured against 1e-3 of the model's largest
            # gradient instead of its own (tests/test_grad_emit.c does the same).
            sc = max(float(np.max(np.abs(ref))), 1e-3 * gmax) or 1.0
            eg = float(np.max(np.abs(got[name] - ref))) / sc
            e32 = float(np.max(np.abs(g32[name] - ref))) / sc
            w32 = max(w32, e32)
            # jit/aot: as the forward, within 4x PyTorch's own float32 error
            # when that is larger than the tolerance (badly conditioned tensors).
            lim = 1e-6 if b == "interp" else max(2e-4, 4 * e32)
            if not eg <= worst:
                worst, wname = eg, name
            if not eg <= lim:
                grad_bad = (eg, lim, name)
        r.update(grad=worst, grad_t32=w32, grad_worst=wname)
        grad_ok = grad_bad is None
        r["ok"] = fwd_ok and grad_ok
        if not fwd_ok:
            r["why"] = "forward err %.2e > bound %.2e" % (e, bound)
        elif not grad_ok:
            r["why"] = "gradient rel err %.2e > %.1e in %s" % grad_bad
        out.append(r)
    return out


def admin_omega_check(blockc, gpath, d, seed):
    """`blockc analyze admin.blk --admin-omega -o W`: the omegas it writes
    against Admin's profiling (Liu et al. 2020, sec. 4.2) done here on the
    PyTorch module with the same weights and batch: omega_i = sqrt(Var[x_0]
    + sum_{j<i} Var[f_j]) over the residuals in order (attention, FFN of each
    layer), Var the population variance over the valid rows; every other
    tensor of W must be the input weights bit for bit.  Returns (ok, worst
    relative error, message)."""
    B, T, D, H, F_, N = 3, 6, 8, 2, 14, 3
    torch.manual_seed(seed)
    model = init_params(Admin(D, H, F_, N), seed).float()
    x = te.make_input(B, T, D, seed)
    lens = lengths_for(B, T, seed)
    os.makedirs(d, exist_ok=True)
    te.write_safetensors(os.path.join(d, "w.safetensors"), model.state_dict())
    np.save(os.path.join(d, "x.npy"), x)
    np.save(os.path.join(d, "len.npy"), np.asarray(lens, dtype=np.int32))
    out = os.path.join(d, "omega.safetensors")
    cmd = [blockc, "analyze", gpath, "--admin-omega", "-o", out, "--weights",
           os.path.join(d, "w.safetensors"), "--input", "x=" + os.path.join(d, "x.npy"),
           "--input", "len=" + os.path.join(d, "len.npy")]
    for k, v in (("B", B), ("T", T), ("D", D), ("H", H), ("F", F_), ("N", N)):
        cmd += ["-D", "%s=%d" % (k, v)]
    rc, err = run(cmd)
    if rc != 0:
        return False, None, "analyze --admin-omega: exit %s: %s" % (rc, err)
    got, _ = te.read_safetensors_independent(out)
    valid = torch.from_numpy(np.arange(T)[None, :] < np.asarray(lens)[:, None])
    m = model.double()
    xt = torch.from_numpy(x).double()
    lt = torch.as_tensor(lens)

    def var(z):
        return float(z[valid].var(unbiased=False))

    acc, want = var(xt), {}
    with torch.no_grad():
        h = xt
        for i, L in enumerate(m.layers):
            want["layers.%d.omega1" % i] = math.sqrt(acc)
            a = L.attn(h, False, lt)
            acc += var(a)
            h = L.norm1(h * L.omega1 + a)
            want["layers.%d.omega2" % i] = math.sqrt(acc)
            f = L.ff(h)
            acc += var(f)
            h = L.norm2(h * L.omega2 + f)
    worst = 0.0
    sd = {k: v.detach().numpy() for k, v in model.float().state_dict().items()}
    if set(got) != set(sd):
        return False, None, "the file's tensors are not the graph's parameters"
    for k, v in got.items():
        if k in want:
            if not np.all(v == v.flat[0]):
                return False, None, "%s is not one value in every element" % k
            worst = max(worst, abs(float(v.flat[0]) - want[k]) / want[k])
        elif not np.array_equal(v, sd[k]):
            return False, None, "%s changed: only the omegas may" % k
    # float32 storage of omega (6e-8) and the float32 weights/input the
    # interpreter reads in double: 1e-6 relative.
    return worst <= 1e-6, worst, "omega vs PyTorch profiling: worst rel err %.2e (tol 1e-6)" % worst


# ---------------------------------------------------------------------------
# Self-check: the reference modules against independent formulations
# ---------------------------------------------------------------------------
def self_check():
    fails = 0

    def check(ok, what):
        nonlocal fails
        print("%s  %s" % ("ok  " if ok else "FAIL", what))
        fails += not ok

    torch.set_num_threads(1)
    torch.manual_seed(0)
    D, H, T, B = 12, 3, 7, 2
    x = torch.randn(B, T, D, dtype=torch.float64)
    # 1. MHA = nn.MultiheadAttention (same weights), causal and padded.
    m = MHA(D, H).double()
    init_params(m, 1)
    ref = nn.MultiheadAttention(D, H, batch_first=True).double()
    with torch.no_grad():
        ref.in_proj_weight.copy_(m.in_proj_weight)
        ref.in_proj_bias.copy_(m.in_proj_bias)
        ref.out_proj.weight.copy_(m.out_proj.weight)
        ref.out_proj.bias.copy_(m.out_proj.bias)
    lens = torch.tensor([7, 4])
    cm = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), 1)
    pad = torch.arange(T)[None, :] >= lens[:, None]
    a = m(x, True, lens)
    b = ref(x, x, x, attn_mask=cm, key_padding_mask=pad, need_weights=False)[0]
    check(torch.allclose(a, b, atol=1e-12), "MHA == nn.MultiheadAttention (causal, padded)")
    # 2. head_scale of ones changes nothing; scaling head h scales its slice.
    mh = MHA(D, H, head_scale=True).double()
    mh.load_state_dict({**m.state_dict(), "head_scale": torch.ones(H, dtype=torch.float64)})
    check(torch.allclose(mh(x, False, None), m(x, False, None), atol=1e-13), "head_scale = 1 is MHA")
    # 3. At the papers' initialisations the wirings reduce to known ones.
    D, F_, N = 8, 16, 2
    x = torch.randn(1, 5, D, dtype=torch.float64)

    def pre_ln(layers, x, norm):
        for L in layers:
            x = x + L.attn(L.norm1(x), False, None)
            x = x + L.ff(L.norm2(x))
        return norm(x) if norm is not None else x

    hc = init_params(HyperConnections(D, 2, F_, N), 3).double()
    with torch.no_grad():
        for L in hc.layers:
            for k, m_ in enumerate((L.attn_hc, L.ffn_hc)):
                for i in range(2):
                    getattr(m_, "am_%d" % i).fill_(1.0 if i == k % 2 else 0.0)
                    getattr(m_, "b_%d" % i).fill_(1.0)
                    for j in range(2):
                        getattr(m_, "ar_%d_%d" % (i, j)).fill_(1.0 if i == j else 0.0)
    # The paper's Pre-Norm-equivalent init: sublayer k reads stream k mod 2
    # and its output is added to both (B = 1, A_r = I), so h_1 = h_2 = the
    # Pre-LN stream s throughout and y = LN(h_1 + h_2) = LN(2 s).
    y_pre = hc.norm(2 * pre_ln(hc.layers, x, None))
    check(torch.allclose(hc(x, False, None), y_pre, atol=1e-12),
          "hyper-connections at the paper's init == Pre-LN (h1 = h2 = the Pre-LN stream)")
    rz = init_params(ReZero(D, 2, F_, N), 4).double()
    with torch.no_grad():
        for L in rz.layers:
            L.resweight.fill_(0.0)
    check(torch.equal(rz(x, False, None), x), "ReZero at alpha = 0 is the identity")
    ls = init_params(LayerScale(D, 2, F_, N), 5).double()
    with torch.no_grad():
        for L in ls.layers:
            L.gamma_1.fill_(1.0)
            L.gamma_2.fill_(1.0)
    check(torch.allclose(ls(x, False, None), pre_ln(ls.layers, x, ls.norm), atol=1e-12),
          "LayerScale at gamma = 1 is Pre-LN")
    ad = init_params(Admin(D, 2, F_, N), 6).double()
    with torch.no_grad():
        for L in ad.layers:
            L.omega1.fill_(1.0)
            L.omega2.fill_(1.0)
    y = x
    for L in ad.layers:
        y = L.norm1(y + L.attn(y, False, None))
        y = L.norm2(y + L.ff(y))
    check(torch.allclose(ad(x, False, None), y, atol=1e-12), "Admin at omega = 1 is Post-LN")
    gt = init_params(Gated(D, 2, F_, N), 7).double()
    with torch.no_grad():
        for L in gt.layers:
            for gl in (L.attn_gate, L.ffn_gate):
                gl.weight.zero_()
                gl.bias.fill_(-60.0)   # sigmoid = 0 to double precision: carry x
    check(torch.allclose(gt(x, False, None), gt.norm(x), atol=1e-12),
          "gated with closed gates (g = 0) carries x: y = LN(x)")
    sw = init_params(Sandwich(D, 2, F_, N), 8).double()
    y = x
    for L in sw.layers:
        a_ = L.attn(L.norm1(y), False, None)
        y = y + nn.functional.layer_norm(a_, (D,), L.norm3.weight, L.norm3.bias, LN_EPS)
        f_ = L.ff(L.norm2(y))
        mu, var = f_.mean(-1, keepdim=True), f_.var(-1, unbiased=False, keepdim=True)
        y = y + (f_ - mu) / torch.sqrt(var + LN_EPS) * L.norm4.weight + L.norm4.bias
    check(torch.allclose(sw(x, False, None), sw.norm(y), atol=1e-12),
          "Sandwich-LN == the equations with LayerNorm written out")
    pl = init_params(Parallel(D, 2, F_, N), 9).double()
    y = x
    for L in pl.layers:
        y = y + L.attn(L.norm1(y), False, None) + L.ff(L.norm1(y))
    check(torch.allclose(pl(x, False, None), pl.norm(y), atol=1e-12), "parallel block")
    nf = init_params(NormFormer(D, 2, F_, N), 10).double()
    with torch.no_grad():
        for L in nf.layers:
            L.self_attn.head_scale.fill_(1.0)
    y = x
    for L in nf.layers:   # out_proj is affine: scaling every head by 2 doubles out_proj(o) - b
        b_ = L.self_attn.out_proj.bias
        y = y + L.attn_ln(b_ + 2.0 * (L.self_attn(L.norm1(y), False, None) - b_))
        y = y + L.linear2(L.ffn_ln(F.gelu(L.linear1(L.norm2(y)))))
    with torch.no_grad():
        for L in nf.layers:
            L.self_attn.head_scale.fill_(2.0)
    check(torch.allclose(nf(x, False, None), nf.norm(y), atol=1e-10),
          "NormFormer: head scales of 2 == 2 x the projected heads, LN after gelu")
    # 4. Every module's names are unique and in state_dict order.
    for g, cls in MODELS.items():
        mm = cls(12, 3, 20, 2)
        names = [n for n, _ in mm.named_parameters()]
        check(len(names) == len(set(names)) and names == list(mm.state_dict()),
              "%-17s %d parameter tensors, names unique" % (g, len(names)))
    # 5. The tolerance can fail: a planted wiring bug (parallel's FFN reading
    #    x instead of LN1(x)) moves y far beyond the jit bound.
    pb = init_params(Parallel(12, 3, 20, 2), 11).double()
    xx = torch.randn(1, 7, 12, dtype=torch.float64)
    good = pb(xx, False, None)
    y = xx
    for L in pb.layers:
        y = y + L.attn(L.norm1(y), False, None) + L.ff(y)
    bad = pb.norm(y)
    check(float((good - bad).abs().max()) > 1e-3 * max(1.0, float(good.abs().max())),
          "a planted wiring bug exceeds the tolerance by > 100x")
    print("self-check: %s" % ("all ok" if not fails else "%d FAILED" % fails))
    return fails


# ---------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(description="research wirings vs PyTorch (see the docstring)")
    ap.add_argument("--blockc", default=os.path.join(ROOT, "build", "blockc"))
    ap.add_argument("--graphs", default=os.path.join(ROOT, "graphs"))
    ap.add_argument("--backends", default="interp,jit,aot")
    ap.add_argument("--only", help="comma list of graphs (default: all of %s)" % ",".join(MODELS))
    ap.add_argument("--filter", help="regex on graph/case")
    ap.add_argument("--allow-missing", action="store_true",
                    help="a graph file that does not exist is NOT RUN instead of a failure")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--self-check", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    if a.self_check:
        return 1 if self_check() else 0
    graphs = [g for g in (a.only.split(",") if a.only else MODELS) if g]
    for g in graphs:
        if g not in MODELS:
            ap.error("unknown graph %r" % g)
    backends = [b for b in a.backends.split(",") if b]
    blockc = os.path.abspath(a.blockc)
    tmp = tempfile.mkdtemp(prefix="blockc_wirings.", dir=os.path.join(ROOT, "build")
                           if os.path.isdir(os.path.join(ROOT, "build")) else None)
    os.environ.setdefault("BLOCKC_CACHE_DIR", os.path.join(tmp, "aot-cache"))
    fails, missing, n = 0, [], 0
    worst = {}
    t0 = time.time()
    print("%-18s %-7s %-7s %10s %10s %10s %10s  %s" % ("graph", "case", "backend", "fwd err",
                                                       "torch32", "grad err", "torch32", "result"))
    try:
        for gi, g in enumerate(graphs):
            gpath = os.path.join(a.graphs, g + ".blk")
            if not os.path.exists(gpath):
                missing.append(g)
                continue
            for ci, case in enumerate(CASES):
                if a.filter and not re.search(a.filter, "%s/%s" % (g, case[0])):
                    continue
                n += 1
                d = os.path.join(tmp, "%s_%s" % (g, case[0]))
                seed = a.seed + 10 * list(MODELS).index(g) + ci
                for r in check_case(blockc, gpath, g, case, seed, backends, d):
                    if "grad" in r:
                        print("%-18s %-7s %-7s %10.2e %10.2e %10.2e %10.2e  %s" % (
                            g, case[0], r["backend"], r["fwd"], r["fwd_t32"], r["grad"],
                            r["grad_t32"], "PASS" if r["ok"] else "FAIL: " + r["why"]))
                        w = worst.setdefault((g, r["backend"]), [0.0, 0.0])
                        w[0], w[1] = max(w[0], r["fwd"]), max(w[1], r["grad"])
                    else:
                        print("%-18s %-7s %-7s %10s %10s %10s %10s  FAIL: %s" % (
                            g, case[0], r["backend"], "-", "-", "-", "-", r["why"]))
                    if not r["ok"]:
                        fails += 1
                        if a.verbose:
                            print("    $ " + r["cmd"])
                            if "gcmd" in r:
                                print("    $ " + r["gcmd"])
        if "admin" in graphs and "admin" not in missing and (not a.filter or re.search(a.filter, "admin/omega")):
            ok, e, msg = admin_omega_check(blockc, os.path.join(a.graphs, "admin.blk"),
                                           os.path.join(tmp, "admin_omega"), a.seed + 99)
            print("%-18s %-7s %-7s %s  %s" % ("admin", "omega", "interp", msg, "PASS" if ok else "FAIL"))
            fails += not ok
        print()
        for (g, b), (ef, eg) in sorted(worst.items()):
            print("%-18s %-7s worst forward err %.2e  worst gradient err %.2e" % (g, b, ef, eg))
        for g in missing:
            print("%-18s NOT RUN: %s.blk does not exist" % (g, g))
        bad = fails + (0 if a.allow_missing else len(missing))
        print("%d cases x %d backends in %.1fs: %s" % (n, len(backends), time.time() - t0,
                                                       "all PASS" if not bad else "%d FAILED" % bad))
    finally:
        if a.keep or fails:
            print("files kept in %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if (fails or (missing and not a.allow_missing)) else 0


if __name__ == "__main__":
    sys.exit(main())
