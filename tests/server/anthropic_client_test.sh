#!/usr/bin/env bash
# The official `@anthropic-ai/sdk` npm client against `mmx serve` on a tiny M2 checkpoint: the
# server start-up, npm-reference rule and clean-up of openai_client_test.sh, with
# anthropic_client_test.mjs as the script.
#   anthropic_client_test.sh MMX_BINARY BUILD_DIR
# Exit 77 = SKIPPED (the npm package is not installed; tests/npm/reference.js says when that may
# skip and when it fails).
HERE=$(cd "$(dirname "$0")" && pwd)
MMX_NPM_NEEDS="@anthropic-ai/sdk ${MMX_NPM_NEEDS:-}" exec bash "$HERE/openai_client_test.sh" "$1" "$2" \
  "$HERE/anthropic_client_test.mjs"
