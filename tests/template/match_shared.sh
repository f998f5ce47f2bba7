#!/bin/sh
# Checks that the chat templates copied into the repository are byte-identical to the shared
# collection they were copied from (data/chat_templates/README.md says which is which).
#   match_shared.sh SOURCE_DIR SHARED_TEMPLATES_DIR
# Exit 0 identical, 1 a difference or a missing copy, 77 skipped (shared folder absent, not CI).
src=$1
shared=$2
if [ ! -d "$shared" ]; then
  if [ "$CI" = true ]; then echo "FAIL: $shared is missing (CI has ../shared beside the clone)"; exit 1; fi
  echo "SKIPPED: $shared is missing; the copies in data/chat_templates were not compared"; exit 77
fi
status=0
check() {  # check REPO_COPY SHARED_NAME
  if cmp -s "$src/$1" "$shared/$2"; then echo "ok   $1 == $2"
  else echo "FAIL $1 differs from $shared/$2 (or one is missing)"; status=1; fi
}
check data/chat_templates/minimax_m1.jinja MiniMax-M1.jinja
check data/chat_templates/minimax_m2.jinja MiniMax-M2.jinja
check data/chat_templates/minimax_m3.jinja MiniMax-M3.jinja
for f in "$src"/tests/data/chat_templates/*.jinja; do
  b=$(basename "$f")
  check "tests/data/chat_templates/$b" "$b"
done
exit $status
