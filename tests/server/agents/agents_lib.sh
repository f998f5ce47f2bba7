# Sourced by the agent-client tests (tests/server/agents/*.sh): the coding agents and agent SDKs
# of tests/npm/agents (BUILD/npm-agents) against a real `mmx serve` on loopback.
#   agents_need BUILD PKG[,PKG...] WHAT
#       exit 0 when every package is installed in BUILD/npm-agents; else SKIP (77) off CI and
#       FAIL (1) under CI=true, naming what is missing and why (tests/npm/reference.js)
#   agents_model MMX DIR
#       a long-context random M2 in DIR: models/m2-tiny's shapes, trained tokenizer and real chat
#       template, seeded random weights, max_position_embeddings 65536 (the agents' prompts are
#       15-30K tokens: a few seconds of prefill on two cores)
# serve_start / serve_alive / serve_stop come from ../serve_lib.sh (sourced here).
AGENTS_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
AGENTS_SRC=$(cd "$AGENTS_HERE/../../.." && pwd)
. "$AGENTS_HERE/../serve_lib.sh"

agents_need() {
  local build=$1 pkgs=$2 what=$3
  if ! command -v node >/dev/null 2>&1; then
    if [ "${CI:-}" = true ]; then echo "FAIL: node not found (under CI=true $what is required)"; return 1; fi
    echo "SKIPPED: node not found"; return 77
  fi
  node "$AGENTS_SRC/tests/npm/reference.js" "$build/npm-agents" "$pkgs" "$what"
}

agents_model() {
  local mmx=$1 dir=$2 src="$AGENTS_SRC/models/m2-tiny"
  "$mmx" make-tiny --arch minimax_m2 --dtype f32 --seed 3 -o "$dir" --layers 4 --hidden 128 --heads 4 \
    --kv-heads 2 --head-dim 32 --rotary-dim 16 --experts 8 --top-k 2 --ffn 256 --vocab 4096 \
    --max-pos 65536 >/dev/null 2>&1 || { echo "make-tiny failed"; return 1; }
  cp "$src/tokenizer.json" "$src/tokenizer_config.json" "$src/generation_config.json" "$dir/" || return 1
  # The special ids are the tokenizer's: take them from the trained checkpoint's config.
  /usr/bin/python3 - "$src/config.json" "$dir/config.json" <<'PY' || return 1
import json, sys
src, dst = (json.load(open(p)) for p in sys.argv[1:3])
for k in ("bos_token_id", "eos_token_id"):
    dst[k] = src[k]
json.dump(dst, open(sys.argv[2], "w"), indent=2)
PY
}
