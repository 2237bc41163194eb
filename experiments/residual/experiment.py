#!/usr/bin/python3
"""experiment.py - the seeds' experiment, reproduced by training
(docs/experiments.md): Post-LN vs Pre-LN vs ResiDual (and DeepNorm) at two
depths, with and without learning-rate warm-up, several seeds, on

  s2s  encoder-decoders (experiments/residual/s2s_<wiring>.blk) learning a
       synthetic translation that needs attention across the whole source:
       the target is the source reversed, each token mapped through a fixed
       random permutation (generated with a seed; disjoint train/valid);
  lm   byte-level decoder-only LMs (experiments/residual/lm_<wiring>.blk) on
       the `fortunes` files Debian ships (/usr/share/games/fortunes; the
       `mini` size uses /usr/share/common-licenses/GPL-3, which every Debian
       system has).

Only the wiring differs between the runs of a row: the same data, batches,
optimizer (AdamW, betas (0.9, 0.98), weight decay 1e-4, label smoothing
0.1 - the ResiDual paper's fairseq recipe), peak learning rate, steps and
seeds for every wiring; nothing is tuned per wiring.  Every run is
`blockc train` (JIT, one thread), cut into segments with --stop-after /
--resume (bit for bit the uninterrupted run) so that the checkpoint after
a few steps is kept; at each kept checkpoint the gradient of the plain
cross-entropy (no smoothing) on a fixed validation batch is taken per layer
(`blockc run` for the logits, dy = (softmax - onehot) / count computed
here, `blockc grad --dy logits=...`).  At the end, s2s runs decode the
validation set greedily (`blockc run` once per target position, the whole
set as one batch) and count exact matches.

Per run: train/val loss curves (the --log JSONL), the step at which the loss
went non-finite (divergence: `blockc train` stops naming it), the step after
which validation stopped improving (stall: the first evaluation that no
later one improves on by 1%; none when the last quarter still improved),
the final validation loss, exact-match accuracy (s2s), per-layer gradient
norms at the kept steps, wall time.

Outputs in --out: results.json (every run), table.md (the table printed at
the end), loss.svg (validation loss per task and depth: colour = wiring,
solid = warm-up, dashed = none; mean over seeds) and grads.svg (per-layer
gradient norms over training at the deepest depth with warm-up, seed 1).

A finished run leaves runs/<name>/summary.json, keyed by its exact training
command and the sha256 of the blockc binary: rerunning the same sweep into
the same --out reuses every finished run (a sweep stopped halfway resumes;
the wall times of reused runs are the original ones) unless --fresh.

Usage: experiment.py [--blockc build/blockc] [--size mini|short|full]
                     [--out DIR] [--jobs 2] [--only WIRING,...] [--tasks s2s,lm] [--depths 6,18]
                     [--schedules warmup,none]
                     [--check] [--fresh]
       experiment.py --replot DIR [--size S]   (table and plots again; from the
                     finished runs' summaries when a stopped sweep left no results.json)
--check (the test's): fail unless every run produced every metric and the
files are well formed.  Python 3's standard library only.
"""
import argparse
import concurrent.futures
import hashlib
import json
import math
import os
import random
import re
import resource
import shutil
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WIRINGS = ["post_ln", "pre_ln", "residual", "deepnorm"]
COLORS = {"post_ln": "#d62728", "pre_ln": "#1f77b4", "residual": "#2ca02c", "deepnorm": "#9467bd"}
PAD, BOS, EOS = 0, 1, 2   # the translation task's special ids; symbols are 3..V-1
S2S_V = 32

# The sizes.  Every wiring of a size gets exactly the same settings.
SIZES = {
    # the test's miniature: a few steps, tiny dims (docs/experiments.md)
    "mini": dict(depths=[2], seeds=[1], schedules=["warmup", "none"],
                 s2s=dict(steps=12, batch=8, warmup=4, lr=1e-3, eval_every=4, eval_batches=1,
                          dims=dict(D=16, H=2), pairs=400, valid=24, lmin=3, lmax=6),
                 lm=dict(steps=12, batch=4, seq=16, warmup=4, lr=1e-3, eval_every=4,
                         eval_batches=1, dims=dict(D=16, H=2), text="licenses")),
    # `make experiment`: <= 30 min on 2 cores
    "short": dict(depths=[6, 18], seeds=[1, 2], schedules=["warmup", "none"],
                  s2s=dict(steps=400, batch=32, warmup=50, lr=1e-3, eval_every=25, eval_batches=4,
                           dims=dict(D=64, H=4), pairs=20000, valid=256, lmin=4, lmax=12),
                  lm=dict(steps=400, batch=16, seq=64, warmup=50, lr=1e-3, eval_every=25,
                          eval_batches=4, dims=dict(D=64, H=4), text="fortunes")),
    # `make experiment FULL=1`
    "full": dict(depths=[6, 18], seeds=[1, 2, 3], schedules=["warmup", "none"],
                 s2s=dict(steps=2000, batch=32, warmup=250, lr=1e-3, eval_every=100,
                          eval_batches=8, dims=dict(D=64, H=4), pairs=50000, valid=512, lmin=4,
                          lmax=16),
                 lm=dict(steps=2000, batch=16, seq=128, warmup=250, lr=1e-3, eval_every=100,
                         eval_batches=8, dims=dict(D=64, H=4), text="fortunes")),
}
FORTUNES = "/usr/share/games/fortunes"
LICENSES = "/usr/share/common-licenses/GPL-3"


# --- .npy and safetensors, by hand (standard library only) ---------------------------
def write_npy(path, values, shape, code="i"):
    descr = {"i": "<i4", "H": "<u2", "f": "<f4"}[code]
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
    with open(path + ".tmp", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack("<%d%s" % (len(values), code), *values))
    os.replace(path + ".tmp", path)


def read_npy_f32(path):
    data = open(path, "rb").read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError("%s: not a .npy file" % path)
    major = data[6]
    hlen = struct.unpack("<H", data[8:10])[0] if major == 1 else struct.unpack("<I", data[8:12])[0]
    start = (10 if major == 1 else 12) + hlen
    hdr = data[start - hlen:start].decode()
    if "'<f4'" not in hdr or "True" in hdr:
        raise ValueError("%s: expected C-order float32" % path)
    shape = tuple(int(x) for x in re.search(r"\(([^)]*)\)", hdr).group(1).split(",") if x.strip())
    n = 1
    for d in shape:
        n *= d
    return list(struct.unpack("<%df" % n, data[start:start + 4 * n])), shape


def safetensors_sumsq(path):
    """{name: sum of squares} of a float32 safetensors file."""
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    hdr = json.loads(data[8:8 + n])
    out = {}
    for name, t in hdr.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            raise ValueError("%s: %s is %s" % (path, name, t["dtype"]))
        a, b = t["data_offsets"]
        vals = struct.unpack("<%df" % ((b - a) // 4), data[8 + n + a:8 + n + b])
        out[name] = math.fsum(v * v for v in vals)
    return out


# --- data --------------------------------------------------------------------------------
def s2s_data(cfg, seed, out):
    """The translation pairs: src (random length in [lmin, lmax] over the symbols),
    tgt = BOS + perm(reversed(src)) + EOS; right-padded with PAD.  Valid pairs are
    disjoint from the training pairs."""
    rng = random.Random(seed)
    syms = list(range(3, S2S_V))
    perm = syms[:]
    rng.shuffle(perm)
    mp = dict(zip(syms, perm))
    seen, pairs = set(), []
    need = cfg["pairs"] + cfg["valid"]
    while len(pairs) < need:
        src = tuple(rng.choice(syms) for _ in range(rng.randint(cfg["lmin"], cfg["lmax"])))
        if src in seen:
            continue
        seen.add(src)
        pairs.append((list(src), [BOS] + [mp[t] for t in reversed(src)] + [EOS]))
    files = {}
    for part, rows in (("train", pairs[:cfg["pairs"]]), ("valid", pairs[cfg["pairs"]:])):
        for k, w, name in ((0, cfg["lmax"], "src"), (1, cfg["lmax"] + 2, "tgt")):
            flat = []
            for r in rows:
                flat += r[k] + [PAD] * (w - len(r[k]))
            path = os.path.join(out, "s2s_%s_%s.npy" % (part, name))
            write_npy(path, flat, (len(rows), w))
            files[(part, name)] = path
        if part == "valid":
            files["valid_rows"] = rows
    return files


def lm_text(kind):
    if kind == "licenses":
        return open(LICENSES, "rb").read()
    if not os.path.isdir(FORTUNES):
        sys.exit("experiment: %s is missing: `make experiment` installs Debian's `fortunes` "
                 "package (sh tools/deps.sh fortunes)" % FORTUNES)
    parts = []
    for name in sorted(os.listdir(FORTUNES)):
        p = os.path.join(FORTUNES, name)
        if os.path.isfile(p) and not os.path.islink(p) and "." not in name:
            parts.append(open(p, "rb").read())
    return b"".join(parts)


def lm_data(cfg, out):
    text = lm_text(cfg["text"])
    cut = len(text) * 9 // 10
    files = {}
    for part, chunk in (("train", text[:cut]), ("valid", text[cut:])):
        path = os.path.join(out, "lm_%s.npy" % part)
        write_npy(path, list(chunk), (len(chunk),), "H")
        files[part] = path
    files["valid_bytes"] = text[cut:]
    files["bytes"] = len(text)
    return files


# --- one run -----------------------------------------------------------------------------
def dflags(dims):
    return [x for k, v in sorted(dims.items()) for x in ("-D", "%s=%s" % (k, v))]


class Run:
    def __init__(self, task, wiring, depth, schedule, seed, cfg, data, out, blockc):
        self.task, self.wiring, self.depth, self.schedule, self.seed = task, wiring, depth, schedule, seed
        self.cfg, self.data, self.blockc = cfg, data, blockc
        self.name = "%s_%s_N%d_%s_s%d" % (task, wiring, depth, schedule, seed)
        self.dir = os.path.join(out, "runs", self.name)
        self.graph = os.path.join(HERE, "%s_%s.blk" % (task, wiring))
        self.dims = dict(cfg["dims"], N=depth)

    def train_cmd(self):
        c = self.cfg
        cmd = [self.blockc, "train", self.graph] + dflags(self.dims)
        if self.task == "s2s":
            d = self.data
            cmd += ["--data", "src=" + d[("train", "src")], "--data", "tgt=" + d[("train", "tgt")],
                    "--val", "src=" + d[("valid", "src")], "--val", "tgt=" + d[("valid", "tgt")],
                    "--pad-id", str(PAD)]
        else:
            cmd += ["--data", self.data["train"], "--val", self.data["valid"], "--seq", str(c["seq"])]
        sched = (["--schedule", "inverse_sqrt", "--warmup", str(c["warmup"])]
                 if self.schedule == "warmup" else ["--schedule", "constant", "--warmup", "0"])
        cmd += ["--steps", str(c["steps"]), "--batch", str(c["batch"]), "--lr", str(c["lr"])] + sched
        cmd += ["--optimizer", "adamw", "--beta1", "0.9", "--beta2", "0.98", "--eps", "1e-8",
                "--weight-decay", "1e-4", "--clip", "0", "--label-smoothing", "0.1",
                "--init", "xavier", "--seed", str(self.seed), "--data-order", "random",
                "--eval-every", str(c["eval_every"]), "--eval-batches", str(c["eval_batches"]),
                "--threads", "1", "--out", os.path.join(self.dir, "ck.safetensors")]
        return cmd

    def kept_steps(self):
        s = self.cfg["steps"]
        return sorted(set([1, max(1, s // 4), max(1, s // 2), s]))

    def cache_key(self, blockc_sha):
        return {"command": self.train_cmd(), "kept_steps": self.kept_steps(), "blockc_sha256": blockc_sha}

    def cached(self, blockc_sha):
        """The summary a finished run with this exact command and binary left, or None."""
        p = os.path.join(self.dir, "summary.json")
        try:
            d = json.load(open(p))
        except (OSError, ValueError):
            return None
        return d["summary"] if d.get("key") == self.cache_key(blockc_sha) else None

    def go(self, blockc_sha=None, fresh=True):
        if not fresh:
            s = self.cached(blockc_sha)
            if s is not None:
                self.reused = s
                return self
        shutil.rmtree(self.dir, ignore_errors=True)  # nothing of an earlier attempt (logs append)
        os.makedirs(self.dir, exist_ok=True)
        t0 = time.time()
        log, diverged, err = [], None, None
        ck = os.path.join(self.dir, "ck.safetensors")
        prev = None
        self.grads = {}
        for k in self.kept_steps():
            cmd = self.train_cmd() + ["--log", os.path.join(self.dir, "log_%d.jsonl" % k)]
            if k < self.cfg["steps"]:
                cmd += ["--stop-after", str(k)]
            if prev is not None:
                cmd += ["--resume", ck]
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
            lp = os.path.join(self.dir, "log_%d.jsonl" % k)
            if os.path.exists(lp):
                log += [json.loads(l) for l in open(lp) if l.strip()]
            if r.returncode != 0:
                m = re.search(r"step (\d+): the (loss|gradient norm)", r.stderr)
                if m:
                    diverged = int(m.group(1))
                else:
                    err = r.stderr.strip()[-600:]
                break
            shutil.copyfile(ck, os.path.join(self.dir, "ck_%d.safetensors" % k))
            self.grads[k] = self.layer_grads(os.path.join(self.dir, "ck_%d.safetensors" % k))
            prev = k
        self.log, self.diverged, self.error = log, diverged, err
        self.exact = None
        if self.task == "s2s" and err is None and diverged is None:
            self.exact = self.exact_match(ck)
        self.wall = time.time() - t0
        if blockc_sha is not None and err is None:
            tmp = os.path.join(self.dir, "summary.json.tmp")
            with open(tmp, "w") as f:
                json.dump({"key": self.cache_key(blockc_sha), "summary": self.summary()}, f)
            os.replace(tmp, os.path.join(self.dir, "summary.json"))
        return self

    # The inputs of a fixed validation batch: the first rows of the valid set.
    def probe_inputs(self, nrows):
        d = os.path.join(self.dir, "probe")
        os.makedirs(d, exist_ok=True)
        if self.task == "s2s":
            rows = self.data["valid_rows"][:nrows]
            lmax = self.cfg["lmax"]
            src, tgt, tgts, sl, tl = [], [], [], [], []
            for s, t in rows:
                src += s + [PAD] * (lmax - len(s))
                fed, want = t[:-1], t[1:]
                tgt += fed + [PAD] * (lmax + 1 - len(fed))
                tgts.append(want + [-100] * (lmax + 1 - len(want)))
                sl.append(len(s))
                tl.append(len(fed))
            n = len(rows)
            paths = {k: os.path.join(d, k + ".npy") for k in ("src", "tgt", "src_len", "tgt_len")}
            write_npy(paths["src"], src, (n, lmax))
            write_npy(paths["tgt"], tgt, (n, lmax + 1))
            write_npy(paths["src_len"], sl, (n,))
            write_npy(paths["tgt_len"], tl, (n,))
            return n, paths, tgts
        T = self.cfg["seq"]
        vb = self.data["valid_bytes"]
        ids, tgts = [], []
        for r in range(nrows):
            s = (r * T * 7) % (len(vb) - T - 1)
            ids += list(vb[s:s + T])
            tgts.append(list(vb[s + 1:s + T + 1]))
        p = os.path.join(d, "ids.npy")
        write_npy(p, ids, (nrows, T))
        return nrows, {"ids": p}, tgts

    def run_logits(self, ck, n, paths, out):
        cmd = [self.blockc, "run", self.graph] + dflags(dict(self.dims, B=n)) + [
            "--weights", ck, "-o", "logits=" + out]
        for k, p in sorted(paths.items()):
            cmd += ["--input", "%s=%s" % (k, p)]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if r.returncode != 0:
            raise RuntimeError("%s: blockc run failed: %s" % (self.name, r.stderr[-600:]))
        return read_npy_f32(out)

    def layer_grads(self, ck):
        """Per layer (stack, index): the L2 norm of d CE / d (the layer's parameters) on
        the probe batch; CE is the plain mean cross-entropy over the target positions."""
        if not hasattr(self, "probe"):  # the same batch at every kept step: written once
            self.probe = self.probe_inputs(8)
        n, paths, tgts = self.probe
        d = os.path.join(self.dir, "probe")
        logits, shape = self.run_logits(ck, n, paths, os.path.join(d, "logits.npy"))
        B, T, V = shape
        count = sum(1 for row in tgts for t in row[:T] if t != -100)
        dy = [0.0] * len(logits)
        for b in range(B):
            for t in range(T):
                y = tgts[b][t] if t < len(tgts[b]) else -100
                if y == -100:
                    continue
                o = (b * T + t) * V
                row = logits[o:o + V]
                m = max(row)
                e = [math.exp(v - m) for v in row]
                z = sum(e)
                for v in range(V):
                    dy[o + v] = (e[v] / z - (1.0 if v == y else 0.0)) / count
        dyp = os.path.join(d, "dy.npy")
        write_npy(dyp, dy, shape, "f")
        gp = os.path.join(d, "grads.safetensors")
        cmd = [self.blockc, "grad", self.graph] + dflags(dict(self.dims, B=n)) + [
            "--weights", ck, "--dy", "logits=" + dyp, "-o", gp]
        for k, p in sorted(paths.items()):
            cmd += ["--input", "%s=%s" % (k, p)]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if r.returncode != 0:
            raise RuntimeError("%s: blockc grad failed: %s" % (self.name, r.stderr[-600:]))
        layers = {}
        for name, ss in safetensors_sumsq(gp).items():
            m = re.match(r"^(?:(encoder|decoder)\.)?layers\.(\d+)\.", name)
            if m:
                key = "%s%s" % ((m.group(1) or "")[:3], m.group(2))
                layers[key] = layers.get(key, 0.0) + ss
        return {k: math.sqrt(v) for k, v in layers.items()}

    def exact_match(self, ck):
        """Greedy decoding of the whole validation set, one batch: the fraction of rows
        whose output up to and including EOS equals the reference."""
        rows = self.data["valid_rows"]
        n, lmax = len(rows), self.cfg["lmax"]
        d = os.path.join(self.dir, "decode")
        os.makedirs(d, exist_ok=True)
        src = []
        for s, _ in rows:
            src += s + [PAD] * (lmax - len(s))
        paths = {"src": os.path.join(d, "src.npy"), "src_len": os.path.join(d, "src_len.npy"),
                 "tgt": os.path.join(d, "tgt.npy"), "tgt_len": os.path.join(d, "tgt_len.npy")}
        write_npy(paths["src"], src, (n, lmax))
        write_npy(paths["src_len"], [len(s) for s, _ in rows], (n,))
        out = [[BOS] for _ in rows]
        done = [False] * n
        for t in range(1, lmax + 2):
            write_npy(paths["tgt"], [x for o in out for x in o], (n, t))
            write_npy(paths["tgt_len"], [t] * n, (n,))
            logits, (B, T, V) = self.run_logits(ck, n, paths, os.path.join(d, "logits.npy"))
            for b in range(n):
                o = (b * T + T - 1) * V
                row = logits[o:o + V]
                nxt = max(range(V), key=lambda v: row[v])
                out[b].append(EOS if done[b] else nxt)
                done[b] = done[b] or nxt == EOS
            if all(done):
                break
        ok = 0
        for b, (_, want) in enumerate(rows):
            got = out[b][1:]
            got = got[:got.index(EOS) + 1] if EOS in got else got
            ok += got == want[1:]
        return ok / n

    def summary(self):
        if hasattr(self, "reused"):
            return self.reused
        val = [(e["step"], e["val_loss"]) for e in self.log if "val_loss" in e]
        train = [(e["step"], e["loss"]) for e in self.log]
        stall = None
        for i, (s, v) in enumerate(val):
            later = [w for _, w in val[i + 1:]]
            if later and min(later) > 0.99 * v:
                stall = s
                break
        if stall is not None and stall > 0.75 * self.cfg["steps"]:
            stall = None
        return {"name": self.name, "task": self.task, "wiring": self.wiring, "N": self.depth,
                "schedule": self.schedule, "seed": self.seed, "graph": os.path.relpath(self.graph, ROOT),
                "command": " ".join(os.path.relpath(x, ROOT) if x.startswith(ROOT) else x
                                    for x in self.train_cmd()),
                "diverged_at": self.diverged, "error": self.error, "stalled_at": stall,
                "final_val_loss": val[-1][1] if val else None,
                "first_val_loss": val[0][1] if val else None,
                "final_train_loss": train[-1][1] if train else None,
                "exact_match": self.exact, "train": train, "val": val,
                "grad_norms": {str(k): v for k, v in self.grads.items()}, "wall_s": self.wall}


# --- report ------------------------------------------------------------------------------
def fmt(x, spec="%.3f"):
    return "—" if x is None else spec % x


def layer_order(keys):
    def k(s):
        m = re.match(r"([a-z]*)(\d+)", s)
        return ({"": 0, "enc": 0, "dec": 1}[m.group(1)], int(m.group(2)))
    return sorted(keys, key=k)


def grad_ratio(g):
    """last layer's gradient norm over the first's (the decoder's for s2s: its lower
    layers are the ones a Post-LN stack starves; the encoder gets gradient through
    the cross-attention of every decoder layer)."""
    if not g:
        return None
    keys = [k for k in layer_order(g) if k.startswith("dec")] or layer_order(g)
    return g[keys[-1]] / g[keys[0]] if keys and g[keys[0]] > 0 else None


def table(results):
    lines = ["| task | N | schedule | wiring | diverged | stalled | final val loss (per seed) | "
             "exact match | grad ratio last/first, step 1 → end | wall s (sum) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    key = lambda r: (r["task"], r["N"], r["schedule"], WIRINGS.index(r["wiring"]))
    groups = {}
    for r in sorted(results, key=key):
        groups.setdefault(key(r), []).append(r)
    for (task, N, sched, _), rs in groups.items():
        div = sum(r["diverged_at"] is not None for r in rs)
        st = " / ".join(fmt(r["stalled_at"], "%d") for r in rs)
        vals = " / ".join(fmt(r["final_val_loss"]) for r in rs)
        ex = [r["exact_match"] for r in rs if r["exact_match"] is not None]
        g0 = [grad_ratio(r["grad_norms"].get("1")) for r in rs]
        ge = [grad_ratio(r["grad_norms"].get(str(max(map(int, r["grad_norms"])))) if r["grad_norms"] else None) for r in rs]
        gr = " / ".join("%s → %s" % (fmt(a, "%.2g"), fmt(b, "%.2g")) for a, b in zip(g0, ge))
        lines.append("| %s | %d | %s | %s | %d/%d%s | %s | %s | %s | %s | %.0f |" % (
            task, N, sched, rs[0]["wiring"], div, len(rs),
            (" (step %s)" % ",".join(str(r["diverged_at"]) for r in rs if r["diverged_at"] is not None)) if div else "",
            st, vals,
            " / ".join("%.1f%%" % (100 * e) for e in ex) if ex else "—", gr,
            sum(r["wall_s"] for r in rs)))
    return "\n".join(lines) + "\n"


def svg_panel(x0, y0, w, h, title, series, logy=False, xlabel="step", yr=None, vline=None):
    """One plot: series = [(label, colour, dashed, [(x, y), ...])]; yr: the y range
    (shared by the panels of a row); vline: an x to mark (the encoder/decoder boundary)."""
    pts = [(x, y) for s in series for (x, y) in s[3] if y is not None and math.isfinite(y) and (not logy or y > 0)]
    out = ['<g font-family="sans-serif" font-size="10">',
           '<text x="%d" y="%d" font-size="11" font-weight="bold">%s</text>' % (x0 + 4, y0 + 12, title)]
    if not pts:
        out.append('<text x="%d" y="%d">no data</text></g>' % (x0 + 20, y0 + h // 2))
        return out
    tf = (lambda v: math.log10(v)) if logy else (lambda v: v)
    xs = [p[0] for p in pts]
    ys = [tf(p[1]) for p in pts]
    xa, xb = min(xs), max(xs)
    ya, yb = (tf(yr[0]), tf(yr[1])) if yr else (min(ys), max(ys))
    if xb == xa:
        xb = xa + 1
    if yb == ya:
        yb = ya + 1
    L, R, T, B = x0 + 44, x0 + w - 8, y0 + 20, y0 + h - 24
    X = lambda v: L + (v - xa) / (xb - xa) * (R - L)
    Y = lambda v: B - (tf(v) - ya) / (yb - ya) * (B - T)
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>' % (L, T, R - L, B - T))
    for i in range(5):
        v = ya + (yb - ya) * i / 4
        lab = ("%.2g" % (10 ** v)) if logy else ("%.3g" % v)
        yy = B - (v - ya) / (yb - ya) * (B - T)
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (L - 3, yy + 3, lab))
    out.append('<text x="%d" y="%d" text-anchor="middle">%s %g…%g</text>' % ((L + R) // 2, B + 16, xlabel, xa, xb))
    if vline is not None:
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#bbb" stroke-dasharray="2,2"/>' % (
            X(vline), T, X(vline), B))
    for label, colour, dashed, data in series:
        d = [(x, y) for x, y in data if y is not None and math.isfinite(y) and (not logy or y > 0)]
        if len(d) == 1:
            out.append('<circle cx="%.1f" cy="%.1f" r="2" fill="%s"/>' % (X(d[0][0]), Y(d[0][1]), colour))
        elif d:
            out.append('<polyline fill="none" stroke="%s" stroke-width="1.3"%s points="%s"><title>%s</title></polyline>' % (
                colour, ' stroke-dasharray="4,3"' if dashed else "",
                " ".join("%.1f,%.1f" % (X(x), Y(y)) for x, y in d), label))
    out.append("</g>")
    return out


def svg_doc(panels, cols, w, h, legend):
    rows = (len(panels) + cols - 1) // cols
    W, H = cols * w, rows * h + 24
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">' % (W, H, W, H),
           '<rect width="100%" height="100%" fill="white"/>']
    for i, p in enumerate(panels):
        out += svg_panel((i % cols) * w, (i // cols) * h, w, h, *p)
    x = 8
    for label, colour, dashed in legend[:8]:
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>' % (
            x, H - 10, x + 18, H - 10, colour, ' stroke-dasharray="4,3"' if dashed else ""))
        out.append('<text x="%d" y="%d" font-family="sans-serif" font-size="10">%s</text>' % (x + 22, H - 6, label))
        x += 30 + 7 * len(label)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def mean_curve(rs):
    by = {}
    for r in rs:
        for s, v in r["val"]:
            by.setdefault(s, []).append(v)
    return [(s, sum(v) / len(v)) for s, v in sorted(by.items()) if len(v) == len(rs)] or \
        [(s, sum(v) / len(v)) for s, v in sorted(by.items())]


def plots(results, out):
    legend = [(w, COLORS[w], False) for w in WIRINGS] + [("warm-up", "#000", False), ("none", "#000", True)]
    panels = []
    for task in ("s2s", "lm"):
        for N in sorted({r["N"] for r in results}):
            series = []
            for w in WIRINGS:
                for sched in ("warmup", "none"):
                    rs = [r for r in results if (r["task"], r["N"], r["wiring"], r["schedule"]) == (task, N, w, sched)]
                    if rs:
                        series.append(("%s %s" % (w, sched), COLORS[w], sched == "none", mean_curve(rs)))
            if series:
                panels.append(("%s, N=%d: validation loss" % (task, N), series, False, "step"))
    open(os.path.join(out, "loss.svg"), "w").write(svg_doc(panels, 2, 420, 260, legend))
    gpanels = []
    deep = max(r["N"] for r in results)
    for task in ("s2s", "lm"):
        pick = [r for r in results if (r["task"], r["N"], r["schedule"]) == (task, deep, "warmup")]
        allg = [v for r in pick for g in r["grad_norms"].values() for v in g.values() if v > 0]
        yr = (min(allg), max(allg)) if allg else None
        for w in WIRINGS:
            rs = [r for r in results if (r["task"], r["N"], r["wiring"], r["schedule"]) == (task, deep, w, "warmup")]
            rs = sorted(rs, key=lambda r: r["seed"])[:1]
            if not rs:
                continue
            g = rs[0]["grad_norms"]
            steps = sorted(g, key=int)
            shades = ["#c6dbef", "#6baed6", "#2171b5", "#08306b"]
            series = []
            for i, s in enumerate(steps):
                keys = layer_order(g[s])
                series.append(("step %s" % s, shades[min(i, 3) if len(steps) <= 4 else i * 3 // (len(steps) - 1)],
                               False, [(j, g[s][k]) for j, k in enumerate(keys)]))
            gpanels.append(("%s %s N=%d: |grad| per layer" % (task, w, deep), series, True,
                            "layer (enc | dec)" if task == "s2s" else "layer", yr,
                            deep - 0.5 if task == "s2s" else None))
    ks = sorted({int(k) for r in results for k in r["grad_norms"]})
    shades = ["#c6dbef", "#6baed6", "#2171b5", "#08306b"]
    gl = [("step %d" % k, shades[min(i, 3)], False) for i, k in enumerate(ks[:4])]
    open(os.path.join(out, "grads.svg"), "w").write(svg_doc(gpanels, 4, 300, 220, gl))


def check(results, out, size):
    cfg = SIZES[size]
    bad = []
    for r in results:
        if r["error"]:
            bad.append("%s: %s" % (r["name"], r["error"]))
            continue
        if r["diverged_at"] is None:
            steps = cfg[r["task"]]["steps"]
            if len(r["train"]) != steps or r["train"][-1][0] != steps:
                bad.append("%s: %d logged steps, want %d" % (r["name"], len(r["train"]), steps))
            if not r["val"] or not all(math.isfinite(v) for _, v in r["val"]):
                bad.append("%s: no finite validation losses" % r["name"])
            if len(r["grad_norms"]) != len(set([1, max(1, steps // 4), max(1, steps // 2), steps])):
                bad.append("%s: gradient norms at %s" % (r["name"], sorted(r["grad_norms"])))
            for s, g in r["grad_norms"].items():
                want = r["N"] * (2 if r["task"] == "s2s" else 1)
                if len(g) != want or not all(math.isfinite(v) and v > 0 for v in g.values()):
                    bad.append("%s: step %s: %d layers with finite non-zero gradients, want %d" % (r["name"], s, len(g), want))
            if r["task"] == "s2s" and not (r["exact_match"] is not None and 0 <= r["exact_match"] <= 1):
                bad.append("%s: exact match %r" % (r["name"], r["exact_match"]))
    for f in ("loss.svg", "grads.svg", "table.md", "results.json"):
        p = os.path.join(out, f)
        if not os.path.exists(p) or os.path.getsize(p) < 100:
            bad.append("%s missing or empty" % f)
    for f in ("loss.svg", "grads.svg"):
        s = open(os.path.join(out, f)).read()
        if not s.startswith("<svg") or s.count("<polyline") < 2:
            bad.append("%s: not a plot of curves" % f)
    return bad


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--blockc", default=os.path.join(ROOT, "build", "blockc"))
    p.add_argument("--size", choices=sorted(SIZES), default="short")
    p.add_argument("--out", default=os.path.join(ROOT, "build", "experiment"))
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--only", default=",".join(WIRINGS))
    p.add_argument("--tasks", default="s2s,lm")
    p.add_argument("--depths", help="only these of the size's depths (e.g. 6): a sweep in parts")
    p.add_argument("--schedules", help="only these of the size's schedules (warmup,none): a sweep in parts")
    p.add_argument("--check", action="store_true")
    p.add_argument("--fresh", action="store_true", help="rerun finished runs too")
    p.add_argument("--replot", metavar="DIR", help="redo table.md and the plots from DIR/results.json")
    a = p.parse_args()
    if a.replot:
        rp = os.path.join(a.replot, "results.json")
        if not os.path.exists(rp):  # a stopped sweep: its finished runs' summaries
            runs = []
            for name in sorted(os.listdir(os.path.join(a.replot, "runs"))):
                sp = os.path.join(a.replot, "runs", name, "summary.json")
                if os.path.exists(sp):
                    runs.append(json.load(open(sp))["summary"])
            with open(rp, "w") as f:
                json.dump({"meta": {"size": a.size, "config": SIZES[a.size], "partial": True,
                                    "finished_runs": len(runs)}, "runs": runs}, f, indent=1)
            print("experiment: %s had no results.json: collected the %d finished runs' summaries" % (a.replot, len(runs)))
        d = json.load(open(rp))
        tab = table(d["runs"])
        open(os.path.join(a.replot, "table.md"), "w").write(tab)
        plots(d["runs"], a.replot)
        print(tab)
        return
    cfg = SIZES[a.size]
    blockc = os.path.abspath(a.blockc)
    wirings = [w for w in a.only.split(",") if w]
    tasks = [t for t in a.tasks.split(",") if t]
    for w in wirings:
        if w not in WIRINGS:
            sys.exit("experiment: unknown wiring '%s' (%s)" % (w, ", ".join(WIRINGS)))
    for t in tasks:
        if t not in ("s2s", "lm"):
            sys.exit("experiment: unknown task '%s' (s2s, lm)" % t)
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    data = {}
    if "s2s" in tasks:
        data["s2s"] = s2s_data(cfg["s2s"], 12345, a.out)
    if "lm" in tasks:
        data["lm"] = lm_data(cfg["lm"], a.out)
    depths = cfg["depths"]
    if a.depths:
        depths = [int(d) for d in a.depths.split(",") if d]
        for d in depths:
            if d not in cfg["depths"]:
                sys.exit("experiment: depth %d is not one of the %s size's (%s)" % (
                    d, a.size, ", ".join(str(x) for x in cfg["depths"])))
    schedules = cfg["schedules"]
    if a.schedules:
        schedules = [x for x in a.schedules.split(",") if x]
        for x in schedules:
            if x not in cfg["schedules"]:
                sys.exit("experiment: schedule %s is not one of the %s size's (%s)" % (
                    x, a.size, ", ".join(cfg["schedules"])))
    runs = [Run(t, w, N, sch, s, cfg[t], data[t], a.out, blockc)
            for t in tasks for N in depths for sch in schedules
            for w in wirings for s in cfg["seeds"]]
    # the slowest first (deep s2s), so the two workers finish together
    runs.sort(key=lambda r: -(r.depth * (3 if r.task == "s2s" else 1)))
    print("experiment: %d runs (%s size), %d at a time, in %s" % (len(runs), a.size, a.jobs, a.out), flush=True)
    with open(blockc, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    reused = sum(1 for r in runs if not a.fresh and r.cached(sha) is not None)
    if reused:
        print("experiment: %d finished runs reused from %s (--fresh reruns them)" % (reused, a.out), flush=True)
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        for r in ex.map(lambda r: r.go(sha, a.fresh), runs):
            s = r.summary()
            results.append(s)
            print("  %-34s %s  val %s  %s%.0f s%s" % (
                s["name"], "diverged at %d" % s["diverged_at"] if s["diverged_at"] else
                ("error" if s["error"] else "ok"), fmt(s["final_val_loss"]),
                "exact %.1f%%  " % (100 * s["exact_match"]) if s["exact_match"] is not None else "",
                s["wall_s"], " (reused)" if hasattr(r, "reused") else ""), flush=True)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    meta = {"size": a.size, "config": cfg, "wall_s": time.time() - t0, "reused_runs": reused,
            "cpu_s": ru.ru_utime + ru.ru_stime, "load_avg_end": os.getloadavg()[0],
            "lm_text_bytes": data.get("lm", {}).get("bytes")}
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "runs": results}, f, indent=1)
    tab = table(results)
    open(os.path.join(a.out, "table.md"), "w").write(tab)
    plots(results, a.out)
    print()
    print(tab)
    print("experiment: %.0f s wall, %.0f s CPU (blockc's processes; load average %.1f at the end); "
          "results.json, table.md, loss.svg, grads.svg in %s" % (time.time() - t0, meta["cpu_s"],
                                                         meta["load_avg_end"], a.out))
    if a.check:
        bad = check(results, a.out, a.size)
        for b in bad:
            print("experiment: check: " + b, file=sys.stderr)
        if bad:
            sys.exit(1)
        print("experiment: check: %d runs, every metric present" % len(results))
    errs = [r for r in results if r["error"]]
    if errs:
        for r in errs:
            print("experiment: %s failed: %s" % (r["name"], r["error"]), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
