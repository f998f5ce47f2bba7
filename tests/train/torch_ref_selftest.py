#!/usr/bin/python3
"""Self-checks of the PyTorch training-loss reference (reference/torch_models.py,
reference/torch_grad.py), on fresh tiny checkpoints from `mmx make-tiny`, all in float64:

  (a) forward logits == the float64 numpy references (reference/minimax_{m2,text01,m3}.py),
      in process (max |diff| / max |logit| <= 1e-10; f32 and bf16 checkpoints) and through their
      CLI `-o FILE` (float32 logits, <= 1e-6); Text-01 also with the token-by-token lightning
      recurrence instead of the whole-sequence block form; M3's indexer KL against an explicit
      per-(group, query) numpy loop over the numpy reference's own q / k / index q / k / selection.
  (b) gradients == central finite differences (4-point stencil) of the loss for the largest and
      one random entry of every non-expert tensor of two layers (+ the busiest expert, embed,
      final norm, lm_head), rel <= 1e-6; an entry whose perturbation flips a discrete choice
      (top-k experts, MSA blocks) is skipped. M3: index_* tensors against the FD of
      ce + W·kl (W = 0.5); all other gradients unchanged by W (indexer input / teacher detached).
  (c) tree mask: a prefix shared by two branches, packed with a visibility mask and positions =
      depth (make_positions(depth=True)), gives each branch's logits, loss and (summed)
      gradients equal to running the branches alone as separate sequences (M3: block-aligned
      branches in the sparse regime, and the indexer KL too).
  plus torch_grad.py's CLI: output names / shapes / values, and exit code 2 on bad input.

  torch_ref_selftest.py [--mmx build/tools/mmx] [--work DIR] [--seed S]
Exit: 0 all passed, 1 a check failed, 2 setup problem (no mmx binary), 77 torch missing (skip).
"""

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REF = os.path.join(ROOT, "reference")
sys.path.insert(0, REF)
PY = "/usr/bin/python3"
MMX = [None]

try:
    import torch
except ImportError:
    if os.environ.get("CI") == "true":  # the reference tool must be there in CI (house rule 2)
        print("torch_ref_selftest: FAILED: python3 torch not importable (apt python3-torch; "
              "scripts/setup.sh installs it)")
        sys.exit(1)
    print("torch_ref_selftest: SKIPPED: python3 torch not importable (apt python3-torch)")
    sys.exit(77)

import torch_models as tm  # noqa: E402
import minimax_m2  # noqa: E402
import minimax_text01  # noqa: E402
import minimax_m3  # noqa: E402
from safetensors_np import Checkpoint  # noqa: E402

NP_REF = {"minimax_m2": (minimax_m2.M2Reference, "minimax_m2.py"),
          "minimax_text01": (minimax_text01.Text01Reference, "minimax_text01.py"),
          "minimax_m3": (minimax_m3.M3Reference, "minimax_m3.py")}
F64 = torch.float64


class Checks:
    def __init__(self):
        self.fails = []
        self.rows = []

    def __call__(self, cond, name, detail=""):
        print(("  ok    " if cond else "  FAIL  ") + name + (f"  ({detail})" if detail else ""),
              flush=True)
        if not cond:
            self.fails.append(name)

    def value(self, name, val, tol):
        self(val <= tol, name, f"{val:.2e} <= {tol:.0e}")
        self.rows.append((name, val, tol))


def rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def causal(B, T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool)).expand(B, T, T)


def make_tiny(mmx, arch, out, dtype, seed, extra=()):
    r = subprocess.run([mmx, "make-tiny", "--arch", arch, "-o", out, "--dtype", dtype,
                        "--seed", str(seed)] + list(extra), capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"mmx make-tiny {arch} failed: {r.stderr.strip()}")


def torch_logits(model, ids):
    ids = torch.as_tensor(np.asarray(ids, dtype=np.int64))[None]
    T = ids.shape[1]
    with torch.no_grad():
        lg, _ = model.forward(ids, torch.arange(T)[None], causal(1, T))
    return lg[0].numpy()


# --------------------------------------------------------------------------------------------
# (a) forward


def check_forward(ck, arch, d, ids, tag, work):
    R, script = NP_REF[arch]
    ref_model = R.from_dir(d)
    ref = ref_model.forward(ids)
    m = tm.load_model(d, F64)
    ck.value(f"{arch} {tag}: torch logits == numpy reference (in process, T={len(ids)})",
             rel(torch_logits(m, ids), ref), 1e-10)
    # batch of 2 different rows == each row alone
    ids2 = np.roll(ids, 7)
    b = torch.as_tensor(np.stack([ids, ids2]).astype(np.int64))
    T = len(ids)
    with torch.no_grad():
        lg, _ = m.forward(b, torch.arange(T).expand(2, T), causal(2, T))
    ck.value(f"{arch} {tag}: batch row 2 == numpy reference of that row",
             rel(lg[1].numpy(), ref_model.forward(ids2)), 1e-10)
    if tag != "f32":
        return m, ref_model
    out = os.path.join(work, f"{arch}_ref_logits.f32")
    r = subprocess.run([PY, os.path.join(REF, script), "-m", d, "--ids",
                        ",".join(str(int(i)) for i in ids), "-o", out],
                       capture_output=True, text=True, timeout=600)
    ck(r.returncode == 0, f"{arch}: numpy reference CLI -o runs", r.stderr.strip()[-200:])
    if r.returncode == 0:
        cli = np.fromfile(out, dtype="<f4").reshape(len(ids), -1)
        ck.value(f"{arch} {tag}: torch logits == numpy reference CLI -o (float32 file)",
                 rel(torch_logits(m, ids), cli), 1e-6)
    if arch == "minimax_text01":
        mr = tm.load_model(d, F64, lightning_impl="recurrence")
        ck.value(f"{arch}: token-by-token lightning recurrence == numpy reference",
                 rel(torch_logits(mr, ids), ref), 1e-10)
    return m, ref_model


def np_kl(ref_model, ids):
    """The indexer KL of the module doc from the numpy reference's own dump, explicit loops."""
    c = ref_model.cfg
    dump = {}
    ref_model.forward(ids, dump=dump)
    T, grp = len(ids), c.n_heads // c.n_kv_heads
    total = 0.0
    for L in range(c.n_layers):
        if not c.is_sparse[L]:
            continue
        pre = f"layer{L:02d}_"
        q, k, iq, ik, sel = (dump[pre + n] for n in ("q", "k", "iq", "ik", "msa_sel"))
        acc = 0.0
        for g in range(c.n_kv_heads):
            for t in range(T):
                blocks = set(int(b) for b in sel[g, t] if b >= 0)
                keys = [j for j in range(t + 1) if j // c.block in blocks]
                teach = np.zeros(len(keys))
                for h in range(g * grp, (g + 1) * grp):
                    s = np.array([q[t, h] @ k[j, g] for j in keys]) / math.sqrt(c.head_dim)
                    e = np.exp(s - s.max())
                    teach += e / e.sum() / grp
                zs = np.array([iq[t, g] @ ik[j] for j in keys]) / math.sqrt(c.index_dim)
                ls = zs - zs.max() - math.log(np.exp(zs - zs.max()).sum())
                nz = teach > 0
                acc += float((teach[nz] * (np.log(teach[nz]) - ls[nz])).sum())
        total += acc / (c.n_kv_heads * T)
    return total


# --------------------------------------------------------------------------------------------
# (b) finite differences


def loss_value(model, batch, w, trace=None):
    with torch.no_grad():
        return float(tm.training_loss(model, batch, None, None, w, trace=trace)[0])


def grads_of(model, batch, w):
    for p in model.params.values():
        p.grad = None
    total, ce, kl = tm.training_loss(model, batch, None, None, w)
    total.backward()
    return {n: (torch.zeros_like(p) if p.grad is None else p.grad.clone())
            for n, p in model.params.items()}


def same_trace(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def fd_tensors(model, arch, grads):
    """Names checked by finite differences: every non-expert tensor of two layers of different
    kinds, the busiest routed expert of those layers, embed / final norm / lm_head."""
    layers = {"minimax_m2": (0, 3), "minimax_text01": (0, 3), "minimax_m3": (0, 1)}[arch]
    pre = "language_model." if arch == "minimax_m3" else ""
    names = [n for n in model.params if not n.startswith(pre + "model.layers.")]
    for L in layers:
        lp = f"{pre}model.layers.{L}."
        mine = [n for n in model.params if n.startswith(lp)]
        names += [n for n in mine if ".experts." not in n]
        ex = {}
        for n in mine:
            if ".experts." in n:
                e = n.split(".experts.")[1].split(".")[0]
                ex[e] = ex.get(e, 0.0) + float(grads[n].abs().sum())
        if ex:
            best = max(ex, key=ex.get)
            names += [n for n in mine if f".experts.{best}." in n]
    return names


def fd_check(ck, model, arch, batch, w, names, grads, rng, h=1e-4, tag="", dir_names=None):
    base_trace = []
    loss_value(model, batch, w, base_trace)
    worst, n_done, skipped, zero_bad = 0.0, 0, 0, 0.0
    worst_name = ""
    for name in names:
        p = model.params[name]
        g = grads[name].reshape(-1)
        gmax = float(g.abs().max())
        if gmax == 0.0:                 # a zero gradient must be a zero derivative
            idx = int(rng.integers(0, g.numel()))
            fd = fd_entry(model, batch, w, p.data.view(-1), idx, h, base_trace)
            if fd is None:
                skipped += 1
            else:
                n_done += 1
                zero_bad = max(zero_bad, abs(fd))
            continue
        big = torch.nonzero(g.abs() >= 0.1 * gmax)[:, 0].tolist()
        picks = [int(g.abs().argmax())]
        if len(big) > 1:
            picks.append(int(rng.choice([i for i in big if i != picks[0]])))
        flat = p.data.view(-1)
        for idx in picks:
            fd = fd_entry(model, batch, w, flat, idx, h, base_trace)
            if fd is None:
                skipped += 1
                continue
            r = abs(fd - float(g[idx])) / abs(float(g[idx]))
            n_done += 1
            if r > worst:
                worst, worst_name = r, f"{name}[{idx}]"
    ck(n_done >= len(names), f"{arch}{tag}: {n_done} finite-difference entries checked "
       f"({skipped} skipped: a discrete choice flipped)")
    ck.value(f"{arch}{tag}: gradient == central finite difference, max rel (worst {worst_name})",
             worst, 1e-6)
    ck.value(f"{arch}{tag}: entries with a zero gradient have |finite difference|", zero_bad,
             1e-9)
    # every parameter at once: directional derivative along a random direction
    # (a unit-norm random direction over `dir_names`, default all parameters)
    gen = torch.Generator().manual_seed(int(rng.integers(0, 2**31)))
    dn = set(model.params if dir_names is None else dir_names)
    dirs = {n: (torch.randn(p.shape, generator=gen, dtype=p.dtype) if n in dn else
                torch.zeros_like(p)) for n, p in model.params.items()}
    norm = math.sqrt(sum(float((v * v).sum()) for v in dirs.values()))
    dirs = {n: v / norm for n, v in dirs.items()}
    saved = {n: p.data.clone() for n, p in model.params.items()}
    vals, flipped = [], False
    for s in (1, -1, 2, -2):
        for n, p in model.params.items():
            p.data.copy_(saved[n] + s * h * dirs[n])
        tr = []
        vals.append(loss_value(model, batch, w, tr))
        flipped |= not same_trace(tr, base_trace)
    for n, p in model.params.items():
        p.data.copy_(saved[n])
    if flipped:
        ck(True, f"{arch}{tag}: directional derivative skipped (a discrete choice flipped)")
        return
    fd = (8.0 * (vals[0] - vals[1]) - (vals[2] - vals[3])) / (12.0 * h)
    ad = sum(float((grads[n] * dirs[n]).sum()) for n in model.params)
    ck.value(f"{arch}{tag}: Σ grad·v == directional finite difference along a random direction "
             f"in {'all' if dir_names is None else len(dn)} parameter tensors",
             abs(fd - ad) / abs(ad), 1e-6)


def fd_entry(model, batch, w, flat, idx, h, base_trace):
    """4-point central difference of the loss in one parameter entry; None when a discrete
    choice flips under the perturbation."""
    orig = float(flat[idx])
    vals, flipped = [], False
    for s in (1, -1, 2, -2):
        flat[idx] = orig + s * h
        tr = []
        vals.append(loss_value(model, batch, w, tr))
        flipped |= not same_trace(tr, base_trace)
    flat[idx] = orig
    if flipped:
        return None
    return (8.0 * (vals[0] - vals[1]) - (vals[2] - vals[3])) / (12.0 * h)


# --------------------------------------------------------------------------------------------
# (c) tree mask


def tree_case(model, arch, rng, w):
    """Returns dict of the comparisons for a prefix + two branches."""
    V = model.c.vocab
    if arch == "minimax_m3":
        Bk = model.c.block
        P, A, Bn = 4 * Bk, 2 * Bk, 3 * Bk          # block-aligned, sparse regime
    else:
        P, A, Bn = 5, 7, 6
    pre, a, b = (rng.integers(0, V, n) for n in (P, A, Bn))
    ta, tb = rng.integers(0, V, 2)
    N = P + A + Bn
    mask = torch.zeros(N, N, dtype=torch.bool)
    for i in range(N):
        for j in range(i + 1):
            in_a_i, in_b_i = P <= i < P + A, i >= P + A
            in_a_j, in_b_j = P <= j < P + A, j >= P + A
            mask[i, j] = j < P or (in_a_i and in_a_j) or (in_b_i and in_b_j)
    mask = mask[None]
    depth = torch.tensor(list(range(P + A)) + list(range(P, P + Bn)))[None]
    pos = tm.make_positions(1, N, mask, depth=True)
    inp = torch.as_tensor(np.concatenate([pre, a, b]).astype(np.int64))[None]
    tgt = torch.as_tensor(np.concatenate([pre[1:], a[:1], a[1:], [ta], b[1:], [tb]])
                          .astype(np.int64))[None]
    inA = torch.as_tensor(np.concatenate([pre, a]).astype(np.int64))[None]
    tgA = torch.as_tensor(np.concatenate([pre[1:], a[:1], a[1:], [ta]]).astype(np.int64))[None]
    inB = torch.as_tensor(np.concatenate([pre, b]).astype(np.int64))[None]
    tgB = torch.as_tensor(np.concatenate([-np.ones(P, dtype=np.int64), b[1:], [tb]]))[None]
    klB_rows = torch.zeros(1, P + Bn, dtype=torch.bool)
    klB_rows[:, P:] = True
    out = {"positions are the depth": bool(torch.equal(pos, depth))}

    def summed(inputs, targets, m, p, kl_rows):
        for q in model.params.values():
            q.grad = None
        total, ce, kl = tm.sequence_loss(model, inputs, targets, m, p, 0.0, kl_rows=kl_rows)
        n = int((targets >= 0).sum())
        s = ce * n
        if kl is not None:
            s = s + w * kl * model.c.n_index_heads * int(kl_rows.sum())
        s.backward()
        g = {k: (torch.zeros_like(q) if q.grad is None else q.grad.clone())
             for k, q in model.params.items()}
        return float(s), float(ce), (None if kl is None else float(kl)), g

    with torch.no_grad():
        lt, _ = model.forward(inp, pos, mask)
        la, _ = model.forward(inA, torch.arange(P + A)[None], causal(1, P + A))
        lb, _ = model.forward(inB, torch.arange(P + Bn)[None], causal(1, P + Bn))
    out["logits, branch A rows"] = rel(lt[0, :P + A].numpy(), la[0].numpy())
    out["logits, branch B rows"] = rel(lt[0, P + A:].numpy(), lb[0, P:].numpy())
    # per-branch loss: the tree with only that branch's targets == the branch alone
    tgt_a_only = tgt.clone()
    tgt_a_only[:, P + A:] = -1
    tgt_b_only = tgt.clone()
    tgt_b_only[:, :P + A] = -1
    rows_all = torch.ones(1, N, dtype=torch.bool)
    rows_b = torch.zeros(1, N, dtype=torch.bool)
    rows_b[:, P + A:] = True
    rows_a = ~rows_b
    _, ce_ta, kl_ta, _ = summed(inp, tgt_a_only, mask, pos, rows_a)
    _, ce_tb, kl_tb, _ = summed(inp, tgt_b_only, mask, pos, rows_b)
    s_t, _, _, g_t = summed(inp, tgt, mask, pos, rows_all)
    s_a, ce_a, kl_a, g_a = summed(inA, tgA, None, None, torch.ones(1, P + A, dtype=torch.bool))
    s_b, ce_b, kl_b, g_b = summed(inB, tgB, None, None, klB_rows)
    out["loss, branch A"] = abs(ce_ta - ce_a) / abs(ce_a)
    out["loss, branch B"] = abs(ce_tb - ce_b) / abs(ce_b)
    if kl_a is not None:
        out["indexer KL, branch A"] = abs(kl_ta - kl_a) / abs(kl_a)
        out["indexer KL, branch B"] = abs(kl_tb - kl_b) / abs(kl_b)
    out["summed loss, tree == A + B"] = abs(s_t - (s_a + s_b)) / abs(s_t)
    worst = 0.0
    for k in g_t:
        scale = float(g_t[k].abs().max())
        if scale > 0:
            worst = max(worst, float((g_t[k] - g_a[k] - g_b[k]).abs().max()) / scale)
    out["gradients, tree == A + B (max rel per tensor)"] = worst
    return out


# --------------------------------------------------------------------------------------------
# CLI of torch_grad.py


def run_grad(args):
    return subprocess.run([PY, os.path.join(REF, "torch_grad.py")] + args, capture_output=True,
                          text=True, timeout=600)


def check_cli(ck, arch, d, model, batch_np, work, w):
    bpath = os.path.join(work, f"{arch}_batch.npy")
    np.save(bpath, batch_np.astype(np.int32))
    out = os.path.join(work, f"{arch}_grad.safetensors")
    extra = ["--index-loss-weight", str(w)] if w else []
    r = run_grad(["-m", d, "--batch", bpath, "-o", out] + extra)
    ck(r.returncode == 0, f"{arch}: torch_grad.py runs", (r.stdout + r.stderr).strip()[-300:])
    if r.returncode != 0:
        return
    batch = torch.as_tensor(batch_np.astype(np.int64))
    g = grads_of(model, batch, w)
    total = loss_value(model, batch, w)
    f = Checkpoint(out)
    ck.value(f"{arch}: torch_grad.py loss == in-process loss", rel(f.get_f64("loss"), [total]),
             1e-14)
    ck(f.shape("loss") == (1,) and f.dtype("loss") == "F64", f"{arch}: 'loss' is F64 [1]")
    src = Checkpoint(d)
    want = set(n for n in src.keys() if n in model.params)
    got = set(f.keys()) - {"loss"}
    ck(got == want and not any("e_score_correction_bias" in n for n in got),
       f"{arch}: one gradient per trainable checkpoint tensor, no e_score_correction_bias",
       f"{len(got)} tensors; missing {sorted(want - got)[:2]} extra {sorted(got - want)[:2]}")
    shapes_ok = all(f.shape(n) == tuple(src.shape(n)) and f.dtype(n) == "F64" for n in got & want)
    ck(shapes_ok, f"{arch}: gradient shapes == checkpoint shapes, dtype F64")
    ck.value(f"{arch}: torch_grad.py gradients == in-process gradients",
             max(rel(f.get_f64(n), g[n].numpy()) if float(g[n].abs().max()) > 0 else
                 float(np.abs(f.get_f64(n)).max()) for n in got & want), 1e-14)
    # float32 run of the same batch is close to float64
    out32 = os.path.join(work, f"{arch}_grad32.safetensors")
    r = run_grad(["-m", d, "--batch", bpath, "-o", out32, "--dtype", "float32"] + extra)
    ck(r.returncode == 0, f"{arch}: torch_grad.py --dtype float32 runs", r.stderr.strip()[-200:])
    if r.returncode == 0:
        f32 = Checkpoint(out32)
        ck.value(f"{arch}: float32 loss vs float64 loss (rel)",
                 rel(f32.get_f64("loss"), f.get_f64("loss")), 1e-5)


def check_cli_errors(ck, d_m2, d_m3, work, T):
    good = os.path.join(work, "err_batch.npy")
    np.save(good, np.arange(2 * (T + 1), dtype=np.int32).reshape(2, T + 1) % 100)
    cases = []
    bad_id = os.path.join(work, "err_badid.npy")
    np.save(bad_id, np.array([[1, 2, 100000]], dtype=np.int32))
    cases.append(("token id >= vocab", ["-m", d_m2, "--batch", bad_id]))
    neg = os.path.join(work, "err_neg.npy")
    np.save(neg, np.array([[1, -2, 3]], dtype=np.int32))
    cases.append(("token id -2", ["-m", d_m2, "--batch", neg]))
    flt = os.path.join(work, "err_float.npy")
    np.save(flt, np.zeros((1, 4), dtype=np.float32))
    cases.append(("float batch", ["-m", d_m2, "--batch", flt]))
    notgt = os.path.join(work, "err_notgt.npy")
    np.save(notgt, np.array([[3, -1, -1]], dtype=np.int32))
    cases.append(("no target", ["-m", d_m2, "--batch", notgt]))
    cases.append(("1-D batch", ["-m", d_m2, "--batch", os.path.join(work, "err_1d.npy")]))
    np.save(os.path.join(work, "err_1d.npy"), np.arange(5, dtype=np.int32))
    up = os.path.join(work, "err_mask_up.npy")
    np.save(up, np.ones((T, T), dtype=bool))
    cases.append(("mask sees a later key", ["-m", d_m2, "--batch", good, "--mask", up]))
    nodiag = os.path.join(work, "err_mask_diag.npy")
    md = np.tril(np.ones((T, T), dtype=bool))
    md[3, 3] = False
    np.save(nodiag, md)
    cases.append(("mask without its diagonal", ["-m", d_m2, "--batch", good, "--mask", nodiag]))
    shp = os.path.join(work, "err_mask_shape.npy")
    np.save(shp, np.tril(np.ones((T + 1, T + 1), dtype=bool)))
    cases.append(("mask of the wrong shape", ["-m", d_m2, "--batch", good, "--mask", shp]))
    cases.append(("missing model directory", ["-m", os.path.join(work, "nope"), "--batch", good]))
    cases.append(("missing batch file", ["-m", d_m2, "--batch", os.path.join(work, "nope.npy")]))
    cases.append(("--index-loss-weight on M2", ["-m", d_m2, "--batch", good,
                                                "--index-loss-weight", "1"]))
    cases.append(("negative --index-loss-weight", ["-m", d_m3, "--batch", good,
                                                   "--index-loss-weight", "-1"]))
    fp8 = os.path.join(work, "err_fp8")
    make_tiny(MMX[0], "minimax_m2", fp8, "fp8", 5)
    cases.append(("FP8 checkpoint (not trainable)", ["-m", fp8, "--batch", good]))
    for what, a in cases:
        r = run_grad(a + ["-o", os.path.join(work, "err_out.safetensors")])
        ck(r.returncode == 2 and "error" in r.stderr, f"exit 2 on bad input: {what}",
           r.stderr.strip().splitlines()[-1][:100] if r.stderr.strip() else f"rc={r.returncode}")
    # a tree mask through the CLI: --depth-positions == --positions (keys seen - 1);
    # the default is 0..T-1 == --positions 0..T-1
    mt = np.tril(np.ones((T, T), dtype=bool))
    mt[T // 2:, 2:T // 2] = False                       # rows >= T/2 skip keys 2..T/2-1
    mpath = os.path.join(work, "tree_mask.npy")
    np.save(mpath, mt)
    ppath = os.path.join(work, "tree_pos.npy")
    np.save(ppath, (mt.sum(-1) - 1).astype(np.int32))
    o1, o2 = os.path.join(work, "tm1.safetensors"), os.path.join(work, "tm2.safetensors")
    r1 = run_grad(["-m", d_m2, "--batch", good, "--mask", mpath, "--depth-positions", "-o", o1])
    r2 = run_grad(["-m", d_m2, "--batch", good, "--mask", mpath, "--positions", ppath, "-o", o2])
    ok = r1.returncode == 0 and r2.returncode == 0
    ck(ok and Checkpoint(o1).get_f64("loss")[0] == Checkpoint(o2).get_f64("loss")[0],
       "CLI --mask: --depth-positions == --positions (keys seen - 1)",
       (r1.stderr + r2.stderr).strip()[-200:])
    apath = os.path.join(work, "arange_pos.npy")
    np.save(apath, np.arange(T, dtype=np.int32))
    o3, o4 = os.path.join(work, "tm3.safetensors"), os.path.join(work, "tm4.safetensors")
    r3 = run_grad(["-m", d_m2, "--batch", good, "--mask", mpath, "-o", o3])
    r4 = run_grad(["-m", d_m2, "--batch", good, "--mask", mpath, "--positions", apath, "-o", o4])
    ok = r3.returncode == 0 and r4.returncode == 0
    l3 = Checkpoint(o3).get_f64("loss")[0] if ok else None
    ck(ok and l3 == Checkpoint(o4).get_f64("loss")[0] and l3 != Checkpoint(o1).get_f64("loss")[0],
       "CLI --mask: default positions == --positions 0..T-1 (and differ from depth here)",
       (r3.stderr + r4.stderr).strip()[-200:])


# --------------------------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description="self-checks of reference/torch_models.py")
    ap.add_argument("--mmx", default=os.path.join(ROOT, "build", "tools", "mmx"))
    ap.add_argument("--work", help="work directory (default: a temporary one, removed)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    if not (os.path.isfile(args.mmx) and os.access(args.mmx, os.X_OK)):
        print(f"torch_ref_selftest: mmx binary missing or not executable: {args.mmx}")
        return 2
    torch.set_num_threads(args.threads)
    MMX[0] = args.mmx
    work = args.work or tempfile.mkdtemp(prefix="torch_ref_selftest_")
    os.makedirs(work, exist_ok=True)
    ck = Checks()
    rng = np.random.default_rng(args.seed)
    dirs = {}
    try:
        for k, arch in enumerate(("minimax_m2", "minimax_text01", "minimax_m3")):
            print(f"== {arch}", flush=True)
            d = os.path.join(work, arch)
            make_tiny(args.mmx, arch, d, "f32", args.seed + k)
            dirs[arch] = d
            V = tm.load_model(d, F64).c.vocab
            ids = rng.integers(0, V, 40)                 # M3: 10 blocks of 4, top-3 -> sparse
            model, ref_model = check_forward(ck, arch, d, ids, "f32", work)
            dbf = os.path.join(work, arch + "_bf16")
            make_tiny(args.mmx, arch, dbf, "bf16", args.seed + 10 + k)
            check_forward(ck, arch, dbf, rng.integers(0, V, 40), "bf16", work)
            if arch == "minimax_text01":
                dhf = os.path.join(work, "text01_hf_bf16")
                make_tiny(args.mmx, arch, dhf, "bf16", args.seed + 20, ["--hf-keys"])
                check_forward(ck, arch, dhf, rng.integers(0, V, 40), "bf16 -hf keys", work)
                dm1 = os.path.join(work, "m1_f16")
                make_tiny(args.mmx, "minimax_m1", dm1, "f16", args.seed + 21)
                check_forward(ck, arch, dm1, rng.integers(0, V, 40), "M1 f16", work)
            if arch == "minimax_m3":
                kl_np = np_kl(ref_model, ids)
                T = len(ids)
                _, _, kl_t = tm.sequence_loss(model, torch.as_tensor(ids.astype(np.int64))[None],
                                              torch.as_tensor(np.roll(ids, -1).astype(np.int64))
                                              [None])
                ck.value(f"{arch}: indexer KL == explicit numpy loop (kl={kl_np:.6f})",
                         abs(float(kl_t) - kl_np) / abs(kl_np), 1e-10)

            # (b) finite differences on a [2, 25] batch whose second row ends in padding
            T = 24
            batch_np = rng.integers(0, V, (2, T + 1))
            batch_np[1, -3:] = -1
            batch = torch.as_tensor(batch_np.astype(np.int64))
            w = 0.5 if arch == "minimax_m3" else 0.0
            g0 = grads_of(model, batch, 0.0)
            names = fd_tensors(model, arch, g0)
            main_names = [n for n in names if ".index_" not in n]
            fd_check(ck, model, arch, batch, 0.0, main_names, g0, rng)
            if arch == "minimax_m3":
                gw = grads_of(model, batch, w)
                idx_names = [n for n in model.params if ".self_attn.index_" in n]
                fd_check(ck, model, arch, batch, w, idx_names, gw, rng,
                         tag=f" index_* with W={w}", dir_names=idx_names)
                diff = max(float((gw[n] - g0[n]).abs().max()) for n in model.params
                           if ".index_" not in n)
                ck(diff == 0.0, f"{arch}: non-indexer gradients independent of W "
                   "(indexer input and teacher detached)", f"max |diff| {diff:.1e}")
                ck(all(float(g0[n].abs().max()) == 0.0 for n in idx_names) and
                   all(float(gw[n].abs().max()) > 0.0 for n in idx_names),
                   f"{arch}: index_* gradients are 0 at W=0 and non-zero at W={w}")

            # (c) tree mask
            res = tree_case(model, arch, rng, w)
            ck(res.pop("positions are the depth"),
               f"{arch} tree: make_positions(depth=True) == depth")
            for name, val in res.items():
                ck.value(f"{arch} tree: {name}", val, 1e-10)

            check_cli(ck, arch, d, model, batch_np, work, w)
        print("== torch_grad.py input errors", flush=True)
        check_cli_errors(ck, dirs["minimax_m2"], dirs["minimax_m3"], work, 12)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(f"torch_ref_selftest: {len(ck.fails)} failed")
    for n in ck.fails:
        print(f"  FAILED: {n}")
    return 1 if ck.fails else 0


if __name__ == "__main__":
    sys.exit(main())
