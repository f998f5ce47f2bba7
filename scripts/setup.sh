#!/usr/bin/env bash
# Installs the Debian 12 packages minimax.cpp needs, only those missing (idempotent).
#   bash scripts/setup.sh run    what `make run` builds and runs: compilers, CMake and the libraries
#                                the mmx binary links (the default)
#   bash scripts/setup.sh test   the run set plus what only the tests use: GoogleTest, Google
#                                Benchmark, numpy (the float64 references), PyTorch (the gradient
#                                second opinion), clang (libFuzzer), Chromium (the chat page test),
#                                gnuplot (plots), Node.js + npm (the reference tokenizer / template)
# Used by `make run` / `make test`; safe to run any number of times.
set -euo pipefail

SET=${1:-run}
RUN_PKGS=(
  build-essential g++ cmake make pkg-config
  nlohmann-json3-dev libfmt-dev libcli11-dev
  libpcre2-dev
  zlib1g-dev        # gzip request bodies (src/server/http_wire.cpp)
  libopenblas-dev   # training GEMMs (src/train; the mmx binary links it)
  libseccomp-dev    # the RL sandbox's network fallback (src/rl/sandbox_seccomp.cpp; mmx links it)
)
TEST_PKGS=(
  libgtest-dev libgmock-dev libbenchmark-dev
  libcpp-httplib-dev        # the HTTP client of the server tests and the load benchmark
  python3 python3-numpy     # the float64 reference implementations (reference/)
  gnuplot-nox               # loss curves and benchmark plots as PNG (mmx train draws one when present)
  python3-torch             # the independent PyTorch gradient reference (tests/train)
  clang libclang-rt-14-dev  # libFuzzer targets (tests/fuzz), built and run by make test
  chromium                  # headless browser for the chat page test (tests/server/chat_page_test.sh)
)
case "$SET" in
  run) PKGS=("${RUN_PKGS[@]}") ;;
  test)
    PKGS=("${RUN_PKGS[@]}" "${TEST_PKGS[@]}")
    # Node.js + npm run the reference tokenizer / template engine in the tests. Any node >= 18 will
    # do; install Debian's only when there is none (a machine may have one from elsewhere).
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
      PKGS+=(nodejs npm)
    fi
    ;;
  *) echo "setup: unknown set '$SET' (expected: run or test)" >&2; exit 2 ;;
esac

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup ($SET): installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "setup: need root (or sudo) to apt-get install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
