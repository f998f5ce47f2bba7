#!/usr/bin/env bash
# Claude Code (`claude -p`, @anthropic-ai/claude-code from tests/npm/agents), unmodified, against
# `mmx serve`'s /v1/messages on a long-context random M2 (agents_lib.sh), through a logging proxy
# (anthropic_proxy.py) that records every request:
#   1. `claude -p "..." --output-format json` finishes with is_error false (its first request
#      carries context_management, output_config, thinking adaptive and a role "system" message);
#   2. the same with the proxy forcing the first request's tool_choice to {tool, Read} (harmless:
#      it reads a file): Claude Code runs Read, its tool_result comes back in the next request,
#      and the run ends with is_error false.
#   claude_code_test.sh MMX_BINARY BUILD_DIR
# Exit 77 = SKIPPED (Claude Code or node not installed and CI is not true).
set -uo pipefail
MMX=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
BUILD=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/agents_lib.sh"
agents_need "$BUILD" @anthropic-ai/claude-code "the Claude Code client test" || exit $?
CLAUDE="$BUILD/npm-agents/node_modules/.bin/claude"

TMP=$(mktemp -d)
PROXY_PID=""
trap 'serve_stop; [ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$TMP"' EXIT
agents_model "$MMX" "$TMP/model" || exit 1
serve_start "$MMX" "$TMP/serve.log" "$TMP/model" --api-key test-key --served-model-name tiny-m2 -t 2 || exit 1

fail() { echo "FAIL: $*"; echo "--- server log ---"; tail -30 "$TMP/serve.log"; exit 1; }

# run NAME [--force-tool TOOL]: one `claude -p` through a fresh proxy; its JSON in TMP/NAME.json,
# the requests in TMP/NAME.jsonl.
run() {
  local name=$1
  shift
  rm -f "$TMP/port"
  python3 "$HERE/anthropic_proxy.py" "$SERVE_PORT" "$TMP/$name.jsonl" "$TMP/port" "$@" &
  PROXY_PID=$!
  for _ in $(seq 1 50); do [ -s "$TMP/port" ] && break; sleep 0.1; done
  [ -s "$TMP/port" ] || fail "the proxy did not start"
  mkdir -p "$TMP/home-$name" "$TMP/work"
  (cd "$TMP/work" && HOME="$TMP/home-$name" ANTHROPIC_BASE_URL="http://127.0.0.1:$(cat "$TMP/port")" \
     ANTHROPIC_API_KEY=test-key CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 \
     DISABLE_AUTOUPDATER=1 CLAUDE_CODE_MAX_OUTPUT_TOKENS=256 \
     timeout 120 "$CLAUDE" -p "$PROMPT" --output-format json --model tiny-m2 --max-turns 3 \
     >"$TMP/$name.json" 2>"$TMP/$name.err")
  local rc=$?
  kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null; PROXY_PID=""
  echo "claude -p ($name): exit $rc, $(wc -l <"$TMP/$name.jsonl" 2>/dev/null || echo 0) requests"
}

mkdir -p "$TMP/work"
echo "hello from the test" >"$TMP/work/hello.txt"
PROMPT="Say hi."
run plain --short-answer
PROMPT="Read hello.txt and tell me what it says."
run forced --force-tool Read --short-answer

python3 - "$TMP" <<'PY' || fail "see above"
import json, sys
tmp = sys.argv[1]
ok = True
def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok &= bool(cond)
def load(name):
    reqs = [json.loads(l) for l in open(f"{tmp}/{name}.jsonl")] if __import__("os").path.exists(f"{tmp}/{name}.jsonl") else []
    try:
        out = json.load(open(f"{tmp}/{name}.json"))
    except Exception as e:
        out = {"is_error": True, "result": f"no JSON result ({e}): " + open(f"{tmp}/{name}.json").read()[:500] +
               open(f"{tmp}/{name}.err").read()[-500:]}
    return reqs, out
reqs, out = load("plain")
msgs = [r for r in reqs if r["path"].split("?")[0] == "/v1/messages"]
check(msgs, "plain: Claude Code sent /v1/messages")
for r in reqs:
    check(r["status"] == 200, f"plain: {r['path']} answered {r['status']} {r.get('error') or ''}")
if msgs:
    b = msgs[0]["body"]
    # What the first request carries (docs/api.md's table): if Claude Code stops sending one,
    # this says so rather than passing without testing it.
    for k in ("context_management", "output_config", "thinking"):
        check(k in b, f"plain: the first request has {k}: {json.dumps(b.get(k))}")
    check(any(m["role"] == "system" for m in b["messages"]), "plain: a role system message inside messages")
check(out.get("is_error") is False, f"plain: is_error false (result {json.dumps(out.get('result'))[:300]}, "
      f"subtype {out.get('subtype')}, api_error_status {out.get('api_error_status')})")
reqs, out = load("forced")
msgs = [r for r in reqs if r["path"].split("?")[0] == "/v1/messages"]
for r in reqs:
    check(r["status"] == 200, f"forced: {r['path']} answered {r['status']} {r.get('error') or ''}")
check(len(msgs) >= 2, f"forced: {len(msgs)} /v1/messages requests (a tool round trip needs 2)")
if len(msgs) >= 2:
    first = msgs[0]["body"]
    check(msgs[0]["sent"].get("tool_choice") == {"type": "tool", "name": "Read"}, "forced: the first request forced Read")
    later = msgs[1]["body"]["messages"]
    uses = [c for m in later if m["role"] == "assistant" and isinstance(m["content"], list)
            for c in m["content"] if c.get("type") == "tool_use"]
    results = [c for m in later if m["role"] == "user" and isinstance(m["content"], list)
               for c in m["content"] if c.get("type") == "tool_result"]
    check(uses and uses[0]["name"] == "Read", f"forced: the second request holds the Read tool_use: {json.dumps(uses)[:300]}")
    check(results and uses and results[0]["tool_use_id"] == uses[0]["id"],
          f"forced: ...and its tool_result: {json.dumps(results)[:300]}")
check(out.get("is_error") is False, f"forced: is_error false (result {json.dumps(out.get('result'))[:300]}, "
      f"subtype {out.get('subtype')}, num_turns {out.get('num_turns')})")
sys.exit(0 if ok else 1)
PY
serve_alive || fail "mmx serve died during the test"
echo "PASS"
