#!/usr/bin/env bash
# Installs the npm reference tools (tests/npm/package.json) into BUILD/npm, once.
# Exit 0 and a node_modules on success; without npm or on a failed install (an unreachable
# registry among the causes), prints why and exits 0 leaving BUILD/npm/UNAVAILABLE, so the rest of
# the suite still runs and every test that needs a package reports it: under CI=true a FAILURE
# naming the missing packages and this reason, elsewhere a SKIP (tests/npm/reference.js; never a pass).
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
  echo "npm_setup: npm not found; the npm reference and client tests will be SKIPPED (FAIL under CI=true)" >&2
  exit 0
fi
# A registry that cannot be reached at all (refused, no DNS, no route) is known in a second from a
# ping without retries; npm install would retry every package for ~13 minutes before failing.
if ping_out=$(cd "$DIR" && timeout 60 npm ping --fetch-retries=0 2>&1); [ $? -ne 0 ] &&
   grep -qE "E(CONNREFUSED|NOTFOUND|AI_AGAIN|TIMEDOUT|NETUNREACH|HOSTUNREACH)" <<<"$ping_out"; then
  printf '%s\n' "$ping_out" > "$DIR/npm-install.log"
  why=$(grep -m2 -E "npm (error|ERR!) (code |FetchError)" "$DIR/npm-install.log" | sed -E 's/^npm (error|ERR!) //' | tr '\n' ' ')
  echo "npm install failed (registry $(npm config get registry 2>/dev/null)): npm ping: $why" > "$DIR/UNAVAILABLE"
  echo "npm_setup: the npm registry is unreachable; the npm reference and client tests will be SKIPPED (FAIL under CI=true; see $DIR/npm-install.log)" >&2
  exit 0
fi
echo "npm_setup: installing reference tools into $DIR (once)"
if (cd "$DIR" && npm install --no-audit --no-fund --loglevel=error >npm-install.log 2>&1); then
  cp tests/npm/package.json "$DIR/.installed.json"
else
  # The error's code and cause (e.g. "code ECONNREFUSED ... request to http://... failed"), else its tail.
  why=$(grep -m2 -E "npm (error|ERR!) (code |FetchError)" "$DIR/npm-install.log" | sed -E 's/^npm (error|ERR!) //' | tr '\n' ' ')
  [ -n "$why" ] || why=$(tail -3 "$DIR/npm-install.log" | tr '\n' ' ')
  echo "npm install failed (registry $(npm config get registry 2>/dev/null)): $why" > "$DIR/UNAVAILABLE"
  echo "npm_setup: npm install failed; the npm reference and client tests will be SKIPPED (FAIL under CI=true; see $DIR/npm-install.log)" >&2
fi
exit 0
