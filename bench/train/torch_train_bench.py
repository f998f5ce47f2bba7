#!/usr/bin/python3
"""Training throughput of the PyTorch reference (reference/torch_models.py), the yardstick for
the C++ training code: float32, torch.optim.AdamW, on random or given token batches.

  torch_train_bench.py -m DIR [--batch B] [--seq-len T] [--steps N] [--warmup W]
                       [--threads N] [--data FILE.npy] [--lr LR] [--seed S]
                       [--index-loss-weight W]

One step = zero_grad + forward + loss (the training-loss contract of torch_models.py) +
backward + AdamW step on a batch of B sequences of T input tokens (a [B, T+1] id array).
--data: an int .npy [N, T+1] of batches (rows taken B at a time, cycling; T is its width - 1);
otherwise uniform random ids in [0, vocab). Timed: the steps after --warmup; reported: the
median step time as tokens/s (B·T input tokens per step). Per-step lines go to stderr; the last
stdout line is `torch_tokens_per_s=<x>`.
Exit codes: 0 ok, 2 bad input.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "reference"))
from torch_models import InputError, load_model, training_loss, check_batch  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch reference training throughput")
    ap.add_argument("-m", "--model", required=True, help="checkpoint directory")
    ap.add_argument("--batch", type=int, default=4, help="sequences per step (default 4)")
    ap.add_argument("--seq-len", type=int, default=128, help="input tokens per sequence")
    ap.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--data", help="int .npy [N, T+1] of token batches")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--index-loss-weight", type=float, default=0.0, metavar="W")
    args = ap.parse_args(argv)
    try:
        for k in ("batch", "seq_len", "steps", "threads"):
            if getattr(args, k) < 1:
                raise InputError(f"--{k.replace('_', '-')} must be >= 1")
        if args.warmup < 0:
            raise InputError("--warmup must be >= 0")
        torch.set_num_threads(args.threads)
        torch.manual_seed(args.seed)
        model = load_model(args.model, torch.float32)
        if args.index_loss_weight and model.family != "m3":
            raise InputError("--index-loss-weight applies to MiniMax-M3 checkpoints only")
        V = model.c.vocab
        rng = np.random.default_rng(args.seed)
        if args.data:
            try:
                data = np.load(args.data, allow_pickle=False)
            except (OSError, ValueError) as e:
                raise InputError(f"--data {args.data}: {e}") from None
            data = check_batch(data, V)
            T = data.shape[1] - 1
        else:
            data, T = None, args.seq_len
        B = args.batch
        opt = torch.optim.AdamW(list(model.params.values()), lr=args.lr)
        times, losses = [], []
        row = 0
        for step in range(args.warmup + args.steps):
            if data is None:
                batch = torch.from_numpy(rng.integers(0, V, (B, T + 1)).astype(np.int64))
            else:
                idx = [(row + i) % data.shape[0] for i in range(B)]
                row += B
                batch = data[idx]
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            total, ce, kl = training_loss(model, batch, index_loss_weight=args.index_loss_weight)
            total.backward()
            opt.step()
            dt = time.perf_counter() - t0
            losses.append(float(total))
            timed = step >= args.warmup
            if timed:
                times.append(dt)
            print(f"step {step:3d}{'' if timed else ' (warm-up)'}: loss {float(total):.5f}  "
                  f"{dt * 1e3:.1f} ms  {B * T / dt:.1f} tok/s", file=sys.stderr, flush=True)
        med = statistics.median(times)
        print(f"{model.family}: B={B} T={T} threads={args.threads} params="
              f"{sum(p.numel() for p in model.params.values())} median step {med * 1e3:.2f} ms "
              f"over {len(times)} steps; loss {losses[0]:.4f} -> {losses[-1]:.4f}")
        print(f"torch_tokens_per_s={B * T / med:.1f}")
        return 0
    except InputError as e:
        print(f"torch_train_bench.py: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
