#!/usr/bin/python3
"""Independent float64 numpy reference forward of MiniMaxText01ForCausalLM / MiniMaxM1ForCausalLM.

Written only from docs/minimax-architecture.md (§2 conventions, §3 Text-01 / M1, §7, §8) -- it
deliberately shares no code with the C++ engine. Every activation is float64; stored weights
(F32 / F16 / BF16) are decoded exactly to float64 first.

The model (spec §3):
  * decoder layer, post-norm α/β residual (§3.3): n1 = RMSNorm_in(x); a = Attn(n1);
    h = α_attn·r1 + β_attn·a; n2 = RMSNorm_post(h); out = α_mlp·r2 + β_mlp·MoE(n2), where the
    carried residual is the NORMED value (r1 = n1, r2 = n2) when postnorm is true and the
    un-normed input (r1 = x, r2 = h) when postnorm is false [V-01 `residual = layernorm_output
    if self.postnorm else layernorm_input`]. α/β are per kind: full (softmax) attention, linear
    (lightning) attention, mlp.
  * lightning layers (§3.5): qkv = silu(n1·W_qkvᵀ) on the whole projection, rows per head
    interleaved [q | k | v] (3·head_dim rows per head); no RoPE / scale / QK-norm; per head
    slope s_h = 2^(−8(h+1)/H) · (1 − L/(N−1) + 1e−5) with the GLOBAL layer index L and N =
    num_hidden_layers (factor 1 + 1e−5 when N = 1); λ_h = exp(−s_h); token by token
    S ← λ·S + kᵀ⊗v, o = q·S (current token included); concat heads → RMSNorm over all heads
    jointly (eps 1e−6, §3.5.5 / §8) → · sigmoid(n1·W_gateᵀ) → out_proj.
  * softmax layers (§3.4): GQA (query head h reads kv head h // (Hq/Hkv)), partial NeoX RoPE on
    the first rotary_dim channels (θ = rope_theta), causal softmax(q·kᵀ/√head_dim), no QK-norm.
  * MoE (§3.6): softmax over all experts, top-k (ties -> lower id), renormalised; SiLU-GLU
    experts, w1 = gate, w3 = up, w2 = down. No shared expert.
  * final RMSNorm (model.norm), lm_head.

Both config spellings are read (§3.1): the original remote-code keys (`attn_type_list` 0 =
lightning / 1 = softmax, `layernorm_{full_attention,linear_attention,mlp}_{alpha,beta}`,
`postnorm`) and the transformers `-hf` keys (`layer_types` "linear_attention" /
"full_attention", `{full_attn,linear_attn,mlp}_{alpha,beta}_factor`; post-norm implied).

CLI:
  minimax_text01.py -m DIR --ids 1,2,3 -o FILE    logits of every position, raw little-endian
                                                  float32, row-major [n_ids, vocab_size]
  minimax_text01.py -m DIR --ids 1,2,3 --greedy N N greedy ids (argmax, ties -> lowest id),
                                                  space-separated on one stdout line
  --dump-dir D                                    per-layer intermediates as .npy (prompt pass)
  --self-test                                     closed-form checks of the lightning math
Exit codes: 0 ok, 2 bad input (ids, arguments), 1 model / checkpoint errors.
"""

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from np_common import (ModelError, InputError, rms_norm, rope_neox, silu,  # noqa: E402,F401
                       sigmoid, softmax, topk_lowest_id_ties, routed_experts, silu_glu,
                       read_attn_geometry, ReferenceBase, SelfCheck, simple_main)

ARCHITECTURES = ("MiniMaxText01ForCausalLM", "MiniMaxM1ForCausalLM", "MiniMaxForCausalLM")
LIGHTNING_NORM_EPS = 1e-6   # §3.5.5: the inner norm uses the class default 1e-6, not rms_norm_eps


# --------------------------------------------------------------------------------------------
# config


class Text01Config:
    """Everything the forward needs, normalised from either config spelling."""

    def __init__(self, cfg):
        def need(key):
            if key not in cfg or cfg[key] is None:
                raise ModelError(f"config.json: missing required key {key!r}")
            return cfg[key]

        self.raw = cfg
        archs = cfg.get("architectures") or []
        if archs and not any(a in ARCHITECTURES for a in archs):
            raise ModelError(f"architectures {archs} is not one of {list(ARCHITECTURES)}")
        read_attn_geometry(self, cfg, need)
        self.intermediate = int(need("intermediate_size"))
        self.n_experts = int(need("num_local_experts"))
        self.top_k = int(need("num_experts_per_tok"))
        self.eps = float(cfg.get("rms_norm_eps", 1e-5))
        self.vocab = int(need("vocab_size"))
        self.tie_embeddings = bool(cfg.get("tie_word_embeddings", False))

        # layer kinds: True = lightning (linear) attention, False = softmax (full) attention
        atl, lt = cfg.get("attn_type_list"), cfg.get("layer_types")
        kinds_a = kinds_b = None
        if atl is not None:
            if len(atl) != self.n_layers or any(int(v) not in (0, 1) for v in atl):
                raise ModelError(f"attn_type_list must be {self.n_layers} values in {{0, 1}}")
            kinds_a = [int(v) == 0 for v in atl]
        if lt is not None:
            names = {"linear_attention": True, "full_attention": False}
            if len(lt) != self.n_layers or any(v not in names for v in lt):
                raise ModelError(f"layer_types must be {self.n_layers} values in "
                                 f"{sorted(names)}")
            kinds_b = [names[v] for v in lt]
        if kinds_a is None and kinds_b is None:
            raise ModelError("config.json: neither attn_type_list nor layer_types is present")
        if kinds_a is not None and kinds_b is not None and kinds_a != kinds_b:
            raise ModelError("attn_type_list and layer_types disagree")
        self.is_lightning = kinds_a if kinds_a is not None else kinds_b

        # α/β residual factors, original or -hf spelling (both present -> must agree)
        def factor(orig, hf):
            vals = [float(cfg[k]) for k in (orig, hf) if cfg.get(k) is not None]
            if not vals:
                raise ModelError(f"config.json: missing {orig!r} (or -hf {hf!r})")
            if len(vals) == 2 and vals[0] != vals[1]:
                raise ModelError(f"{orig} = {vals[0]} disagrees with {hf} = {vals[1]}")
            return vals[0]
        self.alpha_full = factor("layernorm_full_attention_alpha", "full_attn_alpha_factor")
        self.beta_full = factor("layernorm_full_attention_beta", "full_attn_beta_factor")
        self.alpha_lin = factor("layernorm_linear_attention_alpha", "linear_attn_alpha_factor")
        self.beta_lin = factor("layernorm_linear_attention_beta", "linear_attn_beta_factor")
        self.alpha_mlp = factor("layernorm_mlp_alpha", "mlp_alpha_factor")
        self.beta_mlp = factor("layernorm_mlp_beta", "mlp_beta_factor")
        pn = cfg.get("postnorm", True)   # -hf configs have no key: transformers always post-norms
        if not isinstance(pn, bool):
            raise ModelError(f"postnorm must be a boolean, got {pn!r}")
        self.postnorm = pn

        # Only what §3 specifies is implemented; anything else is refused, not guessed.
        act = cfg.get("hidden_act", "silu")
        if act != "silu":
            raise ModelError(f"hidden_act {act!r} not supported (Text-01/M1: silu)")
        sis = cfg.get("shared_intermediate_size", 0)
        if any(int(v) != 0 for v in (sis if isinstance(sis, list) else [sis or 0])):
            raise ModelError("shared experts are not supported (shared_intermediate_size 0)")
        if self.n_heads <= 0 or self.n_heads & (self.n_heads - 1):
            raise ModelError(f"num_attention_heads {self.n_heads} is not a power of two: the "
                             "lightning slopes are only specified for that case (§3.5, §8)")
        if self.n_heads % self.n_kv_heads:
            raise ModelError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.rotary_dim % 2 or not (0 <= self.rotary_dim <= self.head_dim):
            raise ModelError(f"rotary_dim {self.rotary_dim} must be even and <= head_dim")
        if not (1 <= self.top_k <= self.n_experts):
            raise ModelError("num_experts_per_tok out of range")

    def slopes(self, L):
        """[H] decay rates s_h of lightning layer L (global index), §3.5.2."""
        H = self.n_heads
        base = 2.0 ** (-8.0 * (np.arange(H, dtype=np.float64) + 1.0) / H)
        if self.n_layers == 1:
            fac = 1.0 + 1e-5
        else:
            fac = 1.0 - L / (self.n_layers - 1) + 1e-5
        return base * fac


# --------------------------------------------------------------------------------------------
# math helpers (all float64); the generic ones are in np_common.py


def split_qkv(qkv, n_heads, head_dim):
    """[T, H*3*D] fused projection -> q, k, v each [T, H, D]; rows per head are [q | k | v]."""
    t = qkv.reshape(qkv.shape[0], n_heads, 3 * head_dim)
    return (t[..., :head_dim], t[..., head_dim:2 * head_dim], t[..., 2 * head_dim:])


def lightning_recurrence(q, k, v, s, state):
    """Token by token (§3.5.3). q, k, v: [T, H, D]; s: [H] decay rates; state: [H, Dk, Dv]
    (updated in place). Returns o [T, H, Dv]:  S ← exp(−s)·S + kᵀ⊗v;  o = q·S."""
    lam = np.exp(-s)[:, None, None]
    o = np.empty((q.shape[0], q.shape[1], v.shape[2]))
    for t in range(q.shape[0]):
        state *= lam
        state += k[t][:, :, None] * v[t][:, None, :]
        o[t] = np.einsum("hd,hde->he", q[t], state)
    return o


def lightning_chunked(q, k, v, s, state, block):
    """The same recurrence evaluated block-wise (§3.5.4), only used to cross-check
    lightning_recurrence in the self-test. Arguments as lightning_recurrence."""
    T, H, _ = q.shape
    out = np.empty((T, H, v.shape[2]))
    for b0 in range(0, T, block):
        qb, kb, vb = q[b0:b0 + block], k[b0:b0 + block], v[b0:b0 + block]
        m = qb.shape[0]
        i = np.arange(m, dtype=np.float64)
        diff = i[:, None] - i[None, :]                                         # i - j
        decay = np.where(diff[None] >= 0, np.exp(-s[:, None, None] * np.maximum(diff, 0)[None]),
                         0.0)                                                  # [H, m, m]
        qk = np.einsum("ihd,jhd->hij", qb, kb) * decay
        intra = np.einsum("hij,jhe->ihe", qk, vb)
        inter = np.einsum("ihd,hde->ihe", qb * np.exp(-s[None, :] * (i[:, None] + 1))[..., None],
                          state)
        out[b0:b0 + m] = intra + inter
        kdec = kb * np.exp(-s[None, :] * (m - 1 - i[:, None]))[..., None]     # [m, H, D]
        state *= np.exp(-s * m)[:, None, None]
        state += np.einsum("jhd,jhe->hde", kdec, vb)
    return out


def moe_route(logits, top_k):
    """Softmax over all experts, top-k (ties -> lower id), renormalised (§3.6).
    Returns (ids [T, k], weights [T, k])."""
    p = softmax(logits, axis=-1)
    sel = topk_lowest_id_ties(p, top_k)
    w = np.take_along_axis(p, sel, axis=-1)
    return sel, w / w.sum(axis=-1, keepdims=True)


# --------------------------------------------------------------------------------------------
# model


class Text01Reference(ReferenceBase):
    def __init__(self, cfg, source):
        """cfg: dict (config.json contents); source: Checkpoint-like (get_f64/dtype/shape/in)."""
        self.cfg = c = Text01Config(cfg)
        self.src = source
        d, hd, H = c.hidden, c.head_dim, c.n_heads
        qw, kw = H * hd, c.n_kv_heads * hd

        self.embed = self._plain("model.embed_tokens.weight", (c.vocab, d))
        self.norm = self._plain("model.norm.weight", (d,))
        if "lm_head.weight" in source:
            self.lm_head = self._plain("lm_head.weight", (c.vocab, d))
        elif c.tie_embeddings:
            self.lm_head = self.embed
        else:
            raise ModelError("lm_head.weight missing and tie_word_embeddings is false")

        self.layers = []
        for L in range(c.n_layers):
            p = f"model.layers.{L}."
            a = p + "self_attn."
            m = p + "block_sparse_moe."
            lw = {"in_norm": self._plain(p + "input_layernorm.weight", (d,)),
                  "post_norm": self._plain(p + "post_attention_layernorm.weight", (d,)),
                  "gate": self._plain(m + "gate.weight", (c.n_experts, d))}
            if c.is_lightning[L]:
                lw["wqkv"] = self._plain(a + "qkv_proj.weight", (3 * qw, d))
                lw["wgate"] = self._plain(a + "output_gate.weight", (qw, d))
                lw["lnorm"] = self._plain(a + "norm.weight", (qw,))
                lw["wout"] = self._plain(a + "out_proj.weight", (d, qw))
                lw["slopes"] = c.slopes(L)
            else:
                lw["wq"] = self._plain(a + "q_proj.weight", (qw, d))
                lw["wk"] = self._plain(a + "k_proj.weight", (kw, d))
                lw["wv"] = self._plain(a + "v_proj.weight", (kw, d))
                lw["wo"] = self._plain(a + "o_proj.weight", (d, qw))
            for wn, shape in (("w1", (c.intermediate, d)), ("w3", (c.intermediate, d)),
                              ("w2", (d, c.intermediate))):
                lw[wn] = np.stack([self._plain(f"{m}experts.{e}.{wn}.weight", shape)
                                   for e in range(c.n_experts)])
            self.layers.append(lw)

    def _plain(self, name, shape):
        if name not in self.src:
            raise ModelError(f"tensor not found in checkpoint: {name}")
        dt = self.src.dtype(name)
        if dt not in ("F32", "F16", "BF16", "F64"):
            raise ModelError(f"{name}: dtype {dt} is not a Text-01/M1 weight format")
        w = self.src.get_f64(name)
        if tuple(w.shape) != tuple(shape):
            raise ModelError(f"{name}: shape {list(w.shape)} != expected {list(shape)}")
        return w

    # ---- forward

    def new_cache(self):
        """Per layer: lightning -> {"S": [H, D, D]} (fp64 state), softmax -> {"k","v":
        [T, Hkv, D]}; plus the number of tokens already consumed in cache[-1]["pos"]."""
        c = self.cfg
        cache = []
        for L in range(c.n_layers):
            if c.is_lightning[L]:
                cache.append({"S": np.zeros((c.n_heads, c.head_dim, c.head_dim))})
            else:
                cache.append({"k": np.zeros((0, c.n_kv_heads, c.head_dim)),
                              "v": np.zeros((0, c.n_kv_heads, c.head_dim))})
        cache.append({"pos": 0})
        return cache

    def _softmax_attn(self, lw, n1, pos, kc, put, pre):
        c = self.cfg
        T = n1.shape[0]
        hd, Hq, Hkv = c.head_dim, c.n_heads, c.n_kv_heads
        q = rope_neox((n1 @ lw["wq"].T).reshape(T, Hq, hd), pos, c.rotary_dim, c.rope_theta)
        k = rope_neox((n1 @ lw["wk"].T).reshape(T, Hkv, hd), pos, c.rotary_dim, c.rope_theta)
        v = (n1 @ lw["wv"].T).reshape(T, Hkv, hd)
        kc["k"] = np.concatenate([kc["k"], k], axis=0)
        kc["v"] = np.concatenate([kc["v"], v], axis=0)
        kv_of_q = np.arange(Hq) // (Hq // Hkv)
        K, V = kc["k"][:, kv_of_q, :], kc["v"][:, kv_of_q, :]      # [S, Hq, hd]
        S = K.shape[0]
        causal = np.arange(S)[None, :] <= pos[:, None]
        sc = np.einsum("thd,shd->hts", q, K) / math.sqrt(hd)
        sc = np.where(causal[None], sc, -np.inf)
        o = np.einsum("hts,shd->thd", softmax(sc, axis=-1), V).reshape(T, Hq * hd)
        put(pre + "q", q)
        put(pre + "k", k)
        put(pre + "v", v)
        return o @ lw["wo"].T

    def _lightning_attn(self, lw, n1, kc, put, pre):
        c = self.cfg
        T = n1.shape[0]
        H, D = c.n_heads, c.head_dim
        qkv = silu(n1 @ lw["wqkv"].T)                     # SiLU on the whole fused projection
        q, k, v = split_qkv(qkv, H, D)
        o = lightning_recurrence(q, k, v, lw["slopes"], kc["S"]).reshape(T, H * D)
        on = rms_norm(o, lw["lnorm"], LIGHTNING_NORM_EPS)  # one statistic over ALL heads
        g = sigmoid(n1 @ lw["wgate"].T)
        put(pre + "q", q)
        put(pre + "k", k)
        put(pre + "v", v)
        put(pre + "lin_o", o)
        put(pre + "lin_norm", on)
        put(pre + "lin_gate", g)
        return (on * g) @ lw["wout"].T

    def forward(self, ids, cache=None, dump=None):
        """Logits [T, vocab] for `ids` at absolute positions cache_pos .. cache_pos+T-1.
        The cache (new_cache()) is extended in place. dump: optional dict of intermediates."""
        c = self.cfg
        ids = self.check_ids(ids)
        if cache is None:
            cache = self.new_cache()
        T = ids.size
        p0 = cache[-1]["pos"]
        pos = np.arange(p0, p0 + T)

        def put(name, val):
            if dump is not None:
                dump[name] = np.array(val, copy=True)

        x = self.embed[ids]
        put("embed", x)
        for L, lw in enumerate(self.layers):
            pre = f"layer{L:02d}_"
            lin = c.is_lightning[L]
            n1 = rms_norm(x, lw["in_norm"], c.eps)
            if lin:
                a = self._lightning_attn(lw, n1, cache[L], put, pre)
                alpha, beta = c.alpha_lin, c.beta_lin
            else:
                a = self._softmax_attn(lw, n1, pos, cache[L], put, pre)
                alpha, beta = c.alpha_full, c.beta_full
            h = alpha * (n1 if c.postnorm else x) + beta * a
            n2 = rms_norm(h, lw["post_norm"], c.eps)
            rl = n2 @ lw["gate"].T
            sel, wsel = moe_route(rl, c.top_k)
            moe = routed_experts(h, n2, sel, wsel, lw["w1"], lw["w3"], lw["w2"], silu_glu)
            x = c.alpha_mlp * (n2 if c.postnorm else h) + c.beta_mlp * moe

            put(pre + "attn_norm", n1)
            put(pre + "attn_out", a)
            put(pre + "attn_resid", h)
            put(pre + "moe_norm", n2)
            put(pre + "moe_router_logits", rl)
            put(pre + "moe_router_ids", sel)
            put(pre + "moe_router_weights", wsel)
            put(pre + "moe_out", moe)
            put(pre + "layer_out", x)
        cache[-1]["pos"] = p0 + T

        xf = rms_norm(x, self.norm, c.eps)
        put("final_norm", xf)
        logits = xf @ self.lm_head.T
        put("logits", logits)
        return logits



# --------------------------------------------------------------------------------------------
# self-test: closed-form checks of the pieces that are specific to this family


def self_test():
    check = SelfCheck()
    fails = check.fails

    rng = np.random.default_rng(0)
    # 1 head, head_dim 1: S_t = λ S_{t-1} + k_t v_t, o_t = q_t S_t, by hand
    q, k, v = np.array([2.0, -1.0, 0.5]), np.array([1.0, 3.0, -2.0]), np.array([4.0, 0.5, 1.0])
    lam = math.exp(-0.3)
    s1 = k[0] * v[0]
    s2 = lam * s1 + k[1] * v[1]
    s3 = lam * s2 + k[2] * v[2]
    want = np.array([q[0] * s1, q[1] * s2, q[2] * s3])
    st = np.zeros((1, 1, 1))
    got = lightning_recurrence(q[:, None, None], k[:, None, None], v[:, None, None],
                               np.array([0.3]), st)[:, 0, 0]
    check(np.allclose(got, want, rtol=0, atol=1e-14), "1 head, head_dim 1 recurrence by hand",
          f"{got.tolist()} vs {want.tolist()}")
    check(abs(st[0, 0, 0] - s3) < 1e-14, "final state by hand")

    # λ -> 1 (s = 0): plain causal linear attention o_t = Σ_{j<=t} (q_t·k_j) v_j
    T, H, D = 9, 3, 4
    q, k, v = (rng.standard_normal((T, H, D)) for _ in range(3))
    o = lightning_recurrence(q, k, v, np.zeros(H), np.zeros((H, D, D)))
    sc = np.einsum("thd,shd->hts", q, k) * np.tril(np.ones((T, T)))[None]
    check(np.allclose(o, np.einsum("hts,she->the", sc, v), rtol=0, atol=1e-12),
          "s = 0 equals causal linear attention (current token included)")
    # closed form with decay: o_t = Σ_j λ^(t-j) (q_t·k_j) v_j
    s = np.array([0.5, 0.05, 2.0])
    o = lightning_recurrence(q, k, v, s, np.zeros((H, D, D)))
    tt = np.arange(T)
    dec = np.exp(-s[:, None, None] * (tt[:, None] - tt[None, :]))[...] * \
        (tt[:, None] >= tt[None, :])[None]
    check(np.allclose(o, np.einsum("hts,she->the", sc * dec, v), rtol=0, atol=1e-12),
          "recurrence == Σ_j λ^(t-j) (q_t·k_j) v_j")
    # chunked (§3.5.4) == token by token, several block sizes, with a non-zero initial state
    T = 37
    q, k, v = (rng.standard_normal((T, H, D)) for _ in range(3))
    S0 = rng.standard_normal((H, D, D))
    ref_state = S0.copy()
    ref = lightning_recurrence(q, k, v, s, ref_state)
    for B in (1, 5, 16, 37, 64):
        st = S0.copy()
        got = lightning_chunked(q, k, v, s, st, B)
        check(np.allclose(got, ref, rtol=0, atol=1e-10 * np.abs(ref).max()) and
              np.allclose(st, ref_state, rtol=0, atol=1e-10 * np.abs(ref_state).max()),
              f"chunked prefill block {B} == token by token (output and state)")
    # resume: two calls == one call
    st = S0.copy()
    a1 = lightning_recurrence(q[:20], k[:20], v[:20], s, st)
    a2 = lightning_recurrence(q[20:], k[20:], v[20:], s, st)
    check(np.allclose(np.concatenate([a1, a2]), ref, rtol=0, atol=1e-12),
          "resume from state == one pass")

    # slopes: H=4 -> 2^-2, 2^-4, 2^-6, 2^-8 times the global-layer factor
    cfg = {"hidden_size": 8, "num_hidden_layers": 8, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 2, "intermediate_size": 4,
           "num_local_experts": 2, "num_experts_per_tok": 1, "vocab_size": 4,
           "attn_type_list": [0, 0, 0, 1, 0, 0, 0, 1],
           "layernorm_full_attention_alpha": 2.0, "layernorm_full_attention_beta": 1.0,
           "layernorm_linear_attention_alpha": 2.0, "layernorm_linear_attention_beta": 1.0,
           "layernorm_mlp_alpha": 2.0, "layernorm_mlp_beta": 1.0}
    c = Text01Config(cfg)
    check(np.allclose(c.slopes(0), np.array([2**-2, 2**-4, 2**-6, 2**-8]) * (1 + 1e-5),
                      rtol=1e-15, atol=0), "slopes layer 0: 2^(-8(h+1)/H)·(1+1e-5)")
    check(np.allclose(c.slopes(6), np.array([2**-2, 2**-4, 2**-6, 2**-8]) * (1 / 7 + 1e-5),
                      rtol=1e-15, atol=0), "slopes layer 6 use the global index: ·(1-6/7+1e-5)")
    c1 = Text01Config(dict(cfg, num_hidden_layers=1, attn_type_list=[0]))
    check(np.allclose(c1.slopes(0), np.array([2**-2, 2**-4, 2**-6, 2**-8]) * (1 + 1e-5)),
          "slopes with one layer: factor 1+1e-5")
    check(c.is_lightning == [True, True, True, False, True, True, True, False],
          "attn_type_list 0 = lightning, 1 = softmax")
    hf = {k2: v2 for k2, v2 in cfg.items() if not k2.startswith("layernorm_")
          and k2 != "attn_type_list"}
    hf.update({"layer_types": ["linear_attention"] * 3 + ["full_attention"] +
               ["linear_attention"] * 3 + ["full_attention"],
               "full_attn_alpha_factor": 2.0, "full_attn_beta_factor": 1.0,
               "linear_attn_alpha_factor": 2.0, "linear_attn_beta_factor": 1.0,
               "mlp_alpha_factor": 2.0, "mlp_beta_factor": 1.0})
    ch = Text01Config(hf)
    check(ch.is_lightning == c.is_lightning and ch.alpha_mlp == 2.0 and ch.postnorm,
          "-hf spelling (layer_types, *_factor) parses to the same config")
    for bad, why in ((dict(cfg, num_attention_heads=6), "6 heads (not a power of two)"),
                     (dict(cfg, attn_type_list=[0] * 7), "short attn_type_list"),
                     (dict(cfg, layer_types=["full_attention"] * 8), "spellings disagree"),
                     (dict(cfg, shared_intermediate_size=[16]), "shared expert"),
                     ({k2: v2 for k2, v2 in cfg.items() if k2 != "layernorm_mlp_alpha"},
                      "missing α")):
        try:
            Text01Config(bad)
            check(False, f"refused: {why}")
        except ModelError as e:
            check(True, f"refused: {why}", str(e)[:70])

    # softmax router known answer: logits log([0.1, 0.4, 0.2, 0.3]) -> top-2 {1, 3}, 4/7, 3/7
    sel, w = moe_route(np.log(np.array([[0.1, 0.4, 0.2, 0.3]])), 2)
    check(sel.tolist() == [[1, 3]] and np.allclose(w, [[4 / 7, 3 / 7]], rtol=0, atol=1e-15),
          "softmax router: top-2 of softmax, renormalised", f"{sel.tolist()} {w.tolist()}")
    sel, w = moe_route(np.zeros((1, 4)), 2)
    check(sel.tolist() == [[0, 1]] and np.allclose(w, 0.5), "router ties -> lower expert id")
    # fused qkv split: per-head interleaved rows
    row = np.arange(2 * 3 * 2, dtype=float)[None]      # H=2, D=2: [q0 k0 v0 q1 k1 v1] pairs
    qq, kk, vv = split_qkv(row, 2, 2)
    check(qq.tolist() == [[[0, 1], [6, 7]]] and kk.tolist() == [[[2, 3], [8, 9]]] and
          vv.tolist() == [[[4, 5], [10, 11]]], "qkv rows interleaved per head [q|k|v]")

    print(f"minimax_text01 self-test: {len(fails)} failed")
    return 1 if fails else 0


# --------------------------------------------------------------------------------------------
# CLI


def main(argv=None):
    return simple_main(argv, "minimax_text01.py",
                       "float64 numpy reference for MiniMax-Text-01 / M1", Text01Reference,
                       self_test)


if __name__ == "__main__":
    sys.exit(main())
