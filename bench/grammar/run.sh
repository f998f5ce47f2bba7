#!/usr/bin/env bash
# Constraint-mask cost per token as a fraction of a decode step, in one invocation:
#   bench/grammar/run.sh MODEL [BUILD]
# MODEL: a checkpoint directory with a tokenizer.json (use a real-vocabulary one: the M2-shaped
# slice of docs/performance.md has the 200K MiniMax vocabulary). Measures the model's decode step
# (`mmx bench model`, median of 3) and then grammar_bench on the model's tokenizer with it.
# A slice with fewer layers than the real model decodes faster, so the fraction it reports is an
# upper bound of the real one.
set -euo pipefail
MODEL=${1:?usage: bench/grammar/run.sh MODEL [BUILD]}
BUILD=${2:-build}
cmake --build "$BUILD" --target mmx grammar_bench -j "$(nproc)" >/dev/null
JSON=$("$BUILD/tools/mmx" bench model -m "$MODEL" -p 16 -n 16 -r 3 -t "$(nproc)" --no-peak --json | tail -1)
STEP_MS=$(python3 -c 'import json,sys; print(1000.0 / json.loads(sys.argv[1])["decode_tok_s"])' "$JSON")
echo "decode step of $MODEL: ${STEP_MS} ms (median of 3, -t $(nproc))"
"$BUILD/bench/grammar/grammar_bench" --tokenizer "$MODEL" --decode-ms "$STEP_MS"
