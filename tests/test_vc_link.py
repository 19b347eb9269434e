"""The virtual cluster's shaped links (scripts/virtual-cluster up --rate/--queue/--duplex), measured.

A Gigabit link here must behave like one for the two things a study reads off it: a ping-pong between
two nodes never crosses faster than the line (125 MB/s one-way at 1 Gbit/s, at every message size),
and a bulk TCP stream still fills it (iperf3 at 900 Mbit/s or more; the wire overhead leaves about
950 of the 1000). With `tbf burst 256kb` per direction, the ping-pong read 245 MB/s: the bucket
refilled while the answer came back. The module brings up its own two-node cluster, `linkvc`, in
the shapes it needs, and takes it down at the end. Nodes share this machine's two cores with
whatever else runs, which only ever slows a transfer: an upper bound holds under load, a lower
bound gets the best of a few tries.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from tests.conftest import ROOT, cli, query

# A copy of the script under development can be tried in place of the checkout's (bash reads a script as
# it runs, so the one in use is not edited in place).
SCRIPT = Path(os.environ.get("CLUSTERBENCH_VC_SCRIPT", ROOT / "scripts" / "virtual-cluster"))
NAME = "linkvc"
STATE = Path("/run/clusterbench-vc") / NAME
PLACE = ["--name", NAME, "--prefix", "lnode", "--subnet", "10.81.0", "--port", "7117", "--no-slurm"]
SERVER_IP = "10.81.0.12"  # lnode2
LINE_MB_S = 125.0  # 1 Gbit/s in MB/s (10^6 bytes), the unit pingpong reports

pytestmark = pytest.mark.cluster


def vc(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, CLUSTERBENCH_VC_NAME=NAME)  # `exec` takes the cluster's name from here
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env)


class LinkCluster:
    """The module's cluster, brought up again whenever a test asks for other link options."""

    def __init__(self) -> None:
        self.links: tuple[str, ...] | None = None

    def up(self, *links: str) -> None:
        if self.links == links:
            return
        self.down()
        out = vc("up", "2", *PLACE, *links)
        assert out.returncode == 0, out.stdout + out.stderr
        self.links = links

    def down(self) -> None:
        if STATE.exists():
            out = vc("down", "--name", NAME)
            assert out.returncode == 0, out.stdout + out.stderr
        self.links = None

    def run(self, node: str, *cmd: str) -> str:
        out = vc("exec", node, *cmd)
        assert out.returncode == 0, f"{node}: {cmd}: {out.stdout}{out.stderr}"
        return out.stdout


@pytest.fixture(scope="module")
def cluster():
    if os.geteuid() != 0:
        pytest.skip("the virtual cluster needs root")
    for tool in ("sshd", "mpirun", "iperf3", "tc"):
        if not shutil.which(tool) and not Path("/usr/sbin", tool).exists():
            pytest.skip(f"needs {tool} (make setup)")
    handle = LinkCluster()
    handle.down()  # a leftover of an interrupted run of this module: its link options are unknown
    yield handle
    handle.down()


def retransmitted(cluster: LinkCluster, node: str) -> int:
    """TCP's RetransSegs counter in the node's network namespace (/proc/net/snmp)."""
    rows = [line.split() for line in cluster.run(node, "cat", "/proc/net/snmp").splitlines()
            if line.startswith("Tcp:")]
    return int(dict(zip(rows[0], rows[1], strict=True))["RetransSegs"])


def iperf3(cluster: LinkCluster, *args: str) -> dict:
    """One iperf3 test from lnode1 to a one-off server on lnode2 (2 s unless args say otherwise); its
    JSON report's `end` section."""
    cluster.run("lnode2", "iperf3", "-s", "-D", "-1", "-p", "5201")
    deadline = time.monotonic() + 5
    while ":5201 " not in cluster.run("lnode2", "ss", "-ltn") and time.monotonic() < deadline:
        time.sleep(0.05)
    timing = [] if "-t" in args else ["-t", "2"]
    return json.loads(cluster.run("lnode1", "iperf3", "-c", SERVER_IP, "-p", "5201", "-J", *timing, *args))["end"]


def mbit(section: dict) -> float:
    return section["bits_per_second"] / 1e6


def test_bad_link_options_are_refused_before_anything_is_made(cluster):
    cluster.down()
    for links, says in [(["--rate", "1gbit; touch /tmp/x"], "--rate"), (["--rate", "999tbit"], "between"),
                        (["--rate", "1gbit", "--queue", "1e6"], "--queue"),
                        (["--rate", "1gbit", "--queue", "1000"], "--queue"),
                        (["--rate", "1gbit", "--duplex", "simplex"], "--duplex"), (["--queue", "100000"], "--rate")]:
        out = vc("up", "2", *PLACE, *links)
        assert out.returncode == 2 and says in out.stderr, (links, out.stdout + out.stderr)
        assert not STATE.exists()


def test_without_rate_the_links_are_left_as_they_were(cluster):
    """No shaper, no ifb, no clsact, veths at their defaults: what the script set up before --rate changed."""
    cluster.up()
    for i in (1, 2):
        node = f"lnode{i}"
        assert cluster.run(node, "tc", "qdisc", "show").splitlines() == [
            "qdisc noqueue 0: dev lo root refcnt 2 ", "qdisc noqueue 0: dev eth0 root refcnt 2 "]
        assert [line.split()[0].split("@")[0] for line in cluster.run(node, "ip", "-br", "link").splitlines()] == [
            "lo", "eth0"]
        assert "gso_max_size 65536 " in cluster.run(node, "ip", "-d", "link", "show", "eth0")
        host_side = subprocess.run(["tc", "qdisc", "show", "dev", f"{NAME}v{i}"], capture_output=True, text=True)
        assert host_side.stdout.splitlines() == ["qdisc noqueue 0: root refcnt 2 "]


def test_ping_pong_never_crosses_faster_than_the_line(cluster, monkeypatch):
    """Every size from 0 to 2 MiB at or below 125 MB/s one-way, with no margin: shaping delays, load only
    slows. 50 repetitions: the shaper charges a packet as it leaves, so the last GSO packet (64 KiB,
    0.5 ms) of the timed loop is never paid for, 1/100 of a one-skb message's time; the wire overhead
    the shaper counts (66 bytes of headers per 1448) keeps the bulk rate at 119.5 MB/s, under that."""
    cluster.up("--rate", "1gbit")
    folder = Path("/var/tmp") / f"clusterbench-vclink-{uuid.uuid4().hex[:8]}"  # nodes share /var/tmp, not /tmp
    folder.mkdir()
    try:
        db = folder / "results.db"
        monkeypatch.setenv("CLUSTERBENCH_DB", str(db))
        campaign = folder / "pp.yaml"
        campaign.write_text("name: vc-link\ncluster: {launcher: mpirun, hosts: 'lnode[1-2]', mpi: openmpi}\n"
                            "benchmarks:\n  - benchmark: pingpong\n"
                            "    params: {nodes: 2, interconnect: tcp, bind_to: none, max_log2: 21, iter: 50,"
                            " rounds: 1}\n")
        out = cli("campaign", "run", str(campaign), "--json")
        assert out.returncode == 0, out.stdout + out.stderr
        curve = {json.loads(r["labels"])["bytes"]: r["value"] for r in query(
            db, "SELECT labels, value FROM metrics WHERE name = 'pingpong_bandwidth' AND valid = 1")}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print("one-way MB/s by size:", {size: round(v, 1) for size, v in sorted(curve.items())})
    assert sorted(curve) == [0] + [2**k for k in range(22)]
    assert {size: v for size, v in curve.items() if v > LINE_MB_S} == {}
    assert max(curve.values()) > 50, "the link carries next to nothing: is the shaper dropping?"


def test_iperf3_still_fills_the_line(cluster):
    """At least 850 Mbit/s, the best of three runs of 2 seconds after TCP's first second (iperf3 -O 1):
    another process's load only lowers it, and so does an idle machine, whose sleeping cores wake late for
    the shaper's timer. (900 here on a quiet machine; a loaded CI machine gave 896.6 as its best of three.)
    What this checks is that the shaper lets TCP fill the line, not the line's last percent: a shaper that
    drops or stalls gives far less, one that does not shape gives several Gbit/s."""
    cluster.up("--rate", "1gbit")
    best = 0.0
    for _ in range(3):
        best = max(best, mbit(iperf3(cluster, "-t", "3", "-O", "1")["sum_received"]))
        if best >= 900:
            break
    print("iperf3 Mbit/s:", round(best, 1))
    assert 850 <= best <= 1000


def test_half_duplex_both_directions_share_the_cable(cluster):
    cluster.up("--rate", "1gbit")
    end = iperf3(cluster, "--bidir")
    there, back = mbit(end["sum_received"]), mbit(end["sum_received_bidir_reverse"])
    print("bidirectional Mbit/s:", round(there), "+", round(back))
    assert there + back <= 1000 and min(there, back) > 200


def test_a_small_queue_drops_packets_under_load_and_the_default_does_not(cluster):
    """Four parallel streams: with the default queue (50 ms at the rate + 256 KiB, as tbf's 'latency
    50ms burst 256kb' gave) TCP barely retransmits; with --queue 100000 the queue overflows."""
    cluster.up("--rate", "1gbit")
    assert "limit 6512144b" in cluster.run("lnode1", "tc", "qdisc", "show", "dev", "shaper")
    before = retransmitted(cluster, "lnode1")
    iperf3(cluster, "-P", "4")
    default = retransmitted(cluster, "lnode1") - before
    cluster.up("--rate", "1gbit", "--queue", "100000")
    assert "limit 100000b" in cluster.run("lnode1", "tc", "qdisc", "show", "dev", "shaper")
    assert "gso_max_size 25000 " in cluster.run("lnode1", "ip", "-d", "link", "show", "eth0")
    before = retransmitted(cluster, "lnode1")
    end = iperf3(cluster, "-P", "4")
    small = retransmitted(cluster, "lnode1") - before
    print("retransmitted segments: default queue", default, "- 100000-byte queue", small,
          "at", round(mbit(end["sum_received"])), "Mbit/s")
    assert small >= 500 and small > 10 * default
    assert mbit(end["sum_received"]) > 300, "a small queue drops packets, it does not stop the link"


def test_full_duplex_gives_each_direction_the_line(cluster):
    """Both directions together well above one line's rate (the best of three tries: two cores carry four
    iperf3 threads and the shapers, and a loaded machine once gave 610 + 581), neither above the line."""
    cluster.up("--rate", "1gbit", "--duplex", "full")
    tries = []
    for _ in range(3):
        end = iperf3(cluster, "--bidir")
        tries.append((mbit(end["sum_received"]), mbit(end["sum_received_bidir_reverse"])))
        if sum(tries[-1]) > 1200:
            break
    print("bidirectional Mbit/s, full duplex:", [f"{a:.0f} + {b:.0f}" for a, b in tries])
    assert max(a + b for a, b in tries) > 1200
    assert all(max(a, b) <= 1000 for a, b in tries)
