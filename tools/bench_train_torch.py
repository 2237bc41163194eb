#!/usr/bin/python3
"""bench_train_torch.py - PyTorch's training step on the same GPT-2-style LM,
data and optimizer as tools/bench_train.c, for `make bench-train` (not a
test).  The model is tools/lm_check.py's GPT2LMHeadModel (Hugging Face names
and equations: Conv1D, gelu_new, masked softmax attention, tied head); one
step is what a PyTorch training loop does: zero_grad(set_to_none=True),
forward, F.cross_entropy over V on the next-token targets, backward,
clip_grad_norm_(1.0), torch.optim.AdamW(lr 3e-4, betas 0.9/0.999, eps 1e-8,
weight decay 0.01 on rank >= 2 parameters); GPT-2's init.  Batches are llm.c's
sequential windows of the llm.c token file given.  Prints one JSON line:
median ms per step, tokens/s, peak RSS (ru_maxrss: the whole process,
Python and torch included; base_rss_mb is the RSS before the model exists).

Usage: bench_train_torch.py DATA.bin --threads N [--steps S] [--warmup W]
       [-D NAME=VALUE]... (D, N, H, V, B, T, P; F = 4 D)
"""
import argparse
import json
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lm_check  # noqa: E402  (torch, numpy, the reference modules)

torch, np = lm_check.torch, lm_check.np
F = torch.nn.functional


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("data")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("-D", action="append", default=[])
    a = p.parse_args()
    cfg = dict(D=512, N=6, H=8, V=8192, B=4, T=128, P=1024)
    for d in a.D:
        k, _, v = d.partition("=")
        cfg[k] = int(v)
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    base = rss_mb()
    raw = np.fromfile(a.data, dtype=np.int32, count=256)
    if raw[0] != 20240520:
        sys.exit("bench_train_torch.py: error: %s: not an llm.c token file" % a.data)
    tok = np.fromfile(a.data, dtype=np.uint16, offset=1024)[: raw[2]].astype(np.int64)
    D, V, B, T = cfg["D"], cfg["V"], cfg["B"], cfg["T"]
    model = lm_check.GPT2LMHeadModel(V, cfg["P"], D, cfg["H"], 4 * D, cfg["N"]).float()
    with torch.no_grad():  # GPT-2's init (normal 0.02, LayerNorm 1 / 0), as the other trainers
        for name, q in model.named_parameters():
            if q.dim() >= 2:
                q.normal_(0.0, 0.02)
            elif "ln" in name and name.endswith("weight"):
                q.fill_(1.0)
            else:
                q.zero_()
    params = [q for q in model.parameters()]
    groups = [{"params": [q for q in params if q.dim() >= 2], "weight_decay": 0.01},
              {"params": [q for q in params if q.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=3e-4, betas=(0.9, 0.999), eps=1e-8)
    pos, times, loss = 0, [], None
    for _ in range(a.steps + a.warmup):
        t0 = time.perf_counter()
        if pos + B * T + 1 > len(tok):
            pos = 0
        w = torch.from_numpy(tok[pos: pos + B * T + 1])
        pos += B * T
        x, y = w[:-1].view(B, T), w[1:].view(B, T)
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, V), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        times.append((time.perf_counter() - t0) * 1e3)
    ms = float(np.median(times[a.warmup:]))
    print(json.dumps({"what": "pytorch", "threads": a.threads, "torch": torch.__version__,
                      "B": B, "T": T, "steps": a.steps, "ms": round(ms, 3),
                      "tokens_per_s": round(B * T / ms * 1e3, 1),
                      "peak_rss_mb": round(rss_mb(), 1), "base_rss_mb": round(base, 1),
                      "last_loss": round(float(loss), 4)}))


if __name__ == "__main__":
    main()
