#!/usr/bin/python3
"""Independent float64 numpy reference forward of the MiniMax-M3 text model (MiniMax Sparse
Attention), i.e. the LLM inside `MiniMaxM3SparseForConditionalGeneration`.

Written only from docs/minimax-architecture.md (§2 conventions, §5 MiniMax-M3, §7, §8) -- it
deliberately shares no code with the C++ engine. Every activation is float64; stored weights
(F32 / F16 / BF16 / MXFP8 = F8_E4M3 + U8 E8M0 `<name>_scale_inv`) are decoded exactly first.

CLI:
  minimax_m3.py -m DIR --ids 1,2,3 -o FILE      logits of every position, raw little-endian
                                                float32, row-major [n_ids, vocab_size]
  minimax_m3.py -m DIR --ids 1,2,3 --greedy N   N greedy ids (argmax, ties -> lowest id),
                                                space-separated on one stdout line (KV-cached
                                                decode: one query per step)
  --dump-dir D                                  per-layer intermediates as .npy (prompt pass)
  --msa-stats [--msa-top-n N]                   per sparse layer / index group: recall and
                                                coverage of the block selection vs the full
                                                causal attention of the group (stderr; true
                                                top set min(N=16, nvis) blocks)
  --self-test                                   closed-form checks, then exit
Exit codes: 0 ok, 2 bad input (ids, arguments), 1 model / checkpoint errors.

What is computed (spec §5.4-§5.7):
  x = embed[ids]; per layer L
    n  = GRMS(x; input_layernorm)                     GRMS(x; w) = x / sqrt(mean(x²)+eps) · (1+w)
    q, k, v = n·Wᵀ; per-head GRMS of q and k with ONE [head_dim] gain shared by all heads;
    partial NeoX RoPE (first rotary_dim channels of a head, θ = rope_theta)
    sparse_attention_freq[L] == 0: dense causal GQA softmax attention, scale 1/sqrt(head_dim)
    sparse_attention_freq[L] == 1: MSA --
      iq = n·W_iqᵀ -> [G, index_dim], ik = n·W_ikᵀ -> [index_dim] (one key per token);
      per-head GRMS (index_q_norm / index_k_norm) and the same partial RoPE;
      z_g(p, j) = iq_g(p)·ik(j) for j <= p; S_g(p, b) = max over visible keys of block b
      (the local block is partial); per group g (<-> KV head g <-> its query heads):
      nvis = p//B + 1; nvis <= K -> all blocks; else the K-1 best non-local blocks by
      (score desc, block id asc) plus the local block p//B;
      softmax attention over {j <= p : j//B selected} with the group's K/V
    h = x + o_proj(attn); m = GRMS(h; post_attention_layernorm)
    moe_layer_freq[L] == 0: dense MLP (gate_proj/up_proj/down_proj), SwiGLU-OAI
    moe_layer_freq[L] == 1: MoE -- p = sigmoid(m·W_gateᵀ) (float64); selection = top-k of
      p + e_score_correction_bias (ties -> lower id); weights p[sel]/Σp[sel];
      y = routed_scaling_factor · Σ w_e·Expert_e(m) + SharedExpert(m)   (shared NOT scaled)
    SwiGLU-OAI: g = min(g, limit); u = clamp(u, -limit, limit); act = (u+1)·g·sigmoid(alpha·g)
    x = h + y
  logits = GRMS(x; model.norm) · lm_headᵀ
"""

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_np import fp8_e4m3_to_f64  # noqa: E402
from np_common import (ModelError, InputError, rope_neox, sigmoid,  # noqa: E402,F401
                       topk_lowest_id_ties, routed_experts, read_attn_geometry, ReferenceBase,
                       SelfCheck, parse_ids, add_cli_args, add_self_test_arg,
                       check_greedy_arg, write_logits, print_ids, save_dump, run_cli)

PREFIX = "language_model."


# --------------------------------------------------------------------------------------------
# config


def _per_layer(name, val, n, allowed):
    if not isinstance(val, list) or len(val) != n:
        raise ModelError(f"config: {name} must be a list of {n} entries, got {val!r}")
    out = []
    for v in val:
        if v not in allowed:
            raise ModelError(f"config: {name} entry {v!r} not in {sorted(allowed, key=str)}")
        out.append(allowed[v])
    return out


class M3Config:
    """text_config of a minimax_m3_vl checkpoint (spec §5.1). Accepts the nested
    `sparse_attention_config` spelling and the transformers-flattened one (index_n_heads,
    index_head_dim, index_block_size, index_topk_blocks, index_local_blocks, layer_types,
    mlp_layer_types)."""

    def __init__(self, top):
        if "text_config" in top:
            cfg = top["text_config"]
            if not isinstance(cfg, dict):
                raise ModelError("config.json: text_config is not an object")
        else:
            cfg = top
        self.raw = cfg

        def need(key):
            if key not in cfg:
                raise ModelError(f"config.json: text_config is missing required key {key!r}")
            return cfg[key]

        read_attn_geometry(self, cfg, need)
        self.vocab = int(need("vocab_size"))
        self.eps = float(cfg.get("rms_norm_eps", 1e-6))
        self.tie_embeddings = bool(cfg.get("tie_word_embeddings", False))
        self.alpha = float(cfg.get("swiglu_alpha", 1.702))
        self.limit = float(cfg.get("swiglu_limit", 7.0))
        self.dense_inter = int(cfg.get("dense_intermediate_size", 0) or 0)
        self.inter = int(cfg.get("intermediate_size", 0) or 0)
        self.n_shared = int(cfg.get("n_shared_experts", 1) or 0)
        self.shared_inter = int(cfg.get("shared_intermediate_size", 0) or 0)
        self.n_experts = int(cfg.get("num_local_experts", 0) or 0)
        self.top_k = int(cfg.get("num_experts_per_tok", 0) or 0)
        self.use_routing_bias = bool(cfg.get("use_routing_bias", True))
        self.routed_scale = float(cfg.get("routed_scaling_factor", 1.0))

        n = self.n_layers
        if "moe_layer_freq" in cfg:
            self.is_moe = _per_layer("moe_layer_freq", cfg["moe_layer_freq"], n,
                                     {0: False, 1: True})
        elif "mlp_layer_types" in cfg:
            self.is_moe = _per_layer("mlp_layer_types", cfg["mlp_layer_types"], n,
                                     {"dense": False, "sparse": True})
        else:
            raise ModelError("config.json: need moe_layer_freq (or mlp_layer_types)")

        sac = cfg.get("sparse_attention_config")
        if isinstance(sac, dict):
            use_sparse = bool(sac.get("use_sparse_attention", True))
            self.index_dim = int(sac.get("sparse_index_dim", self.head_dim))
            self.n_index_heads = int(sac.get("sparse_num_index_heads", self.n_kv_heads))
            self.topk_blocks = int(sac.get("sparse_topk_blocks", 16))
            self.block = int(sac.get("sparse_block_size", 128))
            score_type = sac.get("sparse_score_type", "max")
            init_block = int(sac.get("sparse_init_block", 0))
            local_block = int(sac.get("sparse_local_block", 1))
            freq = sac.get("sparse_attention_freq")
            if freq is None:
                raise ModelError("sparse_attention_config: missing sparse_attention_freq")
            self.is_sparse = _per_layer("sparse_attention_freq", freq, n, {0: False, 1: True})
            dis = sac.get("sparse_disable_index_value", [1] * n)
            disable_iv = _per_layer("sparse_disable_index_value", dis, n, {0: False, 1: True})
            if not use_sparse:           # documented choice: every layer dense
                self.is_sparse = [False] * n
        elif "layer_types" in cfg:       # transformers-flattened spelling
            self.index_dim = int(cfg.get("index_head_dim", self.head_dim))
            self.n_index_heads = int(cfg.get("index_n_heads", self.n_kv_heads))
            self.topk_blocks = int(cfg.get("index_topk_blocks", 16))
            self.block = int(cfg.get("index_block_size", 128))
            score_type, init_block = "max", 0
            local_block = int(cfg.get("index_local_blocks", 1))
            self.is_sparse = _per_layer("layer_types", cfg["layer_types"], n,
                                        {"full_attention": False, "minimax_m3_sparse": True})
            disable_iv = [True] * n
        else:
            raise ModelError("config.json: need sparse_attention_config (or layer_types)")

        # Only what §5 specifies is implemented; anything else is refused, not guessed.
        if self.n_heads % self.n_kv_heads:
            raise ModelError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.rotary_dim % 2 or not (0 <= self.rotary_dim <= self.head_dim):
            raise ModelError(f"rotary_dim {self.rotary_dim} must be even and <= head_dim")
        if not bool(cfg.get("use_gemma_norm", True)):
            raise ModelError("use_gemma_norm false is not an M3 configuration (§5.1)")
        if not bool(cfg.get("use_qk_norm", True)) or cfg.get("qk_norm_type",
                                                              "per_head") != "per_head":
            raise ModelError("M3 needs use_qk_norm true with qk_norm_type 'per_head' (§5.5)")
        if bool(cfg.get("attention_output_gate", False)):
            raise ModelError("attention_output_gate true is not specified for M3 (§5.5)")
        if cfg.get("hidden_act", "swigluoai") != "swigluoai":
            raise ModelError(f"hidden_act {cfg.get('hidden_act')!r} not supported (swigluoai)")
        if float(cfg.get("swiglu_beta", 1.0)) != 1.0:
            raise ModelError("swiglu_beta other than 1.0 is not specified (§5.7: u + 1)")
        if cfg.get("scoring_func", "sigmoid") != "sigmoid":
            raise ModelError(f"scoring_func {cfg.get('scoring_func')!r} not supported (sigmoid)")
        if self.n_shared not in (0, 1):
            raise ModelError("n_shared_experts must be 0 or 1")
        if any(self.is_moe):
            if not (1 <= self.top_k <= self.n_experts) or self.inter <= 0:
                raise ModelError("MoE layers need intermediate_size > 0 and "
                                 "1 <= num_experts_per_tok <= num_local_experts")
            if self.n_shared and self.shared_inter <= 0:
                raise ModelError("n_shared_experts 1 needs shared_intermediate_size > 0")
        if not all(self.is_moe) and self.dense_inter <= 0:
            raise ModelError("dense MLP layers need dense_intermediate_size > 0")
        if any(self.is_sparse):
            if score_type != "max":
                raise ModelError(f"sparse_score_type {score_type!r} not supported (max)")
            if init_block != 0 or local_block != 1:
                raise ModelError("only sparse_init_block 0 and sparse_local_block 1 are "
                                 "specified (§5.6)")
            if self.n_index_heads != self.n_kv_heads:
                raise ModelError("sparse_num_index_heads must equal num_key_value_heads "
                                 "(one selection per KV group, §5.6)")
            if self.topk_blocks < 1 or self.block < 1:
                raise ModelError("sparse_topk_blocks and sparse_block_size must be >= 1")
            if self.rotary_dim > self.index_dim:
                raise ModelError("rotary_dim must be <= sparse_index_dim")
            for L in range(n):
                if self.is_sparse[L] and not disable_iv[L]:
                    raise ModelError(f"layer {L}: the index-value branch "
                                     "(sparse_disable_index_value 0) is not specified (§8)")

        qc = top.get("quantization_config") or cfg.get("quantization_config") or {}
        self.quant_method = qc.get("quant_method")
        bs = qc.get("weight_block_size") or ([1, 32] if self.quant_method == "mxfp8"
                                             else [128, 128])
        self.block_out, self.block_in = int(bs[0]), int(bs[1])
        if self.block_out <= 0 or self.block_in <= 0:
            raise ModelError("weight_block_size must be positive")


# --------------------------------------------------------------------------------------------
# math helpers (all float64)


def gemma_rms(x, w, eps):
    """Gemma RMSNorm over the last axis: x / sqrt(mean(x²) + eps) · (1 + w)."""
    ms = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(ms + eps) * (1.0 + w)


def swiglu_oai(g, u, alpha, limit):
    """g = min(g, limit); u = clamp(u, -limit, limit); (u + 1) · g · sigmoid(alpha·g)."""
    g = np.minimum(g, limit)
    u = np.clip(u, -limit, limit)
    return (u + 1.0) * g * sigmoid(alpha * g)


def block_pool_max(z, B):
    """z: [..., S] index scores with invisible keys = -inf -> [..., ceil(S/B)] max per block
    (a block with no visible key is -inf)."""
    S = z.shape[-1]
    nb = -(-S // B)
    pad = nb * B - S
    if pad:
        z = np.concatenate([z, np.full(z.shape[:-1] + (pad,), -np.inf)], axis=-1)
    return z.reshape(z.shape[:-1] + (nb, B)).max(axis=-1)


def select_blocks(pooled, p, B, K):
    """Block selection of one (group, query) (spec §5.6). pooled: [>= nvis] block scores
    (only the first nvis = p//B + 1 are read). Returns (selected ids as a list with the local
    block LAST, margin) where margin = (K-1-th best non-local score) - (best unselected
    non-local score), +inf when nothing is left out (the rank boundary's distance to a tie)."""
    nvis = p // B + 1
    if nvis <= K:
        return list(range(nvis)), math.inf
    cand = np.asarray(pooled[:nvis - 1], dtype=np.float64)
    order = np.argsort(-cand, kind="stable")
    top = [int(b) for b in order[:K - 1]]
    margin = float(cand[order[K - 2]] - cand[order[K - 1]]) if K >= 2 else math.inf
    return top + [nvis - 1], margin


# --------------------------------------------------------------------------------------------
# model


class M3Reference(ReferenceBase):
    def __init__(self, top_cfg, source):
        """top_cfg: dict (config.json contents, the VL wrapper or a bare text config);
        source: Checkpoint-like (get_f64/get_raw/dtype/shape/in)."""
        self.cfg = c = M3Config(top_cfg)
        self.src = source
        d, hd = c.hidden, c.head_dim
        qw, kw = c.n_heads * hd, c.n_kv_heads * hd
        P = PREFIX

        self.embed = self._plain(P + "model.embed_tokens.weight", (c.vocab, d))
        self.final_norm = self._plain(P + "model.norm.weight", (d,))
        if P + "lm_head.weight" in source:
            self.lm_head = self._linear(P + "lm_head.weight", c.vocab, d)
        elif c.tie_embeddings:
            self.lm_head = self.embed
        else:
            raise ModelError(f"{P}lm_head.weight missing and tie_word_embeddings is false")

        self.layers = []
        for L in range(c.n_layers):
            p = f"{P}model.layers.{L}."
            a = p + "self_attn."
            lw = {
                "in_norm": self._plain(p + "input_layernorm.weight", (d,)),
                "post_norm": self._plain(p + "post_attention_layernorm.weight", (d,)),
                "wq": self._linear(a + "q_proj.weight", qw, d),
                "wk": self._linear(a + "k_proj.weight", kw, d),
                "wv": self._linear(a + "v_proj.weight", kw, d),
                "wo": self._linear(a + "o_proj.weight", d, qw),
                "q_norm": self._plain(a + "q_norm.weight", (hd,)),
                "k_norm": self._plain(a + "k_norm.weight", (hd,)),
            }
            if c.is_sparse[L]:
                G, di = c.n_index_heads, c.index_dim
                lw["wiq"] = self._linear(a + "index_q_proj.weight", G * di, d)
                lw["wik"] = self._linear(a + "index_k_proj.weight", di, d)
                lw["iq_norm"] = self._plain(a + "index_q_norm.weight", (di,))
                lw["ik_norm"] = self._plain(a + "index_k_norm.weight", (di,))
            if c.is_moe[L]:
                m = p + "block_sparse_moe."
                E, f = c.n_experts, c.inter
                lw["gate"] = self._linear(m + "gate.weight", E, d)
                if c.use_routing_bias:
                    lw["bias"] = self._plain(m + "e_score_correction_bias", (E,))
                else:
                    lw["bias"] = np.zeros(E)
                lw["w1"] = np.stack([self._linear(f"{m}experts.{e}.w1.weight", f, d)
                                     for e in range(E)])
                lw["w3"] = np.stack([self._linear(f"{m}experts.{e}.w3.weight", f, d)
                                     for e in range(E)])
                lw["w2"] = np.stack([self._linear(f"{m}experts.{e}.w2.weight", d, f)
                                     for e in range(E)])
                if c.n_shared:
                    s, fs = m + "shared_experts.", c.shared_inter
                    lw["sh_gate"] = self._linear(s + "gate_proj.weight", fs, d)
                    lw["sh_up"] = self._linear(s + "up_proj.weight", fs, d)
                    lw["sh_down"] = self._linear(s + "down_proj.weight", d, fs)
            else:
                m, f = p + "mlp.", c.dense_inter
                lw["mlp_gate"] = self._linear(m + "gate_proj.weight", f, d)
                lw["mlp_up"] = self._linear(m + "up_proj.weight", f, d)
                lw["mlp_down"] = self._linear(m + "down_proj.weight", d, f)
            self.layers.append(lw)

    # ---- weight loading

    def _plain(self, name, shape):
        self._require(name)
        if self.src.dtype(name) in ("F8_E4M3", "U8"):
            raise ModelError(f"{name}: unexpected {self.src.dtype(name)} for an unquantized "
                             "tensor (norms, embeddings, router bias stay unquantized, §5.2)")
        w = self.src.get_f64(name)
        if tuple(w.shape) != tuple(shape):
            raise ModelError(f"{name}: shape {list(w.shape)} != expected {list(shape)}")
        return w

    def _linear(self, name, out_f, in_f):
        """[out, in] weight as float64. F8_E4M3 needs `<name>_scale_inv`:
        mxfp8 (U8 E8M0, [ceil(out/bo), ceil(in/bi)], default [1,32]): W = fp8 · 2^(e − 127);
        otherwise an F32/BF16 multiplier of the same block shape."""
        self._require(name)
        dt = self.src.dtype(name)
        sname = name + "_scale_inv"
        if dt != "F8_E4M3":
            if sname in self.src:
                raise ModelError(f"{sname} present but {name} is {dt}, not F8_E4M3")
            w = self.src.get_f64(name)
            if tuple(w.shape) != (out_f, in_f):
                raise ModelError(f"{name}: shape {list(w.shape)} != expected {[out_f, in_f]}")
            return w
        q = fp8_e4m3_to_f64(self.src.get_raw(name))
        if tuple(q.shape) != (out_f, in_f):
            raise ModelError(f"{name}: shape {list(q.shape)} != expected {[out_f, in_f]}")
        if np.isnan(q).any():
            raise ModelError(f"{name}: F8_E4M3 NaN byte (0x7f/0xff)")
        if sname not in self.src:
            raise ModelError(f"{name} is F8_E4M3 but {sname} is missing")
        bo, bi = self.cfg.block_out, self.cfg.block_in
        want = (-(-out_f // bo), -(-in_f // bi))
        if tuple(self.src.shape(sname)) != want:
            raise ModelError(f"{sname}: shape {list(self.src.shape(sname))} != expected "
                             f"{list(want)} for weight_block_size [{bo}, {bi}]")
        sdt = self.src.dtype(sname)
        if sdt == "U8":                               # E8M0: 2^(e − 127); 255 is NaN
            e = self.src.get_raw(sname).astype(np.int64)
            if (e == 255).any():
                raise ModelError(f"{sname}: E8M0 byte 255 (NaN)")
            s = np.ldexp(1.0, e - 127)
        elif self.cfg.quant_method == "mxfp8":
            raise ModelError(f"{sname}: mxfp8 scales must be U8 (E8M0), got {sdt}")
        else:
            s = self.src.get_f64(sname)
        full = np.repeat(np.repeat(s, bo, axis=0), bi, axis=1)[:out_f, :in_f]
        return q * full

    # ---- pieces the fake engine of the parity check overrides to build broken variants

    def qk_norm(self, x, w):
        """Per-head Gemma RMSNorm: x [T, H, dim], one [dim] gain shared by all heads."""
        return gemma_rms(x, w, self.cfg.eps)

    def norm(self, x, w):
        return gemma_rms(x, w, self.cfg.eps)

    def act(self, g, u):
        return swiglu_oai(g, u, self.cfg.alpha, self.cfg.limit)

    def pool(self, z, pos):
        """z: [G, T, S] raw index scores (all keys, no mask) -> [G, T, nb] block maxima over
        the keys visible to each query (j <= pos)."""
        S = z.shape[-1]
        vis = np.arange(S)[None, :] <= np.asarray(pos)[:, None]          # [T, S]
        return block_pool_max(np.where(vis[None], z, -np.inf), self.cfg.block)

    def select(self, pooled, pos):
        """pooled [G, T, nb] -> (list over g of list over t of selected block ids,
        margins [G, T])."""
        c = self.cfg
        G, T = pooled.shape[:2]
        sel = [[None] * T for _ in range(G)]
        margin = np.full((G, T), np.inf)
        for g in range(G):
            for t in range(T):
                sel[g][t], margin[g, t] = select_blocks(pooled[g, t], int(pos[t]), c.block,
                                                        c.topk_blocks)
        return sel, margin

    def shared_scale(self):
        return 1.0

    def sparse_keys(self, in_selected, causal_row):
        """Keys a query of a sparse layer attends to: selected blocks ∩ causal (the local
        block is partial)."""
        return in_selected & causal_row

    def index_rope(self, x, pos):
        """The same partial RoPE as q/k, on the index heads [T, G or 1, index_dim]."""
        return rope_neox(x, pos, self.cfg.rotary_dim, self.cfg.rope_theta)

    def index_scores(self, iq, ik):
        """z[g, t, j] = iq[t, g]·ik[j] (unscaled: a positive scale never changes the ranking)."""
        return np.einsum("tgd,sd->gts", iq, ik)

    # ---- forward

    def new_cache(self):
        c = self.cfg
        return [{"k": np.zeros((0, c.n_kv_heads, c.head_dim)),
                 "v": np.zeros((0, c.n_kv_heads, c.head_dim)),
                 "ik": np.zeros((0, c.index_dim if c.is_sparse[L] else 0))}
                for L in range(c.n_layers)]

    def _msa_mask(self, lw, n1, kc, pos, S, put, pre):
        """Index branch + block selection. Returns allowed [G, T, S] (selected ∩ causal)."""
        c = self.cfg
        T, G, di = n1.shape[0], c.n_index_heads, c.index_dim
        iq = (n1 @ lw["wiq"].T).reshape(T, G, di)
        ik = (n1 @ lw["wik"].T).reshape(T, 1, di)
        iq = self.index_rope(self.qk_norm(iq, lw["iq_norm"]), pos)
        ik = self.index_rope(self.qk_norm(ik, lw["ik_norm"]), pos)
        kc["ik"] = np.concatenate([kc["ik"], ik[:, 0, :]], axis=0)        # [S, di]
        z = self.index_scores(iq, kc["ik"])                               # [G, T, S]
        pooled = self.pool(z, pos)                                         # [G, T, nb]
        sel, margin = self.select(pooled, pos)
        blk = np.arange(S) // c.block
        causal = np.arange(S)[None, :] <= pos[:, None]
        allowed = np.zeros((G, T, S), dtype=bool)
        K = max([c.topk_blocks] + [len(s) for row in sel for s in row])
        sel_arr = np.full((G, T, K), -1, dtype=np.int64)
        for g in range(G):
            for t in range(T):
                allowed[g, t] = self.sparse_keys(np.isin(blk, sel[g][t]), causal[t])
                sel_arr[g, t, :len(sel[g][t])] = sel[g][t]
        put(pre + "iq", iq)
        put(pre + "ik", ik[:, 0, :])
        put(pre + "index_scores", np.where(np.isfinite(pooled), pooled, -np.inf))
        put(pre + "msa_sel", sel_arr)
        put(pre + "msa_margin", margin)
        self._last_sel = sel
        return allowed

    def forward(self, ids, cache=None, dump=None, stats=None):
        """Logits [T, vocab] for `ids` at absolute positions len(cache) .. len(cache)+T-1.
        The cache (from new_cache()) is extended in place. dump: optional dict receiving named
        intermediates. stats: optional list receiving per (layer, group, query) MSA selection
        quality dicts (see msa_stats)."""
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
        kv_of_q = np.arange(Hq) // group
        S = p0 + T
        causal = np.arange(S)[None, :] <= pos[:, None]    # [T, S]

        def put(name, val):
            if dump is not None:
                dump[name] = np.array(val, copy=True)

        x = self.embed[ids]
        put("embed", x)
        for L, lw in enumerate(self.layers):
            pre = f"layer{L:02d}_"
            n1 = self.norm(x, lw["in_norm"])
            q = (n1 @ lw["wq"].T).reshape(T, Hq, hd)
            k = (n1 @ lw["wk"].T).reshape(T, Hkv, hd)
            v = (n1 @ lw["wv"].T).reshape(T, Hkv, hd)
            q = rope_neox(self.qk_norm(q, lw["q_norm"]), pos, c.rotary_dim, c.rope_theta)
            k = rope_neox(self.qk_norm(k, lw["k_norm"]), pos, c.rotary_dim, c.rope_theta)
            kc = cache[L]
            kc["k"] = np.concatenate([kc["k"], k], axis=0)
            kc["v"] = np.concatenate([kc["v"], v], axis=0)
            Kf = kc["k"][:, kv_of_q, :]                   # [S, Hq, hd]
            Vf = kc["v"][:, kv_of_q, :]
            sc = np.einsum("thd,shd->hts", q, Kf) * scale  # [Hq, T, S]
            if c.is_sparse[L]:
                allowed_g = self._msa_mask(lw, n1, kc, pos, S, put, pre)   # [G, T, S]
                allowed = allowed_g[kv_of_q]                                # [Hq, T, S]
                if stats is not None:
                    self._msa_stats(L, sc, causal, pos, stats)
            else:
                allowed = np.broadcast_to(causal[None], sc.shape)
            sc = np.where(allowed, sc, -np.inf)
            sc = sc - sc.max(axis=-1, keepdims=True)
            pr = np.exp(sc)
            pr /= pr.sum(axis=-1, keepdims=True)
            o = np.einsum("hts,shd->thd", pr, Vf).reshape(T, Hq * hd)
            attn_out = o @ lw["wo"].T
            h = x + attn_out

            n2 = self.norm(h, lw["post_norm"])
            if c.is_moe[L]:
                logits_r = n2 @ lw["gate"].T               # [T, E], float64 router
                p = sigmoid(logits_r)
                sel = topk_lowest_id_ties(p + lw["bias"][None, :], c.top_k)
                psel = np.take_along_axis(p, sel, axis=-1)
                wsel = psel / psel.sum(axis=-1, keepdims=True)
                ffn = routed_experts(h, n2, sel, wsel, lw["w1"], lw["w3"], lw["w2"], self.act)
                ffn *= c.routed_scale
                if c.n_shared:
                    sh = self.act(n2 @ lw["sh_gate"].T, n2 @ lw["sh_up"].T) @ lw["sh_down"].T
                    ffn = ffn + self.shared_scale() * sh
                put(pre + "moe_router_logits", logits_r)
                put(pre + "moe_router_ids", sel)
                put(pre + "moe_router_weights", wsel)
            else:
                ffn = self.act(n2 @ lw["mlp_gate"].T, n2 @ lw["mlp_up"].T) @ lw["mlp_down"].T
            x = h + ffn

            put(pre + "attn_norm", n1)
            put(pre + "q", q)
            put(pre + "k", k)
            put(pre + "v", v)
            put(pre + "attn_out", attn_out)
            put(pre + "attn_resid", h)
            put(pre + "moe_norm", n2)
            put(pre + "moe_out", ffn)
            put(pre + "layer_out", x)

        xf = self.norm(x, self.final_norm)
        put("final_norm", xf)
        logits = xf @ self.lm_head.T
        put("logits", logits)
        return logits

    msa_top_n = 16   # size of the "true top set" of the selection instrumentation

    def _msa_stats(self, L, sc, causal, pos, stats):
        """Selection quality vs full causal attention (instrumentation; spec wording in the
        module doc): mass_g(b) = mean over the group's heads of the causal probability mass in
        block b; true set = the min(16, nvis) blocks of largest mass (ties lower id);
        recall = |true ∩ selected| / |true|; coverage = Σ_{b ∈ selected} mass_g(b).
        (16 = msa_top_n, the released K; --msa-top-n changes it.)"""
        c = self.cfg
        group = c.n_heads // c.n_kv_heads
        full = np.where(causal[None], sc, -np.inf)
        full = full - full.max(axis=-1, keepdims=True)
        pf = np.exp(full)
        pf /= pf.sum(axis=-1, keepdims=True)                               # [Hq, T, S]
        S = sc.shape[-1]
        nb = -(-S // c.block)
        pad = nb * c.block - S
        pfp = np.concatenate([pf, np.zeros(pf.shape[:-1] + (pad,))], axis=-1) if pad else pf
        mass_h = pfp.reshape(pf.shape[:-1] + (nb, c.block)).sum(-1)       # [Hq, T, nb]
        for g in range(c.n_kv_heads):
            mass = mass_h[g * group:(g + 1) * group].mean(0)               # [T, nb]
            for t in range(sc.shape[1]):
                p = int(pos[t])
                nvis = p // c.block + 1
                sel = set(self._last_sel[g][t])
                ntrue = min(self.msa_top_n, nvis)
                true = [int(b) for b in np.argsort(-mass[t, :nvis], kind="stable")[:ntrue]]
                stats.append({"layer": L, "group": g, "pos": p, "nvis": nvis,
                              "recall": len(sel.intersection(true)) / ntrue,
                              "coverage": float(sum(mass[t, b] for b in sel))})



# --------------------------------------------------------------------------------------------
# in-memory checkpoints (self-test)


class DictSource:
    """Checkpoint-like view of {name: (dtype tag, array)}; floats are returned as float64,
    F8_E4M3 / U8 raw as uint8."""

    def __init__(self, tensors):
        self.t = tensors

    def __contains__(self, name):
        return name in self.t

    def keys(self):
        return list(self.t)

    def dtype(self, name):
        return self.t[name][0]

    def shape(self, name):
        return tuple(np.shape(self.t[name][1]))

    def get_raw(self, name):
        return np.asarray(self.t[name][1])

    def get_f64(self, name):
        tag, a = self.t[name]
        if tag == "F8_E4M3":
            return fp8_e4m3_to_f64(a)
        return np.asarray(a, dtype=np.float64)


def tiny_config(n_layers=4, sparse=(0, 1, 1, 1), moe=(0, 1, 1, 1), block=4, topk=3):
    """A small VL-wrapper config in the §5.1 key set (self-test shapes)."""
    text = {
        "hidden_size": 32, "num_hidden_layers": n_layers, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 8, "rotary_dim": 4,
        "partial_rotary_factor": 0.5, "rope_theta": 5e6, "max_position_embeddings": 4096,
        "vocab_size": 64, "rms_norm_eps": 1e-6, "use_gemma_norm": True, "use_qk_norm": True,
        "qk_norm_type": "per_head", "attention_output_gate": False, "hidden_act": "swigluoai",
        "swiglu_alpha": 1.702, "swiglu_limit": 7.0, "dense_intermediate_size": 24,
        "intermediate_size": 12, "shared_intermediate_size": 10, "n_shared_experts": 1,
        "num_local_experts": 4, "num_experts_per_tok": 2, "scoring_func": "sigmoid",
        "use_routing_bias": True, "routed_scaling_factor": 2.0,
        "moe_layer_freq": list(moe),
        "sparse_attention_config": {
            "use_sparse_attention": True, "sparse_index_dim": 8, "sparse_num_index_heads": 2,
            "sparse_topk_blocks": topk, "sparse_block_size": block, "sparse_score_type": "max",
            "sparse_init_block": 0, "sparse_local_block": 1,
            "sparse_attention_freq": list(sparse),
            "sparse_disable_index_value": [1] * n_layers},
        "num_mtp_modules": 0, "tie_word_embeddings": False}
    return {"architectures": ["MiniMaxM3SparseForConditionalGeneration"],
            "model_type": "minimax_m3_vl", "text_config": text}


def tiny_weights(top, rng):
    c = top["text_config"]
    sac = c["sparse_attention_config"]
    d, H, Hkv, hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], \
        c["head_dim"]
    G, di, E = sac["sparse_num_index_heads"], sac["sparse_index_dim"], c["num_local_experts"]
    V = c["vocab_size"]
    P = PREFIX

    def lin(o, i, g=1.0):
        return ("F32", rng.standard_normal((o, i)) * g / math.sqrt(i))

    def off(n, s=0.2):
        return ("F32", s * rng.standard_normal(n))

    t = {P + "model.embed_tokens.weight": ("F32", rng.standard_normal((V, d))),
         P + "model.norm.weight": off(d), P + "lm_head.weight": lin(V, d, 2.0),
         "vision_tower.dummy.weight": ("F32", np.zeros((2, 2)))}
    for L in range(c["num_hidden_layers"]):
        p = f"{P}model.layers.{L}."
        a = p + "self_attn."
        t.update({p + "input_layernorm.weight": off(d), p + "post_attention_layernorm.weight":
                  off(d), a + "q_proj.weight": lin(H * hd, d), a + "k_proj.weight":
                  lin(Hkv * hd, d), a + "v_proj.weight": lin(Hkv * hd, d),
                  a + "o_proj.weight": lin(d, H * hd), a + "q_norm.weight": off(hd),
                  a + "k_norm.weight": off(hd)})
        if sac["sparse_attention_freq"][L]:
            t.update({a + "index_q_proj.weight": lin(G * di, d),
                      a + "index_k_proj.weight": lin(di, d), a + "index_q_norm.weight": off(di),
                      a + "index_k_norm.weight": off(di)})
        if c["moe_layer_freq"][L]:
            m = p + "block_sparse_moe."
            f, fs = c["intermediate_size"], c["shared_intermediate_size"]
            t[m + "gate.weight"] = lin(E, d, 2.0)
            t[m + "e_score_correction_bias"] = off(E, 0.3)
            for e in range(E):
                t[f"{m}experts.{e}.w1.weight"] = lin(f, d, 2.0)
                t[f"{m}experts.{e}.w3.weight"] = lin(f, d, 2.0)
                t[f"{m}experts.{e}.w2.weight"] = lin(d, f)
            t[m + "shared_experts.gate_proj.weight"] = lin(fs, d, 2.0)
            t[m + "shared_experts.up_proj.weight"] = lin(fs, d, 2.0)
            t[m + "shared_experts.down_proj.weight"] = lin(d, fs)
        else:
            f = c["dense_intermediate_size"]
            t[p + "mlp.gate_proj.weight"] = lin(f, d, 2.0)
            t[p + "mlp.up_proj.weight"] = lin(f, d, 2.0)
            t[p + "mlp.down_proj.weight"] = lin(d, f)
    return t


# --------------------------------------------------------------------------------------------
# self-test: closed-form checks of what is specific to M3


def self_test():
    check = SelfCheck()
    fails = check.fails

    rng = np.random.default_rng(0)
    # ---- selection on hand-made scores (B = 4, K = 3)
    B, K = 4, 3
    check(select_blocks([9.0, 1.0], 5, B, K)[0] == [0, 1], "nvis 2 <= K: all blocks")
    check(select_blocks([1.0, 2.0, 3.0], 11, B, K)[0] == [0, 1, 2], "nvis 3 == K: all blocks")
    sel, mg = select_blocks([1.0, 3.0, 2.0, -50.0], 12, B, K)
    check(sel == [1, 2, 3] and abs(mg - 1.0) < 1e-15,
          "nvis 4: top-2 non-local by score + local (local forced although lowest)",
          f"{sel}, margin {mg}")
    sel, mg = select_blocks([5.0, 2.0, 5.0, 5.0, 0.0], 19, B, K)
    check(sel == [0, 2, 4] and mg == 0.0, "ties: score desc then block id asc (0,2 before 3)",
          f"{sel}")
    sel, _ = select_blocks([-1.0, -2.0, -3.0, 100.0, 0.0], 17, B, K)
    check(sel == [3, 0, 4], "slot order: top-(K-1) by rank, local block last", f"{sel}")
    sel, _ = select_blocks([0.0, 7.0, 7.0, 7.0, 1.0], 16, B, 1)
    check(sel == [4], "K = 1: only the local block")
    # ---- pooling: the local block is partial (keys > p ignored), future blocks -inf
    z = np.array([[[0.0, 1.0, 2.0, 0.5, 3.0, -1.0, 99.0, 98.0]]])           # [1, 1, 8]
    m = M3Reference.__new__(M3Reference)
    m.cfg = type("C", (), {"block": 4})()
    pooled = m.pool(z, np.array([5]))
    check(np.array_equal(pooled[0, 0], [2.0, 3.0]), "max pooling; partial local block "
          "(keys 6,7 > p=5 ignored)", f"{pooled[0, 0].tolist()}")
    pooled = m.pool(np.zeros((1, 1, 9)), np.array([3]))
    check(pooled[0, 0, 0] == 0.0 and np.all(np.isneginf(pooled[0, 0, 1:])),
          "blocks with no visible key (future, padded tail) are -inf")
    # ---- SwiGLU-OAI
    g = np.array([10.0, -3.0, 0.5, 7.0])
    u = np.array([-9.0, 20.0, 0.25, 7.0])
    want = [(-7.0 + 1) * 7.0 / (1 + math.exp(-1.702 * 7.0)),
            (7.0 + 1) * -3.0 / (1 + math.exp(1.702 * 3.0)),
            1.25 * 0.5 / (1 + math.exp(-1.702 * 0.5)),
            8.0 * 7.0 / (1 + math.exp(-1.702 * 7.0))]
    check(np.allclose(swiglu_oai(g, u, 1.702, 7.0), want, rtol=1e-15, atol=0),
          "SwiGLU-OAI: g upper-clamped only, u clamped both sides, (u+1)·g·σ(1.702g)")
    # ---- Gemma norm
    x = np.array([3.0, 4.0])
    check(np.allclose(gemma_rms(x, np.array([0.0, 0.5]), 0.0),
                      [3 / math.sqrt(12.5), 4 / math.sqrt(12.5) * 1.5], rtol=1e-15, atol=0),
          "Gemma RMSNorm: x/rms·(1+w); w = 0 is the identity gain")
    # ---- per-head QK-norm vs one statistic over the whole vector
    qh = np.stack([rng.standard_normal(8), 10 * rng.standard_normal(8)])[None]   # [1, 2, 8]
    w = 0.1 * rng.standard_normal(8)
    per = gemma_rms(qh, w, 1e-6)
    whole = gemma_rms(qh.reshape(1, 16), np.tile(w, 2), 1e-6).reshape(1, 2, 8)
    rms_heads = np.sqrt(np.mean((per / (1 + w)) ** 2, -1))
    check(np.allclose(rms_heads, 1.0, atol=1e-6) and np.abs(per - whole).max() > 0.5,
          "per-head QK-norm normalises each head to rms 1 (differs from whole-vector)",
          f"head rms {rms_heads.ravel().round(6).tolist()}, max diff {np.abs(per - whole).max():.2f}")
    # ---- MXFP8 decode: 0x38 = 1.0, 0xc0 = -2.0; E8M0 130 -> 2^3; ragged 40 = 32 + 8 columns
    q = np.full((2, 40), 0x38, dtype=np.uint8)
    q[1, 35] = 0xC0
    sc = np.array([[130, 127], [120, 1]], dtype=np.uint8)
    src = DictSource({"w": ("F8_E4M3", q), "w_scale_inv": ("U8", sc)})
    mm = M3Reference.__new__(M3Reference)
    mm.src = src
    mm.cfg = type("C", (), {"block_out": 1, "block_in": 32, "quant_method": "mxfp8"})()
    wdq = mm._linear("w", 2, 40)
    want = np.ones((2, 40))
    want[0, :32], want[0, 32:] = 8.0, 1.0
    want[1, :32], want[1, 32:] = 2.0 ** -7, 2.0 ** -126
    want[1, 35] = -2.0 * 2.0 ** -126
    check(np.array_equal(wdq, want), "MXFP8: w = fp8 · 2^(e-127), scale [n_out, ceil(n_in/32)]")
    # ---- whole model: caches, MSA == dense within K·B, sparsity matters beyond it
    top = tiny_config()
    t = tiny_weights(top, np.random.default_rng(1))
    mdl = M3Reference(top, DictSource(t))
    ids = [int(v) for v in rng.integers(0, 64, 40)]
    full = mdl.forward(ids)
    cache = mdl.new_cache()
    steps = np.concatenate([mdl.forward([i], cache) for i in ids])
    check(np.allclose(steps, full, rtol=0, atol=1e-12 * np.abs(full).max()),
          "prefill == token-by-token decode (KV + index-key cache, per-query selection)")
    cache = mdl.new_cache()
    ch = np.concatenate([mdl.forward(ids[:5], cache), mdl.forward(ids[5:18], cache),
                         mdl.forward(ids[18:], cache)])
    check(np.allclose(ch, full, rtol=0, atol=1e-12 * np.abs(full).max()),
          "prefill == chunked prefill 5+13+22")
    dense_top = json.loads(json.dumps(top))
    dense_top["text_config"]["sparse_attention_config"]["use_sparse_attention"] = False
    dense = M3Reference(dense_top, DictSource(t))
    KB = 3 * 4
    check(np.allclose(dense.forward(ids[:KB]), full[:KB], rtol=0, atol=1e-13 * np.abs(full).max()),
          f"context <= K·B = {KB}: MSA == dense attention exactly")
    dfull = dense.forward(ids)
    diff = np.abs(dfull[KB:] - full[KB:]).max(-1) / np.abs(full).max()
    check(float(diff.min()) > 1e-6, "beyond K·B every position differs from dense",
          f"min rel diff {float(diff.min()):.2e}")
    # ---- MSA attention == explicit per-query loop over the selected blocks (layer 1)
    dump = {}
    mdl.forward(ids, dump=dump)
    cfgc = mdl.cfg
    lw = mdl.layers[1]
    n1 = dump["layer01_attn_norm"]
    qd, kd, vd = dump["layer01_q"], dump["layer01_k"], dump["layer01_v"]
    sel = dump["layer01_msa_sel"]
    o = np.zeros((len(ids), cfgc.n_heads, cfgc.head_dim))
    for tq in range(len(ids)):
        for h in range(cfgc.n_heads):
            gq = h // (cfgc.n_heads // cfgc.n_kv_heads)
            keys = [j for j in range(tq + 1) if j // cfgc.block in set(sel[gq, tq][sel[gq, tq] >= 0])]
            s = np.array([qd[tq, h] @ kd[j, gq] / math.sqrt(cfgc.head_dim) for j in keys])
            pr = np.exp(s - s.max())
            pr /= pr.sum()
            o[tq, h] = sum(pr[i] * vd[j, gq] for i, j in enumerate(keys))
    check(np.allclose(o.reshape(len(ids), -1) @ lw["wo"].T, dump["layer01_attn_out"], rtol=0,
                      atol=1e-12), "sparse attention == explicit loop over selected ∩ causal keys")
    sel_ok = all(sel[g, tq][min(tq // 4 + 1, 3) - 1] == tq // 4 and
                 (sel[g, tq] >= 0).sum() == min(tq // 4 + 1, 3)
                 for g in range(2) for tq in range(len(ids)))
    check(sel_ok, "selection holds min(nvis, K) blocks, local block in the last valid slot")
    # per-group selections differ somewhere (the groups really select independently)
    check(any(not np.array_equal(np.sort(sel[0, tq]), np.sort(sel[1, tq]))
              for tq in range(len(ids))), "the two index groups select differently somewhere")
    # ---- MoE: identical experts -> routed part = scale·Expert(x) (weights sum to 1); shared
    #      expert added unscaled
    t2 = dict(t)
    P = PREFIX + "model.layers.2.block_sparse_moe."
    for e in range(1, 4):
        for wn in ("w1", "w2", "w3"):
            t2[f"{P}experts.{e}.{wn}.weight"] = t[f"{P}experts.0.{wn}.weight"]
    m2 = M3Reference(top, DictSource(t2))
    dump = {}
    m2.forward(ids[:10], dump=dump)
    lw = m2.layers[2]
    n2 = dump["layer02_moe_norm"]
    ex = swiglu_oai(n2 @ lw["w1"][0].T, n2 @ lw["w3"][0].T, 1.702, 7.0) @ lw["w2"][0].T
    sh = swiglu_oai(n2 @ lw["sh_gate"].T, n2 @ lw["sh_up"].T, 1.702, 7.0) @ lw["sh_down"].T
    check(np.allclose(dump["layer02_moe_out"], 2.0 * ex + sh, rtol=0, atol=1e-12),
          "MoE = 2.0 · Σ w_e Expert_e + unscaled shared expert (identical experts)")
    # ---- instrumentation: recall/coverage are 1 when nvis <= K
    st = []
    mdl.forward(ids, stats=st)
    early = [s_ for s_ in st if s_["nvis"] <= 3]
    late = [s_ for s_ in st if s_["nvis"] > 3]
    check(all(s_["recall"] == 1.0 and abs(s_["coverage"] - 1) < 1e-12 for s_ in early) and
          all(0 < s_["coverage"] < 1 + 1e-12 and 0 <= s_["recall"] <= 1 for s_ in late),
          "msa stats: recall = coverage = 1 while everything is selected, in (0,1] after",
          f"mean late coverage {np.mean([s_['coverage'] for s_ in late]):.3f}")
    # ---- config refusals
    bad = json.loads(json.dumps(top))
    bad["text_config"]["qk_norm_type"] = "per_layer"
    try:
        M3Reference(bad, DictSource(t))
        check(False, "qk_norm_type per_layer refused")
    except ModelError:
        check(True, "qk_norm_type per_layer refused")
    bad = json.loads(json.dumps(top))
    bad["text_config"]["sparse_attention_config"]["sparse_disable_index_value"] = [0, 0, 0, 0]
    try:
        M3Reference(bad, DictSource(t))
        check(False, "index-value branch refused")
    except ModelError:
        check(True, "index-value branch refused")
    print(f"minimax_m3 self-test: {len(fails)} failed")
    return 1 if fails else 0


# --------------------------------------------------------------------------------------------
# CLI


def print_msa_stats(stats, K, top_n=16, out=sys.stderr):
    """Mean recall / coverage per (layer, group), over the queries where selection is sparse
    (nvis > K; queries with nvis <= K are trivially 1 / 1) and over all queries."""
    keys = sorted({(s["layer"], s["group"]) for s in stats})
    print(f"MSA selection vs full causal attention (true top set: min({top_n}, nvis) blocks; "
          f"first over queries with nvis > K={K}, then over all):", file=out)
    for L, g in keys:
        alls = [s for s in stats if s["layer"] == L and s["group"] == g]
        rs = [s for s in alls if s["nvis"] > K]
        tail = (f"  | all {len(alls)}: recall {np.mean([s['recall'] for s in alls]):.4f} "
                f"coverage {np.mean([s['coverage'] for s in alls]):.4f}")
        if not rs:
            print(f"  layer {L:2d} group {g}: no sparse queries" + tail, file=out)
            continue
        rec = np.array([s["recall"] for s in rs])
        cov = np.array([s["coverage"] for s in rs])
        print(f"  layer {L:2d} group {g}: {len(rs):5d} queries  recall mean {rec.mean():.3f} "
              f"min {rec.min():.3f}  coverage mean {cov.mean():.3f} min {cov.min():.3f}" + tail,
              file=out)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--self-test" in argv:
        return self_test()
    ap = argparse.ArgumentParser(description="float64 numpy reference for MiniMax-M3 (text)")
    add_cli_args(ap)
    ap.add_argument("--msa-stats", action="store_true",
                    help="print per layer/group recall and coverage of the block selection")
    ap.add_argument("--msa-top-n", type=int, default=16, metavar="N",
                    help="--msa-stats: size of the true top set (default 16)")
    add_self_test_arg(ap)
    args = ap.parse_args(argv)

    def body():
        ids = parse_ids(args.ids)
        check_greedy_arg(args)
        if args.msa_top_n < 1:
            raise InputError("--msa-top-n must be >= 1")
        model = M3Reference.from_dir(args.model)
        model.msa_top_n = args.msa_top_n
        ids = model.check_ids(ids)
        dump = {} if args.dump_dir else None
        stats = [] if args.msa_stats else None
        if args.out:
            write_logits(args.out, model.forward(ids, dump=dump, stats=stats))
        else:
            if stats is not None:
                model.forward(ids, stats=stats)
            print_ids(model.greedy(ids, args.greedy, dump=dump))
        if stats is not None:
            print_msa_stats(stats, model.cfg.topk_blocks, args.msa_top_n)
        save_dump(args.dump_dir, dump)
    return run_cli("minimax_m3.py", body)


if __name__ == "__main__":
    sys.exit(main())
