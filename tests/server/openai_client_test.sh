#!/usr/bin/env bash
# The official `openai` npm client against `mmx serve` on a tiny M2 checkpoint.
#   openai_client_test.sh MMX_BINARY BUILD_DIR [SCRIPT.mjs] [MODEL_DIR]
# Starts the server on an ephemeral port (--port 0; the port is read from its log line), waits
# for /health, runs SCRIPT (default openai_client_test.mjs; MMX_BASE_URL, MMX_API_KEY, MMX_NPM in
# its environment), and stops the server. MODEL_DIR: serve that checkpoint instead of a fresh
# random tiny M2; arch:ARCH: a fresh random tiny of that architecture.
# Exit 77 = SKIPPED (an npm package or node is missing and CI is not true; under CI=true that is a
# failure naming what is missing: tests/npm/reference.js).
set -uo pipefail
MMX=$1
BUILD=$2
HERE=$(cd "$(dirname "$0")" && pwd)
SCRIPT=${3:-$HERE/openai_client_test.mjs}
MODEL=${4:-}
NPM="$BUILD/npm"
if ! command -v node >/dev/null 2>&1; then
  if [ "${CI:-}" = true ]; then echo "FAIL: node not found (under CI=true the openai client test is required)"; exit 1; fi
  echo "SKIPPED: node not found"; exit 77
fi
# Missing openai: under CI=true a failure naming it, else a skip (tests/npm/reference.js).
# MMX_NPM_NEEDS: more packages the script imports (e.g. ajv), checked in the same call.
PKGS=$(echo openai ${MMX_NPM_NEEDS:-} | tr -s ' ' ',')
node "$HERE/../npm/reference.js" "$NPM" "$PKGS" "the npm client test $(basename "$SCRIPT")" || exit $?

TMP=$(mktemp -d)
. "$HERE/serve_lib.sh"
trap 'serve_stop; rm -rf "$TMP"' EXIT

if [ -z "$MODEL" ] || [ "${MODEL#arch:}" != "$MODEL" ]; then  # "" or arch:ARCH: a fresh random tiny
  ARCH=${MODEL#arch:}
  "$MMX" make-tiny --arch "${ARCH:-minimax_m2}" -o "$TMP/tiny" --dtype f32 --seed 3 >/dev/null 2>&1 || exit 1
  MODEL="$TMP/tiny"
fi
serve_start "$MMX" "$TMP/serve.log" "$MODEL" --api-key test-key --served-model-name tiny-m2 \
  --drop-reasoning-over 0.3 -t 1 || exit 1

MMX_BASE_URL="http://127.0.0.1:$SERVE_PORT/v1" MMX_API_KEY=test-key MMX_NPM="$NPM" node "$SCRIPT"
RC=$?
if [ $RC -ne 0 ]; then echo "--- server log ---"; cat "$TMP/serve.log"; fi
# The server must still be alive after everything the client threw at it.
if ! serve_alive; then echo "mmx serve died during the test"; cat "$TMP/serve.log"; exit 1; fi
exit $RC
