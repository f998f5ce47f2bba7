#!/usr/bin/env bash
# CLI contract of `mmx train-tokenizer`: --help, the written files (tokenizer.json loads in
# `mmx tokenize`, tokenizer_config.json has the M2 chat template), identical output on a re-run,
# a progress line on stderr, and clear errors (non-zero exit, a message naming the problem) for
# a missing file, a directory, empty data, a vocabulary that is too small and a missing -o folder.
set -euo pipefail
MMX=$1
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
die() { echo "FAIL: $*"; exit 1; }

"$MMX" train-tokenizer --help | grep -q -- "--vocab" || die "--help does not list --vocab"
for i in $(seq 200); do printf 'def f%d(self, x):\n    return x + %d  # Привет\n\n' "$i" "$i"; done > "$DIR/data.txt"
mkdir "$DIR/a" "$DIR/b"
"$MMX" train-tokenizer --data "$DIR/data.txt" --vocab 300 -o "$DIR/a/tokenizer.json" 2>"$DIR/log" || die "training failed: $(cat "$DIR/log")"
grep -q "^train-tokenizer: .*vocab 300" "$DIR/log" || die "no summary line: $(cat "$DIR/log")"
grep -q "^train-tokenizer: merges" "$DIR/log" || die "no progress line: $(cat "$DIR/log")"
[ -s "$DIR/a/tokenizer_config.json" ] || die "tokenizer_config.json not written beside tokenizer.json"
grep -q '"chat_template"' "$DIR/a/tokenizer_config.json" || die "no chat template"
"$MMX" train-tokenizer --data "$DIR/data.txt" --vocab 300 -o "$DIR/b" 2>/dev/null  # a directory is fine too
cmp -s "$DIR/a/tokenizer.json" "$DIR/b/tokenizer.json" || die "a re-run wrote a different tokenizer.json"
IDS=$("$MMX" tokenize --tokenizer "$DIR/a/tokenizer.json" -p ']~!b[def f1(self):')
[ "${IDS%% *}" = "293" ] || die "BOS is not id 293 (the second of the 8 last ids): '$IDS'"
BACK=$("$MMX" detokenize --tokenizer "$DIR/a/tokenizer.json" --ids "${IDS// /,}")
[ "$BACK" = ']~!b[def f1(self):' ] || die "round trip: '$BACK'"

expect_error() {  # expect_error PATTERN ARGS...
  local pat=$1; shift
  if "$MMX" train-tokenizer "$@" 2>"$DIR/err"; then die "accepted: $*"; fi
  grep -q -- "$pat" "$DIR/err" || die "unclear error for '$*': $(cat "$DIR/err")"
}
: > "$DIR/empty.txt"
expect_error "does not exist" --data "$DIR/nope.txt" --vocab 300 -o "$DIR/x.json"
expect_error "is a directory" --data "$DIR" --vocab 300 -o "$DIR/x.json"
expect_error "is empty" --data "$DIR/empty.txt" --vocab 300 -o "$DIR/x.json"
expect_error "at least 265" --data "$DIR/data.txt" --vocab 264 -o "$DIR/x.json"
expect_error "directory .* does not exist" --data "$DIR/data.txt" --vocab 300 -o "$DIR/no/such/tokenizer.json"
expect_error "min-frequency" --data "$DIR/data.txt" --vocab 300 -o "$DIR/x.json" --min-frequency 0
expect_error "vocab" --data "$DIR/data.txt" -o "$DIR/x.json"
echo "train-tokenizer cli ok"
