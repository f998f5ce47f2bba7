#!/usr/bin/python3
"""Independent float64 numpy reference forward of MiniMaxM2ForCausalLM.

Written only from docs/minimax-architecture.md (§2 conventions, §4 MiniMax-M2, §7, §8) -- it
deliberately shares no code with the C++ engine. Every activation is float64; stored weights
(F32 / F16 / BF16 / F8_E4M3 + weight_scale_inv) are decoded exactly to float64 first.

CLI:
  minimax_m2.py -m DIR --ids 1,2,3 -o FILE      logits of every position, raw little-endian
                                                float32, row-major [n_ids, vocab_size]
  minimax_m2.py -m DIR --ids 1,2,3 --greedy N   N greedy ids (argmax, ties -> lowest id),
                                                space-separated on one stdout line
  --dump-dir D                                  per-layer intermediates as .npy (prompt pass)
Exit codes: 0 ok, 2 bad input (ids, arguments), 1 model / checkpoint errors.
"""

import argparse
import json
import math
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
# config


class M2Config:
    def __init__(self, cfg):
        def need(key):
            if key not in cfg:
                raise ModelError(f"config.json: missing required key {key!r}")
            return cfg[key]

        self.raw = cfg
        self.hidden = int(need("hidden_size"))
        self.n_layers = int(need("num_hidden_layers"))
        self.n_heads = int(need("num_attention_heads"))
        self.n_kv_heads = int(cfg.get("num_key_value_heads") or self.n_heads)
        hd = cfg.get("head_dim")
        self.head_dim = int(hd) if hd else self.hidden // self.n_heads
        rd = cfg.get("rotary_dim")
        if rd is None:
            rd = float(cfg.get("partial_rotary_factor", 1.0)) * self.head_dim
        self.rotary_dim = int(rd)
        self.rope_theta = float(cfg.get("rope_theta", 10000.0))
        self.intermediate = int(need("intermediate_size"))
        self.n_experts = int(need("num_local_experts"))
        self.top_k = int(need("num_experts_per_tok"))
        self.eps = float(cfg.get("rms_norm_eps", 1e-6))
        self.vocab = int(need("vocab_size"))
        self.use_qk_norm = bool(cfg.get("use_qk_norm", True))
        self.qk_norm_type = cfg.get("qk_norm_type", "per_layer")
        self.use_routing_bias = bool(cfg.get("use_routing_bias", True))
        self.scoring_func = cfg.get("scoring_func", "sigmoid")
        self.tie_embeddings = bool(cfg.get("tie_word_embeddings", False))
        qc = cfg.get("quantization_config") or {}
        bs = qc.get("weight_block_size") or [128, 128]
        self.block_out, self.block_in = int(bs[0]), int(bs[1])

        # Only what §4 specifies is implemented; anything else is refused, not guessed.
        if self.n_heads % self.n_kv_heads:
            raise ModelError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.rotary_dim % 2 or not (0 <= self.rotary_dim <= self.head_dim):
            raise ModelError(f"rotary_dim {self.rotary_dim} must be even and <= head_dim")
        if self.use_qk_norm and self.qk_norm_type != "per_layer":
            raise ModelError(f"qk_norm_type {self.qk_norm_type!r} not supported (spec §4.4 "
                                  "defines only 'per_layer')")
        if self.scoring_func != "sigmoid":
            raise ModelError(f"scoring_func {self.scoring_func!r} not supported (M2: sigmoid)")
        if not (1 <= self.top_k <= self.n_experts):
            raise ModelError("num_experts_per_tok out of range")
        if self.block_out <= 0 or self.block_in <= 0:
            raise ModelError("weight_block_size must be positive")
        if cfg.get("shared_intermediate_size", 0):
            raise ModelError("shared experts are not part of M2 (shared_intermediate_size 0)")


# --------------------------------------------------------------------------------------------
# math helpers (all float64)


def rms_norm(x, w, eps):
    """x / sqrt(mean(x^2) + eps) * w over the last axis."""
    ms = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(ms + eps) * w


def rope_neox(x, positions, rotary_dim, theta):
    """Partial NeoX ("rotate_half") RoPE on the first rotary_dim channels of each head.
    x: [T, H, head_dim]; positions: [T] absolute indices."""
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


def topk_lowest_id_ties(scores, k):
    """Indices of the k largest entries per row, descending; equal scores -> lower index first.
    A stable sort of -scores keeps equal keys in index order."""
    order = np.argsort(-scores, axis=-1, kind="stable")
    return order[..., :k]


# --------------------------------------------------------------------------------------------
# model


class M2Reference:
    def __init__(self, cfg, source):
        """cfg: dict (config.json contents); source: Checkpoint-like (get_f64/dtype/shape/in)."""
        self.cfg = c = M2Config(cfg)
        self.src = source
        d, hd = c.hidden, c.head_dim
        qw, kw = c.n_heads * hd, c.n_kv_heads * hd

        self.embed = self._plain("model.embed_tokens.weight", (c.vocab, d))
        self.norm = self._plain("model.norm.weight", (d,))
        if "lm_head.weight" in source:
            self.lm_head = self._linear("lm_head.weight", c.vocab, d)
        elif c.tie_embeddings:
            self.lm_head = self.embed
        else:
            raise ModelError("lm_head.weight missing and tie_word_embeddings is false")

        self.layers = []
        for L in range(c.n_layers):
            p = f"model.layers.{L}."
            a = p + "self_attn."
            m = p + "block_sparse_moe."
            lw = {
                "in_norm": self._plain(p + "input_layernorm.weight", (d,)),
                "post_norm": self._plain(p + "post_attention_layernorm.weight", (d,)),
                "wq": self._linear(a + "q_proj.weight", qw, d),
                "wk": self._linear(a + "k_proj.weight", kw, d),
                "wv": self._linear(a + "v_proj.weight", kw, d),
                "wo": self._linear(a + "o_proj.weight", d, qw),
                "gate": self._linear(m + "gate.weight", c.n_experts, d),
            }
            if c.use_qk_norm:
                lw["q_norm"] = self._plain(a + "q_norm.weight", (qw,))
                lw["k_norm"] = self._plain(a + "k_norm.weight", (kw,))
            if c.use_routing_bias:
                lw["bias"] = self._plain(m + "e_score_correction_bias", (c.n_experts,))
            else:
                lw["bias"] = np.zeros(c.n_experts)
            lw["w1"] = np.stack([self._linear(f"{m}experts.{e}.w1.weight", c.intermediate, d)
                                 for e in range(c.n_experts)])
            lw["w3"] = np.stack([self._linear(f"{m}experts.{e}.w3.weight", c.intermediate, d)
                                 for e in range(c.n_experts)])
            lw["w2"] = np.stack([self._linear(f"{m}experts.{e}.w2.weight", d, c.intermediate)
                                 for e in range(c.n_experts)])
            self.layers.append(lw)

    @classmethod
    def from_dir(cls, path):
        cpath = os.path.join(path, "config.json")
        try:
            with open(cpath) as f:
                cfg = json.load(f)
        except FileNotFoundError:
            raise ModelError(f"{cpath}: not found") from None
        except json.JSONDecodeError as e:
            raise ModelError(f"{cpath}: bad JSON: {e}") from None
        return cls(cfg, Checkpoint(path))

    # ---- weight loading

    def _require(self, name):
        if name not in self.src:
            raise ModelError(f"tensor not found in checkpoint: {name}")

    def _plain(self, name, shape):
        self._require(name)
        if self.src.dtype(name) == "F8_E4M3":
            raise ModelError(f"{name}: unexpected F8_E4M3 for a non-linear tensor")
        w = self.src.get_f64(name)
        if tuple(w.shape) != tuple(shape):
            raise ModelError(f"{name}: shape {list(w.shape)} != expected {list(shape)}")
        return w

    def _linear(self, name, out_f, in_f):
        """[out, in] weight as float64; F8_E4M3 is dequantized with `<name>_scale_inv`:
        W[o, i] = fp8[o, i] * scale_inv[o // bo, i // bi] (the "inv" tensor multiplies)."""
        self._require(name)
        w = self.src.get_f64(name)
        if tuple(w.shape) != (out_f, in_f):
            raise ModelError(f"{name}: shape {list(w.shape)} != expected {[out_f, in_f]}")
        sname = name + "_scale_inv"
        if self.src.dtype(name) == "F8_E4M3":
            if sname not in self.src:
                raise ModelError(f"{name} is F8_E4M3 but {sname} is missing")
            bo, bi = self.cfg.block_out, self.cfg.block_in
            s = self.src.get_f64(sname)
            want = (-(-out_f // bo), -(-in_f // bi))
            if tuple(s.shape) != want:
                raise ModelError(f"{sname}: shape {list(s.shape)} != expected {list(want)} "
                                      f"for block [{bo}, {bi}]")
            full = np.repeat(np.repeat(s, bo, axis=0), bi, axis=1)[:out_f, :in_f]
            w = w * full
        elif sname in self.src:
            raise ModelError(f"{sname} present but {name} is {self.src.dtype(name)}, not fp8")
        return w

    # ---- forward

    def new_cache(self):
        """Per-layer KV cache: lists of K / V blocks, each [T, n_kv_heads, head_dim]."""
        return [{"k": np.zeros((0, self.cfg.n_kv_heads, self.cfg.head_dim)),
                 "v": np.zeros((0, self.cfg.n_kv_heads, self.cfg.head_dim))}
                for _ in range(self.cfg.n_layers)]

    def check_ids(self, ids):
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if ids.size == 0:
            raise InputError("no token ids given")
        bad = ids[(ids < 0) | (ids >= self.cfg.vocab)]
        if bad.size:
            raise InputError(f"token id {int(bad[0])} out of range [0, {self.cfg.vocab})")
        return ids

    def forward(self, ids, cache=None, dump=None):
        """Logits [T, vocab] for the tokens `ids`, which sit at absolute positions
        len(cache) .. len(cache)+T-1 (0.. without a cache). The cache is extended in place.
        dump: optional dict receiving named intermediates."""
        c = self.cfg
        ids = self.check_ids(ids)
        if cache is None:
            cache = self.new_cache()
        T = ids.size
        p0 = cache[0]["k"].shape[0]
        pos = np.arange(p0, p0 + T)
        hd, Hq, Hkv = c.head_dim, c.n_heads, c.n_kv_heads
        group = Hq // Hkv
        scale = 1.0 / math.sqrt(hd)
        kv_of_q = np.arange(Hq) // group                  # query head h reads kv head h // group
        S = p0 + T
        causal = np.arange(S)[None, :] <= pos[:, None]    # [T, S] key j visible iff j <= pos

        def put(name, val):
            if dump is not None:
                dump[name] = np.array(val, copy=True)

        x = self.embed[ids]                               # [T, d]
        put("embed", x)
        for L, lw in enumerate(self.layers):
            n1 = rms_norm(x, lw["in_norm"], c.eps)
            q = n1 @ lw["wq"].T                           # [T, Hq*hd]
            k = n1 @ lw["wk"].T                           # [T, Hkv*hd]
            v = n1 @ lw["wv"].T
            if c.use_qk_norm:                             # one statistic over the WHOLE projection
                q = rms_norm(q, lw["q_norm"], c.eps)
                k = rms_norm(k, lw["k_norm"], c.eps)
            q = rope_neox(q.reshape(T, Hq, hd), pos, c.rotary_dim, c.rope_theta)
            k = rope_neox(k.reshape(T, Hkv, hd), pos, c.rotary_dim, c.rope_theta)
            v = v.reshape(T, Hkv, hd)
            kc = cache[L]
            kc["k"] = np.concatenate([kc["k"], k], axis=0)   # [S, Hkv, hd]
            kc["v"] = np.concatenate([kc["v"], v], axis=0)
            K = kc["k"][:, kv_of_q, :]                    # [S, Hq, hd]
            V = kc["v"][:, kv_of_q, :]
            sc = np.einsum("thd,shd->hts", q, K) * scale  # [Hq, T, S]
            sc = np.where(causal[None], sc, -np.inf)
            sc = sc - sc.max(axis=-1, keepdims=True)
            pr = np.exp(sc)
            pr /= pr.sum(axis=-1, keepdims=True)
            o = np.einsum("hts,shd->thd", pr, V).reshape(T, Hq * hd)
            attn_out = o @ lw["wo"].T
            h = x + attn_out

            n2 = rms_norm(h, lw["post_norm"], c.eps)
            logits_r = n2 @ lw["gate"].T                  # [T, E]
            p = sigmoid(logits_r)
            sel = topk_lowest_id_ties(p + lw["bias"][None, :], c.top_k)   # bias: selection only
            psel = np.take_along_axis(p, sel, axis=-1)
            wsel = psel / psel.sum(axis=-1, keepdims=True)                # unbiased, renormalised
            moe = np.zeros_like(h)
            for e in np.unique(sel):
                rows, slot = np.nonzero(sel == e)
                xe = n2[rows]
                ye = (silu(xe @ lw["w1"][e].T) * (xe @ lw["w3"][e].T)) @ lw["w2"][e].T
                moe[rows] += wsel[rows, slot][:, None] * ye
            x = h + moe

            pre = f"layer{L:02d}_"
            put(pre + "attn_norm", n1)
            put(pre + "q", q)
            put(pre + "k", k)
            put(pre + "v", v)
            put(pre + "attn_out", attn_out)
            put(pre + "attn_resid", h)
            put(pre + "moe_norm", n2)
            put(pre + "moe_router_logits", logits_r)
            put(pre + "moe_router_ids", sel)
            put(pre + "moe_router_weights", wsel)
            put(pre + "moe_out", moe)
            put(pre + "layer_out", x)

        xf = rms_norm(x, self.norm, c.eps)
        put("final_norm", xf)
        logits = xf @ self.lm_head.T
        put("logits", logits)
        return logits

    def greedy(self, ids, n, dump=None):
        """n greedy tokens (argmax; np.argmax returns the lowest id among ties), KV-cached."""
        cache = self.new_cache()
        logits = self.forward(ids, cache, dump=dump)
        out = []
        for step in range(n):
            nxt = int(np.argmax(logits[-1]))
            out.append(nxt)
            if step + 1 < n:
                logits = self.forward([nxt], cache)
        return out


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


def main(argv=None):
    ap = argparse.ArgumentParser(description="float64 numpy reference for MiniMax-M2")
    ap.add_argument("-m", "--model", required=True, help="checkpoint directory")
    ap.add_argument("--ids", required=True, help="comma-separated token ids")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("-o", "--out", help="write float32 LE logits [n_ids, vocab] here")
    g.add_argument("--greedy", type=int, metavar="N", help="print N greedy ids")
    ap.add_argument("--dump-dir", help="write per-layer intermediates (.npy) of the prompt pass")
    args = ap.parse_args(argv)

    try:
        ids = parse_ids(args.ids)
        if args.greedy is not None and args.greedy < 0:
            raise InputError("--greedy N must be >= 0")
        model = M2Reference.from_dir(args.model)
        ids = model.check_ids(ids)
        dump = {} if args.dump_dir else None
        if args.out:
            logits = model.forward(ids, dump=dump)
            logits.astype("<f4").tofile(args.out)
        else:
            toks = model.greedy(ids, args.greedy, dump=dump)
            print(" ".join(str(t) for t in toks), flush=True)
        if dump is not None:
            os.makedirs(args.dump_dir, exist_ok=True)
            for name, val in dump.items():
                np.save(os.path.join(args.dump_dir, name + ".npy"), val)
    except InputError as e:
        print(f"minimax_m2.py: error: {e}", file=sys.stderr)
        return 2
    except (ModelError, SafetensorsError, OSError, ValueError, KeyError) as e:
        print(f"minimax_m2.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
