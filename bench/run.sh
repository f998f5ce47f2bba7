#!/usr/bin/env bash
# Benchmarks for the README performance table. Run via `make bench` (builds first).
#   - machine limits: STREAM-like read/copy bandwidth, FP32 FMA peak (mmx bench peak)
#   - tiny M2 (bf16, the `make run` model): prefill / decode tok/s
#   - M2-shaped slice: real M2 widths (hidden 3072, 48/8 heads, 256 experts x 1536, top-8,
#     vocab 200064), 2 layers, fp8 128x128 (~9.8 GB on disk; created once under models/)
#   - the naive fp64 reference ops on the tiny model, as the side-by-side baseline
# Every number is a median of repeated runs; nothing is asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MMX=$BUILD/tools/mmx
REPS=${REPS:-5}

[ -f models/tiny-m2/model.safetensors ] || $MMX make-tiny --arch minimax_m2 -o models/tiny-m2 --dtype bf16 --seed 1
if [ ! -f models/m2-slice/model.safetensors ]; then
  echo "creating the M2-shaped slice (~9.8 GB, a few minutes) in models/m2-slice"
  $MMX make-tiny -o models/m2-slice --m2-slice --layers 2 --seed 1
fi

echo "== machine"
$MMX bench peak
echo
echo "== tiny M2 (bf16), fast ops"
$MMX bench model -m models/tiny-m2 -p 128 -n 64 -r "$REPS" --no-peak
echo
echo "== tiny M2 (bf16), naive fp64 reference ops (baseline)"
MMX_OPS=ref $MMX bench model -m models/tiny-m2 -p 128 -n 64 -r "$REPS" --no-peak
echo
echo "== M2-shaped slice (2 layers, fp8), prompt 64"
$MMX bench model -m models/m2-slice -p 64 -n 16 -r "$REPS"
echo
echo "== M2-shaped slice (2 layers, fp8), prompt 512"
$MMX bench model -m models/m2-slice -p 512 -n 16 -r 3 --no-peak
echo
echo "== continuous batching: 8 sequences decoding in one fused forward vs one forward each"
$MMX bench batch -m models/tiny-m2 -r "$REPS"
$MMX bench batch -m models/m2-slice -r 3 -n 8

# ---- tokenizer (bench/tokenizer) ----
echo
echo "== tokenizer encode, single thread: minimax.cpp vs HF tokenizers (same corpus, same run)"
BUILD=$BUILD bash bench/tokenizer/run.sh 2 "$REPS"

# ---- MSA ops (bench/msa) ----
echo
echo "== MSA (M3 sparse attention core): decode / chunked prefill vs dense paged attention, indexer recall"
$BUILD/bench/msa/msa_bench "$REPS"

# ---- lightning attention (bench/lightning) ----
echo
echo "== lightning vs softmax attention core, one MiniMax-Text-01 layer (64 heads x 128): decode vs context, prefill, cache memory"
$BUILD/bench/lightning/lightning_bench --reps "$REPS"

# ---- serving load test (bench/serving) ----
echo
echo "== mmx serve under load: 64 streaming clients x 256 chat requests (tiny M2), TTFT / ITL percentiles, /metrics leak check, prefix-cache cold/warm TTFT"
for t in 0 1; do
  $BUILD/bench/serving/load_bench --mmx "$MMX" -m models/tiny-m2 --clients 64 --requests 256 --max-tokens 32 --pairs 5 \
    --timeout-s 300 --serve-args "-t $t"
done

# ---- sampling (bench/sampler) ----
echo
echo "== sampling one token over a 200K vocabulary: the Sampler vs the fp64 full-sort reference (same run)"
$BUILD/bench/sampler/sampler_bench --reps 200
