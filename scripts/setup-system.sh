#!/usr/bin/env bash
# Install the Debian packages clusterbench needs, only those that are missing, at one of two levels:
#   run   what `clusterbench run` needs on one box: a compiler, Open MPI, the BLAS variants, hpcc, hwloc
#   test  run + what the test suite needs: MPICH, Slurm, munge, sshd, and slurmdbd with MariaDB (Slurm
#         accounting) for the virtual cluster, Chromium, iperf3 and the autotools that some official
#         sources want
# As root it installs them; otherwise it prints the exact command to run and fails.
#
# Neither level leaves a daemon running or enabled on the host: packages are installed under a
# policy-rc.d that forbids starting services, and every systemd unit the install newly enabled is
# disabled again. The virtual cluster (scripts/virtual-cluster) starts its own daemons inside its
# namespaces and stops them on `down` (MariaDB included: a private server of its own, never the
# package's mariadb.service, whose mysql.service/mysqld.service alias links are removed too).
set -euo pipefail

level=${1:-test}

RUN_PACKAGES=(
  build-essential python3-venv
  openmpi-bin libopenmpi-dev
  libopenblas-dev libopenblas0-serial libopenblas0-openmp libopenblas0-pthread
  libblis-dev
  hpcc hwloc util-linux ethtool
)
TEST_PACKAGES=(
  mpich libmpich-dev
  iperf3 slurm-wlm munge openssh-server openssh-client iproute2
  slurmdbd mariadb-server
  autoconf automake libtool
  chromium fonts-dejavu-core
)

case "$level" in
  run) PACKAGES=("${RUN_PACKAGES[@]}") ;;
  test) PACKAGES=("${RUN_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  *) echo "setup: unknown level '$level' (use: run or test)" >&2; exit 2 ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup: not a Debian/Ubuntu system; install ${PACKAGES[*]} (or your distribution's equivalents)" >&2
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
  echo "setup: (services these packages enable, such as ssh, slurmd or munge, are not needed: disable them)" >&2
  exit 1
fi

# The units enabled before the install: anything enabled after it that is not in this list was
# enabled by the install and is disabled again below.
enabled_units() {
  find /etc/systemd/system -type l -path '*.wants/*' -printf '%f\n' 2>/dev/null | sort -u
}
# Every link under /etc/systemd/system but masks (to /dev/null): `systemctl enable` also makes alias
# links (mariadb.service makes mysql.service and mysqld.service), which `disable` would remove
# with a running systemd only.
unit_links() {
  find /etc/systemd/system -type l ! -lname /dev/null -printf '%p\n' 2>/dev/null | sort -u
}
# SysV start links: mariadb-server pulls in rsync, whose init script has no unit enabled but an
# S link of its own.
rc_started() {
  find /etc/rc2.d /etc/rc3.d /etc/rc4.d /etc/rc5.d -name 'S*' -printf '%f\n' 2>/dev/null | sed 's/^S[0-9]*//' | sort -u
}
before=$(enabled_units)
links_before=$(unit_links)
rc_before=$(rc_started)
# Kept for the test that checks nothing was left enabled: what was enabled before the first install.
record=/var/lib/clusterbench/units-enabled-before-setup
if [ ! -e "$record" ]; then
  mkdir -p "$(dirname "$record")"
  printf '%s\n' "$before" >"$record"
fi

# Forbid service start-up during the install (invoke-rc.d and deb-systemd-invoke obey it), and put
# back whatever policy-rc.d was there before.
policy=/usr/sbin/policy-rc.d
saved_policy=""
if [ -e "$policy" ]; then
  saved_policy=$(mktemp)
  cp -p "$policy" "$saved_policy"
fi
restore_policy() {
  if [ -n "$saved_policy" ]; then
    cp -p "$saved_policy" "$policy"
    rm -f "$saved_policy"
  else
    rm -f "$policy"
  fi
}
trap restore_policy EXIT
printf '#!/bin/sh\n# clusterbench setup: no service starts during the install\nexit 101\n' >"$policy"
chmod 755 "$policy"

echo "setup ($level): installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"

after=$(enabled_units)
new_units=$(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after") | grep -v '^$' || true)
for unit in $new_units; do
  echo "setup: disabling $unit (enabled by the install; clusterbench needs no daemon on the host)"
  if command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now "$unit" >/dev/null 2>&1 || systemctl disable "$unit" >/dev/null 2>&1 || true
  fi
  # Without a running systemd, `systemctl disable` may not act: remove the links ourselves.
  find /etc/systemd/system -type l -path "*.wants/$unit" -delete 2>/dev/null || true
done
# The links the install made that are still there (aliases of the units disabled above).
for link in $(comm -13 <(printf '%s\n' "$links_before") <(unit_links) | grep -v '^$' || true); do
  echo "setup: removing $link (made by the install)"
  rm -f "$link"
done
for script in $(comm -13 <(printf '%s\n' "$rc_before") <(rc_started) | grep -v '^$' || true); do
  echo "setup: disabling the init script $script (enabled by the install)"
  update-rc.d "$script" disable >/dev/null 2>&1 || true
done
