"""`make setup` leaves no daemon behind: no unit enabled by its install, no listener of its packages.

The test packages (openssh-server, slurm-wlm, munge) enable their services when Debian installs
them. scripts/setup-system.sh installs under a policy-rc.d that forbids starting them and
disables every unit the install enabled; it records the units enabled before its first install in
/var/lib/clusterbench/units-enabled-before-setup, so an admin's own sshd is not counted here.
The virtual cluster's daemons (started by scripts/virtual-cluster inside its namespaces, with
their state under /run/clusterbench-vc/) are the only ones allowed to run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.conftest import ROOT

RECORD = Path("/var/lib/clusterbench/units-enabled-before-setup")
PACKAGE_UNITS = ("ssh.service", "ssh.socket", "slurmd.service", "slurmctld.service", "slurmdbd.service",
                 "munge.service", "iperf3.service", "mariadb.service")
DAEMONS = ("sshd", "slurmd", "slurmctld", "slurmdbd", "munged", "iperf3", "mariadbd", "mysqld")

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("dpkg-query"),
                                reason="the set-up installs Debian packages as root")


def enabled_units() -> set[str]:
    links = subprocess.run(["find", "/etc/systemd/system", "-type", "l", "-path", "*.wants/*", "-printf", "%f\\n"],
                           capture_output=True, text=True, check=False).stdout
    return set(links.split())


def test_setup_is_a_no_op_once_done_and_leaves_no_unit_enabled():
    again = subprocess.run([str(ROOT / "scripts" / "setup-system.sh"), "test"], capture_output=True, text=True,
                           timeout=600, check=False)
    assert again.returncode == 0, again.stderr
    assert "installing" not in again.stdout  # everything is there: nothing installed, nothing enabled
    before = set(RECORD.read_text().split()) if RECORD.exists() else set()
    left = {u for u in enabled_units() & set(PACKAGE_UNITS) if u not in before}
    assert not left, f"enabled by the set-up and not disabled: {sorted(left)}"


def listeners() -> list[tuple[str, str, str]]:
    """(address:port, process name, command line) of every listening TCP socket of this namespace."""
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        for name, pid in re.findall(r'\("([^"]+)",pid=(\d+)', line):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            found.append((fields[3], name, cmdline))
    return found


def test_no_daemon_of_the_set_up_packages_listens_outside_the_virtual_cluster():
    strays = [(addr, name, cmd) for addr, name, cmd in listeners()
              if name in DAEMONS and "/run/clusterbench-vc/" not in cmd]
    assert not strays, f"daemons listening that the set-up or a test left behind: {strays}"


def test_the_policy_that_blocked_service_start_is_not_left_in_place_by_us():
    policy = Path("/usr/sbin/policy-rc.d")
    assert not policy.exists() or "clusterbench setup" not in policy.read_text()
