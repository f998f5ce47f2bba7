#!/usr/bin/env bash
# Each family's tiny checkpoint ships its own chat template and serves the OpenAI chat route.
#   families_test.sh MMX_BINARY
# For minimax_m3 and minimax_text01 (and minimax_m2 as the control): `mmx make-tiny`, then
#   * the checkpoint's template is the family's own (data/chat_templates/minimax_{m3,m1,m2}.jinja,
#     compared byte for byte with tokenizer_config.json's chat_template) and every special token
#     that template writes is one token of the checkpoint's tokenizer;
#   * `mmx serve` answers /v1/chat/completions with 200 and an assistant message for a plain
#     conversation, for one with tools + an assistant tool call (string arguments, as OpenAI
#     clients send them) + its result, and (M3) with chat_template_kwargs thinking_mode;
# and the same for the committed trained models/{m3,text01,m2}-tiny.
set -uo pipefail
MMX=$1
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
TMP=$(mktemp -d)
. "$HERE/serve_lib.sh"
trap 'serve_stop; rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; [ -f "$TMP/serve.log" ] && { echo "--- server log ---"; cat "$TMP/serve.log"; }; exit 1; }

check_family() {  # ARCH TEMPLATE_FILE SPECIAL_TOKEN...: a fresh make-tiny checkpoint
  local arch=$1
  "$MMX" make-tiny --arch "$arch" -o "$TMP/$arch" --seed 1 >/dev/null 2>&1 || fail "make-tiny --arch $arch"
  check_dir "$TMP/$arch" "$@"
}

check_dir() {  # DIR ARCH TEMPLATE_FILE SPECIAL_TOKEN...
  local dir=$1 arch=$2 tmpl=$3
  shift 3
  python3 - "$dir/tokenizer_config.json" "$SRC/data/chat_templates/$tmpl" <<'PY' || fail "$arch: tokenizer_config.json chat_template is not $tmpl"
import json, sys
got = json.load(open(sys.argv[1], encoding="utf-8"))["chat_template"]
want = open(sys.argv[2], encoding="utf-8", newline="").read()
sys.exit(0 if got == want else 1)
PY
  for t in "$@"; do
    local ids
    ids=$("$MMX" tokenize -m "$dir" -p "$t" 2>&1) || fail "$arch: mmx tokenize '$t': $ids"
    [ "$(echo "$ids" | wc -w)" = 1 ] || fail "$arch: '$t' is not one token of the tiny tokenizer (ids: $ids)"
  done

  serve_check "$dir" "$arch"
}

serve_check() {  # DIR ARCH: mmx serve answers the chat route
  local dir=$1 arch=$2
  serve_start "$MMX" "$TMP/serve.log" "$dir" -t 1 || fail "$arch: mmx serve did not start"
  local port=$SERVE_PORT
  python3 - "$port" "$arch" <<'PY' || fail "$arch: chat completions"
import json, sys, time, urllib.request, urllib.error
port, arch = sys.argv[1], sys.argv[2]
base = f"http://127.0.0.1:{port}"
for _ in range(100):
    try:
        urllib.request.urlopen(base + "/health", timeout=2)
        break
    except Exception:
        time.sleep(0.1)
tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
bodies = [
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}]},
    {"tools": tools, "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21C"}]},
]
if arch == "minimax_m3":
    bodies.append({"chat_template_kwargs": {"thinking_mode": "enabled"},
                   "messages": [{"role": "user", "content": "Think first."}]})
for i, b in enumerate(bodies):
    b.update({"max_tokens": 6, "temperature": 0})
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(b).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, out = r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        print(f"{arch} body {i}: HTTP {e.code}: {e.read().decode()}")
        sys.exit(1)
    msg = out["choices"][0]["message"]
    ok = status == 200 and msg["role"] == "assistant" and out["usage"]["completion_tokens"] >= 1 \
        and out["usage"]["prompt_tokens"] > 0 and out["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls")
    print(f"{'ok  ' if ok else 'FAIL'} {arch} body {i}: HTTP {status}, prompt {out['usage']['prompt_tokens']} tokens, "
          f"finish {out['choices'][0]['finish_reason']}")
    if not ok:
        print(json.dumps(out))
        sys.exit(1)
PY
  serve_stop
}

check_family minimax_m3 minimax_m3.jinja ']~!b[' ']~b]' '[e~[' ']<]minimax[>[' '<mm:think>' '</mm:think>' ']<]image[>[' ']<]video[>['
check_family minimax_text01 minimax_m1.jinja '<begin_of_document>' '<beginning_of_sentence>' '<end_of_sentence>' '<think>' '</think>'
check_family minimax_m2 minimax_m2.jinja ']~!b[' ']~b]' '[e~[' '<think>' '</think>' '<minimax:tool_call>' '</minimax:tool_call>'
# The committed trained models too (trained with the M2 tokenizer, then given their family's
# tokens and template by `mmx family-tokens`; docs/models.md).
check_dir "$SRC/models/m3-tiny" minimax_m3 minimax_m3.jinja ']<]minimax[>[' '<mm:think>' '</mm:think>' '<think>'
check_dir "$SRC/models/text01-tiny" minimax_text01 minimax_m1.jinja '<begin_of_document>' '<beginning_of_sentence>' '<end_of_sentence>'
check_dir "$SRC/models/m2-tiny" minimax_m2 minimax_m2.jinja ']~!b[' '[e~[' '<think>' '<minimax:tool_call>'
echo "all families: their own template, its special tokens, and the OpenAI chat route answer"
