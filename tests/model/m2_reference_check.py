#!/usr/bin/python3
"""End-to-end parity check: C++ `mmx` engine vs the float64 numpy reference (MiniMax-M2).

Usage:
  /usr/bin/python3 tests/model/m2_reference_check.py --mmx PATH_TO_mmx [--workdir DIR]
  /usr/bin/python3 tests/model/m2_reference_check.py --self-test [--workdir DIR]

For each dtype in (f32, bf16, fp8), with a fixed seed per dtype:
  mmx make-tiny --arch minimax_m2 -o W/DTYPE --dtype DTYPE --seed S [--fp8-block 48]
  mmx logits    -m W/DTYPE --ids IDS -o W/DTYPE/mmx.bin         (float32 [n, vocab])
  reference/minimax_m2.py -m W/DTYPE --ids IDS -o W/DTYPE/ref.bin
  -> max|diff| / max|ref| <= 1e-4, plus max abs diff and mean KL(p_ref || p_mmx) reported
  mmx generate  -m W/DTYPE --ids 5,6,7 -n 32 --temp 0 --ignore-eos          (32 ids on one stdout line)
  reference/minimax_m2.py -m W/DTYPE --ids 5,6,7 --greedy 32    -> must be identical

Exit status: 0 iff every check passed; 1 if a comparison failed or mmx misbehaved (crash,
bad output); 2 if the check could not run at all (mmx missing / not executable, bad usage).

--self-test validates the reference and this script without the C++ engine: known-answer
cases, fp8/bf16/f16 decoding of known bytes, prefill == KV-cached token-by-token decoding, a
scalar pure-Python re-derivation of one layer, and the full pipeline above driven against a
fake `mmx` (this script with --fake-mmx) -- once faithful (must pass) and once per deliberately
broken variant (must fail).
"""

import json
import math
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refcheck_common as rc  # noqa: E402
from refcheck_common import (ROOT, PY, GREEDY_PROMPT, GREEDY_N, REL_TOL,  # noqa: E402
                             CheckError, run, read_logits, parse_id_line, compare)

REF = os.path.join(ROOT, "reference", "minimax_m2.py")

DTYPES = ("f32", "bf16", "fp8")  # also the self-test dtypes (make_tiny_np)
MMX_DTYPES = ("f32", "f16", "bf16", "fp8")  # what mmx make-tiny writes and the check compares
SEEDS = {"f32": 1234, "f16": 1717, "bf16": 2345, "fp8": 3456}
FP8_BLOCK = 48                   # hidden 64 -> blocks of 48 + 16: ragged scale edges
N_IDS = 24

# Tolerance (same for all dtypes): max|logit_mmx - logit_ref| / max|logit_ref| <= 1e-4.
# Both sides decode the SAME stored weights (f32 / bf16 / fp8 bytes * fp32 block scale) -- the
# quantization error of bf16/fp8 is not part of the comparison because the reference
# dequantizes exactly the bytes the engine reads. The only remaining difference is arithmetic
# precision: fp32 in the engine (unit roundoff 6e-8, dot products of length <= 128, 4 layers,
# softmax/exp/rsqrt, and at most one extra rounding of fp8*scale) vs float64 here. That
# accumulates to ~1e-6 relative on this tiny model; 1e-4 leaves ~100x headroom while any
# semantic mistake (per-head QK-norm, wrong RoPE layout, wrong GQA mapping, biased router
# weights, wrong scale blocks...) moves logits by 1e-2..1 relative (see --self-test).
# REL_TOL = 1e-4 (refcheck_common).


def greedy_diagnosis(model_dir, prompt, ref_toks, mmx_toks):
    from minimax_m2 import M2Reference
    return rc.greedy_diagnosis(M2Reference, model_dir, prompt, ref_toks, mmx_toks)


def check_dtype(mmx, work, dtype):
    d = os.path.join(work, dtype)
    if os.path.isdir(d):
        shutil.rmtree(d)
    seed = SEEDS[dtype]
    res = {"dtype": dtype, "seed": seed, "ok": False, "logits": "-", "greedy": "-",
           "absdiff": float("nan"), "rel": float("nan"), "kl": float("nan"), "why": []}

    cmd = [mmx, "make-tiny", "--arch", "minimax_m2", "-o", d, "--dtype", dtype,
           "--seed", str(seed)]
    if dtype == "fp8":
        cmd += ["--fp8-block", str(FP8_BLOCK)]
    run(cmd, "mmx make-tiny")
    try:
        with open(os.path.join(d, "config.json")) as f:
            vocab = int(json.load(f)["vocab_size"])
    except (OSError, ValueError, KeyError) as e:
        raise CheckError(f"mmx make-tiny: no usable {d}/config.json ({e})") from None

    rng = np.random.default_rng(seed + 7)
    ids = [int(t) for t in rng.integers(0, vocab, size=N_IDS)]
    ids_s = ",".join(map(str, ids))

    mmx_bin, ref_bin = os.path.join(d, "mmx.bin"), os.path.join(d, "ref.bin")
    run([mmx, "logits", "-m", d, "--ids", ids_s, "-o", mmx_bin], "mmx logits")
    got = read_logits(mmx_bin, len(ids), vocab, "mmx logits")
    run([PY, REF, "-m", d, "--ids", ids_s, "-o", ref_bin], "reference logits")
    ref = read_logits(ref_bin, len(ids), vocab, "reference logits")

    res["absdiff"], res["rel"], res["kl"] = compare(got, ref)
    logits_ok = res["rel"] <= REL_TOL
    res["logits"] = "ok" if logits_ok else "FAIL"
    if not logits_ok:
        pos = int(np.argmax(np.max(np.abs(got - ref), axis=1)))
        res["why"].append(f"logits: rel {res['rel']:.3e} > {REL_TOL:.0e} (worst position {pos})")

    r = run([mmx, "generate", "-m", d, "--ids", GREEDY_PROMPT, "-n", str(GREEDY_N),
             "--temp", "0", "--ignore-eos", "--kv-dtype", "f32"], "mmx generate")
    mmx_toks = parse_id_line(r.stdout, GREEDY_N, "mmx generate")
    r = run([PY, REF, "-m", d, "--ids", GREEDY_PROMPT, "--greedy", str(GREEDY_N)],
            "reference greedy")
    ref_toks = parse_id_line(r.stdout, GREEDY_N, "reference greedy")
    greedy_ok = mmx_toks == ref_toks
    res["greedy"] = "ok" if greedy_ok else "FAIL"
    if not greedy_ok:
        prompt = [int(t) for t in GREEDY_PROMPT.split(",")]
        res["why"].append("greedy: " + greedy_diagnosis(d, prompt, ref_toks, mmx_toks))
        res["why"].append("  ref: " + " ".join(map(str, ref_toks)))
        res["why"].append("  mmx: " + " ".join(map(str, mmx_toks)))
    res["ok"] = logits_ok and greedy_ok
    return res


def run_check(mmx, workdir=None, quiet=False, results=None):
    """Returns the exit code (0 pass, 1 fail, 2 cannot run); per-dtype result dicts are
    appended to `results` if given."""
    out = (lambda *a, **k: None) if quiet else print
    prep = rc.prepare_check("m2_reference_check", mmx, REF, workdir, out)
    if prep == 2:
        return 2
    mmx, work, own_tmp = prep

    results = [] if results is None else results
    if rc.run_cases("m2_reference_check", MMX_DTYPES, lambda dt: check_dtype(mmx, work, dt),
                    lambda dt, why: {"dtype": dt, "seed": SEEDS[dt], "ok": False,
                                     "logits": "ERROR", "greedy": "-", "absdiff": float("nan"),
                                     "rel": float("nan"), "kl": float("nan"), "why": [why]},
                    results, out) == 2:
        return 2

    out(f"MiniMax-M2 tiny-model parity: mmx={mmx}")
    out(f"workdir={work}   tolerance: max|diff|/max|ref| <= {REL_TOL:.0e}; greedy "
        f"{GREEDY_N} tokens from [{GREEDY_PROMPT}] must match exactly")
    hdr = (f"{'dtype':<6} {'seed':>5} {'max|diff|':>11} {'rel':>11} {'meanKL':>11} "
           f"{'logits':>7} {'greedy':>7}  result")
    out(hdr)
    out("-" * len(hdr))
    for r in results:
        out(f"{r['dtype']:<6} {r['seed']:>5} {r['absdiff']:>11.3e} {r['rel']:>11.3e} "
            f"{r['kl']:>11.3e} {r['logits']:>7} {r['greedy']:>7}  "
            f"{'PASS' if r['ok'] else 'FAIL'}")
    return rc.finish_check(results, "dtype", work, own_tmp, out)


# =============================================================================================
# fake mmx (self-test only): implements the three subcommands with make_tiny_np + reference.
# MMX_FAKE_BREAK=<mode> substitutes a deliberately wrong variant of one step.


def _install_break(mode, ref_mod, cfg):
    hd = cfg["head_dim"]
    qw = cfg["num_attention_heads"] * hd
    kw = cfg["num_key_value_heads"] * hd
    if mode == "qknorm_per_head":
        orig = ref_mod.rms_norm

        def per_head(x, w, eps):
            if x.shape[-1] in (qw, kw) and x.shape[-1] != cfg["hidden_size"]:
                xs = x.reshape(x.shape[:-1] + (-1, hd))
                ms = np.mean(xs * xs, axis=-1, keepdims=True)
                return (xs / np.sqrt(ms + eps)).reshape(x.shape) * w
            return orig(x, w, eps)
        ref_mod.rms_norm = per_head
    elif mode == "rope_interleaved":       # GPT-J pairs (2i, 2i+1) instead of NeoX halves
        def rope_gptj(x, positions, rotary_dim, theta):
            half = rotary_dim // 2
            inv = theta ** (-2.0 * np.arange(half) / rotary_dim)
            ang = np.asarray(positions, dtype=np.float64)[:, None] * inv[None, :]
            cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
            y = x.copy()
            a, b = x[..., 0:rotary_dim:2], x[..., 1:rotary_dim:2]
            y[..., 0:rotary_dim:2] = a * cos - b * sin
            y[..., 1:rotary_dim:2] = b * cos + a * sin
            return y
        ref_mod.rope_neox = rope_gptj
    elif mode == "rope_full":              # rotate the whole head instead of rotary_dim
        orig = ref_mod.rope_neox
        ref_mod.rope_neox = lambda x, p, r, t: orig(x, p, x.shape[-1], t)
    elif mode == "router_off_by_one":      # top-k takes ranks 2..k+1 instead of 1..k
        def topk_off_by_one(scores, k):
            return np.argsort(-scores, axis=-1, kind="stable")[..., 1:k + 1]
        ref_mod.topk_lowest_id_ties = topk_off_by_one
    elif mode in ("noise", "f32_arith"):
        pass
    else:
        raise SystemExit(f"unknown MMX_FAKE_BREAK {mode}")


def fake_mmx(argv):
    import minimax_m2 as ref_mod
    from make_tiny_np import make_tiny
    ap, a, _ = rc.fake_mmx_parser()
    a.add_argument("--fp8-block", type=int, default=128)
    args = ap.parse_args(argv)
    if args.cmd == "make-tiny":
        assert args.arch == "minimax_m2"
        make_tiny(args.o, args.dtype, args.seed, args.fp8_block)
        print(f"fake-mmx: wrote {args.o}", file=sys.stderr)
        return 0
    mode = os.environ.get("MMX_FAKE_BREAK", "")
    with open(os.path.join(args.m, "config.json")) as f:
        cfg = json.load(f)
    if mode:
        _install_break(mode, ref_mod, cfg)
    model = ref_mod.M2Reference.from_dir(args.m)
    if mode == "f32_arith":    # FAITHFUL, but weights (hence most arithmetic) in float32
        model.embed = model.embed.astype(np.float32)
        model.norm = model.norm.astype(np.float32)
        model.lm_head = model.lm_head.astype(np.float32)
        for lw in model.layers:
            for key in lw:
                lw[key] = lw[key].astype(np.float32)
    ids = [int(t) for t in args.ids.split(",")]
    if args.cmd == "logits":
        rc.fake_write_logits(model.forward(ids), mode, args.o)
        return 0
    toks = model.greedy(ids, args.n)
    print("fake-mmx: generating", file=sys.stderr)
    print(" ".join(map(str, toks)))
    return 0


# =============================================================================================
# self-test


def st_decoding(t):
    from safetensors_np import FP8_E4M3_TABLE, Checkpoint
    from make_tiny_np import write_safetensors, f64_to_fp8_bytes
    print("decoding of known bytes")
    known = {0x00: 0.0, 0x80: -0.0, 0x01: 2.0 ** -9, 0x07: 7 * 2.0 ** -9, 0x08: 2.0 ** -6,
             0x0F: 1.875 * 2.0 ** -6, 0x38: 1.0, 0x3C: 1.5, 0x40: 2.0, 0xB8: -1.0,
             0x7E: 448.0, 0xFE: -448.0, 0x78: 256.0, 0x77: 240.0, 0x30: 0.5, 0x81: -2.0 ** -9}
    tab_ok = all(FP8_E4M3_TABLE[b] == v and math.copysign(1, FP8_E4M3_TABLE[b]) ==
                 math.copysign(1, v) for b, v in known.items())
    t.check(tab_ok, "fp8 e4m3fn table: 16 hand-decoded bytes (incl. subnormals, +-0, +-448)")
    nan = [b for b in range(256) if np.isnan(FP8_E4M3_TABLE[b])]
    t.check(nan == [0x7F, 0xFF], "fp8 NaN exactly at 0x7f, 0xff", str(nan))
    pos = FP8_E4M3_TABLE[:0x7F]
    t.check(bool(np.all(np.diff(pos) > 0)) and np.array_equal(FP8_E4M3_TABLE[0x80:0xFF], -pos),
            "fp8 magnitudes monotonic, sign symmetric")
    rt = f64_to_fp8_bytes(FP8_E4M3_TABLE[:0x7F])
    t.check(np.array_equal(rt, np.arange(0x7F, dtype=np.uint8)), "fp8 encoder round-trips")

    p = os.path.join(t.work, "known.safetensors")
    fp8_bytes = np.array([[0x38, 0xB8, 0x01], [0x7E, 0x3C, 0x00]], dtype=np.uint8)
    tensors = {
        "f8": ("F8_E4M3", fp8_bytes),
        "bf": ("BF16", np.array([1.0, -2.0, 0.15625, 3.0e38], dtype=np.float32)),
        "h": ("F16", np.array([1.0, -0.5, 65504.0], dtype=np.float32)),
        "f": ("F32", np.array([[1.5, -1e-30]], dtype=np.float32)),
    }
    write_safetensors(p, tensors, {"format": "pt"})
    # also byte-level: BF16 bits of 1.0 are 0x3f80 (little endian 80 3f)
    with open(p, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    hdr = json.loads(raw[8:8 + n])
    bo = hdr["bf"]["data_offsets"][0]
    t.check(raw[8 + n + bo: 8 + n + bo + 2] == b"\x80\x3f", "writer: bf16(1.0) stored as 80 3f")
    ck = Checkpoint(p)
    t.check(np.array_equal(ck.get_f64("f8"), [[1.0, -1.0, 2.0 ** -9], [448.0, 1.5, 0.0]]),
            "reader: F8_E4M3 tensor decodes to known values")
    bf = ck.get_f64("bf")
    t.check(bf[0] == 1.0 and bf[1] == -2.0 and bf[2] == 0.15625 and
            abs(bf[3] / 3.0e38 - 1) < 2 ** -8, "reader: BF16 known values",
            f"{bf.tolist()}")
    t.check(np.array_equal(ck.get_f64("h"), [1.0, -0.5, 65504.0]), "reader: F16 known values")
    t.check(np.array_equal(ck.get_f64("f"), np.array([[1.5, -1e-30]], dtype=np.float32)),
            "reader: F32 values and 2-d shape")


def st_fp8_dequant(t):
    from make_tiny_np import make_tiny
    from safetensors_np import Checkpoint
    import minimax_m2 as R
    print("fp8 block dequantization")
    d32 = os.path.join(t.work, "dq_f32")
    d8 = os.path.join(t.work, "dq_fp8")
    make_tiny(d32, "f32", 99)
    make_tiny(d8, "fp8", 99, fp8_block=48)
    ck8 = Checkpoint(d8)
    name = "model.layers.0.self_attn.q_proj.weight"
    t.check(ck8.dtype(name) == "F8_E4M3" and ck8.shape(name + "_scale_inv") == (3, 2),
            "q_proj [128, 64] with block 48 has F32 scale_inv [3, 2] (ragged)")
    m32 = R.M2Reference.from_dir(d32)
    m8 = R.M2Reference.from_dir(d8)
    # fp8 keeps 3 mantissa bits: |w8 - w| <= 2^-4 |w| for normals, + subnormal floor per block
    w, w8 = m32.layers[0]["wq"], m8.layers[0]["wq"]
    s = ck8.get_f64(name + "_scale_inv")
    floor = np.repeat(np.repeat(s, 48, 0), 48, 1)[:128, :64] * 2.0 ** -10
    t.check(bool(np.all(np.abs(w8 - w) <= 2.0 ** -4 * np.abs(w) + floor + 1e-12)),
            "dequantized q_proj within fp8 rounding of the f32 original (scale multiplies)")
    raw = ck8.get_f64(name)
    t.check(np.array_equal(w8[47:49, 47:49], raw[47:49, 47:49] *
                           np.array([[s[0, 0], s[0, 1]], [s[1, 0], s[1, 1]]])),
            "block boundaries: W[o,i] = fp8[o,i] * s[o//48, i//48]")
    # an fp8 model with a wrong block size in config must be rejected, not silently misread
    with open(os.path.join(d8, "config.json")) as f:
        cfg = json.load(f)
    cfg["quantization_config"]["weight_block_size"] = [128, 128]
    try:
        R.M2Reference(cfg, ck8)
        t.check(False, "scale_inv shape vs weight_block_size mismatch rejected")
    except R.ModelError as e:
        t.check(True, "scale_inv shape vs weight_block_size mismatch rejected", str(e)[:60])


def st_cache(t):
    from make_tiny_np import make_tiny
    import minimax_m2 as R
    print("prefill vs KV-cached decoding (reference internal consistency)")
    rng = np.random.default_rng(5)
    for dt in DTYPES:
        d = os.path.join(t.work, f"cache_{dt}")
        make_tiny(d, dt, 42 + len(dt), fp8_block=48, shards=2 if dt == "bf16" else 1)
        m = R.M2Reference.from_dir(d)
        ids = [int(x) for x in rng.integers(0, 512, 20)]
        full = rc.check_cache_consistency(t, m, ids, (7, 15), dt, "KV cache", 10)
        if dt == "bf16":
            # 2-shard index.json directory reads the same tensors as a single file
            d1 = os.path.join(t.work, "cache_bf16_single")
            make_tiny(d1, dt, 42 + len(dt), fp8_block=48, shards=1)
            t.close("bf16: sharded index.json == single file", R.M2Reference.from_dir(d1)
                    .forward(ids), full, 0.0)


def _handmodel(gate_gain, bias, s_expert):
    """1 layer, d=4, Hq=4, Hkv=2, head_dim=2, rotary 2, 4 experts (top-2), vocab 4.
    embed[t] = 2 e_t; all norm gains 1; q_proj = 0 (=> uniform causal attention);
    v_proj = I; o_proj picks (head0 ch0, head1 ch1, head2 ch0, 10 * head3 ch1);
    gate rows = gate_gain[e] * ones; experts: w1 = I, w3 = s_e I, w2 = I; lm_head = I."""
    cfg = {"architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2",
           "hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 2, "rotary_dim": 2, "rope_theta": 10000.0,
           "intermediate_size": 4, "num_local_experts": 4, "num_experts_per_tok": 2,
           "rms_norm_eps": 1e-6, "vocab_size": 4, "use_qk_norm": True,
           "qk_norm_type": "per_layer", "use_routing_bias": True, "scoring_func": "sigmoid"}
    I4 = np.eye(4)
    wo = np.zeros((4, 8))
    wo[0, 0] = 1      # head 0 (kv 0) channel 0
    wo[1, 3] = 1      # head 1 (kv 0) channel 1
    wo[2, 4] = 1      # head 2 (kv 1) channel 0
    wo[3, 7] = 10     # head 3 (kv 1) channel 1
    t = {"model.embed_tokens.weight": 2 * I4, "model.norm.weight": np.ones(4),
         "lm_head.weight": I4}
    p = "model.layers.0."
    t[p + "input_layernorm.weight"] = np.ones(4)
    t[p + "post_attention_layernorm.weight"] = np.ones(4)
    t[p + "self_attn.q_proj.weight"] = np.zeros((8, 4))
    t[p + "self_attn.k_proj.weight"] = np.arange(16.0).reshape(4, 4) - 5   # irrelevant (q = 0)
    t[p + "self_attn.v_proj.weight"] = I4
    t[p + "self_attn.o_proj.weight"] = wo
    t[p + "self_attn.q_norm.weight"] = np.ones(8)
    t[p + "self_attn.k_norm.weight"] = np.ones(4)
    t[p + "block_sparse_moe.gate.weight"] = np.asarray(gate_gain, float)[:, None] * np.ones((4, 4))
    t[p + "block_sparse_moe.e_score_correction_bias"] = np.asarray(bias, float)
    for e in range(4):
        q = p + f"block_sparse_moe.experts.{e}."
        t[q + "w1.weight"] = I4
        t[q + "w3.weight"] = s_expert[e] * I4
        t[q + "w2.weight"] = I4
    return cfg, {k: ("F32", np.asarray(v, np.float32)) for k, v in t.items()}


def st_known_answer(t):
    from make_tiny_np import write_checkpoint
    import minimax_m2 as R
    print("hand-built 1-layer model with a closed-form answer")
    eps = 1e-6
    ids = [0, 3, 1, 3, 2, 0]
    s_expert = [1.0, 100.0, 3.0, 1000.0]

    def expected(gate_gain, bias):
        out, sels, ws = [], [], []
        a = 2.0 / math.sqrt(1.0 + eps)            # rmsnorm(2 e_t) = a e_t
        for tpos in range(len(ids)):
            hist = np.bincount(ids[:tpos + 1], minlength=4) / (tpos + 1.0)
            attn = a * hist * np.array([1, 1, 1, 10.0])   # uniform attention, GQA h//2
            h = 2.0 * np.eye(4)[ids[tpos]] + attn
            n2 = h / math.sqrt(float(np.mean(h * h)) + eps)
            p = 1.0 / (1.0 + np.exp(-np.asarray(gate_gain) * n2.sum()))
            sc = p + np.asarray(bias)
            sel = sorted(range(4), key=lambda e: (-sc[e], e))[:2]
            w = p[sel] / p[sel].sum()
            moe = sum(wi * s_expert[e] * (n2 / (1 + np.exp(-n2))) * n2 for wi, e in zip(w, sel))
            x = h + moe
            out.append(x / math.sqrt(float(np.mean(x * x)) + eps))
            sels.append(sel)
            ws.append(w)
        return np.array(out), np.array(sels), np.array(ws)

    cases = [
        # gate 0 => p = 0.5 for all; bias ties 0,2,3 exactly -> lower ids 0, 2 win, w = 1/2
        ("router ties -> lower expert id", [0, 0, 0, 0], [0.25, 0.0, 0.25, 0.25]),
        # bias picks expert 2 and then 3 (p3 > p0 > p1 since sum(n2) > 0);
        # weights from the UNBIASED sigmoid, renormalised over {2, 3}
        ("bias selects only; weights unbiased", [1.0, -2.0, 0.0, 3.0], [0.0, 0.0, 4.0, 0.0]),
    ]
    for k, (name, gg, bias) in enumerate(cases):
        cfg, tensors = _handmodel(gg, bias, s_expert)
        d = os.path.join(t.work, f"hand{k}")
        write_checkpoint(d, cfg, tensors)
        m = R.M2Reference.from_dir(d)
        dump = {}
        logits = m.forward(ids, dump=dump)
        want, sel, w = expected(gg, bias)
        t.check(np.array_equal(dump["layer00_moe_router_ids"], sel), f"{name}: selection",
                f"{dump['layer00_moe_router_ids'][0].tolist()}")
        t.close(f"{name}: router weights", dump["layer00_moe_router_weights"], w, 1e-14)
        t.close(f"{name}: logits (uniform causal attn, GQA h//2, SwiGLU experts)",
                logits, want, 1e-13)
        if k == 1:
            t.check(abs(w[0, 0] - 0.5) > 0.05 and sel[0].tolist() == [2, 3],
                    "case 2 selects {2, 3} with non-trivial weights", f"{w[0].tolist()}")


def _scalar_layer0(cfg, lw, embed, ids):
    """Pure-Python scalar loops (math module only) for layer 0, straight from the spec
    formulas; returns per token: q (after whole-vector QK-norm + RoPE), attn_out, layer_out."""
    d, Hq, Hkv, hd = (cfg["hidden_size"], cfg["num_attention_heads"],
                      cfg["num_key_value_heads"], cfg["head_dim"])
    r, theta, eps = cfg["rotary_dim"], cfg["rope_theta"], cfg["rms_norm_eps"]
    E, K = cfg["num_local_experts"], cfg["num_experts_per_tok"]
    W = {k: v.tolist() for k, v in lw.items()}

    def rms(vec, g):
        s = math.sqrt(sum(v * v for v in vec) / len(vec) + eps)
        return [v / s * gi for v, gi in zip(vec, g)]

    def mv(M, vec):
        return [sum(a * b for a, b in zip(row, vec)) for row in M]

    def rope(vec, pos):
        out = list(vec)
        for h in range(len(vec) // hd):
            for i in range(r // 2):
                f = pos * theta ** (-2.0 * i / r)
                a, b = vec[h * hd + i], vec[h * hd + i + r // 2]
                out[h * hd + i] = a * math.cos(f) - b * math.sin(f)
                out[h * hd + i + r // 2] = b * math.cos(f) + a * math.sin(f)
        return out

    qs, ks, vs, res = [], [], [], []
    for pos, tok in enumerate(ids):
        x = embed[tok].tolist()
        n1 = rms(x, W["in_norm"])
        q = rope(rms(mv(W["wq"], n1), W["q_norm"]), pos)
        k = rope(rms(mv(W["wk"], n1), W["k_norm"]), pos)
        v = mv(W["wv"], n1)
        qs.append(q)
        ks.append(k)
        vs.append(v)
        o = []
        for h in range(Hq):
            g = h // (Hq // Hkv)
            sc = [sum(q[h * hd + c] * ks[j][g * hd + c] for c in range(hd)) / math.sqrt(hd)
                  for j in range(pos + 1)]
            mx = max(sc)
            ex = [math.exp(s - mx) for s in sc]
            z = sum(ex)
            o += [sum(ex[j] / z * vs[j][g * hd + c] for j in range(pos + 1)) for c in range(hd)]
        attn = mv(W["wo"], o)
        hres = [a + b for a, b in zip(x, attn)]
        n2 = rms(hres, W["post_norm"])
        lg = mv(W["gate"], n2)
        p = [1 / (1 + math.exp(-v)) for v in lg]
        sel = sorted(range(E), key=lambda e: (-(p[e] + W["bias"][e]), e))[:K]
        z = sum(p[e] for e in sel)
        moe = [0.0] * d
        for e in sel:
            a1 = mv(W["w1"][e], n2)
            a3 = mv(W["w3"][e], n2)
            hmid = [u / (1 + math.exp(-u)) * w for u, w in zip(a1, a3)]
            y = mv(W["w2"][e], hmid)
            moe = [m + p[e] / z * yy for m, yy in zip(moe, y)]
        res.append((q, attn, [a + b for a, b in zip(hres, moe)]))
    return res


def st_scalar(t):
    from make_tiny_np import make_tiny
    import minimax_m2 as R
    print("vectorised reference vs scalar pure-Python loops (layer 0 of the tiny model)")
    d = os.path.join(t.work, "scalar")
    cfg = make_tiny(d, "f32", 7)
    m = R.M2Reference.from_dir(d)
    ids = [3, 511, 0, 77, 77, 200, 9]
    dump = {}
    m.forward(ids, dump=dump)
    res = _scalar_layer0(cfg, m.layers[0], m.embed, ids)
    T = len(ids)
    t.close("q after whole-vector QK-norm + partial NeoX RoPE",
            dump["layer00_q"].reshape(T, -1), [r[0] for r in res], 1e-12)
    t.close("attn_out (causal GQA softmax, o_proj)", dump["layer00_attn_out"],
            [r[1] for r in res], 1e-12)
    t.close("layer_out (sigmoid router + bias selection + SwiGLU experts)",
            dump["layer00_layer_out"], [r[2] for r in res], 1e-12)
    # RoPE closed form: channel 0 pair has frequency theta^0 = 1
    x = np.zeros((3, 1, 8))
    x[:, 0, 0] = 1.0
    y = R.rope_neox(x, np.array([0, 1, 5]), 4, 10000.0)
    want = np.zeros((3, 1, 8))
    want[:, 0, 0] = np.cos([0, 1, 5])
    want[:, 0, 2] = np.sin([0, 1, 5])
    t.close("rope_neox: e0 at positions 0,1,5 -> (cos p, sin p) in channels (0, r/2)", y, want,
            1e-15)
    # the whole-vector QK statistic really differs from a per-head one on this model
    q_lin = (m.layers[0]["wq"] @ R.rms_norm(m.embed[ids], m.layers[0]["in_norm"], 1e-6).T).T
    qh = q_lin.reshape(T, 8, 16)
    per_head = qh / np.sqrt(np.mean(qh * qh, -1, keepdims=True) + 1e-6)
    whole = q_lin / np.sqrt(np.mean(q_lin * q_lin, -1, keepdims=True) + 1e-6)
    t.check(np.max(np.abs(per_head.reshape(T, -1) - whole)) > 1e-2,
            "tiny model discriminates whole-vector vs per-head QK-norm")


def st_cli(t):
    from make_tiny_np import make_tiny
    import minimax_m2 as R
    print("reference CLI contract")
    d = os.path.join(t.work, "cli")
    make_tiny(d, "fp8", 11, fp8_block=48)
    ids = [4, 8, 15, 16, 23, 42]
    o = os.path.join(t.work, "cli.bin")
    rc.cli_logits(t, REF, d, ids, o)
    m = R.M2Reference.from_dir(d)
    names = rc.cli_check_values(t, o, ids, m.forward(ids))
    t.check("layer03_moe_router_ids.npy" in names and "layer00_q.npy" in names,
            "--dump-dir writes per-layer .npy", f"{len(names)} files")
    rc.cli_greedy_and_errors(t, REF, d, m, o)


def st_pipeline(t):
    print("full check pipeline against a fake mmx (reference + make_tiny_np)")
    fake = rc.write_fake_mmx(t, __file__)
    code = run_check(fake, os.path.join(t.work, "pipe_ok"))
    t.check(code == 0, "faithful fake mmx passes", f"rc={code}")

    def summary(res):
        return ", ".join(f"{r['dtype']} rel {r['rel']:.1e} greedy {r['greedy']}" for r in res)
    os.environ["MMX_FAKE_BREAK"] = "f32_arith"
    res = []
    code = run_check(fake, os.path.join(t.work, "pipe_f32_arith"), quiet=True, results=res)
    t.check(code == 0, "faithful fake mmx with float32 weights/arithmetic passes",
            f"rc={code}; {summary(res)}")
    for mode in ("noise", "qknorm_per_head", "rope_interleaved", "rope_full", "router_off_by_one"):
        os.environ["MMX_FAKE_BREAK"] = mode
        res = []
        code = run_check(fake, os.path.join(t.work, "pipe_" + mode), quiet=True, results=res)
        t.check(code == 1, f"broken fake mmx ({mode}) is caught", f"rc={code}; {summary(res)}")
    rc.st_exit_codes(t, run_check)


def self_test(workdir=None):
    return rc.self_test("m2selftest_", (st_decoding, st_fp8_dequant, st_cache, st_known_answer,
                                        st_scalar, st_cli, st_pipeline), workdir)


def main(argv):
    return rc.main(argv, "mmx vs float64 numpy reference, MiniMax-M2 tiny", fake_mmx, self_test,
                   run_check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
