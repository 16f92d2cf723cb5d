#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages stagecraft builds against, only those missing.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config
  libyaml-cpp-dev libboost-graph-dev libfmt-dev libcli11-dev rapidjson-dev
  libgtest-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin libopenblas-dev
  libimgui-dev libglfw3-dev libgl-dev libstb-dev xvfb xauth
  python3-dev pybind11-dev python3-pytest python3-yaml
  coinor-libcbc-dev zlib1g-dev
  python3-sklearn   # its digits set (a CSV) is the data of scenarios/mlp-digits-cpu.yaml
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "stagecraft: installing ${missing[*]}" >&2
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
