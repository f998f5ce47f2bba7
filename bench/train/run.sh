#!/usr/bin/env bash
# Training throughput side by side: `mmx bench train` vs the PyTorch reference
# (bench/train/torch_train_bench.py: torch.optim.AdamW, float32) on the SAME checkpoint, batch and
# thread count, alternating rounds, medians. Also the fraction of the FMA peak our GEMMs reach.
#   bench/train/run.sh [ROUNDS]          (BUILD=build, THREADS=2, BATCH=16, SEQ=256)
# The model is the default's shape (docs/models.md: 4 layers, hidden 128, 8 experts of 256,
# top-2, vocab 4096), freshly initialised (make-tiny, f32): the speed does not depend on values.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
MMX=$BUILD/tools/mmx
ROUNDS=${1:-3}
THREADS=${THREADS:-2}
BATCH=${BATCH:-16}
SEQ=${SEQ:-256}
DIR=$BUILD/bench_train_model
[ -f "$DIR/model.safetensors" ] || $MMX make-tiny --arch minimax_m2 -o "$DIR" --dtype f32 --seed 1 --layers 4 \
  --hidden 128 --heads 4 --kv-heads 2 --head-dim 32 --rotary-dim 16 --experts 8 --top-k 2 --ffn 256 --vocab 4096 >/dev/null

ours=(); theirs=()
for r in $(seq "$ROUNDS"); do
  o=$($MMX bench train -m "$DIR" --batch "$BATCH" --seq-len "$SEQ" --steps 6 -t "$THREADS" --no-peak | sed -n 's/^mmx_tokens_per_s=//p')
  t=$(/usr/bin/python3 bench/train/torch_train_bench.py -m "$DIR" --batch "$BATCH" --seq-len "$SEQ" --steps 6 \
        --threads "$THREADS" 2>/dev/null | sed -n 's/^torch_tokens_per_s=//p')
  echo "round $r: mmx $o tok/s, torch $t tok/s"
  ours+=("$o"); theirs+=("$t")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mo=$(median "${ours[@]}"); mt=$(median "${theirs[@]}")
echo "median: mmx $mo tok/s, torch $mt tok/s, mmx / torch = $(awk -v a="$mo" -v b="$mt" 'BEGIN {printf "%.2f", a / b}')x"
echo "== GEMM share of the FMA peak (one more mmx run, with the peak measured in it)"
$MMX bench train -m "$DIR" --batch "$BATCH" --seq-len "$SEQ" --steps 6 -t "$THREADS" | grep -v '^mmx_tokens'
