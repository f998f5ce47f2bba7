#!/usr/bin/env bash
# Serving side by side: llama-server and `mmx serve` on the same GGUF file under the same load
# (streaming clients, medians of alternating rounds; compare.py says what is measured).
# llama.cpp is NOT part of this project: build it yourself from its public source (target
# llama-server) and point LLAMA_CPP_DIR at the folder holding bin/llama-server.
#
#   LLAMA_CPP_DIR=~/llama.cpp/build bench/serving/compare.sh --gguf FILE.gguf [options]
#   options (compare.py --help): --clients 8 --requests 3 --prompt-tokens 200 --max-tokens 48
#          --threads 2 --parallel 8 --rounds 2 --mmx-args '--kv-dtype bf16' --out results.json
#          --variant 'NAME=ARGS' (one more mmx server per variant) --no-llama (tuning)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../llamacpp/need_llama_cpp.sh" llama-server
exec python3 "$here/compare.py" --llama-dir "$LLAMA_CPP_DIR" "$@"
