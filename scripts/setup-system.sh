#!/usr/bin/env bash
# Install the Debian/Ubuntu packages clusterbench needs, only those that are missing.
# As root it installs them; otherwise it prints the exact command to run and fails.
set -euo pipefail

PACKAGES=(
  build-essential python3-venv
  openmpi-bin libopenmpi-dev
  libopenblas-dev libopenblas0-serial libopenblas0-openmp libopenblas0-pthread
  libblis-dev
  hpcc hwloc iperf3
  slurm-wlm munge openssh-server openssh-client iproute2 util-linux
  chromium fonts-dejavu-core
)

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup: not a Debian/Ubuntu system; install MPI, OpenBLAS, BLIS, hpcc and hwloc with your package manager" >&2
  exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done

[ ${#missing[@]} -eq 0 ] && exit 0

cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing system packages: ${missing[*]}" >&2
  echo "setup: run as root:  $cmd" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
