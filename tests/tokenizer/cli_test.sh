#!/usr/bin/env bash
# Smoke test of the CLI contracts on the tiny MiniMax tokenizer:
#   mmx tokenize -> ids on one line separated by single spaces; mmx detokenize -> the text back;
#   clear errors (non-zero exit) for a missing tokenizer and an unknown id.
set -euo pipefail
MMX=$1
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
"$MMX" make-tiny -o "$DIR/m" --seed 1 >/dev/null 2>&1
TEXT='Hello world, ПриветМир 123 ]~!b[ tokens'
IDS=$("$MMX" tokenize -m "$DIR/m" -p "$TEXT")
[[ "$IDS" =~ ^[0-9]+( [0-9]+)*$ ]] || { echo "bad tokenize output: '$IDS'"; exit 1; }
printf '%s' "$TEXT" > "$DIR/in.txt"
IDS2=$("$MMX" tokenize --tokenizer "$DIR/m/tokenizer.json" --file "$DIR/in.txt")
[ "$IDS" = "$IDS2" ] || { echo "-p and --file differ: '$IDS' vs '$IDS2'"; exit 1; }
BACK=$("$MMX" detokenize -m "$DIR/m" --ids "${IDS// /,}")
[ "$BACK" = "$TEXT" ] || { echo "round trip: '$BACK' != '$TEXT'"; exit 1; }
SKIP=$("$MMX" detokenize -m "$DIR/m" --ids "${IDS// /,}" --skip-special)
[ "$SKIP" = "${TEXT/]~!b[/}" ] || { echo "skip-special: '$SKIP'"; exit 1; }
if "$MMX" tokenize -m "$DIR/nope" -p x 2>"$DIR/err"; then echo "missing dir accepted"; exit 1; fi
grep -q "does not exist" "$DIR/err" || { echo "unclear error: $(cat "$DIR/err")"; exit 1; }
if "$MMX" detokenize -m "$DIR/m" --ids 1,99999999 2>"$DIR/err"; then echo "unknown id accepted"; exit 1; fi
echo "cli ok: $IDS"
