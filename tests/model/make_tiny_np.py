#!/usr/bin/python3
"""Seeded tiny MiniMax-M2 checkpoint generator in the real HF layout (numpy only).

Used ONLY to self-test reference/minimax_m2.py and tests/model/m2_reference_check.py before /
independently of the C++ `mmx make-tiny`. It has its own safetensors writer and its own
float -> bf16 / float8_e4m3fn encoders; nothing is shared with the C++ engine.

  make_tiny_np.py -o DIR --dtype {f32,f16,bf16,fp8} --seed S [--fp8-block B] [--shards N]

Tensor dtypes follow §4.2/§4.3 of the spec:
  f32  : everything F32
  bf16 : everything BF16 except the router gate and e_score_correction_bias (F32)
  fp8  : q/k/v/o and expert w1/w2/w3 as F8_E4M3 + F32 `<name>_scale_inv` blocks of B x B
         (ceil shapes, ragged edges when B does not divide the dims); gate / bias F32;
         embed, norms, lm_head BF16.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

TINY_CONFIG = {
    "architectures": ["MiniMaxM2ForCausalLM"],
    "model_type": "minimax_m2",
    "hidden_size": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "rotary_dim": 8,
    "rope_theta": 10000.0,
    "intermediate_size": 32,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "shared_intermediate_size": 0,
    "scoring_func": "sigmoid",
    "use_routing_bias": True,
    "use_qk_norm": True,
    "qk_norm_type": "per_layer",
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "vocab_size": 512,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
    "attn_type_list": [1, 1, 1, 1],
    "bos_token_id": 1,
    "eos_token_id": 2,
    "torch_dtype": "float32",
}

# ---------------------------------------------------------------------------------------------
# encoders


def f32_to_bf16_bits(x):
    """Round-to-nearest-even float32 -> bf16 bit pattern (uint16). Inputs are finite."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return b.astype(np.uint16)


def _fp8_pos_values():
    # bytes 0x00..0x7e of float8_e4m3fn are finite, non-negative and strictly increasing
    vals = []
    for byte in range(0x7F):
        e, m = byte >> 3, byte & 7
        vals.append(m * 2.0 ** -9 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7))
    return np.array(vals)


_FP8_POS = _fp8_pos_values()


def f64_to_fp8_bytes(x):
    """Nearest float8_e4m3fn (saturating at 448), as uint8 bytes."""
    x = np.asarray(x, dtype=np.float64)
    a = np.minimum(np.abs(x), 448.0)
    hi = np.clip(np.searchsorted(_FP8_POS, a), 1, len(_FP8_POS) - 1)
    lo = hi - 1
    pick = np.where(a - _FP8_POS[lo] <= _FP8_POS[hi] - a, lo, hi)
    return (pick.astype(np.uint8) | np.where(x < 0, 0x80, 0).astype(np.uint8)).astype(np.uint8)


def fp8_block_quantize(w, block):
    """w [out, in] -> (fp8 bytes [out, in], float32 scale_inv [ceil(out/B), ceil(in/B)]) with
    w ~= fp8 * scale_inv[o//B, i//B]."""
    out_f, in_f = w.shape
    so, si = -(-out_f // block), -(-in_f // block)
    scale = np.ones((so, si), dtype=np.float32)
    for bo in range(so):
        for bi in range(si):
            blk = w[bo * block:(bo + 1) * block, bi * block:(bi + 1) * block]
            amax = float(np.abs(blk).max())
            if amax > 0:
                scale[bo, bi] = np.float32(amax / 448.0)
    full = np.repeat(np.repeat(scale.astype(np.float64), block, 0), block, 1)[:out_f, :in_f]
    return f64_to_fp8_bytes(w / full), scale


# ---------------------------------------------------------------------------------------------
# safetensors writer

_TAG_ITEMSIZE = {"F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F64": 8}


def encode(tag, arr):
    """float array -> (tag, little-endian bytes) of that storage type."""
    arr = np.asarray(arr)
    if tag == "F32":
        return np.ascontiguousarray(arr, dtype="<f4").tobytes()
    if tag == "F64":
        return np.ascontiguousarray(arr, dtype="<f8").tobytes()
    if tag == "F16":
        return np.ascontiguousarray(arr, dtype="<f2").tobytes()
    if tag == "BF16":
        return f32_to_bf16_bits(arr).astype("<u2").tobytes()
    if tag == "F8_E4M3":
        assert arr.dtype == np.uint8, "F8_E4M3 tensors must be given as raw uint8 bytes"
        return np.ascontiguousarray(arr).tobytes()
    raise ValueError(tag)


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: (tag, array)}; F8_E4M3 arrays are raw uint8 bytes, others floats.
    Data is laid out contiguously in name order; header padded with spaces to 8 bytes."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    off = 0
    for name in sorted(tensors):
        tag, arr = tensors[name]
        data = encode(tag, arr)
        shape = list(np.shape(arr))
        n = int(np.prod(shape)) if shape else 1
        assert len(data) == n * _TAG_ITEMSIZE[tag]
        header[name] = {"dtype": tag, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def write_checkpoint(outdir, config, tensors, shards=1):
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for fn in ("model.safetensors", "model.safetensors.index.json"):
        p = os.path.join(outdir, fn)
        if os.path.exists(p):
            os.remove(p)
    if shards <= 1:
        write_safetensors(os.path.join(outdir, "model.safetensors"), tensors, {"format": "pt"})
        return
    names = sorted(tensors)
    wmap = {}
    for s in range(shards):
        fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s::shards]}
        write_safetensors(os.path.join(outdir, fn), part, {"format": "pt"})
        wmap.update({n: fn for n in part})
    with open(os.path.join(outdir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wmap}, f, indent=2)


# ---------------------------------------------------------------------------------------------
# tiny model


def make_tiny(outdir, dtype="f32", seed=0, fp8_block=128, shards=1, config=None):
    cfg = json.loads(json.dumps(config or TINY_CONFIG))
    rng = np.random.default_rng(seed)
    d, V = cfg["hidden_size"], cfg["vocab_size"]
    hd, Hq, Hkv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    I, E = cfg["intermediate_size"], cfg["num_local_experts"]

    def lin(o, i, gain=1.0):
        return (rng.standard_normal((o, i)) * gain / np.sqrt(i)).astype(np.float32)

    def gainv(n):
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    plain_tag = {"f32": "F32", "f16": "F16", "bf16": "BF16", "fp8": "BF16"}[dtype]
    t = {}

    def put_lin(name, w):
        if dtype == "fp8":
            q, s = fp8_block_quantize(w.astype(np.float64), fp8_block)
            t[name] = ("F8_E4M3", q)
            t[name + "_scale_inv"] = ("F32", s)
        else:
            t[name] = (plain_tag, w)

    t["model.embed_tokens.weight"] = (plain_tag, rng.standard_normal((V, d)).astype(np.float32))
    t["model.norm.weight"] = (plain_tag, gainv(d))
    t["lm_head.weight"] = (plain_tag, lin(V, d, 2.0))
    for L in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{L}."
        t[p + "input_layernorm.weight"] = (plain_tag, gainv(d))
        t[p + "post_attention_layernorm.weight"] = (plain_tag, gainv(d))
        a = p + "self_attn."
        put_lin(a + "q_proj.weight", lin(Hq * hd, d))
        put_lin(a + "k_proj.weight", lin(Hkv * hd, d))
        put_lin(a + "v_proj.weight", lin(Hkv * hd, d))
        put_lin(a + "o_proj.weight", lin(d, Hq * hd, 0.5))
        # QK-norm gains are per channel (distinct across heads); larger gains -> peakier attention
        t[a + "q_norm.weight"] = (plain_tag, 2.0 * gainv(Hq * hd))
        t[a + "k_norm.weight"] = (plain_tag, 2.0 * gainv(Hkv * hd))
        m = p + "block_sparse_moe."
        t[m + "gate.weight"] = ("F32", lin(E, d, 2.0))
        t[m + "e_score_correction_bias"] = ("F32", (0.3 * rng.standard_normal(E)).astype(np.float32))
        for e in range(E):
            put_lin(f"{m}experts.{e}.w1.weight", lin(I, d))
            put_lin(f"{m}experts.{e}.w3.weight", lin(I, d))
            put_lin(f"{m}experts.{e}.w2.weight", lin(d, I, 0.5))
    if dtype == "bf16":
        cfg["torch_dtype"] = "bfloat16"
    if dtype == "f16":
        cfg["torch_dtype"] = "float16"
    if dtype == "fp8":
        cfg["torch_dtype"] = "bfloat16"
        cfg["quantization_config"] = {
            "quant_method": "fp8", "fmt": "float8_e4m3fn", "activation_scheme": "dynamic",
            "weight_block_size": [fp8_block, fp8_block],
            "modules_to_not_convert": ["gate", "e_score_correction_bias", "lm_head"]}
    write_checkpoint(outdir, cfg, t, shards=shards)
    return cfg


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--dtype", choices=["f32", "f16", "bf16", "fp8"], default="f32")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fp8-block", type=int, default=128)
    ap.add_argument("--shards", type=int, default=1)
    args = ap.parse_args(argv)
    make_tiny(args.out, args.dtype, args.seed, args.fp8_block, args.shards)
    return 0


if __name__ == "__main__":
    sys.exit(main())
