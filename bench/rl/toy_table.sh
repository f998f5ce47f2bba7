#!/usr/bin/env bash
# The toy RL table of docs/rl.md: CISPO vs GRPO vs DAPO vs PPO-clip vs Dr.GRPO on the `rev` task
# (rl/task.h), SEEDS seeds each, the same rollout budget (STEPS steps x 8 prompts x G=8 samples,
# 8 tokens at most), from the warm-started model (docs/rl.md "Warm start": MODEL).
#   bench/rl/toy_table.sh [SEEDS]     (BUILD=build, MODEL=/work/task-model/m2-rev, OUT=bench/rl/results/toy)
# Writes OUT/<objective>_<seed>/rl_log.csv (kept: the raw numbers), OUT/table.md and
# OUT/reward_curves.png (mean training reward per step over the seeds, one line per objective).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
MMX=$BUILD/tools/mmx
SEEDS=${1:-5}
STEPS=${STEPS:-30}
MODEL=${MODEL:-/work/task-model/m2-rev}
OUT=${OUT:-bench/rl/results/toy}
RUNS=${RUNS:-/tmp/mmx_rl_toy}
mkdir -p "$OUT" "$RUNS"
[ -f "$MODEL/model.safetensors" ] || { echo "no warm-started model at $MODEL: see docs/rl.md \"Warm start\"" >&2; exit 1; }
for obj in cispo grpo dapo ppo drgrpo; do
  for seed in $(seq 1 "$SEEDS"); do
    cfg=$RUNS/${obj}_$seed.json
    cat > "$cfg" <<JSON
{"model": "$MODEL", "out": "$RUNS/${obj}_$seed", "task": {"kind": "rev"}, "objective": "$obj",
 "steps": $STEPS, "prompts_per_step": 8, "group": 8, "max_tokens": 8, "updates": 2, "lr": 1e-4,
 "seed": $seed, "eval_every": 10, "eval_items": 200, "threads": 2, "quiet": true}
JSON
    t0=$(date +%s.%N)
    line=$($MMX rl train --config "$cfg")
    t1=$(date +%s.%N)
    echo "$obj seed $seed: $line ($(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s)"
    mkdir -p "$OUT/${obj}_$seed"
    cp "$RUNS/${obj}_$seed/rl_log.csv" "$OUT/${obj}_$seed/"
    echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')" > "$OUT/${obj}_$seed/wall_s"
  done
done
/usr/bin/python3 - "$OUT" "$SEEDS" <<'PY'
import csv, math, os, sys
out, seeds = sys.argv[1], int(sys.argv[2])
T = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571, 7: 2.447, 8: 2.365, 9: 2.306, 10: 2.262}
def ci(v):
    m = sum(v) / len(v)
    if len(v) < 2: return m, float("nan")
    s = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1))
    return m, T.get(len(v), 1.96) * s / math.sqrt(len(v))
rows, curves = [], {}
for obj in ["cispo", "grpo", "dapo", "ppo", "drgrpo"]:
    before, after, tokens, wall, rew = [], [], [], [], []
    for seed in range(1, seeds + 1):
        d = os.path.join(out, f"{obj}_{seed}")
        r = list(csv.DictReader(open(os.path.join(d, "rl_log.csv"))))
        before.append(float(r[0]["eval_success"]))
        after.append(float(r[-1]["eval_success"]))
        tokens.append(sum(int(x["tokens"]) for x in r[1:]))
        wall.append(float(open(os.path.join(d, "wall_s")).read()))
        rew.append([float(x["reward_mean"]) for x in r[1:]])
    curves[obj] = [sum(c[i] for c in rew) / len(rew) for i in range(len(rew[0]))]
    mb, _ = ci(before); ma, ha = ci(after); md, hd = ci([a - b for a, b in zip(after, before)])
    rows.append((obj, mb, ma, ha, md, hd, sum(tokens) / len(tokens), sum(wall) / len(wall),
                 sum(curves[obj][-5:]) / 5))
with open(os.path.join(out, "table.md"), "w") as f:
    f.write(f"| objective | held-out success before | after (mean ± 95% CI, {seeds} seeds) | change | "
            "train reward, last 5 steps | scored tokens / run | wall s / run |\n|---|---:|---:|---:|---:|---:|---:|\n")
    for o, mb, ma, ha, md, hd, tk, w, lr in rows:
        f.write(f"| {o} | {100*mb:.1f}% | {100*ma:.1f}% ± {100*ha:.1f} | {100*md:+.1f} ± {100*hd:.1f} pts | "
                f"{lr:.3f} | {tk:.0f} | {w:.1f} |\n")
with open(os.path.join(out, "curves.dat"), "w") as f:
    n = len(next(iter(curves.values())))
    f.write("step " + " ".join(curves) + "\n")
    for i in range(n):
        f.write(f"{i + 1} " + " ".join(f"{curves[o][i]:.4f}" for o in curves) + "\n")
print(open(os.path.join(out, "table.md")).read())
PY
if command -v gnuplot >/dev/null; then
  gnuplot <<GP
set terminal pngcairo size 760,440
set output "$OUT/reward_curves.png"
set title "rev task, tiny M2: mean training reward per step ($SEEDS seeds)"
set xlabel "RL step"; set ylabel "reward (sampled success, T = 1)"; set grid; set key bottom right
plot for [i=2:6] "$OUT/curves.dat" using 1:i with lines lw 2 title columnheader(i)
GP
  echo "plot: $OUT/reward_curves.png"
fi
