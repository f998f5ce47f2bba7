#!/usr/bin/python3
"""End-to-end parity check: C++ `mmx` engine vs the float64 numpy reference
(MiniMax-Text-01 / M1, the lightning + softmax hybrid, spec §3).

Usage:
  /usr/bin/python3 tests/model/text01_reference_check.py --mmx PATH_TO_mmx [--workdir DIR]
  /usr/bin/python3 tests/model/text01_reference_check.py --self-test [--workdir DIR]

For each case below (arch, dtype, config spelling, fixed seed):
  mmx make-tiny --arch ARCH -o W/CASE --dtype DTYPE --seed S [--hf-keys]
      (8 layers: lightning 0-2, 4-6 and softmax 3, 7, so the decay uses the global index over 7)
  mmx logits -m W/CASE --ids IDS -o mmx.bin [--lightning-block 16]   (80 ids; float32 [n, vocab])
  mmx logits ... --chunk 13                   (chunked prefill: resumes the lightning state)
  reference/minimax_text01.py -m W/CASE --ids IDS -o ref.bin
  -> max|diff| / max|ref| <= 1e-4 for both mmx runs; max abs diff and mean KL(p_ref || p_mmx)
  mmx generate -m W/CASE --ids 5,6,7 -n 32 --temp 0 --ignore-eos      (32 ids on one stdout line)
  reference/minimax_text01.py -m W/CASE --ids 5,6,7 --greedy 32 -> must be identical
`--lightning-block` / `--chunk` are passed only when `mmx logits --help` lists them.

Exit status: 0 iff every check passed; 1 if a comparison failed or mmx misbehaved (crash,
bad output); 2 if the check could not run at all (mmx missing / not executable, bad usage).

--self-test validates the reference and this script without the C++ engine: the reference's
own closed-form checks, prefill == token-by-token == chunked, a scalar pure-Python re-derivation
of a lightning layer (explicit Σ_j λ^(t−j) form) and of a softmax layer, both config spellings,
the post-norm / pre-norm residual wiring, non-degenerate tiny models, the reference CLI, and the
full pipeline driven against a fake `mmx` (this script with --fake-mmx, using its own numpy
checkpoint writer) -- faithful (must pass) and deliberately broken variants (must fail).
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

REF = os.path.join(ROOT, "reference", "minimax_text01.py")

# name, --arch, --dtype, seed, --hf-keys
CASES = (
    ("text01-f32", "minimax_text01", "f32", 1234, False),
    ("text01-bf16", "minimax_text01", "bf16", 2347, False),
    ("text01-f32-hf", "minimax_text01", "f32", 3456, True),
    ("m1-f16", "minimax_m1", "f16", 4567, False),
)
N_IDS = 80                       # crosses 5 lightning blocks of 16 and 6 prefill chunks of 13
LIGHTNING_BLOCK = 16
PREFILL_CHUNK = 13

# Tolerance (same for all dtypes): max|logit_mmx - logit_ref| / max|logit_ref| <= 1e-4.
# Both sides decode the SAME stored weights (f32 / f16 / bf16 bytes), so quantization error is
# not part of the comparison; what remains is fp32 arithmetic in the engine vs float64 here:
# dot products of length <= 64, 8 layers, exp/rsqrt/softmax, and the fp32 lightning state, which
# sums up to 80 decayed outer products whose pre-norm magnitude reaches ~30 (the joint inner
# RMSNorm removes the scale, not the relative error). That accumulates to ~1e-6 relative; 1e-4
# leaves ~100x headroom, while every semantic mistake tried in --self-test (local layer index in
# the decay, per-head inner norm, pre-norm residual, no SiLU on v, RoPE in lightning layers,
# exclusive recurrence, non-interleaved qkv rows, state resumed with the wrong decay) moves the
# logits by 1e-3..1 relative.
# REL_TOL = 1e-4 (refcheck_common).


def greedy_diagnosis(model_dir, prompt, ref_toks, mmx_toks):
    from minimax_text01 import Text01Reference
    return rc.greedy_diagnosis(Text01Reference, model_dir, prompt, ref_toks, mmx_toks)


def logits_flags(mmx):
    """Which optional `mmx logits` flags exist (read from its --help)."""
    text = rc.logits_help(mmx)
    return {"lightning_block": "--lightning-block" in text, "chunk": "--chunk" in text}


def check_case(mmx, work, case, flags):
    name, arch, dtype, seed, hf = case
    d = os.path.join(work, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    res = {"case": name, "seed": seed, "ok": False, "logits": "-", "chunked": "-", "greedy": "-",
           "absdiff": float("nan"), "rel": float("nan"), "kl": float("nan"),
           "rel_chunk": float("nan"), "distinct": 0, "why": []}

    cmd = [mmx, "make-tiny", "--arch", arch, "-o", d, "--dtype", dtype, "--seed", str(seed)]
    if hf:
        cmd.append("--hf-keys")
    run(cmd, "mmx make-tiny")
    try:
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        vocab = int(cfg["vocab_size"])
    except (OSError, ValueError, KeyError) as e:
        raise CheckError(f"mmx make-tiny: no usable {d}/config.json ({e})") from None
    if hf != ("layer_types" in cfg and "attn_type_list" not in cfg):
        res["why"].append(f"make-tiny: config spelling is not the expected "
                          f"{'-hf' if hf else 'original'} one")
        return res

    rng = np.random.default_rng(seed + 7)
    ids = [int(t) for t in rng.integers(0, vocab, size=N_IDS)]
    ids_s = ",".join(map(str, ids))

    ref_bin = os.path.join(d, "ref.bin")
    run([PY, REF, "-m", d, "--ids", ids_s, "-o", ref_bin], "reference logits")
    ref = read_logits(ref_bin, len(ids), vocab, "reference logits")

    mmx_bin = os.path.join(d, "mmx.bin")
    cmd = [mmx, "logits", "-m", d, "--ids", ids_s, "-o", mmx_bin]
    if flags["lightning_block"]:
        cmd += ["--lightning-block", str(LIGHTNING_BLOCK)]
    run(cmd, "mmx logits")
    got = read_logits(mmx_bin, len(ids), vocab, "mmx logits")
    res["absdiff"], res["rel"], res["kl"] = compare(got, ref)
    logits_ok = res["rel"] <= REL_TOL
    res["logits"] = "ok" if logits_ok else "FAIL"
    if not logits_ok:
        per_pos = np.max(np.abs(got - ref), axis=1) / float(np.max(np.abs(ref)))
        bad = np.nonzero(per_pos > REL_TOL)[0]
        res["why"].append(f"logits: rel {res['rel']:.3e} > {REL_TOL:.0e}; first bad position "
                          f"{int(bad[0])}, worst {int(np.argmax(per_pos))} (of {len(ids)})")

    chunk_ok = True
    if flags["chunk"]:
        chunk_bin = os.path.join(d, "mmx_chunk.bin")
        run([mmx, "logits", "-m", d, "--ids", ids_s, "-o", chunk_bin, "--chunk",
             str(PREFILL_CHUNK)], "mmx logits --chunk")
        gc = read_logits(chunk_bin, len(ids), vocab, "mmx logits --chunk")
        _, res["rel_chunk"], _ = compare(gc, ref)
        chunk_ok = res["rel_chunk"] <= REL_TOL
        res["chunked"] = "ok" if chunk_ok else "FAIL"
        if not chunk_ok:
            per_pos = np.max(np.abs(gc - ref), axis=1) / float(np.max(np.abs(ref)))
            bad = np.nonzero(per_pos > REL_TOL)[0]
            res["why"].append(f"chunked prefill ({PREFILL_CHUNK}): rel {res['rel_chunk']:.3e}; "
                              f"first bad position {int(bad[0])}")

    r = run([mmx, "generate", "-m", d, "--ids", GREEDY_PROMPT, "-n", str(GREEDY_N),
             "--temp", "0", "--ignore-eos", "--kv-dtype", "f32"], "mmx generate")
    mmx_toks = parse_id_line(r.stdout, GREEDY_N, "mmx generate")
    r = run([PY, REF, "-m", d, "--ids", GREEDY_PROMPT, "--greedy", str(GREEDY_N)],
            "reference greedy")
    ref_toks = parse_id_line(r.stdout, GREEDY_N, "reference greedy")
    res["distinct"] = len(set(ref_toks))
    greedy_ok = mmx_toks == ref_toks
    res["greedy"] = "ok" if greedy_ok else "FAIL"
    if not greedy_ok:
        prompt = [int(t) for t in GREEDY_PROMPT.split(",")]
        res["why"].append("greedy: " + greedy_diagnosis(d, prompt, ref_toks, mmx_toks))
        res["why"].append("  ref: " + " ".join(map(str, ref_toks)))
        res["why"].append("  mmx: " + " ".join(map(str, mmx_toks)))
    if res["distinct"] < 4:
        res["why"].append(f"note: the reference greedy continuation has only {res['distinct']} "
                          "distinct tokens (a degenerate tiny model discriminates poorly)")
    res["ok"] = logits_ok and chunk_ok and greedy_ok
    return res


def run_check(mmx, workdir=None, quiet=False, results=None, cases=CASES):
    """Returns the exit code (0 pass, 1 fail, 2 cannot run); per-case result dicts are
    appended to `results` if given."""
    out = (lambda *a, **k: None) if quiet else print
    prep = rc.prepare_check("text01_reference_check", mmx, REF, workdir, out)
    if prep == 2:
        return 2
    mmx, work, own_tmp = prep
    flags = logits_flags(mmx)

    results = [] if results is None else results
    if rc.run_cases("text01_reference_check", cases,
                    lambda case: check_case(mmx, work, case, flags),
                    lambda case, why: {"case": case[0], "seed": case[3], "ok": False,
                                       "logits": "ERROR", "chunked": "-", "greedy": "-",
                                       "absdiff": float("nan"), "rel": float("nan"),
                                       "kl": float("nan"), "rel_chunk": float("nan"),
                                       "distinct": 0, "why": [why]},
                    results, out) == 2:
        return 2

    out(f"MiniMax-Text-01 / M1 tiny-model parity: mmx={mmx}")
    out(f"workdir={work}   {N_IDS} ids; lightning block "
        f"{LIGHTNING_BLOCK if flags['lightning_block'] else '(engine default)'}; chunked prefill "
        f"{PREFILL_CHUNK if flags['chunk'] else '(not available)'}")
    out(f"tolerance: max|diff|/max|ref| <= {REL_TOL:.0e}; greedy {GREEDY_N} tokens from "
        f"[{GREEDY_PROMPT}] must match exactly")
    hdr = (f"{'case':<14} {'seed':>5} {'max|diff|':>10} {'rel':>10} {'meanKL':>10} "
           f"{'rel chunk':>10} {'logits':>6} {'chunk':>6} {'greedy':>6} {'dist':>4}  result")
    out(hdr)
    out("-" * len(hdr))
    for r in results:
        out(f"{r['case']:<14} {r['seed']:>5} {r['absdiff']:>10.3e} {r['rel']:>10.3e} "
            f"{r['kl']:>10.3e} {r['rel_chunk']:>10.3e} {r['logits']:>6} {r['chunked']:>6} "
            f"{r['greedy']:>6} {r['distinct']:>4}  {'PASS' if r['ok'] else 'FAIL'}")
    return rc.finish_check(results, "case", work, own_tmp, out)


# =============================================================================================
# numpy tiny checkpoint writer (self-test only; independent of the C++ `mmx make-tiny`)


def tiny_config(arch="minimax_text01", n_layers=8, hf_keys=False, interval=4):
    alpha = (2.0 * n_layers) ** 0.25
    types = [int((i + 1) % interval == 0) for i in range(n_layers)]
    cfg = {"architectures": ["MiniMaxM1ForCausalLM" if arch == "minimax_m1"
                             else "MiniMaxText01ForCausalLM"],
           "model_type": "minimax_m1" if arch == "minimax_m1" else "minimax_text_01",
           "hidden_size": 64, "num_hidden_layers": n_layers, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 16, "rotary_dim": 8, "rope_theta": 1e7,
           "max_position_embeddings": 4096, "intermediate_size": 32, "num_local_experts": 8,
           "num_experts_per_tok": 2, "shared_intermediate_size": 0, "hidden_act": "silu",
           "rms_norm_eps": 1e-5, "vocab_size": 512, "tie_word_embeddings": False,
           "bos_token_id": 1, "eos_token_id": 2}
    if hf_keys:
        cfg["layer_types"] = ["full_attention" if t else "linear_attention" for t in types]
        for k in ("full_attn", "linear_attn", "mlp"):
            cfg[f"{k}_alpha_factor"] = alpha
            cfg[f"{k}_beta_factor"] = 1.0
    else:
        cfg["attn_type_list"] = types
        for k in ("full_attention", "linear_attention"):
            cfg[f"layernorm_{k}_alpha"] = alpha
            cfg[f"layernorm_{k}_beta"] = 1.0
        cfg["layernorm_mlp_alpha"] = alpha
        cfg["layernorm_mlp_beta"] = 1.0
        cfg["postnorm"] = True
    return cfg


def make_tiny_np(outdir, arch="minimax_text01", dtype="f32", seed=0, hf_keys=False,
                 config=None):
    from make_tiny_np import write_checkpoint
    cfg = config or tiny_config(arch, hf_keys=hf_keys)
    rng = np.random.default_rng(seed)
    d, V = cfg["hidden_size"], cfg["vocab_size"]
    H, Hkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    f, E = cfg["intermediate_size"], cfg["num_local_experts"]
    if "attn_type_list" in cfg:
        lin_layers = [t == 0 for t in cfg["attn_type_list"]]
    else:
        lin_layers = [t == "linear_attention" for t in cfg["layer_types"]]
    tag = {"f32": "F32", "f16": "F16", "bf16": "BF16"}[dtype]

    def lin(o, i, g=1.0):
        return (rng.standard_normal((o, i)) * g / np.sqrt(i)).astype(np.float32)

    def gain(n):
        return (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    t = {"model.embed_tokens.weight": rng.standard_normal((V, d)).astype(np.float32)}
    for L in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{L}."
        a, m = p + "self_attn.", p + "block_sparse_moe."
        t[p + "input_layernorm.weight"] = gain(d)
        t[p + "post_attention_layernorm.weight"] = gain(d)
        if lin_layers[L]:
            t[a + "qkv_proj.weight"] = lin(3 * H * hd, d, 0.75)
            t[a + "output_gate.weight"] = lin(H * hd, d)
            t[a + "norm.weight"] = gain(H * hd)
            t[a + "out_proj.weight"] = lin(d, H * hd)
        else:
            t[a + "q_proj.weight"] = lin(H * hd, d)
            t[a + "k_proj.weight"] = lin(Hkv * hd, d)
            t[a + "v_proj.weight"] = lin(Hkv * hd, d)
            t[a + "o_proj.weight"] = lin(d, H * hd)
        t[m + "gate.weight"] = lin(E, d)
        for e in range(E):
            t[m + f"experts.{e}.w1.weight"] = lin(f, d)
            t[m + f"experts.{e}.w3.weight"] = lin(f, d)
            t[m + f"experts.{e}.w2.weight"] = lin(d, f)
    t["model.norm.weight"] = gain(d)
    t["lm_head.weight"] = lin(V, d)
    cfg = dict(cfg, torch_dtype={"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[dtype])
    write_checkpoint(outdir, cfg, {k: (tag, v) for k, v in t.items()})
    return cfg


# =============================================================================================
# fake mmx (self-test only): make-tiny / logits / generate with make_tiny_np + the reference.
# MMX_FAKE_BREAK=<mode> substitutes a deliberately wrong variant of one step.

BREAKS = ("local_layer_index", "inner_norm_per_head", "prenorm", "no_silu_v",
          "rope_in_lightning", "exclusive_recurrence", "qkv_not_interleaved", "resume_decay",
          "noise")


def _broken_lightning(R, mode):
    """A variant of Text01Reference._lightning_attn with one deliberate mistake."""
    def attn(self, lw, n1, kc, put, pre):
        c = self.cfg
        T, H, D = n1.shape[0], c.n_heads, c.head_dim
        pre_act = n1 @ lw["wqkv"].T
        if mode == "qkv_not_interleaved":      # [Q all heads | K all heads | V all heads]
            qkv = R.silu(pre_act)
            q, k, v = (qkv[:, i * H * D:(i + 1) * H * D].reshape(T, H, D) for i in range(3))
        else:
            q, k, v = R.split_qkv(R.silu(pre_act), H, D)
            if mode == "no_silu_v":
                v = R.split_qkv(pre_act, H, D)[2]
        if mode == "rope_in_lightning":
            pos = np.arange(self._p0, self._p0 + T)
            q = R.rope_neox(q, pos, c.rotary_dim, c.rope_theta)
            k = R.rope_neox(k, pos, c.rotary_dim, c.rope_theta)
        s = lw["slopes"]
        if mode == "exclusive_recurrence":     # o_t = q_t·S(t-1), then update
            lam = np.exp(-s)[:, None, None]
            o = np.empty((T, H, D))
            for t in range(T):
                o[t] = np.einsum("hd,hde->he", q[t], kc["S"])
                kc["S"] = lam * kc["S"] + k[t][:, :, None] * v[t][:, None, :]
        else:
            o = R.lightning_recurrence(q, k, v, s, kc["S"])
        o = o.reshape(T, H * D)
        if mode == "inner_norm_per_head":      # per-head statistic, model eps 1e-5
            oh = o.reshape(T, H, D)
            on = (oh / np.sqrt(np.mean(oh * oh, -1, keepdims=True) + 1e-5)).reshape(T, H * D) \
                * lw["lnorm"]
        else:
            on = R.rms_norm(o, lw["lnorm"], R.LIGHTNING_NORM_EPS)
        return (on * R.sigmoid(n1 @ lw["wgate"].T)) @ lw["wout"].T
    return attn


def _fake_model(model_dir, mode):
    import minimax_text01 as R
    m = R.Text01Reference.from_dir(model_dir)
    c = m.cfg
    if mode in ("no_silu_v", "rope_in_lightning", "exclusive_recurrence", "inner_norm_per_head",
                "qkv_not_interleaved"):
        m._lightning_attn = _broken_lightning(R, mode).__get__(m)
    elif mode == "local_layer_index":          # index among lightning layers, over their count
        lin = [L for L in range(c.n_layers) if c.is_lightning[L]]
        base = 2.0 ** (-8.0 * (np.arange(c.n_heads) + 1.0) / c.n_heads)
        for j, L in enumerate(lin):
            m.layers[L]["slopes"] = base * (1.0 - j / (len(lin) - 1) + 1e-5)
    elif mode == "prenorm":                    # x + a, h + m (plain pre-norm residual)
        c.postnorm = False
        c.alpha_full = c.alpha_lin = c.alpha_mlp = 1.0
    elif mode == "f32_arith":                  # FAITHFUL, but weights (most arithmetic) float32
        m.embed = m.embed.astype(np.float32)
        m.norm = m.norm.astype(np.float32)
        m.lm_head = m.lm_head.astype(np.float32)
        for lw in m.layers:
            for key in lw:
                if key != "slopes":
                    lw[key] = lw[key].astype(np.float32)
    elif mode not in ("", "noise", "resume_decay"):
        raise SystemExit(f"unknown MMX_FAKE_BREAK {mode}")
    orig = m.forward

    def forward(ids, cache=None, dump=None):
        m._p0 = cache[-1]["pos"] if cache is not None else 0
        return orig(ids, cache, dump)
    m.forward = forward
    return m


def fake_mmx(argv):
    ap, a, b = rc.fake_mmx_parser("fake: --lightning-block B, --chunk C")
    a.add_argument("--hf-keys", action="store_true")
    b.add_argument("--lightning-block", type=int, default=256)
    b.add_argument("--chunk", type=int, default=0)
    args = ap.parse_args(argv)
    if args.cmd == "make-tiny":
        assert args.arch in ("minimax_text01", "minimax_m1"), args.arch
        make_tiny_np(args.o, args.arch, args.dtype, args.seed, args.hf_keys)
        print(f"fake-mmx: wrote {args.o}", file=sys.stderr)
        return 0
    mode = os.environ.get("MMX_FAKE_BREAK", "")
    model = _fake_model(args.m, mode)
    ids = [int(t) for t in args.ids.split(",")]
    if args.cmd == "logits":
        if args.chunk:
            cache = model.new_cache()
            parts = []
            for i in range(0, len(ids), args.chunk):
                if mode == "resume_decay" and i:   # carried state decayed one step too little
                    for L, lw in enumerate(model.layers):
                        if "S" in cache[L]:
                            cache[L]["S"] *= np.exp(lw["slopes"])[:, None, None]
                parts.append(model.forward(ids[i:i + args.chunk], cache))
            lg = np.concatenate(parts)
        else:
            lg = model.forward(ids)
        rc.fake_write_logits(lg, mode, args.o)
        return 0
    print(" ".join(map(str, model.greedy(ids, args.n))))
    return 0


# =============================================================================================
# self-test


def st_cache(t):
    import minimax_text01 as R
    print("prefill vs token-by-token vs chunked (reference internal consistency)")
    rng = np.random.default_rng(5)
    for dt in ("f32", "bf16"):
        d = os.path.join(t.work, f"cache_{dt}")
        make_tiny_np(d, "minimax_text01", dt, 42 + len(dt))
        m = R.Text01Reference.from_dir(d)
        ids = [int(x) for x in rng.integers(0, 512, 40)]
        rc.check_cache_consistency(t, m, ids, (7, 23), dt, "state + KV cache", 8)


def _scalar_layer(cfg, lw, x_in, L, lightning):
    """Pure-Python scalar loops (math module only) for one decoder layer, from the spec formulas.
    Lightning uses the explicit sum o_t = Σ_{j<=t} λ^(t-j) (q_t·k_j) v_j (not the recurrence).
    Returns per token (attn_out, layer_out)."""
    d, H, Hkv, D = (cfg["hidden_size"], cfg["num_attention_heads"],
                    cfg["num_key_value_heads"], cfg["head_dim"])
    eps, E, K, N = cfg["rms_norm_eps"], cfg["num_local_experts"], cfg["num_experts_per_tok"], \
        cfg["num_hidden_layers"]
    r, theta = cfg["rotary_dim"], cfg["rope_theta"]
    alpha = (2.0 * N) ** 0.25
    W = {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in lw.items()}

    def rms(vec, g, e):
        s = math.sqrt(sum(v * v for v in vec) / len(vec) + e)
        return [v / s * gi for v, gi in zip(vec, g)]

    def mv(M, vec):
        return [sum(a * b for a, b in zip(row, vec)) for row in M]

    def sil(u):
        return u / (1 + math.exp(-u))

    def rope(vec, pos, nh):
        out = list(vec)
        for h in range(nh):
            for i in range(r // 2):
                f = pos * theta ** (-2.0 * i / r)
                a, b = vec[h * D + i], vec[h * D + i + r // 2]
                out[h * D + i] = a * math.cos(f) - b * math.sin(f)
                out[h * D + i + r // 2] = b * math.cos(f) + a * math.sin(f)
        return out

    n1s = [rms(x, W["in_norm"], eps) for x in x_in]
    qs, ks, vs = [], [], []
    res = []
    for t, x in enumerate(x_in):
        n1 = n1s[t]
        if lightning:
            p = [sil(u) for u in mv(W["wqkv"], n1)]
            qs.append([p[h * 3 * D + c] for h in range(H) for c in range(D)])
            ks.append([p[h * 3 * D + D + c] for h in range(H) for c in range(D)])
            vs.append([p[h * 3 * D + 2 * D + c] for h in range(H) for c in range(D)])
            o = []
            for h in range(H):
                lam = math.exp(-(2.0 ** (-8.0 * (h + 1) / H)) * (1 - L / (N - 1) + 1e-5))
                o += [sum(lam ** (t - j) *
                          sum(qs[t][h * D + e] * ks[j][h * D + e] for e in range(D)) *
                          vs[j][h * D + c] for j in range(t + 1)) for c in range(D)]
            on = rms(o, W["lnorm"], 1e-6)
            g = [1 / (1 + math.exp(-u)) for u in mv(W["wgate"], n1)]
            attn = mv(W["wout"], [a * b for a, b in zip(on, g)])
        else:
            qs.append(rope(mv(W["wq"], n1), t, H))
            ks.append(rope(mv(W["wk"], n1), t, Hkv))
            vs.append(mv(W["wv"], n1))
            o = []
            for h in range(H):
                gk = h // (H // Hkv)
                sc = [sum(qs[t][h * D + c] * ks[j][gk * D + c] for c in range(D)) / math.sqrt(D)
                      for j in range(t + 1)]
                mx = max(sc)
                ex = [math.exp(s - mx) for s in sc]
                z = sum(ex)
                o += [sum(ex[j] / z * vs[j][gk * D + c] for j in range(t + 1)) for c in range(D)]
            attn = mv(W["wo"], o)
        hres = [alpha * a + b for a, b in zip(n1, attn)]
        n2 = rms(hres, W["post_norm"], eps)
        lg = mv(W["gate"], n2)
        mx = max(lg)
        ex = [math.exp(u - mx) for u in lg]
        p = [u / sum(ex) for u in ex]
        sel = sorted(range(E), key=lambda e: (-p[e], e))[:K]
        z = sum(p[e] for e in sel)
        moe = [0.0] * d
        for e in sel:
            hm = [sil(u) * w for u, w in zip(mv(W["w1"][e], n2), mv(W["w3"][e], n2))]
            moe = [mm + p[e] / z * y for mm, y in zip(moe, mv(W["w2"][e], hm))]
        res.append((attn, [alpha * a + b for a, b in zip(n2, moe)]))
    return res


def st_scalar(t):
    import minimax_text01 as R
    print("vectorised reference vs scalar pure-Python loops (layers 1 lightning, 3 softmax)")
    d = os.path.join(t.work, "scalar")
    cfg = make_tiny_np(d, "minimax_text01", "f32", 7)
    m = R.Text01Reference.from_dir(d)
    ids = [3, 511, 0, 77, 77, 200, 9, 41, 41, 13]
    dump = {}
    m.forward(ids, dump=dump)
    for L, lightning in ((1, True), (3, False)):
        x_in = dump[f"layer{L - 1:02d}_layer_out"].tolist()
        res = _scalar_layer(cfg, m.layers[L], x_in, L, lightning)
        kind = "lightning (Σ_j λ^(t-j) form, global-index slopes)" if lightning else \
            "softmax (GQA, partial NeoX RoPE θ=1e7)"
        t.close(f"layer {L} attn_out: {kind}", dump[f"layer{L:02d}_attn_out"],
                [r_[0] for r_ in res], 1e-11)
        t.close(f"layer {L} layer_out: post-norm α/β residual + softmax top-2 MoE",
                dump[f"layer{L:02d}_layer_out"], [r_[1] for r_ in res], 1e-11)
    # the tiny model discriminates the joint inner norm from a per-head one
    o = dump["layer01_lin_o"].reshape(len(ids), 4, 16)
    rms_h = np.sqrt(np.mean(o * o, -1))
    t.check(float(np.max(rms_h.max(1) / rms_h.min(1))) > 1.5,
            "lightning heads have different magnitudes (joint vs per-head norm differ)",
            f"max head rms ratio {float(np.max(rms_h.max(1) / rms_h.min(1))):.2f}")


def st_spellings_and_residual(t):
    import minimax_text01 as R
    from safetensors_np import Checkpoint
    print("config spellings, residual wiring, degeneracy")
    d1 = os.path.join(t.work, "orig")
    d2 = os.path.join(t.work, "hf")
    make_tiny_np(d1, "minimax_text01", "f32", 21)
    make_tiny_np(d2, "minimax_text01", "f32", 21, hf_keys=True)
    ids = list(range(100, 130))
    a = R.Text01Reference.from_dir(d1)
    b = R.Text01Reference.from_dir(d2)
    t.close("-hf spelling == original spelling (same weights)", b.forward(ids), a.forward(ids),
            0.0)
    dump = {}
    a.forward(ids, dump=dump)
    al = (2.0 * 8) ** 0.25
    t.close("post-norm: attn_resid = α·attn_norm + β·attn_out (lightning layer 0)",
            dump["layer00_attn_resid"], al * dump["layer00_attn_norm"] + dump["layer00_attn_out"],
            1e-15)
    t.close("post-norm: layer_out = α·moe_norm + β·moe_out (softmax layer 3)",
            dump["layer03_layer_out"], al * dump["layer03_moe_norm"] + dump["layer03_moe_out"],
            1e-15)
    with open(os.path.join(d1, "config.json")) as f:
        cfg = json.load(f)
    cfg["postnorm"] = False
    cfg["layernorm_mlp_beta"] = 0.5
    c = R.Text01Reference(cfg, Checkpoint(d1))
    dump = {}
    c.forward(ids, dump=dump)
    t.close("postnorm=false: attn_resid = α·x + β·attn_out (the un-normed input)",
            dump["layer01_attn_resid"], al * dump["layer00_layer_out"] + dump["layer01_attn_out"],
            1e-15)
    t.close("postnorm=false: layer_out = α·attn_resid + β·moe_out",
            dump["layer01_layer_out"], al * dump["layer01_attn_resid"] +
            0.5 * dump["layer01_moe_out"], 1e-15)
    # non-degenerate: distinct greedy tokens and spread-out logits over 96 positions
    rng = np.random.default_rng(1)
    lg = a.forward([int(v) for v in rng.integers(0, 512, 96)])
    g = a.greedy([5, 6, 7], 32)
    t.check(len(set(g)) >= 8 and float(lg.std()) > 0.3 and len(set(lg.argmax(-1))) > 30,
            "tiny model is not degenerate", f"{len(set(g))} distinct greedy ids, logit std "
            f"{lg.std():.2f}, {len(set(lg.argmax(-1)))} distinct argmaxes over 96 positions")


def st_cli(t):
    import minimax_text01 as R
    print("reference CLI contract")
    d = os.path.join(t.work, "cli")
    make_tiny_np(d, "minimax_m1", "bf16", 11)
    ids = [4, 8, 15, 16, 23, 42]
    o = os.path.join(t.work, "cli.bin")
    rc.cli_logits(t, REF, d, ids, o)
    m = R.Text01Reference.from_dir(d)
    names = rc.cli_check_values(t, o, ids, m.forward(ids))
    t.check("layer00_lin_o.npy" in names and "layer07_q.npy" in names and
            "layer07_moe_router_ids.npy" in names, "--dump-dir writes per-layer .npy",
            f"{len(names)} files")
    rc.cli_greedy_and_errors(t, REF, d, m, o)


def st_pipeline(t):
    print("full check pipeline against a fake mmx (reference + numpy checkpoint writer)")
    fake = rc.write_fake_mmx(t, __file__)
    code = run_check(fake, os.path.join(t.work, "pipe_ok"))
    t.check(code == 0, "faithful fake mmx passes", f"rc={code}")

    def summary(res):
        return ", ".join(f"{r['case']} rel {r['rel']:.1e}/{r['rel_chunk']:.1e} greedy "
                         f"{r['greedy']}" for r in res)
    os.environ["MMX_FAKE_BREAK"] = "f32_arith"
    res = []
    code = run_check(fake, os.path.join(t.work, "pipe_f32_arith"), quiet=True, results=res)
    t.check(code == 0, "faithful fake mmx with float32 weights/arithmetic passes",
            f"rc={code}; {summary(res)}")
    for mode in BREAKS:
        os.environ["MMX_FAKE_BREAK"] = mode
        res = []
        code = run_check(fake, os.path.join(t.work, "pipe_" + mode), quiet=True, results=res,
                       cases=CASES[:2])
        t.check(code == 1, f"broken fake mmx ({mode}) is caught", f"rc={code}; {summary(res)}")
    rc.st_exit_codes(t, run_check)


def st_reference_selftest(t):
    rc.st_reference_selftest(t, REF)


def self_test(workdir=None):
    return rc.self_test("text01selftest_", (st_reference_selftest, st_cache, st_scalar,
                                            st_spellings_and_residual, st_cli, st_pipeline),
                        workdir)


def main(argv):
    return rc.main(argv, "mmx vs float64 numpy reference, Text-01/M1 tiny", fake_mmx, self_test,
                   run_check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
