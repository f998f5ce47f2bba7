#!/usr/bin/python3
"""Training loss and parameter gradients of a MiniMax checkpoint, from the independent PyTorch
implementation in torch_models.py (a second opinion on the C++ gradients, issue 11).

  torch_grad.py -m DIR --batch FILE.npy [--dtype float64|float32] [--mask FILE.npy]
                [--positions FILE.npy | --depth-positions] [--index-loss-weight W]
                [--threads N] -o OUT.safetensors

  --batch      int array [B, T+1]: inputs = batch[:, :-1], targets = batch[:, 1:]; a target of -1
               is ignored and not counted (an input -1 is embedded as token 0)
  --mask       bool (or 0/1) [T, T] or [B, T, T], True = query i may see key j; default causal.
               Must lie within the causal mask and have the diagonal set.
  --positions  int [T] or [B, T] RoPE positions (and lightning decay distances); default 0..T-1
               (also with --mask, as `mmx grad`)
  --depth-positions  positions = the number of keys a token sees minus one (with --mask: the
               depth of a token in a tree mask)
  --index-loss-weight W   M3 only: loss = ce + W · kl (MSA indexer KL, see torch_models.py);
               default 0 = CE only
  -o           safetensors file of F64 tensors: "loss" [1] (= the total loss), and for every
               trainable checkpoint tensor its gradient under the HF name and shape
               (e_score_correction_bias is not trainable and is skipped)

Prints loss / ce / kl on stdout. Exit codes: 0 ok, 2 bad input (with a message), 1 other errors.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_models import (InputError, load_model, training_loss, check_batch,  # noqa: E402
                          check_mask, make_positions)

PROG = "torch_grad.py"


def write_safetensors_f64(path, tensors):
    """tensors: list of (name, float64 numpy array). Header padded with spaces to 8 bytes."""
    header, off, blobs = {}, 0, []
    for name, a in tensors:
        b = np.ascontiguousarray(a, dtype="<f8").tobytes()
        header[name] = {"dtype": "F64", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_npy(path, what):
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise InputError(f"{what} {path}: cannot read .npy: {e}") from None


def compute(model_dir, batch, dtype=torch.float64, mask=None, positions=None,
            index_loss_weight=0.0, depth_positions=False):
    """-> (model, loss_total, ce, kl, {name: grad float64 numpy}) for numpy inputs."""
    model = load_model(model_dir, dtype)
    b = check_batch(batch, model.c.vocab)
    B, T = b.shape[0], b.shape[1] - 1
    m = check_mask(mask, B, T) if mask is not None else None
    if depth_positions:
        if positions is not None:
            raise InputError("--positions and --depth-positions are exclusive")
        if m is None:
            m = check_mask(np.tril(np.ones((T, T), dtype=bool)), B, T)
    pos = make_positions(B, T, m, positions, depth=depth_positions)
    if index_loss_weight and model.family != "m3":
        raise InputError("--index-loss-weight applies to MiniMax-M3 (MSA) checkpoints only")
    total, ce, kl = training_loss(model, b, m, pos, index_loss_weight)
    total.backward()
    grads = {}
    for name, p in model.params.items():
        g = p.grad
        grads[name] = (np.zeros(tuple(p.shape)) if g is None
                       else g.detach().to(torch.float64).numpy())
    return model, float(total), float(ce), (None if kl is None else float(kl)), grads


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True, help="checkpoint directory")
    ap.add_argument("--batch", required=True, help="int .npy [B, T+1]")
    ap.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    ap.add_argument("--mask", help="bool .npy [T, T] or [B, T, T]")
    ap.add_argument("--positions", help="int .npy [T] or [B, T]")
    ap.add_argument("--depth-positions", action="store_true",
                    help="positions = keys a token sees - 1 (tree depth)")
    ap.add_argument("--index-loss-weight", type=float, default=0.0, metavar="W")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    ap.add_argument("-o", "--out", required=True, help="output .safetensors")
    args = ap.parse_args(argv)
    try:
        if args.threads < 0:
            raise InputError("--threads must be >= 0")
        if args.threads:
            torch.set_num_threads(args.threads)
        if not np.isfinite(args.index_loss_weight) or args.index_loss_weight < 0:
            raise InputError("--index-loss-weight must be a finite number >= 0")
        batch = load_npy(args.batch, "--batch")
        mask = load_npy(args.mask, "--mask") if args.mask else None
        pos = load_npy(args.positions, "--positions") if args.positions else None
        dtype = torch.float64 if args.dtype == "float64" else torch.float32
        model, total, ce, kl, grads = compute(args.model, batch, dtype, mask, pos,
                                              args.index_loss_weight, args.depth_positions)
        if not np.isfinite(total):
            print(f"{PROG}: error: loss is not finite ({total})", file=sys.stderr)
            return 1
        out = [("loss", np.array([total]))] + [(n, grads[n]) for n in sorted(grads)]
        write_safetensors_f64(args.out, out)
        skipped = [n for n in model.unused_tensors()]
        print(f"loss={total:.17g} ce={ce:.17g}" + ("" if kl is None else f" kl={kl:.17g}")
              + f" family={model.family} params={len(grads)} consts={len(model.consts)}"
              + (f" unused_checkpoint_tensors={len(skipped)}" if skipped else ""))
        return 0
    except InputError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
