#!/usr/bin/env bash
# Prefix-tree packing vs separate sequences for one RL training step (`mmx bench rl`: forward +
# CISPO loss + backward on the shipped tiny M2, float32): a sweep over the shared prompt P and the
# group size G at R = 256 own tokens per sample, then an agent trajectory of ~16K packed tokens.
#   bench/rl/run.sh [ROUNDS]     (BUILD=build, THREADS=2, OUT=bench/rl/results)
# Writes OUT/raw.jsonl (every round's timings), OUT/table.md (the table of docs/rl.md) and
# OUT/speedup.png (measured speed-up against the token-count bound G(P+R) / (P+G·R)).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
MMX=$BUILD/tools/mmx
ROUNDS=${1:-3}
THREADS=${THREADS:-2}
OUT=${OUT:-bench/rl/results}
MODEL=${MODEL:-models/m2-tiny}
mkdir -p "$OUT"
RAW=$OUT/raw.jsonl
: > "$RAW"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; threads $THREADS; model $MODEL"
for P in 512 2048; do
  for G in 2 4 8; do
    $MMX bench rl -m "$MODEL" --prompt "$P" --response 256 --group "$G" --rounds "$ROUNDS" -t "$THREADS" --json "$RAW" 2>/dev/null
  done
done
$MMX bench rl -m "$MODEL" --agent 16384 --rounds 1 -t "$THREADS" --json "$RAW" 2>/dev/null
/usr/bin/python3 - "$RAW" "$OUT" <<'PY'
import json, sys, os
raw, out = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(raw)]
with open(os.path.join(out, "table.md"), "w") as f:
    f.write("| P | R | G | tree s | separate s | plain s | speed-up | token bound | % of bound | vs plain |\n")
    f.write("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    for r in rows:
        if r["kind"] != "group":
            continue
        f.write(f"| {r['P']} | {r['R']} | {r['G']} | {r['tree_s']:.3f} | {r['separate_s']:.3f} | {r['plain_s']:.3f} | "
                f"{r['speedup']:.2f}x | {r['bound']:.2f}x | {100 * r['speedup'] / r['bound']:.0f}% | "
                f"{r['plain_s'] / r['tree_s']:.2f}x |\n")
    for r in rows:
        if r["kind"] == "agent":
            f.write(f"\nAgent trajectory: {r['samples']} samples, {r['rows']} packed rows (separately "
                    f"{r['separate_rows']}, bound {r['separate_rows'] / r['rows']:.1f}x): one step {r['step_s']:.1f} s, "
                    f"peak RSS {r['peak_rss_mib']:.0f} MiB.\n")
with open(os.path.join(out, "speedup.dat"), "w") as f:
    for r in rows:
        if r["kind"] == "group":
            f.write(f"{r['bound']:.4f} {r['speedup']:.4f} P={r['P']},G={r['G']}\n")
PY
cat "$OUT/table.md"
if command -v gnuplot >/dev/null; then
  gnuplot <<GP
set terminal pngcairo size 720,480
set output "$OUT/speedup.png"
set title "RL step: prefix tree vs separate sequences (tiny M2, $THREADS threads)"
set xlabel "token-count bound G(P+R)/(P+GR)"
set ylabel "measured speed-up"
set key left top
set grid
plot [1:5] [0:*] x title "the bound" lw 2 dt 2, 0.8*x title "80% of the bound" dt 3, \
     "$OUT/speedup.dat" using 1:2 with points pt 7 ps 1.5 title "measured", \
     "" using 1:2:3 with labels offset 0,1 notitle
GP
  echo "plot: $OUT/speedup.png"
fi
