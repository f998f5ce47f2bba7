#!/usr/bin/env bash
# Tokenizer encode throughput (single thread), minimax.cpp vs HF tokenizers, same corpus, same run.
#   BUILD=build bash bench/tokenizer/run.sh [MB] [REPS]
# Needs the tok_driver target and the npm reference tools (bash scripts/npm_setup.sh $BUILD).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
[ -x "$BUILD/tests/tokenizer/tok_driver" ] || cmake --build "$BUILD" --target tok_driver
bash scripts/npm_setup.sh "$BUILD"
node bench/tokenizer/bench.js "$BUILD" "$BUILD/tests/tokenizer/tok_driver" "${1:-2}" "${2:-3}"
