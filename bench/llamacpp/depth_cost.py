#!/usr/bin/env python3
"""What a long context costs our decode, measured in one run: `mmx bench model` at --ctx SHORT and
--ctx LONG on each file, alternating round by round (so the machine's drift hits both alike), medians
of the rounds, end to end and per op. mmx only (compare.sh --depth is the side by side with llama.cpp).

  bench/llamacpp/depth_cost.py [--short 512] [--long 8192] [--rounds 5] [--threads 2]
                               [--mmx build/tools/mmx] [--out rounds.json] FILE.gguf|DIR ...
  bench/llamacpp/depth_cost.py --from rounds.json      (the table again)
"""
import argparse
import json
import statistics
import subprocess
import sys


def run(a, path, ctx):
    cmd = [a.mmx, "bench", "model", "-m", path, "-t", str(a.threads), "-p", "16", "-n", str(a.gen),
           "-r", "1", "--ctx", str(ctx), "--kv-dtype", a.kv_dtype, "--no-peak", "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--short", type=int, default=512)
    ap.add_argument("--long", type=int, default=8192)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--kv-dtype", default="bf16")
    ap.add_argument("--mmx", default="build/tools/mmx")
    ap.add_argument("--out", help="every round as JSON")
    ap.add_argument("--from", dest="src", help="print the table of an earlier --out file instead of running")
    a = ap.parse_args()
    if not a.paths and not a.src:
        ap.error("give at least one FILE.gguf or DIR (or --from rounds.json)")
    res = {p: {a.short: [], a.long: []} for p in a.paths}
    if a.src:
        with open(a.src) as f:
            res = {p: {int(c): v for c, v in d.items()} for p, d in json.load(f)["rounds"].items()}
        a.rounds = len(next(iter(res.values()))[a.short])
    for r in range(0 if a.src else a.rounds):
        for p in a.paths:
            for c in (a.short, a.long):
                j = run(a, p, c)
                res[p][c].append(j)
                print(f"  round {r + 1}/{a.rounds} {p} ctx {c}: {j['decode_tok_s']:.2f} tok/s", file=sys.stderr)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"args": vars(a), "rounds": {p: {str(c): v for c, v in d.items()} for p, d in res.items()}}, f)
    med = statistics.median
    print(f"threads {a.threads}, gen {a.gen}, kv {a.kv_dtype}, rounds {a.rounds} (medians), mmx only\n")
    print(f"| file | decode t/s at {a.short} / {a.long} | {a.short} ÷ {a.long} | attention ms at {a.short} / {a.long} "
          f"| token ms at {a.short} / {a.long} (sum of ops) | by ops |")
    print("|---|---|---|---|---|---|")
    for p, d in res.items():
        tg = {c: med([j["decode_tok_s"] for j in d[c]]) for c in d}
        att = {c: med([j["decode_ms_per_tok"]["attention"] for j in d[c]]) for c in d}
        tok = {c: sum(med([j["decode_ms_per_tok"][k] for j in d[c]]) for k in d[c][0]["decode_ms_per_tok"]) for c in d}
        name = p.rstrip("/").split("/")[-1]
        print(f"| {name} | {tg[a.short]:.2f} / {tg[a.long]:.2f} | {tg[a.short] / tg[a.long]:.2f}× "
              f"| {att[a.short]:.2f} / {att[a.long]:.2f} | {tok[a.short]:.1f} / {tok[a.long]:.1f} "
              f"| {tok[a.long] / tok[a.short]:.2f}× |")


if __name__ == "__main__":
    main()
