#!/usr/bin/env bash
# The official `@anthropic-ai/sdk` npm client against `mmx serve` on a tiny M2 checkpoint: the
# server start-up, npm-reference rule and clean-up of openai_client_test.sh, with
# anthropic_client_test.mjs as the script.
#   anthropic_client_test.sh MMX_BINARY BUILD_DIR
# Exit 77 = SKIPPED (an npm package is not installed and CI is not true; under CI=true a failure:
# tests/npm/reference.js).
HERE=$(cd "$(dirname "$0")" && pwd)
MMX_NPM_NEEDS="@anthropic-ai/sdk ${MMX_NPM_NEEDS:-}" exec bash "$HERE/openai_client_test.sh" "$1" "$2" \
  "$HERE/anthropic_client_test.mjs"
