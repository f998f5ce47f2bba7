#!/usr/bin/env bash
# Runs one libFuzzer target for a while over its seeds and a corpus that grows between runs.
#   run_fuzz.sh NAME BINARY SECONDS WORKDIR
# NAME is safetensors | gguf | http | template | grammar. Exit 0: no finding; 1: a finding (the input that shows
# it is left in WORKDIR, named crash-*, oom-*, timeout-* or slow-*, and the log says how to
# replay it); 77: skipped (the binary was not built because clang is missing; a failure under CI=true).
set -uo pipefail
name=$1 bin=$2 secs=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ ! -x "$bin" ]; then
  echo "fuzz: $bin was not built (needs clang and libclang-rt-14-dev: scripts/setup.sh installs them)"
  [ "${CI:-}" = "true" ] && exit 1
  exit 77
fi
corpus=$work/corpus_$name seeds=$work/seeds_$name
mkdir -p "$corpus" "$seeds"
case $name in
  template)
    cp "$root"/tests/data/chat_templates/*.jinja "$root"/tests/data/minimax_m2_chat_template.jinja \
       "$root"/data/chat_templates/*.jinja "$seeds"/
    args=(-dict="$here/jinja.dict" -max_len=16384) ;;
  http)
    MMX_FUZZ_SEED_DIR=$seeds "$bin" -runs=0 "$seeds" >/dev/null 2>&1
    args=(-dict="$here/http.dict" -max_len=4096) ;;
  safetensors)
    MMX_FUZZ_SEED_DIR=$seeds "$bin" -runs=0 "$seeds" >/dev/null 2>&1
    args=(-dict="$here/safetensors.dict" -max_len=4096) ;;
  gguf)
    MMX_FUZZ_SEED_DIR=$seeds "$bin" -runs=0 "$seeds" >/dev/null 2>&1
    args=(-dict="$here/gguf.dict" -max_len=8192) ;;
  grammar)  # first byte even: GBNF; odd: a JSON Schema or a tools array (grammar_fuzz.cpp)
    printf '%s' '0root ::= expr
expr ::= term (("+" | "-") term)*
term ::= [0-9]+ | "(" expr ")" | [^\x00-\x1f]{1,3}' > "$seeds/arith"
    printf '%s' '0root ::= "a"{2,4} b? ([xyz] | "é")* b ::= "\u4e00" | .' > "$seeds/reps"
    printf '%s' '1{"type":"object","properties":{"a":{"type":"integer","minimum":-5,"maximum":120},"b":{"enum":["x",3,null]},"c":{"type":"array","items":{"$ref":"#"},"maxItems":2},"d":{"type":"string","maxLength":4}},"required":["a"]}' > "$seeds/schema"
    printf '%s' '1[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"s":{"type":"string"},"o":{"type":"object","properties":{"n":{"type":"number"}}},"l":{"type":"array","items":{"type":"boolean"}}},"required":["s"]}}}]' > "$seeds/tools"
    args=(-dict="$here/grammar.dict" -max_len=4096) ;;
  *) echo "fuzz: unknown target $name"; exit 2 ;;
esac
echo "fuzz: $name for $secs s (corpus $corpus)"
"$bin" "${args[@]}" -max_total_time="$secs" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "$corpus" "$seeds" 2>&1 | grep -v -E "^#[0-9]+\s+(NEW|REDUCE)|NEW_FUNC" | tail -40
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  echo "fuzz: FINDING in $name (exit $rc); replay: $bin $work/<crash|oom|timeout>-*"
  exit 1
fi
echo "fuzz: $name ran $secs s without a finding"
