#!/usr/bin/env bash
# Installs the npm packages the tests use into the build folder, once per version of their lists:
#   tests/npm/package.json                       -> BUILD/npm          reference tools and API clients
#   tests/npm/agents/package.json + package-lock -> BUILD/npm-agents   the coding agents and agent SDKs
#                                                                      (Claude Code, Codex, ...), pinned by the lock
# Exit 0 and a node_modules on success; without npm or on a failed install (an unreachable
# registry among the causes), prints why and exits 0 leaving DIR/UNAVAILABLE, so the rest of
# the suite still runs and every test that needs a package reports it: under CI=true a FAILURE
# naming the missing packages and this reason, elsewhere a SKIP (tests/npm/reference.js; never a pass).
set -uo pipefail
BUILD=${1:-build}

# install SRC_DIR DIR: SRC_DIR's package.json (and package-lock.json when there is one: `npm ci`)
# into DIR, unless DIR already holds exactly that list with every dependency present.
install() {
  local src=$1 dir=$2
  mkdir -p "$dir"
  cp "$src/package.json" "$dir/package.json"
  [ -f "$src/package-lock.json" ] && cp "$src/package-lock.json" "$dir/package-lock.json"
  local want
  want=$(cat "$src/package.json" "$src"/package-lock.json 2>/dev/null | cksum)
  if [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$want" ] &&
     command -v node >/dev/null 2>&1 &&
     node -e 'const p=require(process.argv[1]+"/package.json"),fs=require("fs");
              for (const d of Object.keys(p.dependencies||{}))
                if (!fs.existsSync(process.argv[1]+"/node_modules/"+d)) process.exit(1);' "$(cd "$dir" && pwd)"; then
    return 0
  fi
  rm -f "$dir/UNAVAILABLE" "$dir/.installed"
  if ! command -v npm >/dev/null 2>&1; then
    echo "npm not found" > "$dir/UNAVAILABLE"
    echo "npm_setup: npm not found; the tests needing $dir will be SKIPPED (FAIL under CI=true)" >&2
    return 0
  fi
  # A registry that cannot be reached at all (refused, no DNS, no route) is known in a second from a
  # ping without retries; npm install would retry every package for ~13 minutes before failing.
  local ping_out why
  if ping_out=$(cd "$dir" && timeout 60 npm ping --fetch-retries=0 2>&1); [ $? -ne 0 ] &&
     grep -qE "E(CONNREFUSED|NOTFOUND|AI_AGAIN|TIMEDOUT|NETUNREACH|HOSTUNREACH)" <<<"$ping_out"; then
    printf '%s\n' "$ping_out" > "$dir/npm-install.log"
    why=$(grep -m2 -E "npm (error|ERR!) (code |FetchError)" "$dir/npm-install.log" | sed -E 's/^npm (error|ERR!) //' | tr '\n' ' ')
    echo "npm install failed (registry $(npm config get registry 2>/dev/null)): npm ping: $why" > "$dir/UNAVAILABLE"
    echo "npm_setup: the npm registry is unreachable; the tests needing $dir will be SKIPPED (FAIL under CI=true; see $dir/npm-install.log)" >&2
    return 0
  fi
  local cmd=install
  [ -f "$dir/package-lock.json" ] && cmd=ci
  echo "npm_setup: npm $cmd of $src/package.json into $dir (once)"
  if (cd "$dir" && npm "$cmd" --no-audit --no-fund --loglevel=error >npm-install.log 2>&1); then
    echo "$want" > "$dir/.installed"
  else
    # The error's code and cause (e.g. "code ECONNREFUSED ... request to http://... failed"), else its tail.
    why=$(grep -m2 -E "npm (error|ERR!) (code |FetchError)" "$dir/npm-install.log" | sed -E 's/^npm (error|ERR!) //' | tr '\n' ' ')
    [ -n "$why" ] || why=$(tail -3 "$dir/npm-install.log" | tr '\n' ' ')
    echo "npm install failed (registry $(npm config get registry 2>/dev/null)): $why" > "$dir/UNAVAILABLE"
    echo "npm_setup: npm $cmd failed; the tests needing $dir will be SKIPPED (FAIL under CI=true; see $dir/npm-install.log)" >&2
  fi
}

install tests/npm "$BUILD/npm"
install tests/npm/agents "$BUILD/npm-agents"
exit 0
