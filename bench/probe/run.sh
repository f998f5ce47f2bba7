#!/usr/bin/env bash
# The synthetic long-range retrieval probe (docs/models.md, "Retrieval"): one small model per
# attention generation trained on `mmx train --task retrieval` (8 key-value pairs planted, queried
# after up to 96 filler ids in 128-id windows), then `mmx probe --synthetic` at distances inside and
# far beyond the trained window. Usage: bench/probe/run.sh [OUT_DIR] [STEPS] [RAW_DIR]
# Two trainings at a time, one thread each (~45 min on 2 cores at the default 8000 steps).
# RAW_DIR (optional): where the run's raw output is copied for committing beside its table
# (docs/data/): probe.csv, probe.txt, run.json (commit, date, steps, load, each model's held-out
# losses) and each model's train_log.csv thinned to every 10th step and the evaluations.
set -euo pipefail
OUT=${1:-runs/probe}
STEPS=${2:-8000}
RAW=${3:-}
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
MMX=${MMX:-build/tools/mmx}
mkdir -p "$OUT"
COMMON=(--task retrieval --task-pairs 8 --layers 2 --hidden 64 --heads 4 --kv-heads 2 --head-dim 16
        --rotary-dim 8 --experts 4 --top-k 2 --ffn 64 --max-pos 4096 --steps "$STEPS" --seq-len 128
        --batch 32 --lr 3e-3 --min-lr-ratio 0.5 --warmup 100 --eval-every 250 --eval-windows 64 --seed 1
        -t "${THREADS:-1}")
train() {  # name, extra flags...
  local name=$1; shift
  [ -f "$OUT/$name/model.safetensors" ] || "$MMX" train "${COMMON[@]}" "$@" -o "$OUT/$name" 2> "$OUT/$name.log"
}
echo "training 4 models (logs: $OUT/*.log) ..." >&2
train m2 --arch minimax_m2 &
train text01-hybrid --arch minimax_text01 --full-attn-interval 2 &
wait
train text01-linear --arch minimax_text01 --full-attn-interval 99 &
train m3 --arch minimax_m3 --dense-ffn 128 --shared-ffn 32 --index-dim 16 --msa-block 8 --msa-topk 4 --index-loss-weight 1 &
wait
"$MMX" probe --synthetic --pairs 8 --window 128 --n 100 --distances 0,32,64,96,224,480,992 \
  -m "$OUT/m2" -m "$OUT/text01-hybrid" -m "$OUT/text01-linear" -m "$OUT/m3" \
  --csv "$OUT/probe.csv" --plot "$OUT/probe.png" | tee "$OUT/probe.txt"

if [ -n "$RAW" ]; then
  mkdir -p "$RAW"
  cp "$OUT/probe.csv" "$OUT/probe.txt" "$RAW/"
  for m in m2 text01-hybrid text01-linear m3; do
    awk -F, 'NR == 1 || $1 % 10 == 0 || $5 >= 0' "$OUT/$m/train_log.csv" > "$RAW/$m-train_log.csv"
  done
  STEPS=$STEPS LOAD_BEFORE="$LOAD_BEFORE" OUT="$OUT" RAW="$RAW" COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown) \
  /usr/bin/python3 - <<'EOF'
import csv, json, os, time
out, raw = os.environ["OUT"], os.environ["RAW"]
models = {}
for m in ("m2", "text01-hybrid", "text01-linear", "m3"):
    rows = list(csv.DictReader(open(os.path.join(out, m, "train_log.csv"))))
    models[m] = {"held_out_loss": {r["step"]: float(r["val_loss"]) for r in rows if float(r["val_loss"]) >= 0},
                 "wall_s": round(sum(float(r["step_s"]) for r in rows), 1)}
meta = {"what": "bench/probe/run.sh", "commit": os.environ["COMMIT"], "date": time.strftime("%Y-%m-%d %H:%M"),
        "steps": int(os.environ["STEPS"]), "loadavg_before": os.environ["LOAD_BEFORE"],
        "loadavg_after": " ".join(open("/proc/loadavg").read().split()[:3]), "models": models}
json.dump(meta, open(os.path.join(raw, "run.json"), "w"), indent=1)
EOF
fi
