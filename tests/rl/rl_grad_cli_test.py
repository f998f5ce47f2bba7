#!/usr/bin/env python3
"""mmx rl grad end to end (the stable contract of docs/rl.md) on fresh tiny checkpoints of the three
families: for every objective, --merge tree and --merge none write the same loss and gradients
(f64: 1e-10 relative per tensor; f32: 1e-5), f32 agrees with f64 (1e-3), the loss is finite and
not zero, and bad sample files are refused with a message naming the line and field (exit 1).

Usage: rl_grad_cli_test.py --mmx PATH --work DIR
"""
import argparse, json, os, random, shutil, struct, subprocess, sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F64", (k, v["dtype"])
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype="<f8").reshape(v["shape"])
    return out


def run(mmx, args, ok=True):
    p = subprocess.run([mmx] + args, capture_output=True, text=True)
    if ok and p.returncode != 0:
        sys.exit(f"FAIL: mmx {' '.join(args)}\n{p.stdout}\n{p.stderr}")
    return p


def samples(vocab, seed):
    """A group: one shared system prompt, two user turns, completions that share scored prefixes."""
    r = random.Random(seed)
    ids = lambda n: [r.randrange(vocab) for _ in range(n)]
    sys_p = ids(7)
    lines = []
    for u in range(2):
        prompt = sys_p + ids(3)
        shared = ids(3)
        for g in range(3):
            comp = shared[: r.randrange(1, 4)] + ids(r.randrange(1, 5))
            lines.append({"prompt": prompt, "completion": comp, "advantage": r.uniform(-1, 1),
                          "old_logprobs": [r.uniform(-7, -4) for _ in comp]})
    return lines


def rel(a, b):
    worst = 0.0
    for k in b:
        m = np.abs(b[k]).max()
        if m > 0:
            worst = max(worst, float(np.abs(a[k] - b[k]).max() / m))
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mmx", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    for arch in ["minimax_m2", "minimax_text01", "minimax_m3"]:
        model = os.path.join(a.work, arch)
        run(a.mmx, ["make-tiny", "--arch", arch, "-o", model, "--seed", "3", "--layers", "2" if arch != "minimax_m3" else "3"])
        cfg = json.load(open(os.path.join(model, "config.json")))
        vocab = cfg.get("vocab_size") or cfg["text_config"]["vocab_size"]
        sfile = os.path.join(a.work, f"{arch}.jsonl")
        with open(sfile, "w") as f:
            for s in samples(vocab, 5):
                f.write(json.dumps(s) + "\n")
        for obj in ["cispo", "ppo", "grpo", "dapo", "drgrpo"]:
            res = {}
            for merge in ["tree", "none"]:
                for dt in ["f64", "f32"]:
                    out = os.path.join(a.work, f"{arch}_{obj}_{merge}_{dt}.safetensors")
                    run(a.mmx, ["rl", "grad", "-m", model, "--samples", sfile, "--objective", obj, "--merge", merge,
                                "--dtype", dt, "-o", out])
                    res[merge, dt] = read_safetensors(out)
            L = res["tree", "f64"]["loss"][0]
            if not np.isfinite(L) or L == 0:
                sys.exit(f"FAIL {arch} {obj}: loss {L}")
            d64, d32 = rel(res["tree", "f64"], res["none", "f64"]), rel(res["tree", "f32"], res["none", "f32"])
            dty = rel(res["tree", "f32"], res["tree", "f64"])
            print(f"{arch} {obj}: loss {L:.6g}; tree vs none f64 {d64:.2g}, f32 {d32:.2g}; f32 vs f64 {dty:.2g}")
            if d64 > 1e-10 or d32 > 1e-5 or dty > 1e-3:
                sys.exit(f"FAIL {arch} {obj}: tree vs none f64 {d64}, f32 {d32}, f32 vs f64 {dty}")
    # Bad input: a clear error naming the line and the field, never a crash.
    model = os.path.join(a.work, "minimax_m2")
    good = {"prompt": [1, 2], "completion": [3], "advantage": 1.0, "old_logprobs": [-1.0]}
    bad = [({**good, "completion": []}, "completion"), ({**good, "old_logprobs": [-1.0, -2.0]}, "old_logprobs"),
           ({**good, "prompt": [10 ** 7]}, "vocabulary"), ({**good, "advantage": "x"}, "advantage"),
           ({**good, "temperature": 1}, "unknown field"), ("{not json", "not JSON")]
    for obj, want in bad:
        p = os.path.join(a.work, "bad.jsonl")
        with open(p, "w") as f:
            f.write(json.dumps(good) + "\n" + (obj if isinstance(obj, str) else json.dumps(obj)) + "\n")
        r = run(a.mmx, ["rl", "grad", "-m", model, "--samples", p, "-o", os.path.join(a.work, "x.st")], ok=False)
        if r.returncode != 1 or want not in r.stderr or "bad.jsonl:2" not in r.stderr:
            sys.exit(f"FAIL: bad sample ({want}) gave rc {r.returncode}: {r.stderr}")
    print("rl grad CLI: all objectives x families, tree == none; bad input refused")


if __name__ == "__main__":
    main()
