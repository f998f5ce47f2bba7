#!/usr/bin/env bash
# `mmx chat` driven through a pipe on a fresh tiny M2 checkpoint: two user turns, /reset, a
# third, /system, a fourth, /exit (and a line after it that must never be read as a turn).
#   chat_cli_test.sh MMX_BINARY
# --show-prompt prints each turn's rendered prompt on stderr; the checks read them:
#   * turn 1's prompt is exactly what `mmx chat-template` renders for that one message;
#   * turn 2's prompt carries turn 1 (its user text and an assistant turn) and is longer;
#   * after /reset, turn 3's prompt has neither earlier turn; /system reaches turn 4's prompt;
#   * the first reply equals `mmx generate --chat` on the same message, greedy (same engine);
#   * piped output has no ANSI codes; the commands answer.
set -uo pipefail
MMX=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; echo "--- stdout ---"; cat "$TMP/out"; echo "--- stderr ---"; cat "$TMP/err"; exit 1; }

"$MMX" make-tiny --arch minimax_m2 -o "$TMP/tiny" --dtype f32 --seed 9 >/dev/null 2>&1 || { echo "make-tiny failed"; exit 1; }
printf '%s\n' "first question alpha" "second question beta" "/reset" "third question gamma" \
  "/system Answer tersely, zeta." "fourth question delta" "/exit" "never sent omega" >"$TMP/in"
: >"$TMP/out"; : >"$TMP/err"
timeout 120 "$MMX" chat -m "$TMP/tiny" --temp 0 --seed 1 -n 8 -t 1 --show-prompt <"$TMP/in" >"$TMP/out" 2>"$TMP/err" \
  || fail "mmx chat exited with $?"

# The prompts, one file each (p1..pN), with their reported token counts.
awk -v dir="$TMP" '
  /^--- prompt: [0-9]+ tokens ---$/ { n++; f = dir "/p" n; printf "" > f; print $3 > (dir "/count" n); inside = 1; next }
  /^--- end of prompt ---$/ { inside = 0; next }
  inside { print >> f }' "$TMP/err"
N=$(ls "$TMP" | grep -c '^p[0-9]*$')
[ "$N" = 4 ] || fail "expected 4 prompts on stderr, got $N"
has() { grep -qF -- "$2" "$TMP/p$1"; }
for w in alpha; do has 1 "$w" || fail "prompt 1 lacks '$w'"; done
for w in alpha beta; do has 2 "$w" || fail "prompt 2 lacks '$w' (the history)"; done
[ "$(grep -oF ']~b]ai' "$TMP/p2" | wc -l)" -ge 2 ] || fail "prompt 2 has no assistant turn before its generation prompt"
[ "$(cat "$TMP/count2")" -gt "$(cat "$TMP/count1")" ] || fail "prompt 2 is not longer than prompt 1"
has 3 gamma || fail "prompt 3 lacks 'gamma'"
for w in alpha beta; do ! has 3 "$w" || fail "prompt 3 still has '$w' after /reset"; done
for w in zeta gamma delta; do has 4 "$w" || fail "prompt 4 lacks '$w'"; done
for i in 1 2 3; do ! has $i zeta || fail "prompt $i has the system prompt set later"; done
! grep -qF omega "$TMP/err" || fail "a line after /exit was read as a turn"

# Turn 1's prompt against `mmx chat-template` (the rendered text; --show-prompt adds one newline).
echo '[{"role": "user", "content": "first question alpha"}]' >"$TMP/m.json"
"$MMX" chat-template -m "$TMP/tiny" --messages "$TMP/m.json" --add-generation-prompt >"$TMP/ref_prompt" 2>/dev/null \
  || fail "mmx chat-template failed"
{ cat "$TMP/ref_prompt"; echo; } | cmp -s - "$TMP/p1" || fail "prompt 1 differs from mmx chat-template's rendering"

# The first reply against mmx generate --chat (greedy: the same tokens; the reply is reasoning
# or content, printed as text either way unless it closes </think>, which the check reports).
"$MMX" generate -m "$TMP/tiny" --chat -p "first question alpha" --temp 0 --seed 1 -n 8 -t 1 >"$TMP/gen" 2>/dev/null \
  || fail "mmx generate failed"
GEN=$(cat "$TMP/gen")
case "$(cat "$TMP/out")" in
  "$GEN"*) ;;
  *) fail "the first reply differs from mmx generate --chat: $(printf '%q' "$GEN")" ;;
esac

grep -qF "(conversation cleared)" "$TMP/out" || fail "/reset did not answer"
grep -qF "(system prompt set)" "$TMP/out" || fail "/system did not answer"
! grep -q $'\x1b\[' "$TMP/out" || fail "ANSI codes on a pipe"
echo "ok: 4 turns, prompts $(cat "$TMP/count1") $(cat "$TMP/count2") $(cat "$TMP/count3") $(cat "$TMP/count4") tokens"
