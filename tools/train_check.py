#!/usr/bin/python3
"""train_check.py - `blockc train` against PyTorch: 30 optimizer steps from
the same initial weights on the same batches (issue 22's training
conformance).

For each case the script writes initial weights with torch (safetensors,
PyTorch names), a token file (llm.c's .bin or a 1-D .npy, as `blockc train
--data` reads them), and then

  1. trains the reference in PyTorch (float32, one thread): the batches built
     here as docs/training.md states llm.c's DataLoader windows (row r of
     micro-batch k starts at s = ((k*B + r)*T) mod (n - T - 1); inputs
     tok[s:s+T], targets tok[s+1:s+T+1]), F.cross_entropy (mean over the
     B*T positions), `--accum K` micro-batches per step with (loss / K)
     backward, torch.nn.utils.clip_grad_norm_, torch.optim.AdamW(foreach=
     False) with two groups (weight decay on the parameters of rank >= 2,
     none on the others: blockc's documented rule), the learning rate set
     on every group before each step from llm.c's warm-up + cosine schedule
     (computed in double here, as blockc's bcrt_lr_at does).  The same run in
     float64 ("torch64") measures how far float32 rounding alone moves the
     trajectory: the context for blockc's numbers, not a pass criterion.
  2. runs `blockc train GRAPH --weights INIT --data TOKENS --data-order
     sequential --steps 30 ... --log LOG --out W` on every backend asked for
     and compares:
       loss       every step's logged loss:  |l - l_ref| <= 1e-4 |l_ref|
       weights    every final tensor:  ||w - w_ref|| <= 1e-3 ||w_ref - w_init||
                  (L2 over the tensor).  The attention KEY biases are
                  excepted and named in the output: their exact gradient is
                  zero (softmax is invariant to a constant added to every
                  score of a row, and q.b_k is such a constant), so both
                  sides hold float noise there that Adam normalises into
                  full-size steps of random sign.  The rest of the tensor
                  (the query and value slices of a packed bias) is compared.
       lr         every step's logged lr equals the schedule computed here
                  (1e-12 relative; both are double).
       grad norm  the logged norm (before clipping) vs clip_grad_norm_'s
                  return value: 1e-3 relative (it is a function of the
                  weights, so it drifts with them: up to 6.7e-5 measured).
       step 1     the loss and norm of step 1 (both sides on the initial
                  weights: no drift yet): 1e-5 relative.
       clipping   --clip is the median norm of a reference run without
                  clipping (3 digits); the case must clip at least one step
                  and leave at least one unclipped, or it would not test
                  clipping.
       decay      the rule blockc prints (rate, N parameters of rank >= 2
                  decayed, M not) is the reference's two groups.
  3. the resume identity: the same 30-step run with `--stop-after 15`, then
     `--resume` to 30, must write byte-identical W.safetensors and
     W.optim.safetensors to the uninterrupted run (and the appended log the
     same loss / lr / norm numbers).

Cases (small dims, 30 steps, AdamW lr 2e-3 with warm-up 5 + cosine to
--min-lr 2e-4, wd 0.1, betas 0.9 / 0.999, eps 1e-8):
  gpt2_lm          graphs/gpt2_lm.blk  D64 H4 N2 V101 P64, B4 T32, K1, .bin
  gpt2_lm accum2   the same model, B2 T32, --accum 2, .bin
  llama_lm         graphs/llama_lm.blk D64 H4 KV2 N2 V101, B4 T32, K1, .npy int32
  encdec_lm        ENCDEC_GRAPH below (nn.Transformer Post-LN encoder +
                   decoder, Embedding + Positions, Linear head) D64 H4 F128
                   N2 V101 P64 act=gelu, B2 T24, --accum 2, .npy uint16.
                   `blockc train` feeds one token input `ids` (next-token CE), so
                   the encoder and the decoder read the SAME window: src =
                   tgt = ids, decoder causal, encoder not (as nn.Transformer
                   with only tgt_mask) - the encoder sees the targets, a
                   fixture for the arithmetic, not a seq2seq task.
                   gelu, not nn.Transformer's default relu: a relu
                   pre-activation within float rounding of 0 (seen: -2.2e-7
                   exact, -6.7e-8 in torch float32, >= 0 in blockc's float32)
                   switches that unit's derivative at that position, a
                   discrete 1e-2 change of its weight's gradient that Adam
                   carries on (with relu some seeds fail, blockc against
                   torch and torch float32 against float64 alike; with gelu
                   none of 30 did; gpt2_lm's gelu_tanh and llama_lm's SwiGLU
                   are smooth too).  docs/conformance.md has the numbers.

The references are tools/lm_check.py's GPT2LMHeadModel / LlamaForCausalLM
(Hugging Face names; blocks from tools/families.py) and EncDecLM here
(torch.nn.Transformer itself).  Initial weights: families.init_params
(matrices N(0, 1/fan_in), norms 1 + 0.1 N(0,1), biases 0.1 N(0,1)).

Usage (Debian's /usr/bin/python3: torch 1.13 + numpy):

    train_check.py --blockc build/blockc [--backends jit,aot] [--filter NAME]
                   [--seed S] [--encdec-act gelu|relu] [--keep] [-v]
    train_check.py --self-check       the reference alone (windows, schedule,
                                      AdamW / clipping mapping, files, zero
                                      gradients of the excepted slices)
    train_check.py --plant WHAT       perturb the reference to see the check
                                      fail: decay-all (weight decay on every
                                      parameter), window+1 (windows one token
                                      late), clip2 (twice the clip), eps
                                      (1e-6 instead of 1e-8)
"""

import argparse
import json
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
import lm_check  # noqa: E402  (exits with a message without torch/numpy)

fam, te = lm_check.fam, lm_check.te
np, torch, nn = lm_check.np, lm_check.torch, lm_check.nn
Fn = torch.nn.functional

LOSS_TOL = 1e-4      # relative, per step
WEIGHT_TOL = 1e-3    # ||w - w_ref|| / ||w_ref - w_init||, per tensor
LR_TOL = 1e-12       # relative: the schedule, double on both sides
NORM_TOL = 1e-3      # relative: the logged gradient norm, every step
STEP1_TOL = 1e-5     # relative: step 1's loss and norm (the same weights on both sides)
STEPS, STOP = 30, 15

# The encoder-decoder LM: graphs/transformer.blk (nn.Transformer, Post-LN,
# encoder and decoder final norms) with token embeddings in front and an LM
# head behind.  The source side is the original Transformer's (embedding
# scaled by sqrt(D), sinusoidal positions), the target side GPT-2's (learned
# positions), so both Positions kinds train.  One tokens input `ids` feeds
# both (see the docstring).
ENCDEC_GRAPH = """\
# encdec_lm (tools/train_check.py): torch.nn.Transformer(norm_first=False,
# batch_first=True) between token embeddings and an LM head:
#   src    = src_embed[ids] * sqrt(D) + sinusoid(pos)
#   mem    = nn.Transformer's encoder (Post-LN, not causal) + encoder.norm
#   x      = tgt_embed[ids] + tgt_pos[pos]
#   y      = nn.Transformer's decoder (Post-LN, causal self-attention,
#            cross-attention to mem) + decoder.norm
#   logits = y lm_head.weight^T + lm_head.bias
# The parameter names are EncDecLM's state_dict keys.
model encdec_lm
dim B = 1
dim T <= 64
dim D = 64
dim H = 4
dim F = 2 * D
dim N = 2
dim V = 101
dim P = 64

input ids : tokens[B, T]
s = Embedding(ids, vocab=V, dim=D, scale=sqrt(D), params=src_embed)
src = Positions(s, kind=sinusoidal)
for i in 0..N as transformer.encoder.layers.{i} {
    src = LayerNorm(Add(src, Attention(src, heads=H, causal=false, params=self_attn)), params=norm1)
    src = LayerNorm(Add(src, FFN(src, hidden=F, act=gelu, params=(linear1, linear2))), params=norm2)
}
mem = LayerNorm(src, params=transformer.encoder.norm)
t = Embedding(ids, vocab=V, dim=D, params=tgt_embed)
x = Positions(t, kind=learned, max=P, params=tgt_pos)
for i in 0..N as transformer.decoder.layers.{i} {
    x = LayerNorm(Add(x, Attention(x, heads=H, causal=true, params=self_attn)), params=norm1)
    x = LayerNorm(Add(x, Attention(x, kv=mem, heads=H, params=multihead_attn)), params=norm2)
    x = LayerNorm(Add(x, FFN(x, hidden=F, act=gelu, params=(linear1, linear2))), params=norm3)
}
y = LayerNorm(x, params=transformer.decoder.norm)
logits = Linear(y, out=V, params=lm_head)
output logits
"""


def sinusoid(T, D, dtype):
    """PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(...)
    (docs/language.md, Positions kind=sinusoidal), computed in double."""
    pos = torch.arange(T, dtype=torch.float64).view(T, 1)
    c = torch.arange(D, dtype=torch.float64)
    ang = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64), (c - c % 2) / D)
    pe = torch.where(c.view(1, D) % 2 == 0, torch.sin(ang), torch.cos(ang))
    return pe.to(dtype)


class EncDecLM(nn.Module):
    """ENCDEC_GRAPH in PyTorch: torch.nn.Transformer itself (dropout 0)."""

    def __init__(self, V, P, D, H, F_, N, act="gelu"):
        super().__init__()
        self.D = D
        self.src_embed = nn.Embedding(V, D)
        self.tgt_embed = nn.Embedding(V, D)
        self.tgt_pos = nn.Embedding(P, D)
        self.transformer = nn.Transformer(d_model=D, nhead=H, num_encoder_layers=N,
                                          num_decoder_layers=N, dim_feedforward=F_, dropout=0.0,
                                          activation=act, batch_first=True)
        self.lm_head = nn.Linear(D, V)

    def forward(self, ids):
        T = ids.shape[1]
        dt = self.lm_head.weight.dtype
        scale = torch.tensor(math.sqrt(self.D), dtype=torch.float32).to(dt)  # rounded to float32
        src = self.src_embed(ids) * scale + sinusoid(T, self.D, dt)
        tgt = self.tgt_embed(ids) + self.tgt_pos(torch.arange(T).view(1, T))
        causal = torch.triu(torch.ones((T, T), dtype=torch.bool), 1)  # True = masked
        return self.lm_head(self.transformer(src, tgt, tgt_mask=causal))


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------
HP = dict(lr=2e-3, min_lr=2e-4, warmup=5, clip=1.0, wd=0.1, beta1=0.9, beta2=0.999, eps=1e-8)


def case_hp(case):
    """HP with the case's clip (check_case sets it: see pick_clip)."""
    return dict(HP, clip=case.get("clip", HP["clip"]))


def cases():
    gpt2 = dict(name="gpt2_lm", graph="gpt2_lm", family="gpt2", D=64, H=4, N=2, V=101, P=64,
                B=4, T=32, K=1, fmt="bin", ntok=3001, seed=1)
    return [
        gpt2,
        dict(gpt2, name="gpt2_lm accum2", B=2, K=2, seed=2),
        dict(name="llama_lm", graph="llama_lm", family="llama", D=64, H=4, KV=2, N=2, V=101,
             B=4, T=32, K=1, fmt="npy32", ntok=2999, seed=3),
        dict(name="encdec_lm", graph=None, family="encdec", D=64, H=4, F=128, N=2, V=101, P=64,
             B=2, T=24, K=2, fmt="npy16", ntok=1999, seed=4),
    ]


def build(case):
    c = case
    if c["family"] == "gpt2":
        m = lm_check.GPT2LMHeadModel(c["V"], c["P"], c["D"], c["H"], 4 * c["D"], c["N"])
    elif c["family"] == "llama":
        F_ = (8 * c["D"] // 3 + 31) // 32 * 32       # llama_lm.blk's default F
        m = lm_check.LlamaForCausalLM(c["V"], c["D"], c["H"], F_, c["N"], c["KV"])
    else:
        m = EncDecLM(c["V"], c["P"], c["D"], c["H"], c["F"], c["N"], c.get("act", "gelu"))
    return fam.init_params(m, c["seed"]).float().train()


def dim_flags(case):
    ks = ["D", "H", "N", "V"] + {"gpt2": ["P"], "llama": ["KV"], "encdec": ["F", "P"]}[case["family"]]
    out = []
    for k in ks:
        out += ["-D", "%s=%d" % (k, case[k])]
    return out


def zero_grad_slices(case, params):
    """{name: [(lo, hi, why)]}: the slices whose exact gradient is zero (the
    attention key biases)."""
    D, out = case["D"], {}
    for name in params:
        if case["family"] == "gpt2" and name.endswith(".attn.c_attn.bias"):
            out[name] = [(D, 2 * D, "key bias (packed q|k|v)")]
        if case["family"] == "encdec" and name.endswith("attn.in_proj_bias"):
            out[name] = [(D, 2 * D, "key bias (in_proj q|k|v)")]
    return out


# ---------------------------------------------------------------------------
# Data, schedule, reference training
# ---------------------------------------------------------------------------
def window_start(k, r, B, T, n):
    """Row r of micro-batch k: llm.c's DataLoader walk (docs/training.md)."""
    return ((k * B + r) * T) % (n - T - 1)


def batch(tok, k, B, T, shift=0):
    """Micro-batch k: inputs [B, T] and targets [B, T] (int64)."""
    n = len(tok)
    x = np.empty((B, T), dtype=np.int64)
    y = np.empty((B, T), dtype=np.int64)
    for r in range(B):
        s = window_start(k, r, B, T, n) + shift
        x[r], y[r] = tok[s:s + T], tok[s + 1:s + T + 1]
    return torch.from_numpy(x), torch.from_numpy(y)


def lr_at(s, steps, warmup, lr, min_lr):
    """llm.c's llmc/schedulers.h cosine with linear warm-up (0-based step s)."""
    if s < warmup:
        return lr * (s + 1) / warmup
    r = 1.0 if steps <= warmup else min(1.0, (s - warmup) / (steps - warmup))
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * r)) * (lr - min_lr)


def make_tokens(n, V, seed):
    """A Markov chain over V ids (each id has 3 likely successors), so the
    model has something to learn in 30 steps."""
    rng = np.random.default_rng(seed)
    succ = rng.integers(0, V, size=(V, 3))
    tok = np.empty(n, dtype=np.int64)
    tok[0] = rng.integers(0, V)
    for i in range(1, n):
        tok[i] = succ[tok[i - 1], rng.integers(0, 3)] if rng.random() < 0.9 else rng.integers(0, V)
    return tok


def write_tokens(path, tok, fmt):
    """llm.c .bin (256 int32 header: 20240520, 1, count; uint16 tokens), or a
    1-D .npy of int32 / uint16."""
    if fmt == "bin":
        header = np.zeros(256, dtype="<i4")
        header[:3] = (20240520, 1, len(tok))
        with open(path, "wb") as f:
            f.write(header.tobytes())
            f.write(np.asarray(tok, dtype="<u2").tobytes())
    else:
        np.save(path, np.asarray(tok, dtype="<i4" if fmt == "npy32" else "<u2"))


def read_tokens(path):
    """An independent reader of both formats (for the self-check)."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:6] == b"\x93NUMPY":
        return np.load(path).astype(np.int64)
    h = np.frombuffer(raw[:1024], dtype="<i4")
    if h[0] != 20240520 or h[1] != 1 or len(raw) != 1024 + 2 * int(h[2]):
        raise ValueError("%s: not an llm.c v1 token file" % path)
    return np.frombuffer(raw[1024:], dtype="<u2").astype(np.int64)


def make_optimizer(model, hp, decay_all=False):
    """torch.optim.AdamW with blockc's decay rule: rank >= 2 parameters decay."""
    params = list(model.parameters())
    dec = [p for p in params if p.dim() >= 2 or decay_all]
    rest = [p for p in params if not (p.dim() >= 2 or decay_all)]
    groups = [{"params": dec, "weight_decay": hp["wd"]}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"],
                             weight_decay=hp["wd"], amsgrad=False, foreach=False, maximize=False)


def torch_train(case, init, tok, dtype, plant=None, steps=STEPS):
    """The reference run: {losses, lrs, norms, final {name: float64 array}}."""
    model = build(case)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(init[name])
    model = model.to(dtype)
    hp = case_hp(case)
    if plant == "clip2":
        hp["clip"] *= 2
    if plant == "eps":
        hp["eps"] = 1e-6
    opt = make_optimizer(model, hp, decay_all=plant == "decay-all")
    params = list(model.parameters())
    B, T, K, V = case["B"], case["T"], case["K"], case["V"]
    shift = 1 if plant == "window+1" else 0
    k, out = 0, dict(losses=[], lrs=[], norms=[])
    for s in range(steps):
        lr = lr_at(s, steps, hp["warmup"], hp["lr"], hp["min_lr"])
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for _ in range(K):
            x, y = batch(tok, k, B, T, shift)
            k += 1
            loss = Fn.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
            (loss / K).backward()
            total += float(loss)
        norm = torch.nn.utils.clip_grad_norm_(params, hp["clip"])
        opt.step()
        out["losses"].append(total / K)
        out["lrs"].append(lr)
        out["norms"].append(float(norm))
    out["final"] = {n: p.detach().to(torch.float64).numpy().copy() for n, p in model.named_parameters()}
    return out


def pick_clip(case, init, tok):
    """--clip for the case: the median gradient norm of the reference run
    without clipping (3 significant digits), so that about half the steps of
    the real run clip and the others do not - both paths are exercised."""
    norms = torch_train(dict(case, clip=float("inf")), init, tok, torch.float32)["norms"]
    return float("%.3g" % float(np.median(norms)))


# ---------------------------------------------------------------------------
# blockc
# ---------------------------------------------------------------------------
def spawn(cmd, timeout=600):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", "timeout after %ds" % timeout, time.time() - t0
    return (p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"),
            time.time() - t0)


def read_st(path):
    """{name: float64 array} of an F32 safetensors file (metadata dropped)."""
    return {k: v.numpy().astype(np.float64) for k, v in fam.read_safetensors_any(path).items()}


def train_cmd(a, case, graph, backend, d, tag, extra=(), weights=True):
    hp = case_hp(case)
    return ([a.blockc, "train", graph, "--backend", backend, "--data", os.path.join(d, case["data"]),
             "--data-order", "sequential", "--steps", str(STEPS), "--batch", str(case["B"]),
             "--seq", str(case["T"]), "--accum", str(case["K"]), "--optimizer", "adamw",
             "--lr", repr(hp["lr"]), "--schedule", "cosine", "--warmup", str(hp["warmup"]),
             "--min-lr", repr(hp["min_lr"]), "--clip", repr(hp["clip"]),
             "--weight-decay", repr(hp["wd"]), "--beta1", repr(hp["beta1"]),
             "--beta2", repr(hp["beta2"]), "--eps", repr(hp["eps"]),
             ] + (["--weights", os.path.join(d, "init.safetensors")] if weights else []) + [
             "--log", os.path.join(d, tag + ".jsonl"), "--out", os.path.join(d, tag + ".safetensors")]
            + dim_flags(case) + list(extra))


def run_train(a, R, what, cmd, want=None):
    rc, out, err, secs = spawn(cmd)
    if a.verbose:
        print("    $ " + " ".join(cmd))
    if rc != 0 or (want and want not in out):
        R.row(False, what, "blockc train exit %s%s: %s\n    %s" % (
            rc, "" if not want or want in out else " (no %r in its output)" % want,
            (err.strip() or out.strip()[-400:])[:800], " ".join(cmd)))
        return None
    return secs, out


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# ---------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------
def dist_ratio(w, ref, init):
    moved = float(np.linalg.norm(ref - init))
    return float(np.linalg.norm(w - ref)) / moved if moved > 0 else float("inf"), moved


def compare_weights(case, got, ref, init):
    """Per tensor (key-bias slices cut out): (worst ratio, its name, [excepted
    (name, lo, hi, why, ratio)], problems)."""
    problems, excepted = [], []
    worst, worst_name = 0.0, ""
    zs = zero_grad_slices(case, ref)
    if set(got) != set(ref):
        problems.append("tensor names differ: only blockc %s, only torch %s"
                        % (sorted(set(got) - set(ref)), sorted(set(ref) - set(got))))
    for name in ref:
        if name not in got:
            continue
        w, r, i = got[name].reshape(-1), ref[name].reshape(-1), init[name].reshape(-1)
        if got[name].shape != ref[name].shape:
            problems.append("%s: shape %s, torch's %s" % (name, got[name].shape, ref[name].shape))
            continue
        if not np.all(np.isfinite(w)):
            problems.append("%s is not finite" % name)
            continue
        keep = np.ones(len(r), dtype=bool)
        for lo, hi, why in zs.get(name, []):
            keep[lo:hi] = False
            ex, _ = dist_ratio(w[lo:hi], r[lo:hi], i[lo:hi])
            excepted.append((name, lo, hi, why, ex))
        ratio, moved = dist_ratio(w[keep], r[keep], i[keep])
        if moved == 0:
            problems.append("%s did not move in the reference" % name)
        if ratio > worst:
            worst, worst_name = ratio, name
    return worst, worst_name, excepted, problems


def num(v):
    """A logged number (null: not finite) as a float."""
    return float("inf") if v is None else float(v)


def rel(a, b):
    return abs(a - b) / abs(b) if b != 0 else abs(a - b)


class Report:
    def __init__(self):
        self.fails = 0
        self.rows = 0

    def row(self, ok, what, detail=""):
        self.fails += 0 if ok else 1
        self.rows += 1
        print("  %s  %-40s %s" % ("ok  " if ok else "FAIL", what, detail), flush=True)


def check_case(a, R, case, d, backends, summary):
    init_model = build(case)
    init = {n: p.detach().clone() for n, p in init_model.named_parameters()}
    te.write_safetensors(os.path.join(d, "init.safetensors"), init)
    init64 = {n: t.to(torch.float64).numpy() for n, t in init.items()}
    tok = make_tokens(case["ntok"], case["V"], case["seed"] + 1000)
    case["data"] = "tokens." + ("bin" if case["fmt"] == "bin" else "npy")
    write_tokens(os.path.join(d, case["data"]), tok, case["fmt"])
    if case["graph"]:
        graph = os.path.join(ROOT, "graphs", case["graph"] + ".blk")
    else:
        graph = os.path.join(d, "encdec_lm.blk")
        text = ENCDEC_GRAPH.replace("act=gelu", "act=" + case.get("act", "gelu"))
        if text.count("act=") != 2 or ("act=" + case.get("act", "gelu")) not in text:
            raise SystemExit("train_check: ENCDEC_GRAPH lost its two act=gelu the --encdec-act edit needs")
        with open(graph, "w") as f:
            f.write(text)
    t0 = time.time()
    case["clip"] = pick_clip(case, init, tok)
    ref = torch_train(case, init, tok, torch.float32, a.plant)
    ref64 = torch_train(case, init, tok, torch.float64, a.plant)
    tref = time.time() - t0
    clip = case_hp(case)["clip"]
    clipped = sum(1 for v in ref["norms"] if v > clip)
    l32 = max(rel(x, y) for x, y in zip(ref["losses"], ref64["losses"]))
    w32, w32n, _, _ = compare_weights(case, ref["final"], ref64["final"], init64)
    print("%s: %s B=%d T=%d accum %d clip %g, %d tokens (%s), %d params; torch: loss %.4f -> %.4f, "
          "%d/%d steps clipped (%.1fs)" % (
              case["name"], " ".join(dim_flags(case)[1::2]), case["B"], case["T"], case["K"], clip,
              len(tok), case["fmt"], sum(v.size for v in init64.values()), ref["losses"][0],
              ref["losses"][-1], clipped, STEPS, tref))
    print("  context: torch float32 vs float64: loss rel %.1e, weight ratio %.1e (%s)" % (l32, w32, w32n))
    R.row(0 < clipped < STEPS, "%s: the reference clips some steps" % case["name"],
          "%d of %d steps have norm > --clip %g" % (clipped, STEPS, clip))
    finals = {}
    for b in backends:
        what = "%s %s" % (case["name"], b)
        got_run = run_train(a, R, what + " train", train_cmd(a, case, graph, b, d, "full_" + b))
        if got_run is None:
            continue
        secs, out = got_run
        # The decay rule blockc prints = the reference's groups.
        m = re.search(r"weight decay (\S+) on the (\d+) parameters of rank >= 2.*not on the (\d+) ", out)
        ndec = sum(1 for v in init64.values() if v.ndim >= 2)
        want = ("%g" % HP["wd"], ndec, len(init64) - ndec)
        R.row(m is not None and (m.group(1), int(m.group(2)), int(m.group(3))) == want,
              what + " weight-decay rule", "blockc: %s; torch groups: %s on %d, none on %d" % (
                  "%s on %s, none on %s" % m.groups() if m else "no rule printed", *want))
        log = read_log(os.path.join(d, "full_%s.jsonl" % b))
        if len(log) != STEPS or [e.get("step") for e in log] != list(range(1, STEPS + 1)):
            R.row(False, what + " log", "%d entries, steps %s" % (len(log), [e.get("step") for e in log]))
            continue
        lw = max(range(STEPS), key=lambda i: rel(num(log[i]["loss"]), ref["losses"][i]))
        lworst = rel(num(log[lw]["loss"]), ref["losses"][lw])
        R.row(lworst <= LOSS_TOL, what + " loss per step",
              "worst rel %.2e at step %d (%.6f vs torch %.6f) %s %.0e" % (
                  lworst, lw + 1, num(log[lw]["loss"]), ref["losses"][lw],
                  "<=" if lworst <= LOSS_TOL else ">", LOSS_TOL))
        lrw = max(rel(e["lr"], x) for e, x in zip(log, ref["lrs"]))
        R.row(lrw <= LR_TOL, what + " lr per step", "worst rel %.1e (warm-up 5, cosine to %g)"
              % (lrw, HP["min_lr"]))
        nw = max(rel(num(e["grad_norm"]), x) for e, x in zip(log, ref["norms"]))
        R.row(nw <= NORM_TOL, what + " grad norm per step", "worst rel %.2e %s %.0e" % (
            nw, "<=" if nw <= NORM_TOL else ">", NORM_TOL))
        l1 = rel(num(log[0]["loss"]), ref["losses"][0])
        n1 = rel(num(log[0]["grad_norm"]), ref["norms"][0])
        R.row(max(l1, n1) <= STEP1_TOL, what + " step 1 (initial weights)", "loss rel %.1e, grad norm rel "
              "%.1e %s %.0e" % (l1, n1, "<=" if max(l1, n1) <= STEP1_TOL else ">", STEP1_TOL))
        got = read_st(os.path.join(d, "full_%s.safetensors" % b))
        worst, wname, excepted, problems = compare_weights(case, got, ref["final"], init64)
        ok = not problems and worst <= WEIGHT_TOL
        R.row(ok, what + " final weights", ("; ".join(problems) + "; " if problems else "")
              + "worst ||w - w_ref|| / ||w_ref - w_init|| %.2e (%s) %s %.0e, %d tensors, %.1fs" % (
                  worst, wname, "<=" if ok else ">", WEIGHT_TOL, len(got), secs))
        if excepted and b == backends[0]:
            names = sorted(set(e[0] for e in excepted))
            print("        excepted (exact gradient zero, not compared): the %s [%d:%d] of %d tensors%s; "
                  "their ratio up to %.2g (Adam's steps on float noise)" % (
                      excepted[0][3], excepted[0][1], excepted[0][2], len(names),
                      " (%s)" % ", ".join(names) if a.verbose else " (-v names them)",
                      max(e[4] for e in excepted)))
        finals[b] = open(os.path.join(d, "full_%s.safetensors" % b), "rb").read()
        summary.append(dict(case=case["name"], backend=b, loss=lworst, weight=worst, weight_name=wname,
                            norm=nw, t32_loss=l32, t32_weight=w32))
        # The resume identity.
        if run_train(a, R, what + " --stop-after %d" % STOP,
                     train_cmd(a, case, graph, b, d, "res_" + b, ["--stop-after", str(STOP)]),
                     "stopped after step %d" % STOP) is None:
            continue
        if run_train(a, R, what + " --resume",
                     train_cmd(a, case, graph, b, d, "res_" + b,
                               ["--resume", os.path.join(d, "res_%s.safetensors" % b)], weights=False),
                     "resumed") is None:
            continue
        same = []
        for suffix in (".safetensors", ".optim.safetensors"):
            with open(os.path.join(d, "full_" + b + suffix), "rb") as f:
                x = f.read()
            with open(os.path.join(d, "res_" + b + suffix), "rb") as f:
                y = f.read()
            same.append((suffix, x == y, len(x)))
        rlog = read_log(os.path.join(d, "res_%s.jsonl" % b))
        keys = ("step", "loss", "lr", "grad_norm")
        log_same = [tuple(e[k] for k in keys) for e in rlog] == [tuple(e[k] for k in keys) for e in log]
        ok = all(s for _, s, _ in same) and log_same
        R.row(ok, what + " resume identity", "stop after %d + resume: %s; log %s" % (
            STOP, ", ".join("W%s %s (%d B)" % (sfx, "identical" if s else "DIFFERS", n) for sfx, s, n in same),
            "the same 30 steps" if log_same else "DIFFERS (%d entries)" % len(rlog)))
    if len(finals) > 1:  # information, not a criterion (docs/training.md: equal when both runtimes fuse)
        print("  note  %s: the final weights of %s are %s" % (
            case["name"], " and ".join(finals),
            "bit-identical" if len(set(finals.values())) == 1 else "not bit-identical"))


# ---------------------------------------------------------------------------
# Self-check: the reference alone
# ---------------------------------------------------------------------------
def self_check():
    R = Report()
    # 1. Windows: a hand-worked example.  n = 20, T = 4, B = 2: m = 15;
    #    k=0: 0, 4; k=1: 8, 12; k=2: 16 mod 15 = 1, 20 mod 15 = 5.
    got = [window_start(k, r, 2, 4, 20) for k in range(3) for r in range(2)]
    R.row(got == [0, 4, 8, 12, 1, 5], "windows: hand-worked starts", str(got))
    tok = np.arange(100, 120)
    x, y = batch(tok, 2, 2, 4)
    R.row(x.tolist() == [[101, 102, 103, 104], [105, 106, 107, 108]]
          and y.tolist() == [[102, 103, 104, 105], [106, 107, 108, 109]],
          "windows: micro-batch 2's inputs and targets", "%s / %s" % (x.tolist(), y.tolist()))
    last = max(window_start(k, r, 3, 5, 50) + 5 + 1 for k in range(200) for r in range(3))
    R.row(last <= 49, "windows: every target inside the file", "largest index %d of 0..49" % last)
    # 2. The schedule: steps 10, warm-up 2, lr 1, min 0.1.
    want = {0: 0.5, 1: 1.0, 2: 1.0, 6: 0.55, 9: 0.1 + 0.45 * (1 + math.cos(math.pi * 7 / 8)), 10: 0.1}
    got = {s: lr_at(s, 10, 2, 1.0, 0.1) for s in want}
    R.row(all(abs(got[s] - want[s]) < 1e-15 for s in want), "schedule: warm-up + cosine by hand",
          " ".join("%d:%.4f" % (s, got[s]) for s in sorted(got)))
    # 3. AdamW: the config mapping equals docs/training.md's formulas (float64).
    torch.manual_seed(0)
    lin = nn.Linear(3, 2).double()
    hp = dict(HP, lr=0.1, wd=0.5)
    opt = make_optimizer(lin, hp)
    p0 = {n: p.detach().clone() for n, p in lin.named_parameters()}
    st = {n: (torch.zeros_like(p), torch.zeros_like(p)) for n, p in p0.items()}
    ok = True
    xin = torch.randn(4, 3, dtype=torch.float64)
    for t in range(1, 4):
        lr = lr_at(t - 1, 6, 2, hp["lr"], 0.01)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad()
        lin(xin * t).pow(2).sum().backward()
        grads = {n: p.grad.detach().clone() for n, p in lin.named_parameters()}
        opt.step()
        for n in p0:
            wd = hp["wd"] if p0[n].dim() >= 2 else 0.0
            m, v = st[n]
            g = grads[n]
            p = p0[n] * (1 - lr * wd)
            m = hp["beta1"] * m + (1 - hp["beta1"]) * g
            v = hp["beta2"] * v + (1 - hp["beta2"]) * g * g
            bc1, bc2 = 1 - hp["beta1"] ** t, 1 - hp["beta2"] ** t
            p = p - (lr / bc1) * m / (v.sqrt() / math.sqrt(bc2) + hp["eps"])
            p0[n], st[n] = p, (m, v)
            ok = ok and torch.allclose(p, dict(lin.named_parameters())[n].detach(), rtol=0, atol=1e-14)
    R.row(ok, "AdamW groups = the documented update", "3 steps, decay on weight [2,3] only, float64")
    R.row([len(g["params"]) for g in opt.param_groups] == [1, 1]
          and [g["weight_decay"] for g in opt.param_groups] == [0.5, 0.0]
          and all(g["foreach"] is False for g in opt.param_groups),
          "AdamW groups: rank >= 2 decays, foreach=False")
    # 4. Clipping: coef = clip / (norm + 1e-6), applied when < 1.
    w = nn.Parameter(torch.tensor([3.0, 4.0], dtype=torch.float64))
    w.grad = torch.tensor([3.0, 4.0], dtype=torch.float64)
    n = float(torch.nn.utils.clip_grad_norm_([w], 1.0))
    R.row(n == 5.0 and abs(float(w.grad[0]) - 3.0 / (5.0 + 1e-6)) < 1e-15,
          "clip_grad_norm_: returns the norm, scales by clip/(norm+1e-6)", "norm %g" % n)
    # 5. Token files read back (independent reader) with their headers.
    d = tempfile.mkdtemp(prefix="train_check_self.")
    try:
        tk = make_tokens(777, 101, 5)
        for fmt, name in (("bin", "t.bin"), ("npy32", "t32.npy"), ("npy16", "t16.npy")):
            path = os.path.join(d, name)
            write_tokens(path, tk, fmt)
            back = read_tokens(path)
            size = os.path.getsize(path)
            extra = " (size %d = 1024 + 2*777)" % size if fmt == "bin" else ""
            R.row(np.array_equal(back, tk) and (fmt != "bin" or size == 1024 + 2 * 777),
                  "token file %s round trip" % fmt, "%d tokens%s" % (len(back), extra))
        R.row(tk.min() >= 0 and tk.max() < 101 and len(set(tk.tolist())) > 50,
              "tokens: ids in 0..V-1, varied", "%d distinct" % len(set(tk.tolist())))
        # The written weights read back exactly.
        c = cases()[0]
        m = build(c)
        sd = {k: v.detach() for k, v in m.named_parameters()}
        te.write_safetensors(os.path.join(d, "w.safetensors"), sd)
        back = read_st(os.path.join(d, "w.safetensors"))
        R.row(set(back) == set(sd) and all(np.array_equal(back[k], sd[k].double().numpy()) for k in sd),
              "init weights round trip (%d tensors; tied head once)" % len(sd),
              "lm_head.weight %s" % ("absent (tied)" if "lm_head.weight" not in back else "PRESENT"))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    # 6. Each model: the excepted slices have a zero exact gradient (float64),
    #    nothing else is near zero; the encoder-decoder's names and pieces.
    for c in cases():
        if c["name"].endswith("accum2"):
            continue
        m = build(c).double()
        tok = make_tokens(400, c["V"], 9)
        x, y = batch(tok, 0, c["B"], c["T"])
        Fn.cross_entropy(m(x).reshape(-1, c["V"]), y.reshape(-1)).backward()
        zs = zero_grad_slices(c, dict(m.named_parameters()))
        worst_z, least = 0.0, float("inf")
        for n, p in m.named_parameters():
            g = p.grad.reshape(-1).abs()
            keep = torch.ones(len(g), dtype=torch.bool)
            for lo, hi, _ in zs.get(n, []):
                keep[lo:hi] = False
                worst_z = max(worst_z, float(g[lo:hi].max()) / float(g.max()))
            least = min(least, float(g[keep].max()))
        want = {"gpt2": 2, "llama": 0, "encdec": 3 * c["N"]}[c["family"]]
        R.row(len(zs) == want and worst_z < 1e-12 and least > 1e-8,
              "%s: %d key-bias slices with zero gradient" % (c["name"], len(zs)),
              "max |g| there %.1e of the tensor's; every other tensor's max |g| >= %.1e" % (worst_z, least))
    c = cases()[3]
    m = build(c)
    keys = list(m.state_dict())
    want = (["src_embed.weight", "tgt_embed.weight", "tgt_pos.weight"]
            + ["transformer.encoder.layers.%d.%s" % (i, k) for i in range(c["N"]) for k in (
                "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
                "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias")]
            + ["transformer.encoder.norm.weight", "transformer.encoder.norm.bias"]
            + ["transformer.decoder.layers.%d.%s" % (i, k) for i in range(c["N"]) for k in (
                "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                "self_attn.out_proj.bias", "multihead_attn.in_proj_weight",
                "multihead_attn.in_proj_bias", "multihead_attn.out_proj.weight",
                "multihead_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
                "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias",
                "norm3.weight", "norm3.bias")]
            + ["transformer.decoder.norm.weight", "transformer.decoder.norm.bias",
               "lm_head.weight", "lm_head.bias"])
    R.row(sorted(keys) == sorted(want), "encdec_lm: state_dict keys = the graph's names (%d)" % len(keys))
    # The encoder-decoder by hand: its encoder / decoder layers called one by
    # one on the documented inputs (sqrt(D) scale, sinusoid, learned
    # positions, causal decoder self-attention) give its logits.
    m = m.double().eval()
    ids = torch.as_tensor(make_tokens(9, c["V"], 3)).view(1, 9)
    with torch.no_grad():
        D, T = c["D"], 9
        pe = torch.zeros(T, D, dtype=torch.float64)
        for pos in range(T):
            for j in range(D):
                a = pos / 10000.0 ** ((j - j % 2) / D)
                pe[pos, j] = math.sin(a) if j % 2 == 0 else math.cos(a)
        src = m.src_embed(ids) * math.sqrt(D) + pe
        for layer in m.transformer.encoder.layers:
            src = layer(src)
        mem = m.transformer.encoder.norm(src)
        xx = m.tgt_embed(ids) + m.tgt_pos.weight[:T]
        mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
        for layer in m.transformer.decoder.layers:
            xx = layer(xx, mem, tgt_mask=mask)
        want_y = m.lm_head(m.transformer.decoder.norm(xx))
        got_y = m(ids)
        ids2 = ids.clone()
        ids2[0, 8] = (ids2[0, 8] + 1) % c["V"]
        y2 = m(ids2)
    R.row(torch.allclose(got_y, want_y, rtol=0, atol=1e-12), "encdec_lm = its layers by hand",
          "max diff %.1e" % float((got_y - want_y).abs().max()))
    R.row(float((y2[0, :8] - got_y[0, :8]).abs().max()) > 1e-6,
          "encdec_lm: the encoder sees the whole window (src = tgt)",
          "changing ids[8] moves logits at t < 8 by %.1e" % float((y2[0, :8] - got_y[0, :8]).abs().max()))
    # 7. The metric: a planted 1e-4 deviation reads 1e-4.
    wi = np.zeros(10)
    wr = np.linspace(1, 2, 10)
    r, _ = dist_ratio(wr + 1e-4 * wr, wr, wi)
    R.row(abs(r - 1e-4) < 1e-12, "distance ratio of a planted 1e-4 deviation", "%.3e" % r)
    print("train_check --self-check: %d checks, %d failure%s" % (R.rows, R.fails, "" if R.fails == 1 else "s"))
    return R.fails


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blockc", default=os.path.join(ROOT, "build", "blockc"))
    ap.add_argument("--backends", default="jit,aot")
    ap.add_argument("--self-check", action="store_true")
    ap.add_argument("--filter", default="", help="run the cases whose name contains this")
    ap.add_argument("--seed", type=int, default=0,
                    help="added to every case's seed (weights and tokens; default 0)")
    ap.add_argument("--plant", choices=["decay-all", "window+1", "clip2", "eps"],
                    help="perturb the PyTorch reference (the check must then fail)")
    ap.add_argument("--encdec-act", choices=["gelu", "relu"], default="gelu",
                    help="encdec_lm's FFN activation (relu: see the docstring)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the blockc command lines")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    if a.self_check:
        return 1 if self_check() else 0
    backends = [b for b in a.backends.split(",") if b]
    bad = [b for b in backends if b not in ("jit", "aot")]
    if bad or not backends:
        ap.error("--backends: jit and/or aot (got %s; the interpreter has no training step)" % a.backends)
    if not os.access(a.blockc, os.X_OK):
        ap.error("--blockc %s is not an executable (make builds build/blockc)" % a.blockc)
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="train_check.", dir=os.path.join(ROOT, "build")
                           if os.path.isdir(os.path.join(ROOT, "build")) else None)
    print("train_check: %s, backends %s, in %s%s" % (a.blockc, ",".join(backends), tmp,
                                                     "; PLANTED: " + a.plant if a.plant else ""))
    print("  %d steps, AdamW lr %g warm-up %d cosine to %g, betas %g/%g eps %g, wd %g (rank >= 2), "
          "clip per case; pass: loss rel <= %g per step, ||w - w_ref|| <= %g ||w_ref - w_init|| per tensor"
          % (STEPS, HP["lr"], HP["warmup"], HP["min_lr"], HP["beta1"], HP["beta2"], HP["eps"], HP["wd"],
             LOSS_TOL, WEIGHT_TOL))
    R, summary = Report(), []
    for i, case in enumerate(cases()):
        if a.filter not in case["name"]:
            continue
        case["seed"] += a.seed
        if case["family"] == "encdec":
            case["act"] = a.encdec_act
        d = os.path.join(tmp, "case%d" % i)
        os.makedirs(d)
        check_case(a, R, case, d, backends, summary)
    print("summary (worst over the 30 steps / the tensors):")
    for s in summary:
        print("  %-16s %-4s loss rel %.2e  weight ratio %.2e (%s)  grad norm rel %.1e   "
              "[torch32 vs 64: %.1e, %.1e]" % (s["case"], s["backend"], s["loss"], s["weight"],
                                                s["weight_name"], s["norm"], s["t32_loss"], s["t32_weight"]))
    print("train_check: %d checks, %d failure%s (%.0fs)" % (R.rows, R.fails, "" if R.fails == 1 else "s",
                                                          time.time() - t0))
    if a.keep or R.fails:
        print("train_check: files kept in %s" % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if R.fails else 0


if __name__ == "__main__":
    sys.exit(main())
