# Sourced by the side-by-side drivers (bench/llamacpp/compare.sh, bench/serving/compare.sh):
# exits 2 with what to do when LLAMA_CPP_DIR is unset. $1: the llama.cpp target the driver runs.
# llama.cpp is NOT part of this project: it is built from its public source by whoever compares.
if [ -z "${LLAMA_CPP_DIR:-}" ]; then
  echo "$(basename "$0"): LLAMA_CPP_DIR is not set, so there is nothing to compare against." >&2
  echo "  Build llama.cpp from its public source (cmake -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF" >&2
  echo "  -DLLAMA_OPENSSL=OFF; target $1) and set LLAMA_CPP_DIR to its build folder." >&2
  exit 2
fi
