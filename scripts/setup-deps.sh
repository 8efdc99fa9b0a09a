#!/usr/bin/env bash
# Installs the Debian 12 packages trainsim builds and tests with (chromium: the headless browser
# the HTML report test opens reports in; OpenMPI: distributed sweeps and their test).
# Idempotent: packages already present are skipped, and nothing is done when all are there.
# Needs root (or sudo) only when something is missing.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config
  libboost-graph-dev libeigen3-dev libcli11-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libyaml-cpp-dev nlohmann-json3-dev
  libopenmpi-dev openmpi-bin
  chromium
  python3
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-deps: all ${#PKGS[@]} Debian packages present"
  exit 0
fi

echo "setup-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "setup-deps: need root to install: ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup-deps: done"
