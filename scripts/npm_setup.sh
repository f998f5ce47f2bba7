#!/usr/bin/env bash
# Installs the npm reference tools (tests/npm/package.json) into BUILD/npm, once.
# Exit 0 and a node_modules on success; on an unreachable registry, prints why and exits 0
# leaving BUILD/npm/UNAVAILABLE so the tests that need it SKIP with that message (never pass).
set -uo pipefail
BUILD=${1:-build}
DIR="$BUILD/npm"
mkdir -p "$DIR"
cp tests/npm/package.json "$DIR/package.json"
if [ -d "$DIR/node_modules/@anush008/tokenizers" ] && [ -d "$DIR/node_modules/@huggingface/jinja" ] \
   && [ -d "$DIR/node_modules/openai" ] && [ -d "$DIR/node_modules/ajv" ] \
   && [ -d "$DIR/node_modules/@anthropic-ai/sdk" ] && [ -d "$DIR/node_modules/puppeteer-core" ] \
   && cmp -s tests/npm/package.json "$DIR/.installed.json"; then
  exit 0
fi
rm -f "$DIR/UNAVAILABLE"
if ! command -v npm >/dev/null 2>&1; then
  echo "npm not found" > "$DIR/UNAVAILABLE"
  echo "npm_setup: npm not found; reference-parity tests will be SKIPPED" >&2
  exit 0
fi
echo "npm_setup: installing reference tools into $DIR (once)"
if (cd "$DIR" && npm install --no-audit --no-fund --loglevel=error >npm-install.log 2>&1); then
  cp tests/npm/package.json "$DIR/.installed.json"
else
  echo "npm install failed: $(tail -3 "$DIR/npm-install.log" | tr '\n' ' ')" > "$DIR/UNAVAILABLE"
  echo "npm_setup: npm install failed; reference-parity tests will be SKIPPED (see $DIR/npm-install.log)" >&2
fi
exit 0
