"""Independent PyTorch implementation of the TRAINING loss of the three MiniMax families, used as
a second opinion on the C++ gradients (issue 11, "Training core").

Written from ../shared/docs/minimax-architecture.md (the spec; section numbers below refer to it)
only. It shares no code with the C++ engine and none with the numpy references either, except the
safetensors reader reference/safetensors_np.py (reference code). Autograd computes the gradients.

Families (spec section):
  * MiniMaxM2ForCausalLM (§4.4): pre-norm; GQA with QK-norm over the WHOLE q / k projection of a
    token (one RMS statistic across heads, per-channel gains); partial NeoX RoPE (§2); sigmoid
    router, top-k on sigmoid + e_score_correction_bias (selection only), weights = the unbiased
    sigmoid of the selected experts renormalised; SiLU-GLU experts; final norm; lm_head.
  * MiniMax-Text-01 / M1 (§3): post-norm α/β residual (§3.3); lightning layers (§3.5) and softmax
    GQA layers (§3.4); softmax top-k router renormalised (§3.6).
  * MiniMax-M3 text model (§5): Gemma (1 + w) norms, per-head QK-norm with one [head_dim] gain,
    dense GQA layers and MSA layers (lightning indexer, per-KV-group top-k block selection with the
    local block forced, §5.6), SwiGLU-OAI (§5.7), dense MLP / MoE with routed_scaling_factor and an
    unscaled shared expert.

Training-loss contract (the C++ side implements the same):
  batch = int array [B, T+1]; inputs = batch[:, :-1]; targets = batch[:, 1:].
  ce = Σ over all B·T positions with target != -1 of cross-entropy(logits, target) / (number of
  such positions). Logits are computed in the parameter dtype (float64 or float32).
  An INPUT id of -1 (the tail padding that also produces the -1 targets) is embedded as token 0;
  with padding only at the tail of a causal sequence it cannot affect any counted target.
  Discrete choices (top-k experts, MSA block selection) are not differentiated: gradients flow
  through the selected experts' renormalised weights and through the selected blocks' attention
  only. e_score_correction_bias is a constant (no gradient).

Visibility mask and positions (for RL tree packing):
  mask[b, i, j] = True: query i may see key j. Default: causal. A given mask must be a subset of
  the causal mask (j <= i) and have its diagonal set (each token sees itself).
  positions[b, i]: the RoPE position of token i, and for lightning layers the decay distance
  between tokens i and j is positions[i] - positions[j]. Default: i = 0..T-1, with or without a
  mask (as the C++ `mmx grad --mask` does). make_positions(..., depth=True) / torch_grad.py
  --depth-positions give the number of keys token i sees minus one instead: for an
  ancestor-closed tree mask that is the depth, and then a branch of a tree computes exactly what
  it computes alone (tests/train/torch_ref_selftest.py).
  - Lightning attention (§3.5.3-4) is evaluated as ONE block covering the whole sequence (§3.5.4:
    "any block size, including the whole prompt as one block, gives the same math"):
        o_i = Σ_j mask[i, j] · λ_h^(pos_i - pos_j) · (q_i · k_j) v_j,   λ_h = exp(-s_h)
    which for the causal mask with pos = 0..T-1 is the recurrence S ← λ·S + kᵀ⊗v, o = q·S;
    lightning_recurrence() below is that token-by-token form (causal only), used as a cross-check.
  - MSA with a mask (generalising §5.6, cf. the tree indexer of §5.6 [MSA-tree]): blocks are
    blocks of the PACKED row index j (block id j // B); a key takes part in the index scores, the
    block max and the attention only if mask[i, j]; the local block is i // B (always holds the
    query itself); the candidates are the non-local blocks j // B < i // B that hold at least one
    visible key. If there are at most K-1 candidates all are selected, otherwise the K-1 best by
    (block max desc, block id asc); plus the local block. For the causal mask this is exactly
    §5.6 (nvis <= K -> everything; else top K-1 of blocks 0..nvis-2 + local).

MSA indexer auxiliary loss (M3, spec §5.6 "KL objective used to train the indexer" [MSA-T
kl_full_reference, MSA-KL _resolve_scales]), loss_total = ce + index_loss_weight · kl:
  for every sparse layer, index head g (<-> KV group g) and query token i:
    allowed(i) = {j : mask[i, j] and j // B in selected_g(i)}   (exactly the keys the sparse
                 attention of group g uses; token level, the local block partial)
    teacher   = mean over the Hq/Hkv query heads of group g of the main (sparse) attention
                probabilities of query i over allowed(i) (softmax of q·k/√head_dim), DETACHED
    student   = softmax over allowed(i) of iq_g(i)·ik(j) / √index_dim
    KL(teacher ‖ student) = Σ_j t_j (log t_j − log s_j)
  kl_layer = mean over the index heads and over the query rows that hold a real token (input id
  != -1), i.e. Σ / (n_index_heads · n_rows) as in MSA-KL grad_scale = loss_coeff / 4 / total_q;
  kl = Σ over the sparse layers (each layer's indexer gets its own loss_coeff-weighted gradient).
  Choices where the spec is open, taken from the DeepSeek-V3.2 sparse-attention (DSA) paper,
  which MSA follows: the teacher is detached AND the indexer's input (the normalised hidden state
  feeding index_q_proj / index_k_proj) is detached, so the indexer is trained by the KL only and
  the rest of the model by the CE only; the KL is taken over the selected tokens (the "sparse
  training stage" form); no bf16 rounding of (p_student - p_teacher) (the MSA kernel does that);
  lse temperature 1. So under index_loss_weight > 0 the gradient of a non-indexer parameter is
  its CE gradient and the gradient of an indexer parameter is index_loss_weight · d kl.
"""

import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_np import Checkpoint, SafetensorsError  # noqa: E402

__all__ = ["InputError", "load_model", "training_loss", "sequence_loss", "make_positions",
           "check_mask", "check_batch", "detect_family"]


class InputError(Exception):
    """Bad model directory, config, batch, mask or positions (CLI exit code 2)."""


# --------------------------------------------------------------------------------------------
# math pieces


def rms_norm(x, w, eps):
    """x / sqrt(mean(x²) + eps) · w over the last axis (§2, Llama flavour)."""
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def gemma_norm(x, w, eps):
    """x / sqrt(mean(x²) + eps) · (1 + w) over the last axis (§2, Gemma flavour, M3)."""
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * (1.0 + w)


def rope_tables(positions, rotary_dim, theta, dtype):
    """cos / sin [B, T, 1, rotary_dim/2] for partial NeoX RoPE (§2): inv_freq_i = θ^(−2i/rd),
    built in float64 then cast."""
    half = rotary_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    inv = theta ** (-2.0 * i / rotary_dim)
    ang = positions.to(torch.float64)[..., None] * inv                 # [B, T, half]
    return torch.cos(ang)[:, :, None, :].to(dtype), torch.sin(ang)[:, :, None, :].to(dtype)


def apply_rope(x, cs, rotary_dim):
    """x [B, T, H, D]: y[i] = x[i]cos − x[i+h]sin, y[i+h] = x[i+h]cos + x[i]sin for i < h =
    rotary_dim/2 (rotate_half layout); channels >= rotary_dim pass through."""
    if rotary_dim == 0:
        return x
    cos, sin = cs
    h = rotary_dim // 2
    a, b, rest = x[..., :h], x[..., h:rotary_dim], x[..., rotary_dim:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin, rest], dim=-1)


def expand_kv(t, group):
    """[B, S, Hkv, D] -> [B, S, Hkv·group, D]: query head h reads KV head h // group (§2)."""
    return t.repeat_interleave(group, dim=2)


def masked_softmax_attention(q, k, v, allowed, scale):
    """q [B, T, Hq, D], k / v [B, S, Hq, D], allowed bool broadcastable to [B, Hq, T, S].
    Returns (o [B, T, Hq, D], probabilities [B, Hq, T, S])."""
    s = torch.einsum("bthd,bshd->bhts", q, k) * scale
    s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.einsum("bhts,bshd->bthd", p, v), p


def stable_topk_ids(scores, k):
    """Indices of the k largest scores per row; equal scores -> lower index first."""
    return torch.sort(-scores, dim=-1, stable=True).indices[..., :k]


def silu_glu(g, u):
    return torch.nn.functional.silu(g) * u


def routed_experts(x, sel, w, experts, act):
    """Σ_slots w · W2_e·act(W1_e·x, W3_e·x) over the selected experts. x [N, d]; sel / w [N, k];
    experts: list of (w1, w3, w2)."""
    out = torch.zeros_like(x)
    for e, (w1, w3, w2) in enumerate(experts):
        rows, slot = torch.nonzero(sel == e, as_tuple=True)
        if rows.numel() == 0:
            continue
        xe = x[rows]
        ye = act(xe @ w1.t(), xe @ w3.t()) @ w2.t()
        out = out.index_add(0, rows, w[rows, slot][:, None] * ye)
    return out


def lightning_quadratic(q, k, v, slopes, positions, mask):
    """§3.5 as one block over the whole sequence: o_i = Σ_j mask_ij λ^(p_i−p_j) (q_i·k_j) v_j.
    q / k / v [B, T, H, D]; slopes [H] (float64); positions [B, T]; mask [B, T, T] bool."""
    diff = (positions[:, :, None] - positions[:, None, :]).to(torch.float64)      # [B, T, T]
    dec = torch.exp(-slopes[None, :, None, None] * diff.clamp(min=0)[:, None])     # [B, H, T, T]
    dec = torch.where(mask[:, None], dec, torch.zeros_like(dec)).to(q.dtype)
    a = torch.einsum("bihd,bjhd->bhij", q, k) * dec
    return torch.einsum("bhij,bjhd->bihd", a, v)


def lightning_recurrence(q, k, v, slopes):
    """§3.5.3 token by token, causal, positions 0..T-1 (cross-check of lightning_quadratic):
    S ← λ·S + kᵀ⊗v; o = q·S (current token included)."""
    B, T, H, D = q.shape
    lam = torch.exp(-slopes).to(q.dtype)[None, :, None, None]
    S = torch.zeros(B, H, D, v.shape[-1], dtype=q.dtype)
    outs = []
    for t in range(T):
        S = lam * S + k[:, t, :, :, None] * v[:, t, :, None, :]
        outs.append(torch.einsum("bhd,bhde->bhe", q[:, t], S))
    return torch.stack(outs, dim=1)


def swiglu_oai(g, u, alpha, limit):
    """§5.7: g = min(g, limit); u = clamp(u, −limit, limit); (u + 1)·g·sigmoid(alpha·g)."""
    g = torch.clamp(g, max=limit)
    u = torch.clamp(u, min=-limit, max=limit)
    return (u + 1.0) * g * torch.sigmoid(alpha * g)


# --------------------------------------------------------------------------------------------
# config helpers


def _need(cfg, key, where="config.json"):
    if key not in cfg or cfg[key] is None:
        raise InputError(f"{where}: missing required key {key!r}")
    return cfg[key]


def _geometry(c, cfg, where):
    c.hidden = int(_need(cfg, "hidden_size", where))
    c.n_layers = int(_need(cfg, "num_hidden_layers", where))
    c.n_heads = int(_need(cfg, "num_attention_heads", where))
    c.n_kv_heads = int(cfg.get("num_key_value_heads") or c.n_heads)
    c.head_dim = int(cfg.get("head_dim") or c.hidden // c.n_heads)
    rd = cfg.get("rotary_dim")
    if rd is None:
        rd = float(cfg.get("partial_rotary_factor", 1.0)) * c.head_dim
    c.rotary_dim = int(rd)
    c.rope_theta = float(cfg.get("rope_theta", 10000.0))
    c.vocab = int(_need(cfg, "vocab_size", where))
    c.tie = bool(cfg.get("tie_word_embeddings", False))
    if c.n_heads % c.n_kv_heads:
        raise InputError("num_attention_heads must be a multiple of num_key_value_heads")
    if c.rotary_dim % 2 or not 0 <= c.rotary_dim <= c.head_dim:
        raise InputError(f"rotary_dim {c.rotary_dim} must be even and <= head_dim")


class _Cfg:
    pass


def detect_family(cfg):
    archs = cfg.get("architectures") or []
    mt = cfg.get("model_type", "")
    if "MiniMaxM2ForCausalLM" in archs or mt == "minimax_m2":
        return "m2"
    if any(a in archs for a in ("MiniMaxText01ForCausalLM", "MiniMaxM1ForCausalLM",
                                "MiniMaxForCausalLM")) or mt in ("minimax_text_01",
                                                                 "minimax_m1", "minimax"):
        return "text01"
    if "MiniMaxM3SparseForConditionalGeneration" in archs or mt == "minimax_m3_vl" or \
            "text_config" in cfg:
        return "m3"
    raise InputError(f"config.json: unknown architecture {archs} / model_type {mt!r}")


# --------------------------------------------------------------------------------------------
# models


class _Model:
    """Parameters as a dict HF name -> leaf tensor (requires_grad) plus constants (the routing
    bias). Subclasses define forward(ids, positions, mask, rows_valid, trace) -> (logits, kl)."""

    def __init__(self, ckpt, dtype):
        self.ckpt = ckpt
        self.dtype = dtype
        self.params = {}
        self.consts = {}
        self.used = set()

    def _load(self, name, shape, trainable=True):
        if name not in self.ckpt:
            raise InputError(f"tensor not found in checkpoint: {name}")
        dt = self.ckpt.dtype(name)
        if dt not in ("F32", "F16", "BF16", "F64"):
            raise InputError(f"{name}: dtype {dt} not supported for training (F32/F16/BF16); "
                             "FP8 / MXFP8 checkpoints must be dequantized first")
        if tuple(self.ckpt.shape(name)) != tuple(shape):
            raise InputError(f"{name}: shape {list(self.ckpt.shape(name))} != expected "
                             f"{list(shape)}")
        t = torch.from_numpy(np.ascontiguousarray(self.ckpt.get_f64(name)))
        self.used.add(name)
        if trainable:
            t = t.to(self.dtype).requires_grad_(True)
            self.params[name] = t
        else:
            t = t.to(self.dtype)
            self.consts[name] = t
        return t

    def _embed_and_head(self, prefix, c):
        self.embed = self._load(prefix + "model.embed_tokens.weight", (c.vocab, c.hidden))
        self.final_norm = self._load(prefix + "model.norm.weight", (c.hidden,))
        if prefix + "lm_head.weight" in self.ckpt:
            self.lm_head = self._load(prefix + "lm_head.weight", (c.vocab, c.hidden))
        elif c.tie:
            self.lm_head = self.embed
        else:
            raise InputError("lm_head.weight missing and tie_word_embeddings is false")

    def unused_tensors(self):
        return [n for n in self.ckpt.keys() if n not in self.used]


class M2Model(_Model):
    family = "m2"

    def __init__(self, cfg, ckpt, dtype):
        super().__init__(ckpt, dtype)
        self.c = c = _Cfg()
        _geometry(c, cfg, "config.json")
        c.inter = int(_need(cfg, "intermediate_size"))
        c.n_experts = int(_need(cfg, "num_local_experts"))
        c.top_k = int(_need(cfg, "num_experts_per_tok"))
        c.eps = float(cfg.get("rms_norm_eps", 1e-6))
        c.use_qk_norm = bool(cfg.get("use_qk_norm", True))
        c.use_bias = bool(cfg.get("use_routing_bias", True))
        if c.use_qk_norm and cfg.get("qk_norm_type", "per_layer") != "per_layer":
            raise InputError("qk_norm_type other than 'per_layer' is not M2 (§4.4)")
        if cfg.get("scoring_func", "sigmoid") != "sigmoid":
            raise InputError("scoring_func other than sigmoid is not M2 (§4.4)")
        if cfg.get("shared_intermediate_size", 0):
            raise InputError("shared experts are not part of M2")
        if not 1 <= c.top_k <= c.n_experts:
            raise InputError("num_experts_per_tok out of range")
        d, hd = c.hidden, c.head_dim
        qw, kw = c.n_heads * hd, c.n_kv_heads * hd
        self._embed_and_head("", c)
        self.layers = []
        for L in range(c.n_layers):
            p, a, m = f"model.layers.{L}.", f"model.layers.{L}.self_attn.", \
                f"model.layers.{L}.block_sparse_moe."
            lw = {"in_norm": self._load(p + "input_layernorm.weight", (d,)),
                  "post_norm": self._load(p + "post_attention_layernorm.weight", (d,)),
                  "wq": self._load(a + "q_proj.weight", (qw, d)),
                  "wk": self._load(a + "k_proj.weight", (kw, d)),
                  "wv": self._load(a + "v_proj.weight", (kw, d)),
                  "wo": self._load(a + "o_proj.weight", (d, qw)),
                  "gate": self._load(m + "gate.weight", (c.n_experts, d))}
            if c.use_qk_norm:
                lw["q_norm"] = self._load(a + "q_norm.weight", (qw,))
                lw["k_norm"] = self._load(a + "k_norm.weight", (kw,))
            lw["bias"] = (self._load(m + "e_score_correction_bias", (c.n_experts,), False)
                          if c.use_bias else torch.zeros(c.n_experts, dtype=dtype))
            lw["experts"] = [(self._load(f"{m}experts.{e}.w1.weight", (c.inter, d)),
                              self._load(f"{m}experts.{e}.w3.weight", (c.inter, d)),
                              self._load(f"{m}experts.{e}.w2.weight", (d, c.inter)))
                             for e in range(c.n_experts)]
            self.layers.append(lw)

    def forward(self, ids, positions, mask, rows_valid=None, trace=None):
        c = self.c
        B, T = ids.shape
        hd, Hq, Hkv = c.head_dim, c.n_heads, c.n_kv_heads
        cs = rope_tables(positions, c.rotary_dim, c.rope_theta, self.dtype)
        x = self.embed[ids]
        for lw in self.layers:
            n1 = rms_norm(x, lw["in_norm"], c.eps)
            q, k, v = n1 @ lw["wq"].t(), n1 @ lw["wk"].t(), n1 @ lw["wv"].t()
            if c.use_qk_norm:                 # one statistic over the WHOLE projection (§4.4.2)
                q = rms_norm(q, lw["q_norm"], c.eps)
                k = rms_norm(k, lw["k_norm"], c.eps)
            q = apply_rope(q.view(B, T, Hq, hd), cs, c.rotary_dim)
            k = apply_rope(k.view(B, T, Hkv, hd), cs, c.rotary_dim)
            v = v.view(B, T, Hkv, hd)
            g = Hq // Hkv
            o, _ = masked_softmax_attention(q, expand_kv(k, g), expand_kv(v, g), mask[:, None],
                                            1.0 / math.sqrt(hd))
            h = x + o.reshape(B, T, Hq * hd) @ lw["wo"].t()
            n2 = rms_norm(h, lw["post_norm"], c.eps).reshape(B * T, -1)
            p = torch.sigmoid(n2 @ lw["gate"].t())
            sel = stable_topk_ids(p.detach() + lw["bias"], c.top_k)     # bias: selection only
            psel = p.gather(-1, sel)
            w = psel / psel.sum(-1, keepdim=True)                        # unbiased, renormalised
            if trace is not None:
                trace.append(sel)
            x = h + routed_experts(n2, sel, w, lw["experts"], silu_glu).view(B, T, -1)
        xf = rms_norm(x, self.final_norm, c.eps)
        return xf @ self.lm_head.t(), None


class Text01Model(_Model):
    family = "text01"
    LIGHTNING_NORM_EPS = 1e-6    # §3.5.5 / §8: the inner norm uses 1e-6, not rms_norm_eps

    def __init__(self, cfg, ckpt, dtype, lightning_impl="quadratic"):
        super().__init__(ckpt, dtype)
        self.lightning_impl = lightning_impl
        self.c = c = _Cfg()
        _geometry(c, cfg, "config.json")
        c.inter = int(_need(cfg, "intermediate_size"))
        c.n_experts = int(_need(cfg, "num_local_experts"))
        c.top_k = int(_need(cfg, "num_experts_per_tok"))
        c.eps = float(cfg.get("rms_norm_eps", 1e-5))
        if not 1 <= c.top_k <= c.n_experts:
            raise InputError("num_experts_per_tok out of range")
        if cfg.get("hidden_act", "silu") != "silu":
            raise InputError("hidden_act other than silu is not Text-01 (§3)")
        sis = cfg.get("shared_intermediate_size", 0)
        if any(int(s) for s in (sis if isinstance(sis, list) else [sis or 0])):
            raise InputError("shared experts are not supported (shared_intermediate_size 0)")
        H = c.n_heads
        if H & (H - 1):
            raise InputError("lightning slopes are specified for a power-of-two head count "
                             "only (§3.5.2, §8)")
        # layer kinds (§3.1): attn_type_list 0 = lightning / 1 = softmax, or -hf layer_types
        atl, lt = cfg.get("attn_type_list"), cfg.get("layer_types")
        if atl is not None:
            if len(atl) != c.n_layers or any(int(t) not in (0, 1) for t in atl):
                raise InputError(f"attn_type_list must hold {c.n_layers} values in {{0, 1}}")
            c.lightning = [int(t) == 0 for t in atl]
        elif lt is not None:
            names = {"linear_attention": True, "full_attention": False}
            if len(lt) != c.n_layers or any(t not in names for t in lt):
                raise InputError(f"layer_types must hold {c.n_layers} known values")
            c.lightning = [names[t] for t in lt]
        else:
            raise InputError("config.json: neither attn_type_list nor layer_types")

        def factor(orig, hf):
            for key in (orig, hf):
                if cfg.get(key) is not None:
                    return float(cfg[key])
            raise InputError(f"config.json: missing {orig!r} (or {hf!r})")
        c.a_full = factor("layernorm_full_attention_alpha", "full_attn_alpha_factor")
        c.b_full = factor("layernorm_full_attention_beta", "full_attn_beta_factor")
        c.a_lin = factor("layernorm_linear_attention_alpha", "linear_attn_alpha_factor")
        c.b_lin = factor("layernorm_linear_attention_beta", "linear_attn_beta_factor")
        c.a_mlp = factor("layernorm_mlp_alpha", "mlp_alpha_factor")
        c.b_mlp = factor("layernorm_mlp_beta", "mlp_beta_factor")
        c.postnorm = bool(cfg.get("postnorm", True))

        d, hd = c.hidden, c.head_dim
        qw, kw = H * hd, c.n_kv_heads * hd
        self._embed_and_head("", c)
        self.layers = []
        base = 2.0 ** (-8.0 * (torch.arange(H, dtype=torch.float64) + 1.0) / H)
        for L in range(c.n_layers):
            p, a, m = f"model.layers.{L}.", f"model.layers.{L}.self_attn.", \
                f"model.layers.{L}.block_sparse_moe."
            lw = {"in_norm": self._load(p + "input_layernorm.weight", (d,)),
                  "post_norm": self._load(p + "post_attention_layernorm.weight", (d,)),
                  "gate": self._load(m + "gate.weight", (c.n_experts, d))}
            if c.lightning[L]:
                lw["wqkv"] = self._load(a + "qkv_proj.weight", (3 * qw, d))
                lw["wgate"] = self._load(a + "output_gate.weight", (qw, d))
                lw["lnorm"] = self._load(a + "norm.weight", (qw,))
                lw["wout"] = self._load(a + "out_proj.weight", (d, qw))
                # §3.5.2: s_h = 2^(−8(h+1)/H) · (1 − L/(N−1) + 1e−5), GLOBAL layer index L
                fac = 1.0 + 1e-5 if c.n_layers == 1 else 1.0 - L / (c.n_layers - 1) + 1e-5
                lw["slopes"] = base * fac
            else:
                lw["wq"] = self._load(a + "q_proj.weight", (qw, d))
                lw["wk"] = self._load(a + "k_proj.weight", (kw, d))
                lw["wv"] = self._load(a + "v_proj.weight", (kw, d))
                lw["wo"] = self._load(a + "o_proj.weight", (d, qw))
            lw["experts"] = [(self._load(f"{m}experts.{e}.w1.weight", (c.inter, d)),
                              self._load(f"{m}experts.{e}.w3.weight", (c.inter, d)),
                              self._load(f"{m}experts.{e}.w2.weight", (d, c.inter)))
                             for e in range(c.n_experts)]
            self.layers.append(lw)

    def _lightning(self, lw, n1, positions, mask):
        c = self.c
        B, T, _ = n1.shape
        H, D = c.n_heads, c.head_dim
        qkv = torch.nn.functional.silu(n1 @ lw["wqkv"].t()).view(B, T, H, 3 * D)
        q, k, v = qkv[..., :D], qkv[..., D:2 * D], qkv[..., 2 * D:]     # per-head [q | k | v]
        if self.lightning_impl == "recurrence":
            o = lightning_recurrence(q, k, v, lw["slopes"])
        else:
            o = lightning_quadratic(q, k, v, lw["slopes"], positions, mask)
        on = rms_norm(o.reshape(B, T, H * D), lw["lnorm"], self.LIGHTNING_NORM_EPS)
        g = torch.sigmoid(n1 @ lw["wgate"].t())
        return (on * g) @ lw["wout"].t()

    def _softmax(self, lw, n1, cs, mask):
        c = self.c
        B, T, _ = n1.shape
        hd, Hq, Hkv = c.head_dim, c.n_heads, c.n_kv_heads
        q = apply_rope((n1 @ lw["wq"].t()).view(B, T, Hq, hd), cs, c.rotary_dim)
        k = apply_rope((n1 @ lw["wk"].t()).view(B, T, Hkv, hd), cs, c.rotary_dim)
        v = (n1 @ lw["wv"].t()).view(B, T, Hkv, hd)
        g = Hq // Hkv
        o, _ = masked_softmax_attention(q, expand_kv(k, g), expand_kv(v, g), mask[:, None],
                                        1.0 / math.sqrt(hd))
        return o.reshape(B, T, Hq * hd) @ lw["wo"].t()

    def forward(self, ids, positions, mask, rows_valid=None, trace=None):
        c = self.c
        B, T = ids.shape
        cs = rope_tables(positions, c.rotary_dim, c.rope_theta, self.dtype)
        x = self.embed[ids]
        for L, lw in enumerate(self.layers):
            n1 = rms_norm(x, lw["in_norm"], c.eps)
            if c.lightning[L]:
                a, alpha, beta = self._lightning(lw, n1, positions, mask), c.a_lin, c.b_lin
            else:
                a, alpha, beta = self._softmax(lw, n1, cs, mask), c.a_full, c.b_full
            h = alpha * (n1 if c.postnorm else x) + beta * a                 # §3.3
            n2 = rms_norm(h, lw["post_norm"], c.eps)
            n2f = n2.reshape(B * T, -1)
            pr = torch.softmax(n2f @ lw["gate"].t(), dim=-1)                # §3.6
            sel = stable_topk_ids(pr.detach(), c.top_k)
            psel = pr.gather(-1, sel)
            w = psel / psel.sum(-1, keepdim=True)
            if trace is not None:
                trace.append(sel)
            moe = routed_experts(n2f, sel, w, lw["experts"], silu_glu).view(B, T, -1)
            x = c.a_mlp * (n2 if c.postnorm else h) + c.b_mlp * moe
        xf = rms_norm(x, self.final_norm, c.eps)
        return xf @ self.lm_head.t(), None


def _per_layer(name, val, n, allowed):
    if not isinstance(val, list) or len(val) != n or any(v not in allowed for v in val):
        raise InputError(f"config: {name} must be a list of {n} values in "
                         f"{sorted(allowed, key=str)}")
    return [allowed[v] for v in val]


class M3Model(_Model):
    family = "m3"
    PREFIX = "language_model."

    def __init__(self, top, ckpt, dtype):
        super().__init__(ckpt, dtype)
        cfg = top.get("text_config", top)
        if not isinstance(cfg, dict):
            raise InputError("config.json: text_config is not an object")
        W = "config.json text_config"
        self.c = c = _Cfg()
        _geometry(c, cfg, W)
        c.eps = float(cfg.get("rms_norm_eps", 1e-6))
        c.alpha = float(cfg.get("swiglu_alpha", 1.702))
        c.limit = float(cfg.get("swiglu_limit", 7.0))
        c.dense_inter = int(cfg.get("dense_intermediate_size", 0) or 0)
        c.inter = int(cfg.get("intermediate_size", 0) or 0)
        c.n_shared = int(cfg.get("n_shared_experts", 1) or 0)
        c.shared_inter = int(cfg.get("shared_intermediate_size", 0) or 0)
        c.n_experts = int(cfg.get("num_local_experts", 0) or 0)
        c.top_k = int(cfg.get("num_experts_per_tok", 0) or 0)
        c.use_bias = bool(cfg.get("use_routing_bias", True))
        c.routed_scale = float(cfg.get("routed_scaling_factor", 1.0))
        n = c.n_layers
        if "moe_layer_freq" in cfg:
            c.is_moe = _per_layer("moe_layer_freq", cfg["moe_layer_freq"], n, {0: False, 1: True})
        elif "mlp_layer_types" in cfg:
            c.is_moe = _per_layer("mlp_layer_types", cfg["mlp_layer_types"], n,
                                  {"dense": False, "sparse": True})
        else:
            raise InputError(f"{W}: need moe_layer_freq (or mlp_layer_types)")
        sac = cfg.get("sparse_attention_config")
        if isinstance(sac, dict):
            c.index_dim = int(sac.get("sparse_index_dim", c.head_dim))
            c.n_index_heads = int(sac.get("sparse_num_index_heads", c.n_kv_heads))
            c.topk_blocks = int(sac.get("sparse_topk_blocks", 16))
            c.block = int(sac.get("sparse_block_size", 128))
            score, init_b, local_b = (sac.get("sparse_score_type", "max"),
                                      int(sac.get("sparse_init_block", 0)),
                                      int(sac.get("sparse_local_block", 1)))
            c.is_sparse = _per_layer("sparse_attention_freq", sac.get("sparse_attention_freq"),
                                     n, {0: False, 1: True})
            div = _per_layer("sparse_disable_index_value",
                             sac.get("sparse_disable_index_value", [1] * n), n,
                             {0: False, 1: True})
            if not bool(sac.get("use_sparse_attention", True)):
                c.is_sparse = [False] * n
        elif "layer_types" in cfg:
            c.index_dim = int(cfg.get("index_head_dim", c.head_dim))
            c.n_index_heads = int(cfg.get("index_n_heads", c.n_kv_heads))
            c.topk_blocks = int(cfg.get("index_topk_blocks", 16))
            c.block = int(cfg.get("index_block_size", 128))
            score, init_b, local_b = "max", 0, int(cfg.get("index_local_blocks", 1))
            c.is_sparse = _per_layer("layer_types", cfg["layer_types"], n,
                                     {"full_attention": False, "minimax_m3_sparse": True})
            div = [True] * n
        else:
            raise InputError(f"{W}: need sparse_attention_config (or layer_types)")
        if not bool(cfg.get("use_gemma_norm", True)) or \
                cfg.get("qk_norm_type", "per_head") != "per_head" or \
                not bool(cfg.get("use_qk_norm", True)):
            raise InputError("M3 needs Gemma norms and per-head QK-norm (§5.1, §5.5)")
        if bool(cfg.get("attention_output_gate", False)):
            raise InputError("attention_output_gate is not specified for M3")
        if cfg.get("hidden_act", "swigluoai") != "swigluoai" or \
                float(cfg.get("swiglu_beta", 1.0)) != 1.0:
            raise InputError("M3 FFN must be swigluoai with beta 1 (§5.7)")
        if cfg.get("scoring_func", "sigmoid") != "sigmoid":
            raise InputError("scoring_func other than sigmoid is not M3")
        if any(c.is_sparse):
            if score != "max" or init_b != 0 or local_b != 1:
                raise InputError("only sparse_score_type max, init_block 0, local_block 1 "
                                 "are specified (§5.6)")
            if c.n_index_heads != c.n_kv_heads:
                raise InputError("sparse_num_index_heads must equal num_key_value_heads")
            if c.topk_blocks < 1 or c.block < 1 or c.rotary_dim > c.index_dim:
                raise InputError("bad sparse attention geometry")
            if any(s and not dv for s, dv in zip(c.is_sparse, div)):
                raise InputError("the index-value branch is not specified (§8)")
        if any(c.is_moe) and not (1 <= c.top_k <= c.n_experts and c.inter > 0):
            raise InputError("MoE layers need intermediate_size and a valid top-k")

        P = self.PREFIX
        d, hd = c.hidden, c.head_dim
        qw, kw = c.n_heads * hd, c.n_kv_heads * hd
        self._embed_and_head(P, c)
        self.layers = []
        for L in range(n):
            p = f"{P}model.layers.{L}."
            a = p + "self_attn."
            lw = {"in_norm": self._load(p + "input_layernorm.weight", (d,)),
                  "post_norm": self._load(p + "post_attention_layernorm.weight", (d,)),
                  "wq": self._load(a + "q_proj.weight", (qw, d)),
                  "wk": self._load(a + "k_proj.weight", (kw, d)),
                  "wv": self._load(a + "v_proj.weight", (kw, d)),
                  "wo": self._load(a + "o_proj.weight", (d, qw)),
                  "q_norm": self._load(a + "q_norm.weight", (hd,)),
                  "k_norm": self._load(a + "k_norm.weight", (hd,))}
            if c.is_sparse[L]:
                G, di = c.n_index_heads, c.index_dim
                lw["wiq"] = self._load(a + "index_q_proj.weight", (G * di, d))
                lw["wik"] = self._load(a + "index_k_proj.weight", (di, d))
                lw["iq_norm"] = self._load(a + "index_q_norm.weight", (di,))
                lw["ik_norm"] = self._load(a + "index_k_norm.weight", (di,))
            if c.is_moe[L]:
                m = p + "block_sparse_moe."
                E, f = c.n_experts, c.inter
                lw["gate"] = self._load(m + "gate.weight", (E, d))
                lw["bias"] = (self._load(m + "e_score_correction_bias", (E,), False)
                              if c.use_bias else torch.zeros(E, dtype=dtype))
                lw["experts"] = [(self._load(f"{m}experts.{e}.w1.weight", (f, d)),
                                  self._load(f"{m}experts.{e}.w3.weight", (f, d)),
                                  self._load(f"{m}experts.{e}.w2.weight", (d, f)))
                                 for e in range(E)]
                if c.n_shared:
                    s, fs = m + "shared_experts.", c.shared_inter
                    lw["shared"] = (self._load(s + "gate_proj.weight", (fs, d)),
                                    self._load(s + "up_proj.weight", (fs, d)),
                                    self._load(s + "down_proj.weight", (d, fs)))
            else:
                m, f = p + "mlp.", c.dense_inter
                lw["mlp"] = (self._load(m + "gate_proj.weight", (f, d)),
                             self._load(m + "up_proj.weight", (f, d)),
                             self._load(m + "down_proj.weight", (d, f)))
            self.layers.append(lw)

    def _act(self, g, u):
        return swiglu_oai(g, u, self.c.alpha, self.c.limit)

    def _ffn(self, w, x):
        g, u, dn = w
        return self._act(x @ g.t(), x @ u.t()) @ dn.t()

    def _msa_select(self, z, mask):
        """z [B, G, T, S] index scores (detached), mask [B, T, S] -> allowed [B, G, T, S]
        (module doc: per-group top-(K-1) non-local blocks with a visible key + the local one)."""
        c = self.c
        B, G, T, S = z.shape
        Bk, K = c.block, c.topk_blocks
        nb = -(-S // Bk)
        zm = z.masked_fill(~mask[:, None], float("-inf"))
        if nb * Bk > S:
            zm = torch.cat([zm, zm.new_full((B, G, T, nb * Bk - S), float("-inf"))], dim=-1)
        pooled = zm.view(B, G, T, nb, Bk).amax(-1)                        # [B, G, T, nb]
        bid = torch.arange(nb)
        local = torch.arange(T) // Bk                                      # [T]
        cand = pooled.masked_fill(bid[None, :] >= local[:, None], float("-inf"))
        sel = torch.zeros(B, G, T, nb, dtype=torch.bool)
        if K > 1:
            top = stable_topk_ids(cand, min(K - 1, nb))
            ok = torch.isfinite(cand.gather(-1, top))
            sel.scatter_(-1, top, ok)
        sel |= bid[None, :] == local[:, None]
        blk_of_key = torch.arange(S) // Bk
        return sel[..., blk_of_key] & mask[:, None]

    def forward(self, ids, positions, mask, rows_valid=None, trace=None):
        c = self.c
        B, T = ids.shape
        hd, Hq, Hkv = c.head_dim, c.n_heads, c.n_kv_heads
        grp = Hq // Hkv
        scale = 1.0 / math.sqrt(hd)
        cs = rope_tables(positions, c.rotary_dim, c.rope_theta, self.dtype)
        if rows_valid is None:
            rows_valid = torch.ones(B, T, dtype=torch.bool)
        kl_total = None
        x = self.embed[ids]
        for L, lw in enumerate(self.layers):
            n1 = gemma_norm(x, lw["in_norm"], c.eps)
            q = (n1 @ lw["wq"].t()).view(B, T, Hq, hd)
            k = (n1 @ lw["wk"].t()).view(B, T, Hkv, hd)
            v = (n1 @ lw["wv"].t()).view(B, T, Hkv, hd)
            q = apply_rope(gemma_norm(q, lw["q_norm"], c.eps), cs, c.rotary_dim)   # per head
            k = apply_rope(gemma_norm(k, lw["k_norm"], c.eps), cs, c.rotary_dim)
            if c.is_sparse[L]:
                G, di = c.n_index_heads, c.index_dim
                ni = n1.detach()                       # indexer input detached (module doc)
                iq = (ni @ lw["wiq"].t()).view(B, T, G, di)
                ik = (ni @ lw["wik"].t()).view(B, T, 1, di)
                iq = apply_rope(gemma_norm(iq, lw["iq_norm"], c.eps), cs, c.rotary_dim)
                ik = apply_rope(gemma_norm(ik, lw["ik_norm"], c.eps), cs, c.rotary_dim)
                z = torch.einsum("btgd,bsd->bgts", iq, ik[:, :, 0])         # [B, G, T, S]
                allowed_g = self._msa_select(z.detach(), mask)
                if trace is not None:
                    trace.append(allowed_g)
                allowed = allowed_g.repeat_interleave(grp, dim=1)          # [B, Hq, T, S]
            else:
                allowed = mask[:, None]
            o, probs = masked_softmax_attention(q, expand_kv(k, grp), expand_kv(v, grp),
                                                allowed, scale)
            if c.is_sparse[L]:
                teacher = probs.detach().view(B, G, grp, T, T).mean(2)      # [B, G, T, S]
                ls = torch.log_softmax((z / math.sqrt(di)).masked_fill(~allowed_g,
                                                                       float("-inf")), -1)
                ls = ls.masked_fill(~allowed_g, 0.0)
                kl_rows = (torch.xlogy(teacher, teacher) - teacher * ls).sum(-1)   # [B, G, T]
                kl_rows = kl_rows * rows_valid[:, None].to(kl_rows.dtype)
                kl_l = kl_rows.sum() / (G * rows_valid.sum().clamp(min=1))
                kl_total = kl_l if kl_total is None else kl_total + kl_l
            h = x + o.reshape(B, T, Hq * hd) @ lw["wo"].t()
            n2 = gemma_norm(h, lw["post_norm"], c.eps)
            n2f = n2.reshape(B * T, -1)
            if c.is_moe[L]:
                p = torch.sigmoid(n2f @ lw["gate"].t())
                sel = stable_topk_ids(p.detach() + lw["bias"], c.top_k)
                psel = p.gather(-1, sel)
                w = psel / psel.sum(-1, keepdim=True)
                if trace is not None:
                    trace.append(sel)
                y = c.routed_scale * routed_experts(n2f, sel, w, lw["experts"], self._act)
                if c.n_shared:
                    y = y + self._ffn(lw["shared"], n2f)                   # NOT scaled
            else:
                y = self._ffn(lw["mlp"], n2f)
            x = h + y.view(B, T, -1)
        xf = gemma_norm(x, self.final_norm, c.eps)
        return xf @ self.lm_head.t(), kl_total


# --------------------------------------------------------------------------------------------
# loading, inputs, loss


def load_model(path, dtype=torch.float64, **kw):
    """The model of checkpoint directory `path` (config.json + model.safetensors or a sharded
    index) with parameters in `dtype`."""
    cpath = os.path.join(path, "config.json")
    try:
        with open(cpath) as f:
            cfg = json.load(f)
    except FileNotFoundError:
        raise InputError(f"{cpath}: not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{cpath}: bad JSON: {e}") from None
    if not isinstance(cfg, dict):
        raise InputError(f"{cpath}: not a JSON object")
    try:
        ckpt = Checkpoint(path)
        fam = detect_family(cfg)
        cls = {"m2": M2Model, "text01": Text01Model, "m3": M3Model}[fam]
        return cls(cfg, ckpt, dtype, **kw)
    except (SafetensorsError, OSError) as e:
        raise InputError(str(e)) from None
    except (ValueError, TypeError, KeyError) as e:
        raise InputError(f"{path}: bad config or checkpoint: {e}") from None


def check_batch(batch, vocab):
    """int array [B, T+1] with ids in [0, vocab) or -1 -> LongTensor."""
    a = np.asarray(batch)
    if a.dtype.kind not in "iu":
        raise InputError(f"batch must be an integer array, got dtype {a.dtype}")
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 2:
        raise InputError(f"batch must have shape [B, T+1] with B >= 1, T >= 1; got {list(a.shape)}")
    a = a.astype(np.int64)
    bad = a[(a < -1) | (a >= vocab)]
    if bad.size:
        raise InputError(f"token id {int(bad[0])} out of range [0, {vocab}) (or -1 = ignored)")
    if not (a[:, 1:] >= 0).any():
        raise InputError("batch has no target (every target is -1)")
    return torch.from_numpy(a)


def check_mask(mask, B, T):
    """bool/int array [T, T] or [B, T, T] -> BoolTensor [B, T, T]; must be within the causal
    mask and have its diagonal set."""
    m = np.asarray(mask)
    if m.dtype.kind not in "biu":
        raise InputError(f"mask must be boolean (or 0/1 integers), got dtype {m.dtype}")
    if m.shape not in ((T, T), (B, T, T)):
        raise InputError(f"mask must have shape [{T}, {T}] or [{B}, {T}, {T}], got {list(m.shape)}")
    if m.ndim == 2:
        m = np.broadcast_to(m, (B,) + m.shape)
    if m.dtype.kind != "b":
        if ((m != 0) & (m != 1)).any():
            raise InputError("integer mask values must be 0 or 1")
    m = torch.from_numpy(np.ascontiguousarray(m != 0))
    if (m & ~torch.tril(torch.ones(T, T, dtype=torch.bool))).any():
        raise InputError("mask lets a query see a later key (must be within the causal mask)")
    if not torch.diagonal(m, dim1=1, dim2=2).all():
        raise InputError("mask diagonal must be True (each token sees itself)")
    return m


def make_positions(B, T, mask=None, positions=None, depth=False):
    """LongTensor [B, T]: the given positions ([T] or [B, T], >= 0); else with depth=True (needs
    the mask) the number of keys token i sees minus one (= its depth in a tree mask); else i."""
    if positions is not None:
        p = np.asarray(positions)
        if p.dtype.kind not in "iu":
            raise InputError(f"positions must be integers, got dtype {p.dtype}")
        if p.shape not in ((T,), (B, T)):
            raise InputError(f"positions must have shape [{T}] or [{B}, {T}], got {list(p.shape)}")
        if p.ndim == 1:
            p = np.broadcast_to(p, (B,) + p.shape)
        if (p < 0).any():
            raise InputError("positions must be >= 0")
        return torch.from_numpy(np.ascontiguousarray(p.astype(np.int64)))
    if depth and mask is not None:
        return mask.sum(-1).to(torch.int64) - 1
    return torch.arange(T).expand(B, T).clone()


def training_loss(model, batch, mask=None, positions=None, index_loss_weight=0.0, trace=None):
    """The training-loss contract of the module doc. batch: LongTensor [B, T+1]; mask: BoolTensor
    [B, T, T] or None (causal); positions: LongTensor [B, T] or None (0..T-1).
    Returns (loss_total, ce, kl or None) as tensors of the model dtype."""
    return sequence_loss(model, batch[:, :-1], batch[:, 1:], mask, positions, index_loss_weight,
                         trace=trace)


def sequence_loss(model, inputs, targets, mask=None, positions=None, index_loss_weight=0.0,
                  kl_rows=None, trace=None):
    """training_loss with inputs / targets given separately (LongTensors [B, T]; target -1 =
    ignored; input -1 = token 0). kl_rows: BoolTensor [B, T] of the query rows the indexer KL
    averages over (default: inputs != -1)."""
    B, T = inputs.shape
    if mask is None:
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool)).expand(B, T, T)
    if positions is None:
        positions = make_positions(B, T, mask)
    if kl_rows is None:
        kl_rows = inputs >= 0
    logits, kl = model.forward(inputs.clamp(min=0), positions, mask, rows_valid=kl_rows,
                               trace=trace)
    logp = torch.log_softmax(logits, dim=-1)
    valid = targets >= 0
    nll = -logp.gather(-1, targets.clamp(min=0)[..., None])[..., 0]
    ce = torch.where(valid, nll, torch.zeros_like(nll)).sum() / valid.sum()
    total = ce
    if kl is not None and index_loss_weight:
        total = ce + index_loss_weight * kl
    return total, ce, kl
