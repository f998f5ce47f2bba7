#!/usr/bin/env bash
# Installs the Debian 12 packages minimax.cpp needs, only those missing (idempotent).
# Used by `make run` / `make test`; safe to run any number of times.
set -euo pipefail

PKGS=(
  build-essential g++ cmake make pkg-config
  nlohmann-json3-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy
  libpcre2-dev
  libcpp-httplib-dev
  zlib1g-dev        # gzip request bodies in the hostile-client tests (httplib depends on it too)
  libopenblas-dev   # training GEMMs (src/train)
  gnuplot-nox       # loss curves and benchmark plots as PNG
  python3-torch     # the independent PyTorch gradient reference (tests/train)
  clang libclang-rt-14-dev  # libFuzzer targets (tests/fuzz), built and run by make test
  chromium          # headless browser for the chat page test (tests/server/chat_page_test.sh)
)
# Node.js + npm run the reference tokenizer / template engine in the tests. Any node >= 18 will
# do; install Debian's only when there is none (a machine may have one from elsewhere).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  PKGS+=(nodejs npm)
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}"
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
