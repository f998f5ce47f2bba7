#!/usr/bin/env bash
# The AI SDK's Anthropic provider (ai + @ai-sdk/anthropic from tests/npm/agents) against `mmx
# serve` on the agents' long-context random M2: ai_sdk_anthropic_test.mjs.
#   ai_sdk_anthropic_test.sh MMX_BINARY BUILD_DIR      (77 = SKIPPED, as agents_lib.sh says)
set -uo pipefail
MMX=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
BUILD=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/agents_lib.sh"
agents_need "$BUILD" ai,@ai-sdk/anthropic "the AI SDK Anthropic provider test" || exit $?
TMP=$(mktemp -d)
trap 'serve_stop; rm -rf "$TMP"' EXIT
agents_model "$MMX" "$TMP/model" || exit 1
serve_start "$MMX" "$TMP/serve.log" "$TMP/model" --api-key test-key --served-model-name tiny-m2 -t 2 || exit 1
MMX_BASE_URL="http://127.0.0.1:$SERVE_PORT/v1" MMX_API_KEY=test-key MMX_NPM_AGENTS="$BUILD/npm-agents" \
  node "$HERE/ai_sdk_anthropic_test.mjs"
RC=$?
if [ $RC -ne 0 ]; then echo "--- server log ---"; tail -30 "$TMP/serve.log"; fi
serve_alive || { echo "mmx serve died during the test"; exit 1; }
exit $RC
