"""Driver pieces shared by the three mmx-vs-numpy-reference parity checks
(m2_reference_check.py, text01_reference_check.py, m3_reference_check.py): running commands
with timeouts, reading float32 logits files, max-diff / KL comparisons, the greedy-divergence
diagnosis, the self-test bookkeeping, the fake-mmx plumbing, the reference CLI contract and the
exit-code contract (0 pass, 1 fail, 2 cannot run).
"""

import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"          # Debian python with numpy (the pyenv python3 has none)
sys.path.insert(0, os.path.join(ROOT, "reference"))
sys.path.insert(0, HERE)

GREEDY_PROMPT = "5,6,7"
GREEDY_N = 32
CMD_TIMEOUT = 300
REL_TOL = 1e-4                   # max|logit_mmx - logit_ref| / max|logit_ref| (see each check)


class CheckError(Exception):
    """mmx misbehaved (exit code 1)."""


class CannotRun(Exception):
    """The check cannot run at all (exit code 2)."""


def run(cmd, what, timeout=CMD_TIMEOUT):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise CannotRun(f"{what}: executable not found: {cmd[0]}") from None
    except PermissionError:
        raise CannotRun(f"{what}: not executable: {cmd[0]}") from None
    except subprocess.TimeoutExpired:
        raise CheckError(f"{what}: timed out after {timeout}s: {' '.join(cmd)}") from None
    if r.returncode != 0:
        tail = (r.stderr or "").strip().splitlines()[-8:]
        raise CheckError(f"{what}: exit code {r.returncode}: {' '.join(cmd)}\n    "
                         + "\n    ".join(tail))
    return r


def read_logits(path, n, vocab, what):
    if not os.path.isfile(path):
        raise CheckError(f"{what}: output file {path} was not written")
    size = os.path.getsize(path)
    if size != n * vocab * 4:
        raise CheckError(f"{what}: {path} has {size} bytes, expected {n}*{vocab}*4 = "
                         f"{n * vocab * 4} (float32 [n_ids, vocab])")
    a = np.fromfile(path, dtype="<f4").astype(np.float64).reshape(n, vocab)
    if not np.all(np.isfinite(a)):
        raise CheckError(f"{what}: non-finite logits in {path}")
    return a


def parse_id_line(stdout, n, what):
    lines = [ln for ln in stdout.strip().splitlines() if ln.strip()]
    if not lines:
        raise CheckError(f"{what}: printed nothing on stdout (expected {n} ids)")
    try:
        toks = [int(t) for t in lines[-1].split()]
    except ValueError:
        raise CheckError(f"{what}: last stdout line is not space-separated ids: {lines[-1]!r}") \
            from None
    if len(toks) != n:
        raise CheckError(f"{what}: got {len(toks)} ids, expected {n}: {lines[-1]!r}")
    return toks


def log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def mean_kl(ref, got):
    lp, lq = log_softmax(ref), log_softmax(got)
    return float(np.mean(np.sum(np.exp(lp) * (lp - lq), axis=-1)))


def compare(got, ref):
    """(max abs diff, max abs diff / max|ref|, mean KL(p_ref || p_got))."""
    absdiff = float(np.max(np.abs(got - ref)))
    return absdiff, absdiff / float(np.max(np.abs(ref))), mean_kl(ref, got)


def logits_help(mmx):
    """`mmx logits --help` text (empty if it cannot be run): which optional flags exist."""
    try:
        r = subprocess.run([mmx, "logits", "--help"], capture_output=True, text=True, timeout=60)
        return r.stdout + r.stderr
    except (OSError, subprocess.TimeoutExpired):
        return ""


def first_divergence(ref_toks, mmx_toks):
    return next(k for k in range(len(ref_toks)) if ref_toks[k] != mmx_toks[k])


def divergence_text(i, lg, ref_toks, mmx_toks):
    """How decisive the reference's argmax (logits lg) was at the first divergence i."""
    top2 = np.sort(lg)[-2:]
    other = mmx_toks[i]
    gap_other = lg[ref_toks[i]] - lg[other] if 0 <= other < lg.size else float("nan")
    return (f"first divergence at step {i}: ref {ref_toks[i]} vs mmx {other}; reference "
            f"top-1 minus top-2 logit = {top2[1] - top2[0]:.3e}, ref logit gap to mmx's choice "
            f"= {gap_other:.3e}")


def greedy_diagnosis(model_cls, model_dir, prompt, ref_toks, mmx_toks):
    """Where the sequences diverge, how decisive was the reference's argmax?"""
    i = first_divergence(ref_toks, mmx_toks)
    m = model_cls.from_dir(model_dir)
    lg = m.forward(list(prompt) + ref_toks[:i])[-1]
    return (divergence_text(i, lg, ref_toks, mmx_toks)
            + " (a gap ~1e-6 would mean a genuine near-tie)")


def run_cases(name, items, check_one, error_row, results, out):
    """results += check_one(item) per item; a CheckError becomes error_row(item, message);
    CannotRun stops with exit code 2 (returned), otherwise None."""
    for item in items:
        try:
            results.append(check_one(item))
        except CannotRun as e:
            out(f"{name}: cannot run: {e}")
            return 2
        except CheckError as e:
            results.append(error_row(item, str(e)))
    return None


def prepare_check(name, mmx, ref, workdir, out):
    """Usage / binary / reference checks and the work directory of run_check.
    Returns an exit code (2) or (absolute mmx, work dir, whether work is a temp dir)."""
    if mmx is None:
        out(f"{name}: --mmx PATH is required (or use --self-test)")
        return 2
    if not (os.path.isfile(mmx) and os.access(mmx, os.X_OK)):
        out(f"{name}: FAIL: mmx binary missing or not executable: {mmx}")
        return 2
    if not os.path.isfile(ref):
        out(f"{name}: FAIL: reference not found at {ref}")
        return 2
    mmx = os.path.abspath(mmx)
    own_tmp = workdir is None
    prefix = name.split("_")[0] + "check_"
    work = tempfile.mkdtemp(prefix=prefix) if own_tmp else os.path.abspath(workdir)
    os.makedirs(work, exist_ok=True)
    return mmx, work, own_tmp


def finish_check(results, key, work, own_tmp, out):
    """The per-result `why` lines, the verdict, temp-dir cleanup; returns the exit code."""
    for r in results:
        for w in r["why"]:
            out(f"  [{r[key]}] {w}")
    ok = bool(results) and all(r["ok"] for r in results)
    out("ALL PASS" if ok else "FAILED")
    if own_tmp and ok:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


# =============================================================================================
# self-test bookkeeping


class SelfTest:
    def __init__(self, work):
        self.work = work
        self.n_ok = 0
        self.failures = []

    def check(self, cond, name, detail=""):
        if cond:
            self.n_ok += 1
            print(f"  ok    {name}" + (f"  ({detail})" if detail else ""))
        else:
            self.failures.append(name)
            print(f"  FAIL  {name}" + (f"  ({detail})" if detail else ""))

    def close(self, name, a, b, tol):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            self.check(False, name, f"shape {a.shape} vs {b.shape}")
            return
        err = float(np.max(np.abs(a - b))) if a.size else 0.0
        scale = max(float(np.max(np.abs(b))) if b.size else 0.0, 1e-300)
        self.check(err <= tol * scale, name, f"max err {err:.2e}, rel {err / scale:.2e}")


def self_test(prefix, sections, workdir=None):
    """Runs every section fn(t) (a crash is one failure); returns the exit code."""
    own = workdir is None
    work = tempfile.mkdtemp(prefix=prefix) if own else os.path.abspath(workdir)
    os.makedirs(work, exist_ok=True)
    t = SelfTest(work)
    for fn in sections:
        try:
            fn(t)
        except Exception as e:  # a crash in a section is a failure, keep going
            import traceback
            traceback.print_exc()
            t.check(False, f"{fn.__name__} raised {type(e).__name__}: {e}")
    print(f"self-test: {t.n_ok} ok, {len(t.failures)} failed")
    for f in t.failures:
        print(f"  FAILED: {f}")
    if own and not t.failures:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"workdir kept: {work}")
    return 0 if not t.failures else 1


def st_reference_selftest(t, ref):
    name = os.path.basename(ref)
    print(f"reference closed-form self-test (reference/{name} --self-test)")
    r = subprocess.run([PY, ref, "--self-test"], capture_output=True, text=True)
    t.check(r.returncode == 0, f"{name} --self-test passes",
            (r.stdout.strip().splitlines() or [""])[-1])


def check_cache_consistency(t, m, ids, cuts, what, cache_what, greedy_n):
    """prefill == token by token == chunked prefill (cut at `cuts`) through the cache, causal
    prefix logits, cached greedy == greedy recomputed from scratch."""
    full = m.forward(ids)
    cache = m.new_cache()
    steps = np.concatenate([m.forward([i], cache) for i in ids])
    t.close(f"{what}: prefill == token-by-token with {cache_what}", steps, full, 1e-12)
    cache = m.new_cache()
    bounds = [0, *cuts, len(ids)]
    chunks = np.concatenate([m.forward(ids[a:b], cache) for a, b in zip(bounds, bounds[1:])])
    sizes = "+".join(str(b - a) for a, b in zip(bounds, bounds[1:]))
    t.close(f"{what}: prefill == chunked prefill {sizes}", chunks, full, 1e-12)
    # causality: logits of a prefix do not depend on what follows
    t.close(f"{what}: causal (prefix logits unchanged by later tokens)",
            m.forward(ids[:9]), full[:9], 1e-12)
    g = m.greedy(ids[:3], greedy_n)
    seq = list(ids[:3])
    for _ in range(greedy_n):
        seq.append(int(np.argmax(m.forward(seq)[-1])))
    t.check(g == seq[3:], f"{what}: cached greedy == recompute-from-scratch greedy")
    return full


# ---- the reference CLI contract


def cli_logits(t, ref, d, ids, o, extra=()):
    """`REF -m d --ids IDS -o o --dump-dir work/cli_dump [extra]` must exit 0."""
    r = subprocess.run([PY, ref, "-m", d, "--ids", ",".join(map(str, ids)), "-o", o,
                        "--dump-dir", os.path.join(t.work, "cli_dump"), *extra],
                       capture_output=True, text=True)
    t.check(r.returncode == 0, "-o exits 0", r.stderr.strip()[-200:])
    return r


def cli_check_values(t, o, ids, ref_logits, vocab=512):
    got = np.fromfile(o, "<f4")
    t.check(got.size == len(ids) * vocab, "-o writes float32 [n_ids, vocab]",
            f"{got.size} floats")
    t.close("-o values == forward() rounded to f32", got.reshape(len(ids), vocab), ref_logits,
            1e-7)
    return sorted(os.listdir(os.path.join(t.work, "cli_dump")))


def cli_greedy_and_errors(t, ref, d, m, o):
    """--greedy output == m.greedy(); bad --ids -> exit 2; missing model dir -> exit 1."""
    r = subprocess.run([PY, ref, "-m", d, "--ids", "5,6,7", "--greedy", "12"],
                       capture_output=True, text=True)
    lines = r.stdout.strip().splitlines()
    t.check(r.returncode == 0 and len(lines) == 1 and
            [int(x) for x in lines[0].split()] == m.greedy([5, 6, 7], 12),
            "--greedy prints N ids on one line == greedy()", lines[0] if lines else "")
    for bad in ("5,512", "-1", "1,x,3", ""):
        r = subprocess.run([PY, ref, "-m", d, "--ids", bad, "-o", o],
                           capture_output=True, text=True)
        t.check(r.returncode == 2 and "error" in r.stderr, f"--ids {bad!r} -> exit 2",
                r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "")
    r = subprocess.run([PY, ref, "-m", os.path.join(t.work, "nonexistent"), "--ids", "1",
                        "-o", o], capture_output=True, text=True)
    t.check(r.returncode == 1 and "config.json" in r.stderr, "missing model dir -> exit 1",
            r.stderr.strip())


# =============================================================================================
# fake mmx plumbing


def write_fake_mmx(t, script):
    """work/fake-mmx: a shell wrapper running `script --fake-mmx ARGS`; MMX_FAKE_BREAK unset."""
    fake = os.path.join(t.work, "fake-mmx")
    with open(fake, "w") as f:
        f.write(f"#!/bin/sh\nexec {PY} {os.path.abspath(script)} --fake-mmx \"$@\"\n")
    os.chmod(fake, 0o755)
    os.environ.pop("MMX_FAKE_BREAK", None)
    return fake


def st_exit_codes(t, run_check):
    """A missing mmx binary -> exit 2; an mmx that crashes -> exit 1."""
    os.environ.pop("MMX_FAKE_BREAK", None)
    rc = run_check(os.path.join(t.work, "no-such-mmx"), os.path.join(t.work, "pipe_missing"),
                   quiet=True)
    t.check(rc == 2, "missing mmx binary -> exit 2", f"rc={rc}")
    failing = os.path.join(t.work, "failing-mmx")
    with open(failing, "w") as f:
        f.write("#!/bin/sh\necho 'boom' >&2\nexit 3\n")
    os.chmod(failing, 0o755)
    rc = run_check(failing, os.path.join(t.work, "pipe_failing"), quiet=True)
    t.check(rc == 1, "crashing mmx -> exit 1", f"rc={rc}")


def fake_mmx_parser(logits_description=None):
    """argparse for the fake engine: make-tiny (--arch -o --dtype --seed), logits (-m --ids -o),
    generate (-m --ids -n --temp --ignore-eos --kv-dtype). Returns (parser, make-tiny sub, logits sub)
    for the family-specific options."""
    import argparse
    ap = argparse.ArgumentParser(prog="fake-mmx")
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("make-tiny")
    a.add_argument("--arch", required=True)
    a.add_argument("-o", required=True)
    a.add_argument("--dtype", required=True)
    a.add_argument("--seed", type=int, required=True)
    b = sub.add_parser("logits", description=logits_description)
    b.add_argument("-m", required=True)
    b.add_argument("--ids", required=True)
    b.add_argument("-o", required=True)
    c = sub.add_parser("generate")
    c.add_argument("-m", required=True)
    c.add_argument("--ids", required=True)
    c.add_argument("-n", type=int, required=True)
    c.add_argument("--temp", type=float, default=1.0)
    c.add_argument("--ignore-eos", action="store_true")
    c.add_argument("--kv-dtype", default="bf16", choices=["f32", "bf16"])  # the fake's K/V are exact either way
    return ap, a, b


def fake_write_logits(lg, mode, path):
    if mode == "noise":    # 1e-3 relative perturbation: must be caught by the 1e-4 tolerance
        lg = lg + 1e-3 * np.abs(lg).max() * np.random.default_rng(0).standard_normal(lg.shape)
    lg.astype("<f4").tofile(path)


def main(argv, description, fake_mmx, self_test_fn, run_check):
    if argv[:1] == ["--fake-mmx"]:
        return fake_mmx(argv[1:])
    import argparse
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--mmx", help="path to the mmx binary")
    ap.add_argument("--workdir", help="where to put checkpoints/outputs (default: temp dir, "
                    "removed on success)")
    ap.add_argument("--self-test", action="store_true",
                    help="validate the reference and this script without the C++ engine")
    args = ap.parse_args(argv)
    if args.self_test:
        return self_test_fn(args.workdir)
    return run_check(args.mmx, args.workdir)
