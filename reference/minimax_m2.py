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

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from np_common import (ModelError, InputError, rms_norm, rope_neox, sigmoid,  # noqa: E402,F401
                       topk_lowest_id_ties, routed_experts, silu_glu, read_attn_geometry, ReferenceBase,
                       simple_main)


# --------------------------------------------------------------------------------------------
# config


class M2Config:
    def __init__(self, cfg):
        def need(key):
            if key not in cfg:
                raise ModelError(f"config.json: missing required key {key!r}")
            return cfg[key]

        self.raw = cfg
        read_attn_geometry(self, cfg, need)
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
# model


class M2Reference(ReferenceBase):
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

    # ---- weight loading

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
            moe = routed_experts(h, n2, sel, wsel, lw["w1"], lw["w3"], lw["w2"], silu_glu)
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



# --------------------------------------------------------------------------------------------
# CLI


def main(argv=None):
    return simple_main(argv, "minimax_m2.py", "float64 numpy reference for MiniMax-M2",
                       M2Reference)


if __name__ == "__main__":
    sys.exit(main())
