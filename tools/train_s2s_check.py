#!/usr/bin/python3
"""train_s2s_check.py - `blockc train` on a sequence-to-sequence graph
(examples/train/s2s.blk, issue 22) step for step against PyTorch 1.13's
torch.nn.Transformer trained on the same batches.

The reference: nn.Transformer(d_model=64, nhead=4, 2 + 2 layers,
dim_feedforward=256, dropout=0, batch_first=True, Post-LN) under the
graph's names (`transformer.*`), one nn.Embedding `embedding` shared by
source and target and scaled by sqrt(64) = 8, the sinusoidal positions of
docs/language.md, and an nn.Linear head `generator`.  Its initial weights
(PyTorch's own init, seeded) are written as safetensors and given to
`blockc train --weights`, so both start equal.

The data: a reverse task (src = s EOS, tgt = BOS reversed(s) EOS, pad 0),
as 2-D int32 .npy pair files.  The batches are docs/training.md's pairing,
rebuilt here independently: sequential order, micro-batch k row r = pair
(k*B + r) mod P; src fed its row (id 0 past its length L, src_key_padding_mask
and memory_key_padding_mask True at j >= L); tgt fed row[:-1] and the targets
row[1:] (-100 past the row's end, tgt_key_padding_mask True at j >= L - 1),
the causal tgt_mask; widths the files' (tgt's minus one).  The loss is
F.cross_entropy(..., ignore_index=-100); the step is clip_grad_norm_(1.0)
and torch.optim.AdamW (lr 3e-4, blockc's default; weight decay 0.01 on
parameters of rank >= 2 only, as blockc's rule), with --accum 2
micro-batches averaged, 30 steps.

Checked, on each backend (jit, aot): every step's loss (blockc's --log
against the reference's) within 1e-4 relative (measured: 1.1e-7; step 1
agrees to 6.5e-8, so the batches are the same), and the final weights
(blockc's --out) within 1e-4 absolute (measured 1.2e-5), leaving out the
key third of every in_proj_bias: its gradient is exactly zero in exact
arithmetic (softmax ignores a constant added to every score of a row), so
both sides update it from rounding noise, which AdamW's normalisation turns
into steps of up to lr either way: noise, not a disagreement.  (Faster
runs drift apart as any two float32 runs with different summation orders
do: at lr 1e-3 the losses differ by 2.5e-4 at step 20; `--optimizer sgd
--lr 0.03` passes, 7e-6; `--lr 0.1` passes for 20 steps, 8e-7, and not 30.)

Usage (Debian's /usr/bin/python3: torch + numpy):

    train_s2s_check.py --blockc build/blockc [--backends jit,aot] [--steps 30]
                       [--optimizer adamw|sgd] [--lr 3e-4] [--keep]
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from torch_export import write_safetensors  # noqa: E402

GRAPH = os.path.join(ROOT, "examples", "train", "s2s.blk")
D, H, FF, N, V = 64, 4, 256, 2, 32
PAD, BOS, EOS = 0, 1, 2
B, ACCUM, LR, WD, CLIP = 4, 2, 3e-4, 0.01, 1.0


def write_npy(path, a):
    a = np.ascontiguousarray(a, dtype="<i4")
    h = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d, %d), }" % a.shape
    h += " " * (-(10 + len(h) + 1) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode("latin-1"))
        f.write(a.tobytes())


def reverse_pairs(n, seed):
    rng = np.random.default_rng(seed)
    src = np.full((n, 12), PAD, np.int32)
    tgt = np.full((n, 13), PAD, np.int32)
    for i in range(n):
        L = int(rng.integers(3, 11))
        s = rng.integers(3, V, L)
        src[i, :L], src[i, L] = s, EOS
        tgt[i, 0], tgt[i, 1:L + 1], tgt[i, L + 1] = BOS, s[::-1], EOS
    return src, tgt


def lengths(a):
    """A row's length: the count before its first pad."""
    return np.array([int(np.argmax(r == PAD)) if (r == PAD).any() else len(r) for r in a])


def batch(src, tgt, k):
    """Micro-batch k of the documented pairing (sequential order)."""
    rows = [(k * B + r) % len(src) for r in range(B)]
    ls, lt = lengths(src[rows]), lengths(tgt[rows]) - 1
    W = tgt.shape[1] - 1
    s = src[rows].copy()
    t = np.zeros((B, W), np.int64)
    y = np.full((B, W), -100, np.int64)
    for r, row in enumerate(rows):
        s[r, ls[r]:] = 0
        t[r, :lt[r]] = tgt[row, :lt[r]]
        y[r, :lt[r]] = tgt[row, 1:lt[r] + 1]
    j_s, j_t = np.arange(src.shape[1]), np.arange(W)
    return (torch.tensor(s, dtype=torch.long), torch.tensor(t), torch.tensor(y),
            torch.tensor(j_s[None, :] >= ls[:, None]), torch.tensor(j_t[None, :] >= lt[:, None]))


def sinusoid(T):
    pe = np.zeros((T, D))
    pos = np.arange(T)[:, None]
    i2 = np.arange(0, D, 2)
    pe[:, 0::2] = np.sin(pos / 10000.0 ** (i2 / D))
    pe[:, 1::2] = np.cos(pos / 10000.0 ** (i2 / D))
    return torch.tensor(pe, dtype=torch.float32)


class S2S(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(V, D)
        self.transformer = torch.nn.Transformer(d_model=D, nhead=H, num_encoder_layers=N,
                                                num_decoder_layers=N, dim_feedforward=FF,
                                                dropout=0.0, batch_first=True)
        self.generator = torch.nn.Linear(D, V)

    def forward(self, s, t, s_pad, t_pad):
        # blockc: Positions(x) computes x + PE in double and rounds once.
        es = (self.embedding(s) * 8.0).double() + sinusoid(s.shape[1]).double()
        et = (self.embedding(t) * 8.0).double() + sinusoid(t.shape[1]).double()
        mask = torch.triu(torch.full((t.shape[1], t.shape[1]), float("-inf")), 1)
        y = self.transformer(es.float(), et.float(), tgt_mask=mask, src_key_padding_mask=s_pad,
                             tgt_key_padding_mask=t_pad, memory_key_padding_mask=s_pad)
        return self.generator(y)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype="<f4").reshape(v["shape"])
    return out


def reference(m, src, tgt, a):
    """The reference run: per-step losses, and the final state_dict."""
    decay = [p for p in m.parameters() if p.dim() >= 2]
    no_decay = [p for p in m.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}]
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(groups, lr=a.lr, momentum=0.0, foreach=False)
    else:
        opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.999), eps=1e-8, foreach=False)
    losses = []
    for step in range(a.steps):
        opt.zero_grad()
        total = 0.0
        for k in range(ACCUM):
            s, t, y, s_pad, t_pad = batch(src, tgt, step * ACCUM + k)
            loss = F.cross_entropy(m(s, t, s_pad, t_pad).reshape(-1, V), y.reshape(-1),
                                   ignore_index=-100)
            (loss / ACCUM).backward()
            total += loss.item() / ACCUM
        torch.nn.utils.clip_grad_norm_(m.parameters(), CLIP)
        opt.step()
        losses.append(total)
    return losses, {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}


def weights_diff(w, ref_state):
    """Max over tensors of max|w - ref|, the key biases left out."""
    worst = 0.0
    for name, ref in ref_state.items():
        got = w[name]
        if name.endswith("attn.in_proj_bias"):  # drop the key bias (see the docstring)
            ref, got = np.concatenate([ref[:D], ref[2 * D:]]), np.concatenate([got[:D], got[2 * D:]])
        r = float(np.abs(got - ref).max())
        if os.environ.get("S2S_VERBOSE"):
            print("  %-60s %.2e" % (name, r))
        worst = max(worst, r)
    return worst


def run_blockc(a, backend, tmp, init):
    log = os.path.join(tmp, "log-%s.jsonl" % backend)
    out = os.path.join(tmp, "out-%s.safetensors" % backend)
    cmd = [a.blockc, "train", GRAPH, "--data", "src=" + os.path.join(tmp, "src.npy"),
           "--data", "tgt=" + os.path.join(tmp, "tgt.npy"), "--weights", init,
           "--steps", str(a.steps), "--batch", str(B), "--accum", str(ACCUM), "--lr", repr(a.lr),
           "--optimizer", a.optimizer, "--weight-decay", str(WD), "--clip", str(CLIP),
           "--data-order", "sequential", "--backend", backend, "--threads", "1", "--log", log,
           "--out", out]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return [json.loads(line)["loss"] for line in open(log)], read_safetensors(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blockc", default=os.path.join(ROOT, "build", "blockc"))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--backends", default="jit,aot")
    ap.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd"])
    ap.add_argument("--lr", type=float, default=LR)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(1)
    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp(prefix="s2s-check-")
    try:
        src, tgt = reverse_pairs(200, 3)
        write_npy(os.path.join(tmp, "src.npy"), src)
        write_npy(os.path.join(tmp, "tgt.npy"), tgt)
        m = S2S()
        init = os.path.join(tmp, "init.safetensors")
        write_safetensors(init, dict(m.state_dict()))
        want, ref_state = reference(m, src, tgt, a)
        failed = False
        for backend in a.backends.split(","):
            got, w = run_blockc(a, backend, tmp, init)
            rel = [abs(g - t) / abs(t) for g, t in zip(got, want)]
            for i in (0, len(rel) // 2, len(rel) - 1):
                print("%s step %2d  blockc %.6f  torch %.6f  rel %.2e" % (backend, i + 1, got[i],
                                                                          want[i], rel[i]))
            wrel = weights_diff(w, ref_state)
            ok = len(got) == a.steps and max(rel) <= 1e-4 and wrel <= 1e-4
            failed |= not ok
            print("%s: loss %.4f -> %.4f; worst relative loss difference %.2e over %d steps (limit "
                  "1e-4), final weights max|difference| %.2e (limit 1e-4): %s" % (backend, want[0], want[-1],
                                                                 max(rel), a.steps, wrel,
                                                                 "ok" if ok else "FAIL"))
        return 1 if failed else 0
    finally:
        if a.keep:
            print("kept", tmp)
        else:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    sys.exit(main())
