"""Small float64 building blocks shared verbatim by the three numpy references
(minimax_m2.py, minimax_text01.py, minimax_m3.py).

Only generic pieces live here: error classes, RMSNorm, partial NeoX RoPE, softmax / SiLU /
sigmoid, top-k with lowest-id ties, the routed-expert loop, config.json loading, token-id
checks, the KV/recurrent-cached greedy loop, and the common CLI plumbing. Each family's own
math (lightning recurrence, MSA selection, routers, weight decoding) stays in its own file.
Like the references, this shares no code with the C++ engine: numpy and safetensors_np only.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_np import Checkpoint, SafetensorsError  # noqa: E402


class ModelError(Exception):
    """Model / checkpoint problem (exit code 1)."""


class InputError(Exception):
    """Bad user input (exit code 2)."""


# --------------------------------------------------------------------------------------------
# math helpers (all float64)


def rms_norm(x, w, eps):
    """x / sqrt(mean(x^2) + eps) * w over the last axis."""
    ms = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(ms + eps) * w


def rope_neox(x, positions, rotary_dim, theta):
    """Partial NeoX ("rotate_half") RoPE on the first rotary_dim channels of each head.
    x: [T, H, head_dim]; positions: [T] absolute indices; inv_freq[i] = θ^(−2i/rotary_dim)."""
    if rotary_dim == 0:
        return x
    half = rotary_dim // 2
    i = np.arange(half, dtype=np.float64)
    inv_freq = theta ** (-2.0 * i / rotary_dim)                      # [half]
    ang = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]   # [T, half]
    cos = np.cos(ang)[:, None, :]
    sin = np.sin(ang)[:, None, :]
    x1 = x[..., :half]
    x2 = x[..., half:rotary_dim]
    y = x.copy()
    y[..., :half] = x1 * cos - x2 * sin
    y[..., half:rotary_dim] = x2 * cos + x1 * sin
    return y


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def topk_lowest_id_ties(scores, k):
    """Indices of the k largest entries per row, descending; equal scores -> lower index first.
    A stable sort of -scores keeps equal keys in index order."""
    order = np.argsort(-scores, axis=-1, kind="stable")
    return order[..., :k]


def routed_experts(like, x, sel, wsel, w1, w3, w2, act):
    """Σ_slots wsel · w2[e]·act(w1[e]·x, w3[e]·x) over the selected experts, token rows that
    picked expert e evaluated together. like: array whose shape/dtype the result takes;
    act(g, u): the gated activation (SiLU-GLU: silu(g) · u)."""
    out = np.zeros_like(like)
    for e in np.unique(sel):
        rows, slot = np.nonzero(sel == e)
        xe = x[rows]
        ye = act(xe @ w1[e].T, xe @ w3[e].T) @ w2[e].T
        out[rows] += wsel[rows, slot][:, None] * ye
    return out


def silu_glu(g, u):
    return silu(g) * u


# --------------------------------------------------------------------------------------------
# model plumbing


def read_attn_geometry(c, cfg, need):
    """hidden / n_layers / n_heads / n_kv_heads / head_dim / rotary_dim / rope_theta onto the
    config object c (rotary_dim from partial_rotary_factor when absent)."""
    c.hidden = int(need("hidden_size"))
    c.n_layers = int(need("num_hidden_layers"))
    c.n_heads = int(need("num_attention_heads"))
    c.n_kv_heads = int(cfg.get("num_key_value_heads") or c.n_heads)
    hd = cfg.get("head_dim")
    c.head_dim = int(hd) if hd else c.hidden // c.n_heads
    rd = cfg.get("rotary_dim")
    if rd is None:
        rd = float(cfg.get("partial_rotary_factor", 1.0)) * c.head_dim
    c.rotary_dim = int(rd)
    c.rope_theta = float(cfg.get("rope_theta", 10000.0))


def load_config(path):
    """config.json of checkpoint directory `path` as a dict (ModelError if absent / bad)."""
    cpath = os.path.join(path, "config.json")
    try:
        with open(cpath) as f:
            return json.load(f)
    except FileNotFoundError:
        raise ModelError(f"{cpath}: not found") from None
    except json.JSONDecodeError as e:
        raise ModelError(f"{cpath}: bad JSON: {e}") from None


def check_ids(ids, vocab):
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    if ids.size == 0:
        raise InputError("no token ids given")
    bad = ids[(ids < 0) | (ids >= vocab)]
    if bad.size:
        raise InputError(f"token id {int(bad[0])} out of range [0, {vocab})")
    return ids


def greedy_decode(model, ids, n, dump=None):
    """n greedy tokens (argmax; np.argmax returns the lowest id among ties): the prompt in one
    forward, then one token per forward through model.new_cache()."""
    cache = model.new_cache()
    logits = model.forward(ids, cache, dump=dump)
    out = []
    for step in range(n):
        nxt = int(np.argmax(logits[-1]))
        out.append(nxt)
        if step + 1 < n:
            logits = model.forward([nxt], cache)
    return out


class ReferenceBase:
    """What the three reference models share: loading from a checkpoint directory, tensor
    presence, token-id checks and the cached greedy loop. Subclasses set self.cfg (with .vocab)
    and self.src, and define new_cache() / forward(ids, cache, dump=...)."""

    @classmethod
    def from_dir(cls, path):
        return cls(load_config(path), Checkpoint(path))

    def _require(self, name):
        if name not in self.src:
            raise ModelError(f"tensor not found in checkpoint: {name}")

    def check_ids(self, ids):
        return check_ids(ids, self.cfg.vocab)

    def greedy(self, ids, n, dump=None):
        """n greedy tokens (argmax; np.argmax returns the lowest id among ties): the prompt in
        one forward, then one query per forward with the KV / recurrent cache."""
        return greedy_decode(self, ids, n, dump)


class SelfCheck:
    """check(cond, name, detail="") for the closed-form self-tests; failed names in .fails."""

    def __init__(self):
        self.fails = []

    def __call__(self, cond, name, detail=""):
        print(("  ok    " if cond else "  FAIL  ") + name + (f"  ({detail})" if detail else ""))
        if not cond:
            self.fails.append(name)


# --------------------------------------------------------------------------------------------
# CLI


def parse_ids(s):
    try:
        ids = [int(t) for t in s.replace(" ", "").split(",") if t != ""]
    except ValueError:
        raise InputError(f"--ids must be comma-separated integers, got {s!r}") from None
    if not ids:
        raise InputError("--ids is empty")
    return ids


def add_cli_args(ap):
    """-m, --ids, -o | --greedy N, --dump-dir (the part of the CLI all references share)."""
    ap.add_argument("-m", "--model", required=True, help="checkpoint directory")
    ap.add_argument("--ids", required=True, help="comma-separated token ids")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("-o", "--out", help="write float32 LE logits [n_ids, vocab] here")
    g.add_argument("--greedy", type=int, metavar="N", help="print N greedy ids")
    ap.add_argument("--dump-dir", help="write per-layer intermediates (.npy) of the prompt pass")


def add_self_test_arg(ap):
    ap.add_argument("--self-test", action="store_true", help="closed-form checks, then exit")


def check_greedy_arg(args):
    if args.greedy is not None and args.greedy < 0:
        raise InputError("--greedy N must be >= 0")


def write_logits(path, logits):
    """Raw little-endian float32, row-major [n_ids, vocab]."""
    logits.astype("<f4").tofile(path)


def print_ids(toks):
    print(" ".join(str(t) for t in toks), flush=True)


def save_dump(dump_dir, dump):
    if dump is not None:
        os.makedirs(dump_dir, exist_ok=True)
        for name, val in dump.items():
            np.save(os.path.join(dump_dir, name + ".npy"), val)


def run_cli(prog, body):
    """body() with the exit-code contract: 0 ok, 2 bad input, 1 model / checkpoint errors."""
    try:
        body()
    except InputError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except (ModelError, SafetensorsError, OSError, ValueError, KeyError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    return 0


def simple_main(argv, prog, description, model_cls, self_test=None):
    """The whole CLI of a reference without family-specific options: -m / --ids / -o |
    --greedy / --dump-dir, plus --self-test when `self_test` is given."""
    if self_test is not None:
        argv = sys.argv[1:] if argv is None else argv
        if "--self-test" in argv:
            return self_test()
    ap = argparse.ArgumentParser(description=description)
    add_cli_args(ap)
    if self_test is not None:
        add_self_test_arg(ap)
    args = ap.parse_args(argv)

    def body():
        ids = parse_ids(args.ids)
        check_greedy_arg(args)
        model = model_cls.from_dir(args.model)
        ids = model.check_ids(ids)
        dump = {} if args.dump_dir else None
        if args.out:
            write_logits(args.out, model.forward(ids, dump=dump))
        else:
            print_ids(model.greedy(ids, args.greedy, dump=dump))
        save_dump(args.dump_dir, dump)
    return run_cli(prog, body)
