#!/usr/bin/python3
"""lm_check.py - conformance of the whole-model graphs graphs/gpt2_lm.blk and
graphs/llama_lm.blk (issue 21): token ids in, logits and generated ids out,
against PyTorch reference modules with Hugging Face's state_dict names.

The references are written here (the transformers package is not available
and is not a dependency), from Hugging Face's modeling_gpt2 / modeling_llama
read for their equations and names; the blocks are tools/families.py's
(GPT2Block: Conv1D [in, out] layouts, gelu_new; LlamaDecoderLayer: RMSNorm,
RoPE rotate_half, SwiGLU, grouped-query attention):

  GPT2LMHeadModel   transformer.wte (nn.Embedding [V, D]), transformer.wpe
                    ([P, D]), transformer.h.{i}.*, transformer.ln_f, lm_head
                    TIED to transformer.wte.weight (one tensor: state_dict()
                    lists it under both names, as Hugging Face's does).
  LlamaForCausalLM  model.embed_tokens, model.layers.{i}.*, model.norm,
                    lm_head (untied; tied=True is Llama 3.2's
                    tie_word_embeddings).

What is checked, on every backend asked for (interp, jit, aot):

  1. logits at odd dims (V not a multiple of 8, F odd, dh = 12 / 6), B > 1 with
     `len` lengths (right-padded rows: only the valid rows are compared),
     and a run-time T shorter than the compiled bound.  Tolerance, as
     tools/conformance.py's: with y64 the float64 reference,
        jit, aot:  max|y - y64| <= max(1e-5 * max(1, max|y64|), 4 * max|y32 - y64|)
        interp:    max|y - y64| <= 1e-6 * max(1, max|y64|)
     (blockc's float32 kernels round like PyTorch's float32 run, y32, up to
     summation order; the interpreter computes in double and rounds once).
  2. checkpoint layouts (jit): the file Hugging Face's save_pretrained
     writes for GPT2LMHeadModel (no lm_head.weight: tied), the same with
     lm_head.weight saved too (the same tensor: loads without options), the
     bare GPT2Model file of the hub (no `transformer.`) with
     --weights-prefix transformer., and a tied Llama (the one-line change of
     graphs/llama_lm.blk's head).  A file whose lm_head.weight differs from
     wte must be refused.
  3. greedy generation: the reference's greedy loop (float64, the whole
     sequence recomputed each step) for 32 tokens vs `blockc generate
     --prompt-ids ... --max-new-tokens 32 --ids` - identical ids.  The seed
     of the weights is chosen so that every step's top-1 logit leads the
     runner-up by >= 1e-3 (a closer race is decided by rounding, not by the
     model; the margin is ~100x the float32 error seen).  Without a
     `generate` command in the blockc under test, a loop of `blockc run`
     calls (the whole sequence each step) stands in, to prove the harness.
  4. sampled generation (with `generate`): --temperature 0.8 --top-k 20
     --top-p 0.9 --seed S gives the same ids on every backend and on a
     second run, and another seed gives other ids.

Usage (Debian's /usr/bin/python3: torch + numpy):

    lm_check.py --blockc build/blockc [--backends interp,jit,aot] [--keep]
    lm_check.py --self-check        the modules alone (names, tying, blocks)
"""

import argparse
import json
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
import families as fam  # noqa: E402  (exits with a message without torch/numpy)

te, np, torch, nn = fam.te, fam.np, fam.torch, fam.nn

NEW_TOKENS = 32
MARGIN = 1e-3          # greedy: minimum lead of the top-1 logit (see the docstring)
TOL, FACTOR, INTERP_TOL = 1e-5, 4.0, 1e-6


# ---------------------------------------------------------------------------
# Reference modules (Hugging Face names)
# ---------------------------------------------------------------------------
class GPT2Model(nn.Module):
    """wte + wpe, the blocks, ln_f (Hugging Face's GPT2Model)."""

    def __init__(self, V, P, D, H, F_, N):
        super().__init__()
        self.wte = nn.Embedding(V, D)
        self.wpe = nn.Embedding(P, D)
        self.h = nn.ModuleList([fam.GPT2Block(D, H, F_) for _ in range(N)])
        self.ln_f = nn.LayerNorm(D, eps=fam.NORM_EPS["gpt2"])

    def forward(self, ids, lengths=None):
        B, T = ids.shape
        x = self.wte(ids) + self.wpe(torch.arange(T).view(1, T))
        ok = fam.allowed_keys(B, T, True, lengths)
        for block in self.h:
            x = block(x, ok)
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, V, P, D, H, F_, N):
        super().__init__()
        self.transformer = GPT2Model(V, P, D, H, F_, N)
        self.lm_head = nn.Linear(D, V, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tie_weights()

    def forward(self, ids, lengths=None):
        return self.lm_head(self.transformer(ids, lengths))


class LlamaModel(nn.Module):
    def __init__(self, V, D, H, F_, N, KV):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, D)
        self.layers = nn.ModuleList([fam.LlamaDecoderLayer(D, H, F_, KV) for _ in range(N)])
        self.norm = fam.RMSNorm(D, fam.NORM_EPS["llama"])

    def forward(self, ids, lengths=None):
        B, T = ids.shape
        x = self.embed_tokens(ids)
        ok = fam.allowed_keys(B, T, True, lengths)
        for layer in self.layers:
            x = layer(x, ok)   # RoPE at positions 0..T-1 (families.LlamaAttention)
        return self.norm(x)


class LlamaForCausalLM(nn.Module):
    def __init__(self, V, D, H, F_, N, KV, tied=False):
        super().__init__()
        self.model = LlamaModel(V, D, H, F_, N, KV)
        self.lm_head = nn.Linear(D, V, bias=False)
        if tied:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, ids, lengths=None):
        return self.lm_head(self.model(ids, lengths))


def build(case):
    c = case
    if c["family"] == "gpt2":
        m = GPT2LMHeadModel(c["V"], c["P"], c["D"], c["H"], c["F"], c["N"])
    else:
        m = LlamaForCausalLM(c["V"], c["D"], c["H"], c["F"], c["N"], c["KV"], c.get("tied", False))
    return fam.init_params(m, c["seed"]).eval()   # shared (tied) tensors are initialised once


def logits(model, ids, lengths=None, dtype=torch.float64):
    m = model.to(dtype)
    with torch.no_grad():
        return m(torch.as_tensor(np.asarray(ids, dtype=np.int64)), lengths).numpy()


def hf_names(case):
    """The state_dict keys Hugging Face's modules have (in its module order;
    families.py's LlamaDecoderLayer registers its norms first)."""
    N = case["N"]
    if case["family"] == "gpt2":
        per = ["ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"]
        return (["transformer.wte.weight", "transformer.wpe.weight"]
                + ["transformer.h.%d.%s.%s" % (i, m, w) for i in range(N) for m in per
                   for w in ("weight", "bias")]
                + ["transformer.ln_f.weight", "transformer.ln_f.bias", "lm_head.weight"])
    per = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "input_layernorm",
           "post_attention_layernorm"]
    return (["model.embed_tokens.weight"]
            + ["model.layers.%d.%s.weight" % (i, m) for i in range(N) for m in per]
            + ["model.norm.weight", "lm_head.weight"])


def checkpoint(model, layout):
    """The state_dict as a file of that layout holds it:
    hf       as save_pretrained writes it (a tied head's lm_head.weight left
             out; an untied one kept)
    hf+head  every key, lm_head.weight included even when tied
    bare     GPT2Model alone (the hub's gpt2 model.safetensors): no prefix,
             no head
    untied   hf+head with lm_head.weight perturbed (must be refused)"""
    sd = {k: v.detach().to(torch.float32).clone() for k, v in model.state_dict().items()}
    shared = model.lm_head.weight is (model.transformer.wte.weight if hasattr(model, "transformer")
                                      else model.model.embed_tokens.weight)
    if layout == "hf" and shared:
        del sd["lm_head.weight"]
    if layout == "bare":
        sd = {k[len("transformer."):]: v for k, v in sd.items() if k.startswith("transformer.")}
    if layout == "untied":
        sd["lm_head.weight"] = sd["lm_head.weight"].clone()
        sd["lm_head.weight"][3, 1] += 0.5
    return sd


# ---------------------------------------------------------------------------
# blockc
# ---------------------------------------------------------------------------
def graph_for(case, d):
    """The shipped graph (for a tied Llama: its documented one-line change)."""
    src = os.path.join(ROOT, "graphs", case["graph"] + ".blk")
    if not case.get("tied") or case["family"] != "llama":
        return src
    text = open(src).read()
    line = "logits = Linear(y, out=V, bias=false, params=lm_head)"
    if line not in text:
        raise SystemExit("lm_check: %s lost the head line %r the tied variant edits" % (src, line))
    path = os.path.join(d, "llama_lm_tied.blk")
    with open(path, "w") as f:
        f.write(text.replace(line, line.replace("params=lm_head", "params=model.embed_tokens")))
    return path


def dim_flags(case, T):
    ks = ["B", "D", "H", "F", "N", "V"] + (["P"] if case["family"] == "gpt2" else ["KV"])
    out = []
    for k in ks:
        out += ["-D", "%s=%d" % (k, case[k])]
    return out + ["-D", "T=%d" % T]


def spawn(cmd, timeout=300):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", "timeout after %ds" % timeout, time.time() - t0
    return (p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"),
            time.time() - t0)


def run_logits(a, case, graph, weights, backend, ids, lengths, d, B, extra=()):
    """`blockc run` on ids [B, T] (int32 .npy) -> (logits float32, None) or (None, why)."""
    ids_p, out = os.path.join(d, "ids.npy"), os.path.join(d, "logits_%s.npy" % backend)
    te._save_npy(ids_p, np.asarray(ids, dtype=np.int32))
    if os.path.exists(out):
        os.unlink(out)
    c = dict(case, B=B)
    cmd = [a.blockc, "run", graph, "--backend", backend, "--weights", weights,
           "--input", "ids=" + ids_p, "--output", "logits=" + out] + list(extra)
    if lengths is not None:
        len_p = os.path.join(d, "len.npy")
        te._save_npy(len_p, np.asarray(lengths, dtype=np.int64))
        cmd += ["--input", "len=" + len_p]
    cmd += dim_flags(c, case["Tbound"])
    rc, _, err, _ = spawn(cmd)
    if rc != 0:
        return None, "blockc run exit %s: %s\n    %s" % (rc, err.strip()[:600], " ".join(cmd))
    y = np.load(out)
    V = case["V"]
    if y.dtype != np.float32 or y.shape != (B, np.asarray(ids).shape[1], V):
        return None, "logits are %s %s, expected float32 %s" % (y.dtype, y.shape,
                                                                (B, np.asarray(ids).shape[1], V))
    return y, None


def valid(y, lengths):
    if lengths is None:
        return y.reshape(-1, y.shape[-1])
    return np.concatenate([y[b, :n] for b, n in enumerate(lengths)], axis=0)


# ---------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------
class Report:
    def __init__(self):
        self.fails = 0

    def row(self, ok, what, detail=""):
        self.fails += 0 if ok else 1
        print("  %s  %-58s %s" % ("ok  " if ok else "FAIL", what, detail), flush=True)


def check_logits(a, R, case, model, d, backends):
    """Section 1: logits vs the float64 / float32 references."""
    rng = np.random.default_rng(case["seed"] + 11)
    weights = os.path.join(d, "hf.safetensors")
    graph = graph_for(case, d)
    for B, T, lengths in case["shapes"]:
        ids = rng.integers(0, case["V"], size=(B, T))
        y64 = logits(model, ids, lengths, torch.float64)
        y32 = logits(model, ids, lengths, torch.float32).astype(np.float64)
        v64, v32 = valid(y64, lengths), valid(y32, lengths)
        scale = float(np.max(np.abs(v64)))
        t64 = float(np.max(np.abs(v32 - v64)))
        for b in backends:
            y, why = run_logits(a, case, graph, weights, b, ids, lengths, d, B)
            what = "%s logits %s B=%d T=%d%s" % (case["name"], b, B, T,
                                                 " len=%s" % ",".join(map(str, lengths)) if lengths else "")
            if y is None:
                R.row(False, what, why)
                continue
            v = valid(y.astype(np.float64), lengths)
            err = float(np.max(np.abs(v - v64)))
            bound = INTERP_TOL * max(1.0, scale) if b == "interp" else max(TOL * max(1.0, scale), FACTOR * t64)
            ok = bool(np.all(np.isfinite(y))) and err <= bound
            R.row(ok, what, "err %.2e %s %.2e (max|y| %.2f, torch32 %.1e)"
                  % (err, "<=" if ok else ">", bound, scale, t64))


def check_layouts(a, R, case, model, d):
    """Section 2: the checkpoint layouts load (and an untied head does not)."""
    rng = np.random.default_rng(case["seed"] + 12)
    B, T = 2, 6
    ids = rng.integers(0, case["V"], size=(B, T))
    y64 = logits(model, ids, None, torch.float64)
    graph = graph_for(case, d)
    layouts = [("hf+head", [], True), ("untied", [], False)]
    if case["family"] == "gpt2":
        layouts += [("bare", ["--weights-prefix", "transformer."], True)]
    for layout, flags, want in layouts:
        w = os.path.join(d, layout + ".safetensors")
        te.write_safetensors(w, checkpoint(model, layout))
        y, why = run_logits(a, case, graph, w, "jit", ids, None, d, B, flags)
        what = "%s loads a %s file%s" % (case["name"], layout, " " + " ".join(flags) if flags else "")
        if not want:
            refused = y is None and "lm_head.weight" in why and "no tied copy" in why
            if case.get("tied") or case["family"] == "gpt2":
                R.row(refused, "%s refuses an untied lm_head.weight" % case["name"],
                      "" if refused else (why or "it loaded")[:200])
            continue
        if y is None:
            R.row(False, what, why)
            continue
        err = float(np.max(np.abs(y - y64)))
        R.row(err <= 1e-4 * max(1.0, float(np.max(np.abs(y64)))), what, "err %.2e" % err)


def greedy_ref(model, prompt, n):
    """The reference's greedy loop (float64, whole sequence each step); the
    ids and the smallest top-1 lead seen."""
    ids, lead = list(prompt), float("inf")
    for _ in range(n):
        row = logits(model, [ids], None, torch.float64)[0, -1]
        top = np.argsort(-row, kind="stable")[:2]
        lead = min(lead, float(row[top[0]] - row[top[1]]))
        ids.append(int(top[0]))
    return ids[len(prompt):], lead


def have_generate(a):
    rc, out, err, _ = spawn([a.blockc, "generate", "--help"], 60)
    return rc == 0 and "--prompt-ids" in out + err


def parse_ids(text, prompt):
    got = [int(t) for t in re.findall(r"-?\d+", text)]
    if len(got) == len(prompt) + NEW_TOKENS and got[:len(prompt)] == list(prompt):
        got = got[len(prompt):]
    return got


def generate(a, case, graph, weights, backend, prompt, sample=None):
    cmd = [a.blockc, "generate", graph, "--backend", backend, "--weights", weights,
           "--prompt-ids", ",".join(map(str, prompt)), "--max-new-tokens", str(NEW_TOKENS), "--ids"]
    if sample:
        cmd += ["--temperature", "0.8", "--top-k", "20", "--top-p", "0.9", "--seed", str(sample)]
    cmd += dim_flags(dict(case, B=1), case["Tbound"])
    rc, out, err, secs = spawn(cmd)
    if rc != 0:
        return None, "blockc generate exit %s: %s\n    %s" % (rc, err.strip()[:600], " ".join(cmd))
    return parse_ids(out, prompt), None


def generate_by_runs(a, case, graph, weights, backend, prompt, d):
    """The stand-in for `generate`: one `blockc run` per token."""
    ids = list(prompt)
    for _ in range(NEW_TOKENS):
        y, why = run_logits(a, case, graph, weights, backend, [ids], None, d, 1)
        if y is None:
            return None, why
        ids.append(int(np.argmax(y[0, -1])))
    return ids[len(prompt):], None


def check_generation(a, R, case, model, d, backends, gen_cmd):
    graph = graph_for(case, d)
    weights = os.path.join(d, "hf.safetensors")
    prompt = case["prompt"]
    want, lead = case["greedy"], case["lead"]
    how = "generate" if gen_cmd else "run loop"
    for b in backends:
        t0 = time.time()
        if gen_cmd:
            got, why = generate(a, case, graph, weights, b, prompt)
        else:
            got, why = generate_by_runs(a, case, graph, weights, b, prompt, d)
        what = "%s greedy %d tokens (%s) %s" % (case["name"], NEW_TOKENS, how, b)
        if got is None:
            R.row(False, what, why)
            continue
        first = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), None)
        R.row(got == want, what, "identical (min lead %.2e, %.1fs)" % (lead, time.time() - t0)
              if got == want else "differs from step %s: %s vs %s" % (first, got, want))
    if not gen_cmd:
        print("  note  sampled generation needs `blockc generate` (not in %s): not checked" % a.blockc)
        return
    runs = {}
    for b in backends:
        got, why = generate(a, case, graph, weights, b, prompt, sample=7)
        if got is None:
            R.row(False, "%s sampled (seed 7) %s" % (case["name"], b), why)
            continue
        again, _ = generate(a, case, graph, weights, b, prompt, sample=7)
        R.row(again == got and len(got) == NEW_TOKENS, "%s sampled (seed 7) %s: reproducible" % (case["name"], b),
              "" if again == got else "%s then %s" % (got, again))
        runs[b] = got
    if runs:
        ref = next(iter(runs.values()))
        R.row(all(v == ref for v in runs.values()), "%s sampled (seed 7): the same ids on %s"
              % (case["name"], ",".join(runs)), "" if all(v == ref for v in runs.values()) else str(runs))
        other = [generate(a, case, graph, weights, backends[0], prompt, sample=s)[0] for s in (8, 9)]
        R.row(any(o is not None and o != ref for o in other), "%s sampled: other seeds give other ids"
              % case["name"])


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------
def cases():
    gpt2 = dict(name="gpt2_lm", graph="gpt2_lm", family="gpt2", D=36, H=3, F=4 * 36, N=2, V=101,
                P=64, Tbound=48, shapes=[(3, 13, [13, 7, 1]), (1, 5, None), (2, 9, None)])
    llama = dict(name="llama_lm", graph="llama_lm", family="llama", D=36, H=6, KV=2, F=97, N=2,
                 V=101, Tbound=48, shapes=[(2, 11, [11, 4]), (1, 6, None)])
    tied = dict(llama, name="llama_lm (tied)", tied=True, shapes=[(2, 7, [7, 5])])
    return [gpt2, llama, tied]


def pick_seed(case, start):
    """The first seed >= start whose greedy run keeps every top-1 lead >= MARGIN."""
    rng = np.random.default_rng(start)
    prompt = [int(v) for v in rng.integers(0, case["V"], size=5)]
    for seed in range(start, start + 40):
        case["seed"] = seed
        model = build(case)
        ids, lead = greedy_ref(model, prompt, NEW_TOKENS)
        if lead >= MARGIN:
            case.update(prompt=prompt, greedy=ids, lead=lead)
            return model
    raise SystemExit("lm_check: no seed in %d..%d gives top-1 leads >= %g" % (start, start + 39, MARGIN))


def self_check():
    R = Report()
    for case in cases():
        case["seed"] = 3
        m = build(case)
        names = list(m.state_dict())
        R.row(sorted(names) == sorted(hf_names(case)), "%s state_dict keys are Hugging Face's (%d)"
              % (case["name"], len(names)))
        emb = m.transformer.wte.weight if case["family"] == "gpt2" else m.model.embed_tokens.weight
        tied = case["family"] == "gpt2" or case.get("tied", False)
        R.row((m.lm_head.weight is emb) == tied, "%s head %s" % (case["name"], "tied" if tied else "untied"))
        ids = np.random.default_rng(1).integers(0, case["V"], size=(2, 7))
        y = logits(m, ids, [7, 4])
        # The blocks are families.py's stacks: the same stack on the same embeddings.
        with torch.no_grad():
            it = torch.as_tensor(ids)
            if case["family"] == "gpt2":
                st = fam.GPT2Stack(case["D"], case["H"], case["F"], case["N"]).double()
                st.h, st.ln_f = m.transformer.h, m.transformer.ln_f
                x = m.transformer.wte(it) + m.transformer.wpe(torch.arange(7))
            else:
                st = fam.LlamaStack(case["D"], case["H"], case["F"], case["N"], case["KV"]).double()
                st.layers, st.norm = m.model.layers, m.model.norm
                x = m.model.embed_tokens(it)
            y2 = m.lm_head(st(x, [7, 4])).numpy()
        R.row(np.allclose(valid(y, [7, 4]), valid(y2, [7, 4]), rtol=0, atol=1e-12),
              "%s = embeddings + families.py stack + head" % case["name"])
        # Causal + padding: a row's valid logits do not depend on its padding.
        y1 = logits(m, ids[1:, :4])
        R.row(np.allclose(y[1, :4], y1[0], rtol=0, atol=1e-10), "%s padded row = unpadded run" % case["name"])
    return R.fails


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blockc", default=os.path.join(ROOT, "build", "blockc"))
    ap.add_argument("--backends", default="interp,jit,aot")
    ap.add_argument("--self-check", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    if a.self_check:
        return 1 if self_check() else 0
    backends = [b for b in a.backends.split(",") if b]
    bad = [b for b in backends if b not in ("interp", "jit", "aot")]
    if bad or not backends:
        ap.error("--backends: interp, jit and/or aot (got %s)" % a.backends)
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="lm_check.")
    gen_cmd = have_generate(a)
    print("lm_check: %s, backends %s, in %s; greedy/sampled via %s" % (a.blockc, ",".join(backends), tmp,
          "blockc generate" if gen_cmd else "a blockc run loop (no generate command)"))
    print("  tolerance: jit/aot max|y - y64| <= max(%g * max(1, max|y64|), %g * max|y32 - y64|); "
          "interp <= %g * max(1, max|y64|)" % (TOL, FACTOR, INTERP_TOL))
    R = Report()
    for i, case in enumerate(cases()):
        d = os.path.join(tmp, "case%d" % i)
        os.makedirs(d)
        model = pick_seed(case, a.seed + 100 * i)
        te.write_safetensors(os.path.join(d, "hf.safetensors"), checkpoint(model, "hf"))
        with open(os.path.join(d, "case.json"), "w") as f:
            json.dump({k: v for k, v in case.items()}, f, indent=1)
        print("%s: D=%d H=%d N=%d F=%d V=%d%s seed %d, prompt %s" % (
            case["name"], case["D"], case["H"], case["N"], case["F"], case["V"],
            " KV=%d" % case["KV"] if "KV" in case else " P=%d" % case["P"], case["seed"], case["prompt"]))
        check_logits(a, R, case, model, d, backends)
        check_layouts(a, R, case, model, d)
        if not case.get("tied"):
            check_generation(a, R, case, model, d, backends, gen_cmd)
    print("lm_check: %d failure%s (%.0fs)" % (R.fails, "" if R.fails == 1 else "s", time.time() - t0))
    if a.keep or R.fails:
        print("lm_check: files kept in %s" % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if R.fails else 0


if __name__ == "__main__":
    sys.exit(main())
