#!/usr/bin/env bash
# The Responses API clients, unmodified, against `mmx serve` (POST /v1/responses):
#   codex exec (@openai/codex, a custom model provider with wire_api "responses") finishes a turn
#   and prints the model's reply; the Agents SDK and the AI SDK (responses_sdk_test.mjs).
#   responses_clients_test.sh MMX_BINARY BUILD_DIR
# The model is agents_lib.sh's long-context random M2, made to end its replies (below). Codex gets a server with the
# minimax_m2_append_think parser, so the random model's words are its reply (with minimax_m2 they
# would all be reasoning: a random model never closes its think block), and so does the Agents
# SDK; the AI SDK gets minimax_m2 (reasoning items, summaries, item_reference to them).
# Exit 77 = SKIPPED (node or a package missing, CI not true).
set -uo pipefail
MMX=$1
BUILD=$2
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/agents_lib.sh"
agents_need "$BUILD" "@openai/codex,@openai/agents,openai,ai,@ai-sdk/openai,zod" "the Responses API client test" || exit $?

TMP=$(mktemp -d)
trap 'serve_stop; rm -rf "$TMP"' EXIT
agents_model "$MMX" "$TMP/model" || exit 1
# A random model never writes its end-of-sequence token, so every reply would run into the token
# cap and end "incomplete" — which Codex and the Agents SDK rightly treat as a failed turn. This
# one ends its replies: embedding dimension 0 is a constant for every token (so the last hidden
# state's dimension 0 is positive) and the eos row of lm_head reads only that dimension, giving
# eos a steady probability per token (replies of ~5-50 tokens; deterministic under --seed).
/usr/bin/python3 - "$TMP/model" <<'PY' || { echo "could not bias the model's eos"; exit 1; }
import json, struct, sys
import numpy as np
d = sys.argv[1]
eos = json.load(open(d + "/config.json"))["eos_token_id"]
with open(d + "/model.safetensors", "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    raw = f.read(n)
    data = bytearray(f.read())
hdr = json.loads(raw)
def view(name):
    a, b = hdr[name]["data_offsets"]
    return np.frombuffer(memoryview(data)[a:b], dtype=np.float32).reshape(hdr[name]["shape"])
emb, head, g = view("model.embed_tokens.weight"), view("lm_head.weight"), view("model.norm.weight")
emb[:, 0] = np.sqrt(emb.shape[1] - 1) * emb[:, 1:].std()
g0 = max(abs(float(g[0])), 1e-3)
head[eos, :] = 0
head[eos, 0] = 1.3 / g0
# Nor does it write markup by itself (<think>, </think>, <minimax:tool_call>, role markers): a
# stray tool-call tag inside its words would turn a forced call's text into a broken block. A
# forced call still gets them: constrained decoding leaves them the only choice.
for t in json.load(open(d + "/tokenizer.json"))["added_tokens"]:
    if t["id"] != eos and t["id"] < head.shape[0]:
        head[t["id"], :] = 0
        head[t["id"], 0] = -8.0 / g0
with open(d + "/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", n) + raw + data)
PY
NPM=$(cd "$BUILD/npm-agents" && pwd)
RC=0

# ---- Codex ----
serve_start "$MMX" "$TMP/codex-serve.log" "$TMP/model" --api-key test-key --served-model-name tiny \
  --default-max-tokens 160 -t 2 --seed 1 --reasoning-format minimax_m2_append_think || exit 1
mkdir -p "$TMP/codex-home" "$TMP/work"
cat > "$TMP/codex-home/config.toml" <<TOML
model = "tiny"
model_provider = "mmx"
[model_providers.mmx]
name = "mmx"
base_url = "http://127.0.0.1:$SERVE_PORT/v1"
env_key = "MMX_TEST_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
TOML
T0=$(date +%s)
(cd "$TMP/work" && MMX_TEST_KEY=test-key CODEX_HOME="$TMP/codex-home" timeout 120 \
  "$NPM/node_modules/.bin/codex" exec --skip-git-repo-check -s read-only --color never \
  --output-last-message "$TMP/last.txt" "Say hello." </dev/null >"$TMP/codex.out" 2>"$TMP/codex.err")
CODEX_RC=$?
REPLY=$(head -c 200 "$TMP/last.txt" 2>/dev/null | head -1)
if [ $CODEX_RC -ne 0 ]; then
  echo "FAIL codex exec: exit $CODEX_RC"; RC=1
elif [ -z "$REPLY" ]; then
  echo "FAIL codex exec: no reply (--output-last-message is empty)"; RC=1
elif ! grep -qF -- "$REPLY" "$TMP/codex.out"; then
  echo "FAIL codex exec: the reply is not printed"; RC=1
else
  echo "ok   codex exec finished a turn in $(( $(date +%s) - T0 )) s and printed the reply"
fi
if [ $RC -ne 0 ]; then
  echo "--- codex stdout ---"; tail -c 3000 "$TMP/codex.out"; echo "--- codex stderr ---"; tail -c 3000 "$TMP/codex.err"
  echo "--- server log ---"; tail -c 3000 "$TMP/codex-serve.log"
fi
# ---- the Agents SDK (same server: its run ends on a turn with a message) ----
MMX_BASE_URL="http://127.0.0.1:$SERVE_PORT/v1" MMX_API_KEY=test-key MMX_NPM_AGENTS="$NPM" MMX_PART=agents \
  node "$HERE/responses_sdk_test.mjs" || { RC=1; echo "--- server log ---"; tail -c 3000 "$TMP/codex-serve.log"; }
serve_alive || { echo "FAIL mmx serve died under codex or the Agents SDK"; RC=1; }
serve_stop

# ---- the AI SDK (minimax_m2: reasoning items and summaries) ----
# (160: a forced call's shortest reply in this tokenizer is ~120 tokens.)
serve_start "$MMX" "$TMP/sdk-serve.log" "$TMP/model" --api-key test-key --served-model-name tiny \
  --default-max-tokens 160 -t 2 --seed 1 || exit 1
MMX_BASE_URL="http://127.0.0.1:$SERVE_PORT/v1" MMX_API_KEY=test-key MMX_NPM_AGENTS="$NPM" MMX_PART=aisdk \
  node "$HERE/responses_sdk_test.mjs" || { RC=1; echo "--- server log ---"; tail -c 3000 "$TMP/sdk-serve.log"; }
serve_alive || { echo "FAIL mmx serve died under the AI SDK"; RC=1; }
exit $RC
