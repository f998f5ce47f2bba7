#!/usr/bin/env bash
# CLI smoke test: every subcommand has --help; bad input gives "error: ..." and exit 1 (never a
# crash); inspect on the real M2 config prints the published-scale parameter counts.
# usage: cli_test.sh MMX_BINARY SOURCE_DIR WORK_DIR
set -u
MMX=$1; SRC=$2; W=$3
rm -rf "$W"; mkdir -p "$W"
fails=0
check() {  # check NAME EXPECTED_RC GREP_PATTERN -- CMD...
  local name=$1 want=$2 pat=$3; shift 4
  "$@" >"$W/out" 2>&1; local rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -q -- "$pat" "$W/out"; then
    echo "FAIL $name: rc=$rc (want $want), pattern '$pat' in:"; sed 's/^/    /' "$W/out" | head -5
    fails=$((fails + 1))
  else
    echo "ok   $name"
  fi
}
for sub in generate logits make-tiny inspect bench tokenize detokenize chat-template; do
  check "$sub --help" 0 "Usage" -- "$MMX" $sub --help
done
check "inspect real M2 config" 0 "total             228.690 B" -- "$MMX" inspect -m "$SRC/tests/data/minimax_m2_config"
check "inspect active" 0 "9.801 B without embedding" -- "$MMX" inspect -m "$SRC/tests/data/minimax_m2_config"
check "inspect real Text-01/M1 config" 0 "total             456.090 B" -- "$MMX" inspect -m "$SRC/tests/data/minimax_text01_config"
check "inspect Text-01 layers" 0 "80 = 70 lightning + 10 softmax" -- "$MMX" inspect -m "$SRC/tests/data/minimax_text01_config"
check "inspect Text-01 active" 0 "45.945 B without embedding" -- "$MMX" inspect -m "$SRC/tests/data/minimax_text01_config"
check "inspect real M3 config" 0 "total             426.175 B" -- "$MMX" inspect -m "$SRC/tests/data/minimax_m3_config"
check "inspect M3 msa" 0 "57 sparse layers: 4 index heads x 128, top-16 blocks of 128" -- "$MMX" inspect -m "$SRC/tests/data/minimax_m3_config"
check "text01 refuses fp8" 1 "error:" -- "$MMX" make-tiny --arch minimax_text01 --dtype fp8 -o "$W/t01fp8"
"$MMX" make-tiny --arch minimax_text01 -o "$W/t01" --seed 3 >/dev/null 2>&1
check "text01 generate" 0 "" -- "$MMX" generate -m "$W/t01" --ids 1,2,3 -n 4 --temp 0 --lightning-block 2
check "text01 bad lightning block" 1 "lightning-block" -- "$MMX" generate -m "$W/t01" --ids 1 --lightning-block 0
"$MMX" make-tiny --arch minimax_m3 -o "$W/m3" --seed 3 --dtype mxfp8 >/dev/null 2>&1
check "m3 generate --msa-stats" 0 "mass coverage" -- "$MMX" generate -m "$W/m3" --ids 1,2,3 -n 20 --temp 0 --msa-stats
check "m3 inspect" 0 "3 sparse layers" -- "$MMX" inspect -m "$W/m3"
check "msa-stats without MSA" 0 "no sparse-attention" -- "$MMX" generate -m "$W/t01" --ids 1,2 -n 2 --msa-stats
check "missing model dir" 1 "error: cannot open" -- "$MMX" generate -m "$W/nope" --ids 1
"$MMX" make-tiny -o "$W/tiny" --seed 3 >/dev/null 2>&1
check "bad id list" 1 "error: --ids" -- "$MMX" generate -m "$W/tiny" --ids 1,x,3
check "id out of vocab" 1 "outside the vocabulary" -- "$MMX" logits -m "$W/tiny" --ids 1,512 -o "$W/l.bin"
check "negative id" 1 "error: --ids" -- "$MMX" logits -m "$W/tiny" --ids 1,-2 -o "$W/l.bin"
check "bad sampling" 1 "top_p" -- "$MMX" generate -m "$W/tiny" --ids 1 --top-p 0
check "context overflow" 1 "exceed the model context" -- "$MMX" generate -m "$W/tiny" --ids 1 -n 5000
check "generate ids" 0 "" -- "$MMX" generate -m "$W/tiny" --ids 1,2,3 -n 4 --temp 0
printf '{"architectures":["LlamaForCausalLM"]}' > "$W/tiny/config.json"
check "unknown architecture" 1 "not supported" -- "$MMX" logits -m "$W/tiny" --ids 1 -o "$W/l.bin"
head -c 100 "$SRC/tests/data/minimax_m2_config/config.json" > "$W/trunc.json"
mkdir -p "$W/trunc" && cp "$W/trunc.json" "$W/trunc/config.json"
check "truncated config" 1 "not valid JSON" -- "$MMX" inspect -m "$W/trunc"
[ "$fails" -eq 0 ] && echo "ALL PASS" || { echo "$fails FAILED"; exit 1; }
