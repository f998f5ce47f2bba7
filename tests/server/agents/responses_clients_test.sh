#!/usr/bin/env bash
# The Responses API clients, unmodified, against `mmx serve` (POST /v1/responses):
#   codex exec (@openai/codex, a custom model provider with wire_api "responses") finishes a turn
#   and prints the model's reply; the Agents SDK and the AI SDK (responses_sdk_test.mjs).
#   responses_clients_test.sh MMX_BINARY BUILD_DIR
# The model is agents_lib.sh's long-context random M2. Codex gets a server with the
# minimax_m2_append_think parser, so the random model's words are its reply (with minimax_m2 they
# would all be reasoning: a random model never closes its think block); the SDKs get minimax_m2.
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
NPM="$BUILD/npm-agents"
RC=0

# ---- Codex ----
serve_start "$MMX" "$TMP/codex-serve.log" "$TMP/model" --api-key test-key --served-model-name tiny \
  --default-max-tokens 48 -t 2 --seed 1 --reasoning-format minimax_m2_append_think || exit 1
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
serve_alive || { echo "FAIL mmx serve died under codex"; RC=1; }
serve_stop

# ---- the Agents SDK and the AI SDK ----
serve_start "$MMX" "$TMP/sdk-serve.log" "$TMP/model" --api-key test-key --served-model-name tiny \
  --default-max-tokens 48 -t 2 --seed 1 || exit 1
MMX_BASE_URL="http://127.0.0.1:$SERVE_PORT/v1" MMX_API_KEY=test-key MMX_NPM_AGENTS="$(cd "$NPM" && pwd)" \
  node "$HERE/responses_sdk_test.mjs" || { RC=1; echo "--- server log ---"; tail -c 3000 "$TMP/sdk-serve.log"; }
serve_alive || { echo "FAIL mmx serve died under the SDKs"; RC=1; }
exit $RC
