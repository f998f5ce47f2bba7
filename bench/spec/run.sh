#!/usr/bin/env bash
# Speculative decoding measured (mmx bench spec): the trained tiny M2 and, when present, the
# real-width M2 slice (docs/performance.md makes it: mmx make-tiny --m2-slice --experts 64).
#   bench/spec/run.sh [OUT_DIR] [SLICE_DIR]
# Writes OUT_DIR/{tiny,slice}.txt; the prompt is a Python source (json.dumps), whose repetitions
# the prompt-lookup drafter feeds on.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-bench/spec/results}
SLICE=${2:-/work/slices/m2s-fp8}
MMX=build/tools/mmx
mkdir -p "$OUT"
P=$(python3 -c "import inspect, json; print(inspect.getsource(json.dumps))" | head -c 2500)
echo "== tiny M2 (trained)"; "$MMX" bench spec -m models/m2-tiny -p "$P" -n 96 -r 5 -t 2 | tee "$OUT/tiny.txt"
if [ -d "$SLICE" ]; then  # a shorter prompt and run: its prefill is ~10 tokens/s on 2 cores
  P=$(python3 -c "import inspect, json; print(inspect.getsource(json.dumps))" | head -c 900)
  echo "== M2 slice (random weights, real widths)"
  "$MMX" bench spec -m "$SLICE" -p "$P" -n 24 -r 2 -c 128 -b 1,4 -t 2 | tee "$OUT/slice.txt"
fi
