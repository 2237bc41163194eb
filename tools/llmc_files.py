#!/usr/bin/python3
"""llmc_files.py - the files tools/bench_train.py feeds every trainer: a
token file in llm.c's format and a random-weight GPT-2 checkpoint in the
layout llm.c's train_gpt2.c reads (gpt2_build_from_checkpoint), so llm.c's
train_gpt2 runs at any config without downloading GPT-2.

  data .bin   256 int32 header: [0] = 20240520 (magic), [1] = 1 (version),
              [2] = number of tokens; then the tokens as uint16
              (llmc/dataloader.h).  Ids are uniform in 0..V-1, seeded.
  model .bin  256 int32 header: [0] = 20240326, [1] = 3 (float32),
              [2] = maxT, [3] = V, [4] = L, [5] = NH, [6] = C, [7] = Vp
              (padded vocab); then float32 tensors in this order
              (fill_in_parameter_sizes): wte [Vp, C], wpe [maxT, C],
              ln1w [L, C], ln1b [L, C], qkvw [L, 3C, C], qkvb [L, 3C],
              attprojw [L, C, C], attprojb [L, C], ln2w, ln2b [L, C],
              fcw [L, 4C, C], fcb [L, 4C], fcprojw [L, C, 4C],
              fcprojb [L, C], lnfw [C], lnfb [C].  Weights normal(0, 0.02),
              biases 0, LayerNorm gains 1 (GPT-2's init; speed does not
              depend on the values).

Usage: llmc_files.py --data OUT.bin --tokens N --vocab V
       llmc_files.py --model OUT.bin --vocab V --maxT P --layers L --heads H --channels C
"""
import argparse
import sys

import numpy as np


def write_data(path, ntok, V, seed):
    hdr = np.zeros(256, dtype=np.int32)
    hdr[0], hdr[1], hdr[2] = 20240520, 1, ntok
    tok = np.random.default_rng(seed).integers(0, V, size=ntok, dtype=np.int64).astype(np.uint16)
    with open(path, "wb") as f:
        f.write(hdr.tobytes())
        f.write(tok.tobytes())


def write_model(path, V, P, L, H, C, seed):
    Vp = (V + 127) // 128 * 128
    hdr = np.zeros(256, dtype=np.int32)
    hdr[:8] = [20240326, 3, P, V, L, H, C, Vp]
    rng = np.random.default_rng(seed)

    def normal(*shape):
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)

    zeros, ones = (lambda *s: np.zeros(s, np.float32)), (lambda *s: np.ones(s, np.float32))
    wte = normal(Vp, C)
    wte[V:] = 0
    tensors = [wte, normal(P, C), ones(L, C), zeros(L, C), normal(L, 3 * C, C), zeros(L, 3 * C),
               normal(L, C, C), zeros(L, C), ones(L, C), zeros(L, C), normal(L, 4 * C, C),
               zeros(L, 4 * C), normal(L, C, 4 * C), zeros(L, C), ones(C), zeros(C)]
    with open(path, "wb") as f:
        f.write(hdr.tobytes())
        for t in tensors:
            f.write(np.ascontiguousarray(t, dtype=np.float32).tobytes())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data")
    p.add_argument("--model")
    p.add_argument("--tokens", type=int, default=1 << 16)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--maxT", type=int, default=1024)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--channels", type=int, default=512)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if not (0 < a.vocab <= 65536):
        sys.exit("llmc_files.py: error: --vocab must be 1..65536 (uint16 tokens)")
    if a.data:
        write_data(a.data, a.tokens, a.vocab, a.seed)
    if a.model:
        write_model(a.model, a.vocab, a.maxT, a.layers, a.heads, a.channels, a.seed)
    if not (a.data or a.model):
        sys.exit("llmc_files.py: error: give --data and/or --model")


if __name__ == "__main__":
    main()
