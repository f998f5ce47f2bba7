#!/usr/bin/env bash
# The chat page (GET /) in headless Chromium, driven by npm puppeteer-core, against `mmx serve`
# on a fresh tiny M2 checkpoint started with --api-key.
#   chat_page_test.sh MMX_BINARY BUILD_DIR
# Writes BUILD_DIR/chat_page.png. Exit 77 = SKIPPED: Chromium missing off CI (scripts/setup.sh
# installs it, so under CI=true a missing Chromium is a failure), or puppeteer-core missing off CI
# (under CI=true a failure: tests/npm/reference.js).
set -uo pipefail
MMX=$1
BUILD=$2
HERE=$(cd "$(dirname "$0")" && pwd)
NPM="$BUILD/npm"
CHROMIUM=${MMX_CHROMIUM:-/usr/bin/chromium}
if ! command -v node >/dev/null 2>&1; then
  if [ "${CI:-}" = true ]; then echo "FAIL: node not found (under CI=true the chat page test is required)"; exit 1; fi
  echo "SKIPPED: node not found"; exit 77
fi
if [ ! -x "$CHROMIUM" ]; then
  if [ "${CI:-}" = true ]; then echo "FAIL: $CHROMIUM not found (scripts/setup.sh installs chromium)"; exit 1; fi
  echo "SKIPPED: $CHROMIUM not found (install it: scripts/setup.sh, or apt-get install chromium)"; exit 77
fi
node "$HERE/../npm/reference.js" "$NPM" puppeteer-core "the chat page test" || exit $?

TMP=$(mktemp -d)
. "$HERE/serve_lib.sh"
trap 'serve_stop; rm -rf "$TMP"' EXIT

"$MMX" make-tiny --arch minimax_m2 -o "$TMP/tiny" --dtype f32 --seed 5 >/dev/null 2>&1 || exit 1
serve_start "$MMX" "$TMP/serve.log" "$TMP/tiny" --api-key page-key --served-model-name tiny-m2 -t 1 || exit 1

MMX_BASE="http://127.0.0.1:$SERVE_PORT" MMX_API_KEY=page-key MMX_NPM="$NPM" MMX_CHROMIUM="$CHROMIUM" \
  MMX_SCREENSHOT="$BUILD/chat_page.png" HOME="$TMP" node "$HERE/chat_page_test.mjs"
RC=$?
if [ $RC -ne 0 ]; then echo "--- server log ---"; cat "$TMP/serve.log"; fi
if ! serve_alive; then echo "mmx serve died during the test"; cat "$TMP/serve.log"; exit 1; fi
exit $RC
