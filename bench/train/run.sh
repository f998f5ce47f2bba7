#!/usr/bin/env bash
# Training throughput side by side: `mmx bench train` vs the PyTorch reference
# (bench/train/torch_train_bench.py: torch.optim.AdamW, float32) on the SAME checkpoint, batch and
# thread count, alternating rounds, medians; and the fraction of the FMA peak our GEMMs reach —
# both from the same rounds: every mmx round measures its tokens/s, its GEMM GFLOP/s and the FP32
# FMA peak (`mmx bench train` prints all three), so the ratio and the "% of peak" share one run.
#   bench/train/run.sh [ROUNDS] [OUT.json]   (BUILD=build, THREADS=2, BATCH=16, SEQ=256)
# OUT.json (default $BUILD/bench_train.json) holds every round's raw numbers, the medians and the
# machine's state (commit, date, CPU, load average before the run): docs/training.md's table is
# read from such a file (docs/data/).
# The model is the default's shape (docs/models.md: 4 layers, hidden 128, 8 experts of 256,
# top-2, vocab 4096), freshly initialised (make-tiny, f32): the speed does not depend on values.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
MMX=$BUILD/tools/mmx
ROUNDS=${1:-3}
OUT=${2:-$BUILD/bench_train.json}
THREADS=${THREADS:-2}
BATCH=${BATCH:-16}
SEQ=${SEQ:-256}
DIR=$BUILD/bench_train_model
[ -f "$DIR/model.safetensors" ] || $MMX make-tiny --arch minimax_m2 -o "$DIR" --dtype f32 --seed 1 --layers 4 \
  --hidden 128 --heads 4 --kv-heads 2 --head-dim 32 --rotary-dim 16 --experts 8 --top-k 2 --ffn 256 --vocab 4096 >/dev/null

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
rounds=""
for r in $(seq "$ROUNDS"); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  m=$($MMX bench train -m "$DIR" --batch "$BATCH" --seq-len "$SEQ" --steps 6 -t "$THREADS")
  val() { printf '%s\n' "$m" | sed -n "s/^$1=//p"; }
  t=$(/usr/bin/python3 bench/train/torch_train_bench.py -m "$DIR" --batch "$BATCH" --seq-len "$SEQ" --steps 6 \
        --threads "$THREADS" 2>/dev/null | sed -n 's/^torch_tokens_per_s=//p')
  echo "round $r: mmx $(val mmx_tokens_per_s) tok/s (GEMMs $(val mmx_gemm_gflop_s) GFLOP/s, FMA peak" \
       "$(val mmx_fma_peak_gflop_s) GFLOP/s), torch $t tok/s"
  rounds+="{\"mmx_tokens_per_s\": $(val mmx_tokens_per_s), \"mmx_gemm_gflop_s\": $(val mmx_gemm_gflop_s),"
  rounds+=" \"mmx_gemm_gflop_per_step\": $(val mmx_gemm_gflop_per_step), \"fma_peak_gflop_s\": $(val mmx_fma_peak_gflop_s),"
  rounds+=" \"torch_tokens_per_s\": $t, \"loadavg_1min_at_start\": $load},"
done
ROUNDS_JSON="[${rounds%,}]" LOAD="$load_before" LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg) OUT="$OUT" THREADS="$THREADS" BATCH="$BATCH" SEQ="$SEQ" \
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown) /usr/bin/python3 - <<'EOF'
import json, os, platform, statistics, time
rounds = json.loads(os.environ["ROUNDS_JSON"])
med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0] if k != "loadavg_1min_at_start"}
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
out = {
    "what": "bench/train/run.sh: mmx bench train vs bench/train/torch_train_bench.py, alternating rounds",
    "commit": os.environ["COMMIT"], "date": time.strftime("%Y-%m-%d %H:%M"), "cpu": cpu, "nproc": os.cpu_count(),
    "loadavg_before": os.environ["LOAD"], "loadavg_after": os.environ["LOAD_AFTER"], "threads": int(os.environ["THREADS"]),
    "batch": int(os.environ["BATCH"]), "seq_len": int(os.environ["SEQ"]), "steps_timed": 6,
    "rounds": rounds, "median": med,
    "mmx_over_torch": round(med["mmx_tokens_per_s"] / med["torch_tokens_per_s"], 2),
    "gemm_share_of_fma_peak": round(med["mmx_gemm_gflop_s"] / med["fma_peak_gflop_s"], 3),
}
with open(os.environ["OUT"], "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
print(f"median: mmx {med['mmx_tokens_per_s']:.0f} tok/s, torch {med['torch_tokens_per_s']:.0f} tok/s, "
      f"mmx / torch = {out['mmx_over_torch']:.2f}x; GEMMs {med['mmx_gemm_gflop_s']:.1f} GFLOP/s = "
      f"{100 * out['gemm_share_of_fma_peak']:.0f} % of the {med['fma_peak_gflop_s']:.0f} GFLOP/s FMA peak "
      f"(medians of {len(rounds)} rounds) -> {os.environ['OUT']}")
EOF
