#!/usr/bin/env bash
# install-deps.sh — installs what kdflow needs to build and test on Debian 12, and only
# what is missing (checked with dpkg-query). Runs `apt-get update` only when something
# is missing, so a second run changes nothing and needs no network. Needs no GPU or CUDA.
# Run as root, or as a user with sudo.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++
  ccache  # compiled objects kept across builds and clean clones (scripts/build-config.sh)
  libcli11-dev nlohmann-json3-dev libfmt-dev catch2
  graphviz
  libgraphviz-dev  # kdflow view: Graphviz's libgvc lays the page out (lib/emit/view)
  chromium  # kdflow view's browser tests (test/view), headless
  llvm-15-dev libclang-15-dev libclang-cpp15-dev libclang-common-15-dev
  libprotobuf-dev protobuf-compiler  # Chakra traces (kdflow extract --format chakra)
  libisl-dev pkg-config  # footprints (lib/analysis/footprint)
  libboost-context-dev  # fibers of the CPU replay back end (lib/replay/cpu)
  python3  # the optional cross-check, and the exporter's tests (python/, test/tvm)
  python3-numpy  # the exporter's unit tests (python/tests)
  python3-venv  # test/tvm: TVM 0.27 from PyPI in a virtual environment (scripts/test.sh)
)

installed() {
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]
}

missing=()
for p in "${PACKAGES[@]}"; do
  installed "$p" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages are installed"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "install-deps: error: missing packages (${missing[*]}); run as root or install sudo" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq "${missing[@]}" >/dev/null

still=()
for p in "${missing[@]}"; do
  installed "$p" || still+=("$p")
done
if [ ${#still[@]} -ne 0 ]; then
  echo "install-deps: error: still missing after apt-get install: ${still[*]}" >&2
  exit 1
fi
echo "install-deps: done"
