# Sourced by the tests that drive a real `mmx serve` (openai_client_test.sh, chat_page_test.sh,
# families_test.sh): one way to start it on an ephemeral port and to stop it.
#   serve_start MMX LOG MODEL [serve flags...]
#       starts `MMX serve -m MODEL --host 127.0.0.1 --port 0 [flags]` with stderr in LOG, reads the
#       port from its "listening on" line (up to 30 s for load + bind) and waits for /health;
#       sets SERVE_PID and SERVE_PORT. Returns 1 (LOG printed) when it exits or never listens.
#   serve_alive    0 while the server runs (a test checks it survived what it was sent)
#   serve_stop     stops it (the caller's EXIT trap should call it too)
SERVE_PID=""
SERVE_PORT=""

serve_start() {
  local mmx=$1 log=$2 model=$3
  shift 3
  "$mmx" serve -m "$model" --host 127.0.0.1 --port 0 "$@" 2>"$log" &
  SERVE_PID=$!
  SERVE_PORT=""
  for _ in $(seq 1 300); do
    SERVE_PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
    [ -n "$SERVE_PORT" ] && break
    if ! kill -0 "$SERVE_PID" 2>/dev/null; then echo "mmx serve exited:"; cat "$log"; SERVE_PID=""; return 1; fi
    sleep 0.1
  done
  if [ -z "$SERVE_PORT" ]; then echo "mmx serve did not start:"; cat "$log"; return 1; fi
  for _ in $(seq 1 100); do
    python3 -c "import urllib.request, sys; urllib.request.urlopen('http://127.0.0.1:$SERVE_PORT/health', timeout=2)" \
      2>/dev/null && return 0
    sleep 0.1
  done
  echo "mmx serve does not answer /health:"; cat "$log"; return 1
}

serve_alive() { [ -n "$SERVE_PID" ] && kill -0 "$SERVE_PID" 2>/dev/null; }

serve_stop() {
  if [ -n "$SERVE_PID" ]; then kill "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null; fi
  SERVE_PID=""
}
