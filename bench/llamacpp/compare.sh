#!/usr/bin/env bash
# Side by side: llama.cpp's llama-bench and `mmx bench model` on the same GGUF files, at equal
# threads, prompt and generation lengths, alternating the two engines round by round; medians of
# the rounds. llama.cpp is NOT part of this project: build it yourself from its public source and
# point LLAMA_CPP_DIR at the folder holding bin/llama-bench (or build/bin/llama-bench).
#
#   LLAMA_CPP_DIR=~/llama.cpp/build bench/llamacpp/compare.sh [options] ENTRY...
#   ENTRY: FILE.gguf (both engines run it) or LABEL=LLAMA_FILE.gguf,MMX_PATH[,MMX_ARGS[,LLAMA_ARGS]]
#          (different inputs, e.g. our FP8 HF checkpoint beside llama.cpp's Q8_0 of the same
#          weights; MMX_ARGS are extra `mmx bench model` flags, e.g. "--lm-head-type q8_0" or
#          "--mmap"; LLAMA_ARGS extra llama-bench flags, e.g. "-mmp 0": its weights read into
#          memory instead of mapped, as ours are by default)
#   options (passed to compare.py): --threads 2 --prompt 512 --gen 32 --rounds 5 --depth 0
#          --mmx build/tools/mmx --out results.json --md table.md
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../llamacpp/need_llama_cpp.sh" llama-bench
exec python3 "$here/compare.py" --llama-dir "$LLAMA_CPP_DIR" "$@"
