#!/usr/bin/env python3
"""The driver behind compare.sh (read its header). Per entry and round: one llama-bench run
(-r 1, its own warm-up) and one `mmx bench model` run (--reps 1 after its warm-up run), in
alternating order, so drifts of the machine hit both engines alike. Reports medians over rounds
of prefill (pp) and decode (tg) tokens/s, the ratio mmx / llama.cpp, and mmx's decode bandwidth as
a fraction of the read ceiling: the best read kernel of `mmx bench model`, measured in every mmx
round, and the best of those (a shared machine's bandwidth varies from minute to minute; the ceiling
is what it showed at its best during the comparison, so no figure can exceed it)."""
import argparse, json, os, shlex, statistics, subprocess, sys, time


def find_llama_bench(d):
    for rel in ("bin/llama-bench", "build/bin/llama-bench", "llama-bench"):
        p = os.path.join(d, rel)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    sys.exit(f"compare: no llama-bench under LLAMA_CPP_DIR={d} (looked in bin/, build/bin/, .)")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"compare: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout


def llama_round(exe, path, a, depth, extra):
    """tok/s of llama-bench's pp (prompt) and tg (gen) tests, one repetition each."""
    cmd = [exe, "-m", path, "-t", str(a.threads), "-r", "1", "-o", "json", "-d", str(depth)] + extra
    cmd += ["-p", str(a.prompt if depth == 0 else 0), "-n", str(a.gen)]
    out = json.loads(run(cmd))
    pp = [t["avg_ts"] for t in out if t["n_prompt"] > 0 and t["n_gen"] == 0]
    tg = [t["avg_ts"] for t in out if t["n_gen"] > 0 and t["n_prompt"] == 0]
    return (pp[0] if pp else None), tg[0]


def mmx_round(exe, path, a, depth, extra):
    cmd = [exe, "bench", "model", "-m", path, "-t", str(a.threads), "-r", "1", "--json",
           "-p", str(a.prompt if depth == 0 else 16), "-n", str(a.gen), "--kv-dtype", a.kv_dtype] + extra
    if depth > 0:
        cmd += ["--ctx", str(depth)]
    return json.loads(run(cmd).strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--llama-dir", required=True)
    ap.add_argument("--mmx", default="build/tools/mmx")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--depth", type=int, default=0, help="decode after this many context tokens (llama-bench -d)")
    ap.add_argument("--kv-dtype", default="bf16", choices=["f32", "bf16"])
    ap.add_argument("--out", help="write every run as JSON here")
    ap.add_argument("--md", help="append the markdown table rows here")
    ap.add_argument("entries", nargs="+")
    a = ap.parse_args()
    exe = find_llama_bench(a.llama_dir)
    if a.rounds < 5:
        print("compare: note: fewer than 5 rounds; the issue's tables use >= 5", file=sys.stderr)
    rows, everything = [], []
    ceiling = None
    for e in a.entries:
        extra, lextra = [], []
        if "=" in e:  # LABEL=LLAMA_FILE,MMX_PATH[,MMX_ARGS[,LLAMA_ARGS]]
            label, rest = e.split("=", 1)
            parts = rest.split(",", 3)
            lpath, mpath = parts[0], parts[1]
            extra = shlex.split(parts[2]) if len(parts) > 2 else []
            lextra = shlex.split(parts[3]) if len(parts) > 3 else []
        else:
            label, lpath, mpath = os.path.basename(e), e, e
        res = {"label": label, "llama": lpath, "mmx": mpath, "mmx_args": extra, "llama_args": lextra, "rounds": []}
        for r in range(a.rounds):
            order = ("llama", "mmx") if r % 2 == 0 else ("mmx", "llama")
            rec = {}
            for who in order:
                t0 = time.time()
                if who == "llama":
                    rec["llama_pp"], rec["llama_tg"] = llama_round(exe, lpath, a, a.depth, lextra)
                else:
                    j = mmx_round(a.mmx, mpath, a, a.depth, extra)
                    ceiling = max(ceiling or 0.0, j["bw_ceiling_gb_s"])
                    rec["mmx_pp"], rec["mmx_tg"] = j["prefill_tok_s"], j["decode_tok_s"]
                    rec["mmx_gb_s"] = j["decode_gb_s"]
                    rec["mmx_ms"] = j["decode_ms_per_tok"]
                    rec["rss_mb"] = j["rss_mb"]
                print(f"  {label} round {r + 1}/{a.rounds} {who}: {time.time() - t0:.0f} s", file=sys.stderr)
            res["rounds"].append(rec)
        everything.append(res)
        med = lambda k: statistics.median(x[k] for x in res["rounds"]) if res["rounds"][0].get(k) is not None else None
        lp, lt, mp, mt, gb = med("llama_pp"), med("llama_tg"), med("mmx_pp"), med("mmx_tg"), med("mmx_gb_s")
        ms = {k: statistics.median(x["mmx_ms"][k] for x in res["rounds"]) for k in res["rounds"][0]["mmx_ms"]}
        res["median"] = {"llama_pp": lp, "llama_tg": lt, "mmx_pp": mp, "mmx_tg": mt, "mmx_gb_s": gb, "mmx_ms": ms}
        rows.append((label, lp, lt, mp, mt, gb, ms))
    fmt = lambda v, d=1: "—" if v is None else f"{v:.{d}f}"
    ratio = lambda m, l: "—" if (m is None or l is None) else f"{m / l:.2f}×"
    head = (f"threads {a.threads}, prompt {a.prompt if a.depth == 0 else '—'}, gen {a.gen}, depth {a.depth}, "
            f"rounds {a.rounds} (medians), read ceiling {ceiling:.1f} GB/s (best read kernel, best of all rounds)\n\n"
            "| entry | llama.cpp pp / tg t/s | mmx pp / tg t/s | mmx ÷ llama.cpp pp / tg | mmx decode GB/s (% ceiling) | mmx decode ms/tok: attention / router / experts / lm_head / sampling / other |\n"
            "|---|---|---|---|---|---|\n")
    lines = []
    for label, lp, lt, mp, mt, gb, ms in rows:
        br = " / ".join(f"{ms[k]:.2f}" for k in ("attention", "router", "experts", "lm_head", "sampling", "other"))
        lines.append(f"| {label} | {fmt(lp)} / {fmt(lt, 2)} | {fmt(mp)} / {fmt(mt, 2)} | {ratio(mp, lp)} / {ratio(mt, lt)} "
                     f"| {gb:.1f} ({100 * gb / ceiling:.0f} %) | {br} |")
    table = head + "\n".join(lines) + "\n"
    print(table)
    if a.md:
        with open(a.md, "a") as f:
            f.write(table + "\n")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"args": vars(a), "ceiling_gb_s": ceiling, "entries": everything}, f, indent=1)


if __name__ == "__main__":
    main()
