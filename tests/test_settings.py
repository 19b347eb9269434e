"""System settings applied before a run and restored after (issue 18): the allow-list and its
checks, the scripts and their quoting, the journal and its lock, and, on a virtual cluster of
this module's own (setvc: snode1, snode2, 10.80.0.x), real MTU, rto_min, SACK and RPS changes
read back from the nodes, restored after a normal end, an exception, a failure part-way and
kill -9.

The captured answers below are the real output of `read_script` on the virtual cluster's nodes
(Linux 6.18, iproute2 6.1) and, as uid 65534, on this machine; the `ethtool -c` text is this
machine's virtio NIC. Only per-namespace settings are changed on the nodes: kernel-wide ones
would change this machine too.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from tests.conftest import ROOT, cli

from clusterbench.errors import EnvironmentProblem, UserInputError
from clusterbench.execution import settings as es
from clusterbench.system import settings as ss

SCRIPT = ROOT / "scripts" / "virtual-cluster"
VC_NAME = "setvc"
NODES = ["snode1", "snode2"]
STATE = Path("/run/clusterbench-vc") / VC_NAME
cluster = pytest.mark.cluster
needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                reason="needs root and unshare (a throw-away network namespace)")

# read_script(tcp_sack, congestion control, tcp_low_latency, netdev_max_backlog, mtu, rto_min, rps,
# rps_flow_cnt, coalesce.adaptive-rx, governor, thp) on snode1 and snode2, peers each other.
SNODE1 = ('U\t0\nB\t6d96b6ae-678e-4724-8ecb-65854d72e31a\nN\tnet:[4026532396]\nC\t0-1\n'
          'V\tsysctl.net.ipv4.tcp_sack\tnet.ipv4.tcp_sack\t1\n'
          'V\tsysctl.net.ipv4.tcp_congestion_control\tnet.ipv4.tcp_congestion_control\tbbr\n'
          'A\tsysctl.net.ipv4.tcp_congestion_control\treno bbr cubic\n'
          'X\tsysctl.net.ipv4.tcp_low_latency\tnet.ipv4.tcp_low_latency\tdoes not exist here\n'
          'X\tsysctl.net.core.netdev_max_backlog\tnet.core.netdev_max_backlog\tdoes not exist here\n'
          'X\tgovernor\t\tno cpufreq scaling_governor here (no frequency scaling driver)\nA\tgovernor\t\n'
          'V\tthp\t/sys/kernel/mm/transparent_hugepage/enabled\talways [madvise] never\n'
          'P\tsnode2\t10.80.0.12\teth0\nT\tdefault via 10.80.0.1 dev eth0 \n'
          'T\t10.80.0.0/24 dev eth0 proto kernel scope link src 10.80.0.11 \n'
          'V\tmtu\teth0\t1500\nL\teth0\t68 65535\n'
          'V\trps\t/sys/class/net/eth0/queues/rx-0/rps_cpus\t0\n'
          'V\trps_flow_cnt\t/sys/class/net/eth0/queues/rx-0/rps_flow_cnt\t0\n'
          'X\tcoalesce\teth0\tethtool -c: netlink error: Operation not supported\n')
SNODE2 = ('U\t0\nB\t6d96b6ae-678e-4724-8ecb-65854d72e31a\nN\tnet:[4026532467]\nC\t0-1\n'
          'V\tsysctl.net.ipv4.tcp_sack\tnet.ipv4.tcp_sack\t1\n'
          'V\tsysctl.net.ipv4.tcp_congestion_control\tnet.ipv4.tcp_congestion_control\tbbr\n'
          'A\tsysctl.net.ipv4.tcp_congestion_control\treno bbr cubic\n'
          'X\tsysctl.net.ipv4.tcp_low_latency\tnet.ipv4.tcp_low_latency\tdoes not exist here\n'
          'X\tsysctl.net.core.netdev_max_backlog\tnet.core.netdev_max_backlog\tdoes not exist here\n'
          'X\tgovernor\t\tno cpufreq scaling_governor here (no frequency scaling driver)\nA\tgovernor\t\n'
          'V\tthp\t/sys/kernel/mm/transparent_hugepage/enabled\talways [madvise] never\n'
          'P\tsnode1\t10.80.0.11\teth0\nT\tdefault via 10.80.0.1 dev eth0 \n'
          'T\t10.80.0.0/24 dev eth0 proto kernel scope link src 10.80.0.12 \n'
          'V\tmtu\teth0\t1500\nL\teth0\t68 65535\n'
          'V\trps\t/sys/class/net/eth0/queues/rx-0/rps_cpus\t0\n'
          'V\trps_flow_cnt\t/sys/class/net/eth0/queues/rx-0/rps_flow_cnt\t0\n'
          'X\tcoalesce\teth0\tethtool -c: netlink error: Operation not supported\n')
# read_script(tcp_sack, net.core.rmem_max, thp) on this machine as uid 65534 (setpriv).
NOBODY = ('U\t65534\nB\t6d96b6ae-678e-4724-8ecb-65854d72e31a\nN\tnet:[4026531833]\nC\t0-1\n'
          'V\tsysctl.net.ipv4.tcp_sack\tnet.ipv4.tcp_sack\t1\n'
          'W\tsysctl.net.ipv4.tcp_sack\tnet.ipv4.tcp_sack\tnot writable\n'
          'V\tsysctl.net.core.rmem_max\tnet.core.rmem_max\t4194304\n'
          'W\tsysctl.net.core.rmem_max\tnet.core.rmem_max\tnot writable\n'
          'V\tthp\t/sys/kernel/mm/transparent_hugepage/enabled\talways [madvise] never\n'
          'W\tthp\t/sys/kernel/mm/transparent_hugepage/enabled\tnot writable\n')
# `ethtool -c eth0` on this machine (virtio_net, ethtool 6.1).
ETHTOOL_C = """Coalesce parameters for eth0:
Adaptive RX: off  TX: n/a
stats-block-usecs: n/a
sample-interval: n/a
pkt-rate-low: n/a
pkt-rate-high: n/a

rx-usecs: 0
rx-frames: 1
rx-usecs-irq: n/a
rx-frames-irq: n/a

tx-usecs: 0
tx-frames: 1
tx-usecs-irq: n/a
"""
# `ip -o route show table main` on snode1 after `ip route change ... rto_min 5ms`.
ROUTE_WITH_RTO = "10.80.0.0/24 dev eth0 proto kernel scope link src 10.80.0.11 rto_min lock 5ms "


# --- the allow-list and validation


def test_values_are_normalised_to_text():
    out = ss.validate({"sysctl.net.ipv4.tcp_sack": False, "mtu": 9000, "rto_min": "0.2s",
                       "coalesce.adaptive-rx": True, "rps": "0-3", "sysctl.net.ipv4.tcp_rmem": "4096,131072,6291456",
                       "thp": "never", "interface": "eth0"})
    assert out == {"sysctl.net.ipv4.tcp_sack": "0", "mtu": "9000", "rto_min": "200ms", "coalesce.adaptive-rx": "on",
                   "rps": "0-3", "sysctl.net.ipv4.tcp_rmem": "4096 131072 6291456", "thp": "never",
                   "interface": "eth0"}
    assert ss.validate(out) == out  # normalised values validate to themselves


@pytest.mark.parametrize(("settings", "says"), [
    ({"sysctl.kernel.core_pattern": "|/tmp/x"},
     "'sysctl.kernel.core_pattern' is not a setting clusterbench may change"),
    ({"sysctl.net.ipv4.tcp_sak": 0}, "did you mean sysctl.net.ipv4.tcp_sack"),
    ({"sysctl.net.ipv4.tcp_sack": 2}, "sysctl.net.ipv4.tcp_sack: not 1 or 0: '2'; allowed: 1 or 0"),
    ({"mtu": 65536}, "mtu: 65536 is out of range; allowed: an integer from 68 to 65535"),
    ({"mtu": 9000.5}, "mtu: not an integer"),
    ({"rto_min": "0ms"}, "allowed: a duration from 1ms to 120s"),
    ({"sysctl.net.ipv4.tcp_rmem": "6291456 131072 4096"}, "min <= default <= max"),
    ({"rps": "0-5000"}, "beyond 4095"),
    ({"thp": "sometimes"}, "allowed: one of always, madvise, never"),
    ({"mtu": [1500, 9000]}, "a single value is needed, not list"),
    ({"mtu": None}, "a single value is needed, not NoneType"),
    ({"mca.btl tcp": 1}, "an MPI parameter name is a letter then letters"),
    ({"sysctl.net.ipv4.tcp_sack\n": 1}, "not a setting name"),
])
def test_bad_keys_and_values_are_refused_naming_the_key(settings, says):
    with pytest.raises(ValueError) as exc:
        ss.validate(settings)
    assert says in str(exc.value)


@pytest.mark.parametrize("hostile", ["1; touch /tmp/pwned", "1\ntouch /tmp/pwned", "$(touch /tmp/pwned)",
                                     "`touch /tmp/pwned`", "1\x00", "eth0; reboot", "9000 && reboot"])
def test_hostile_values_never_validate(hostile):
    for key in ("sysctl.net.ipv4.tcp_sack", "mtu", "rto_min", "rps", "interface", "governor",
                "sysctl.net.ipv4.tcp_congestion_control", "coalesce.rx-usecs"):
        with pytest.raises(ValueError):
            ss.validate({key: hostile})


def test_a_ten_megabyte_value_is_refused_by_its_length():
    started = time.perf_counter()
    with pytest.raises(ValueError, match="10,000,000 characters long"):
        ss.validate({"mca.btl_tcp_if_include": "x" * 10_000_000})
    assert time.perf_counter() - started < 1.0
    with pytest.raises(ValueError, match="at most 128"):
        ss.validate({f"mca.p{i}": 1 for i in range(129)})


def test_mpi_parameters_become_environment_variables_only():
    settings = {"mca.btl_tcp_eager_limit": 131072, "cvar.ch3_eager_max_msg_size": "65536", "mtu": 9000}
    assert ss.mpi_env(settings) == {"OMPI_MCA_btl_tcp_eager_limit": "131072",
                                    "MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE": "65536"}
    assert ss.machine_keys(ss.validate(settings)) == {"mtu": "9000"}
    with pytest.raises(ValueError, match="control character"):
        ss.mpi_env({"mca.btl": "tcp\nself"})


def test_cpu_lists_become_the_kernels_rps_mask():
    assert ss.cpu_mask(ss.parse_cpulist("0-1")) == "3"
    assert ss.cpu_mask(ss.parse_cpulist("0-3,6")) == "4f"
    assert ss.cpu_mask(ss.parse_cpulist("0-39")) == "ff,ffffffff"  # 32-bit words, as rps_cpus prints them
    assert ss.cpu_mask([]) == "0"
    assert ss.duration_ms("200000us") == 200 and ss.duration_ms("5") == 5 and ss.duration_ms("1.5s") == 1500


def test_the_doc_table_lists_every_allowed_key_and_no_other():
    doc = (ROOT / "docs" / "settings.md").read_text()
    keys = re.findall(r"^\| `([^`]+)` \| (netns|kernel|process) \|", doc, flags=re.M)
    assert {k for k, _ in keys} == set(ss.ALLOWED)
    assert all(ss.ALLOWED[k].scope == scope for k, scope in keys)


def test_every_entry_documents_itself():
    for t in ss.ALLOWED.values():
        assert t.description and t.allowed and t.scope in ("netns", "kernel", "process"), t.key
        assert t.needs_root == (t.kind not in ("env", "interface")), t.key


# --- parsing the nodes' answers and planning the changes


def test_a_nodes_answer_becomes_the_changes_and_the_refusals():
    state = ss.parse_read(SNODE1)
    assert (state.uid, state.netns, state.max_cpu) == (0, "net:[4026532396]", 1)
    settings = ss.validate({"mtu": 9000, "rto_min": "5ms", "sysctl.net.ipv4.tcp_sack": 0, "rps": "0-1",
                            "sysctl.net.ipv4.tcp_congestion_control": "reno", "mca.btl_tcp_eager_limit": 1})
    items, problems = ss.plan_node(state, settings)
    assert problems == []
    assert [(i.key, i.target, i.original, i.value) for i in items] == [
        ("mtu", "eth0", "1500", "9000"),
        ("rto_min", "10.80.0.0/24 dev eth0 proto kernel scope link src 10.80.0.11", "", "5ms"),
        ("sysctl.net.ipv4.tcp_sack", "net.ipv4.tcp_sack", "1", "0"),
        ("rps", "/sys/class/net/eth0/queues/rx-0/rps_cpus", "0", "3"),
        ("sysctl.net.ipv4.tcp_congestion_control", "net.ipv4.tcp_congestion_control", "bbr", "reno"),
    ]


def test_what_a_node_cannot_take_is_refused_with_the_reason():
    state = ss.parse_read(SNODE1)
    _, problems = ss.plan_node(state, ss.validate({
        "governor": "performance", "coalesce.rx-usecs": 50, "sysctl.net.ipv4.tcp_low_latency": 1,
        "sysctl.net.core.netdev_max_backlog": 5000, "rps": "0-2", "sysctl.net.ipv4.tcp_congestion_control": "vegas",
        "interface": "eth0", "mtu": 9000}))
    assert problems == [
        "governor=performance: no cpufreq scaling_governor here (no frequency scaling driver)",
        "coalesce.rx-usecs=50: eth0: ethtool -c: netlink error: Operation not supported",
        "sysctl.net.ipv4.tcp_low_latency=1: net.ipv4.tcp_low_latency: does not exist here",
        "sysctl.net.core.netdev_max_backlog=5000: net.core.netdev_max_backlog: does not exist here",
        "rps=0-2: CPU 2 does not exist here (CPUs 0-1)",
        "sysctl.net.ipv4.tcp_congestion_control=vegas: not available here (available: reno bbr cubic)",
    ]


def test_a_non_root_user_is_told_root_is_needed():
    state = ss.parse_read(NOBODY)
    _, problems = ss.plan_node(state, ss.validate({"sysctl.net.ipv4.tcp_sack": 0, "thp": "never",
                                                   "mca.btl_tcp_eager_limit": 131072}))
    assert problems == ["sysctl.net.ipv4.tcp_sack=0: needs root (the settings run as uid 65534 there)",
                        "thp=never: needs root (the settings run as uid 65534 there)"]


def test_changes_shared_by_nodes_on_one_kernel_are_made_once():
    states = {"snode1": ss.parse_read(SNODE1), "snode2": ss.parse_read(SNODE2)}
    plans, problems = es._plan(states, ss.validate({"sysctl.net.ipv4.tcp_sack": 0, "thp": "never"}))
    assert problems == []
    assert [(i.key, i.original) for i in plans["snode1"]] == [("sysctl.net.ipv4.tcp_sack", "1"), ("thp", "madvise")]
    assert [i.key for i in plans["snode2"]] == ["sysctl.net.ipv4.tcp_sack"]  # own namespace, same kernel
    twice = {"snode1": ss.parse_read(SNODE1), "snode1.local": ss.parse_read(SNODE1)}  # one node, two names
    assert list(es._plan(twice, {"sysctl.net.ipv4.tcp_sack": "0"})[0]) == ["snode1"]


def test_routes_and_coalescing_are_read_as_ip_and_ethtool_print_them():
    state = ss.parse_read(SNODE1)
    assert ss.select_routes(state, None) == ["10.80.0.0/24 dev eth0 proto kernel scope link src 10.80.0.11 "]
    assert ss.select_routes(state, "eth0") == [r for r in state.routes]
    one_node = ss.parse_read(SNODE1.replace("P\tsnode2\t10.80.0.12\teth0", "P\t\tdefault\teth0"))
    assert ss.select_routes(one_node, None) == ["default via 10.80.0.1 dev eth0 "]
    assert ss.split_rto_min(ROUTE_WITH_RTO) == ("10.80.0.0/24 dev eth0 proto kernel scope link src 10.80.0.11", "5ms")
    assert ss.parse_coalesce(ETHTOOL_C) == {
        "adaptive-rx": "off", "adaptive-tx": "n/a", "stats-block-usecs": "n/a", "sample-interval": "n/a",
        "pkt-rate-low": "n/a", "pkt-rate-high": "n/a", "rx-usecs": "0", "rx-frames": "1", "rx-usecs-irq": "n/a",
        "rx-frames-irq": "n/a", "tx-usecs": "0", "tx-frames": "1", "tx-usecs-irq": "n/a"}
    state.coalesce["eth0"] = ss.parse_coalesce(ETHTOOL_C)
    del state.missing["coalesce"]
    items, problems = ss.plan_node(state, {"coalesce.adaptive-rx": "on", "coalesce.adaptive-tx": "on"})
    assert [(i.target, i.original, i.value) for i in items] == [("eth0", "off", "on")]
    assert problems == ["coalesce.adaptive-tx=on: the driver of eth0 has no adaptive-tx (ethtool -c)"]


# --- the scripts: quoting, and targets a journal may not redirect


def test_every_substituted_word_is_one_quoted_argument():
    item = ss.Item("sysctl.net.ipv4.tcp_sack", "sysctl", "net.ipv4.tcp_sack", "1; touch /tmp/pwned $(id)", "0")
    line = next(x for x in ss.change_script([item], restore=True).splitlines() if x.startswith("step "))
    assert shlex.split(line) == ["step", "0", "put", "/proc/sys/net/ipv4/tcp_sack", "1; touch /tmp/pwned $(id)"]
    route = ss.Item("rto_min", "rto_min", "10.80.0.0/24 dev eth0 proto kernel scope link src 10.80.0.11", "", "5ms")
    assert ss.change_command(route, "5ms") == ["ip", "route", "change", "10.80.0.0/24", "dev", "eth0", "proto",
                                               "kernel", "scope", "link", "src", "10.80.0.11", "rto_min", "5ms"]
    assert ss.change_command(route, "")[-1] == "10.80.0.11"  # restoring 'no rto_min' drops it


@pytest.mark.parametrize("item", [
    ss.Item("sysctl.net.ipv4.tcp_sack", "sysctl", "kernel.core_pattern", "1", "0"),
    ss.Item("rps", "rps", "/etc/passwd", "x", "3"),
    ss.Item("rps", "rps", "/sys/class/net/eth0/queues/rx-0/../../../../../etc/shadow", "x", "3"),
    ss.Item("rps", "rps_flow_cnt", "/sys/class/net/eth0/queues/rx-0/rps_flow_cnt", "0", "3"),
    ss.Item("mtu", "mtu", "eth0;reboot", "1500", "9000"),
    ss.Item("rto_min", "rto_min", "10.0.0.0/24 dev eth0 ;reboot", "", "5ms"),
    ss.Item("governor", "governor", "/sys/devices/system/cpu/cpu0/cpufreq/../../../../../tmp/x", "a", "b"),
    ss.Item("sysctl.net.ipv4.tcp_sack", "sysctl", "net.ipv4.tcp_sack", "1\ntouch /tmp/x", "0"),
])
def test_a_tampered_journal_cannot_point_a_write_elsewhere(item):
    with pytest.raises(ValueError):
        ss.change_command(item, item.original)


@needs_root
def test_a_hostile_value_stays_one_word_when_the_script_runs(tmp_path):
    """In a throw-away network namespace (root there changes nothing outside it): the hostile
    original is written as text, the kernel refuses it, nothing it names runs; a plain value works."""
    marks = [tmp_path / "pwned-1", tmp_path / "pwned-2", tmp_path / "pwned-3"]
    hostile = f"1; touch {marks[0]} $(touch {marks[1]}) `touch {marks[2]}`"
    items = [ss.Item("sysctl.net.ipv4.tcp_sack", "sysctl", "net.ipv4.tcp_sack", hostile, "0"),
             ss.Item("sysctl.net.ipv4.tcp_timestamps", "sysctl", "net.ipv4.tcp_timestamps", "0", "2")]
    script = ss.change_script(items, restore=True)
    out = subprocess.run(["unshare", "--net", "bash", "-c", 'bash -c "$1"; cat /proc/sys/net/ipv4/tcp_timestamps',
                          "_", script], capture_output=True, text=True, timeout=30)
    results = ss.parse_results(out.stdout, 2)
    assert results[1] is None and out.stdout.endswith("\n0\n"), out.stdout  # the plain original was written
    assert "Invalid argument" in results[0]
    assert not any(m.exists() for m in marks)


# --- the lock and the journal (this machine only)


def _hold_lock(folder: Path) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from clusterbench.execution.settings import SettingsLock
        SettingsLock({str(folder)!r}).acquire()
        print("locked", flush=True)
        time.sleep(120)
        """)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "locked"
    return child


def test_a_second_process_is_refused_the_lock_with_the_holders_pid(tmp_path):
    child = _hold_lock(tmp_path)
    try:
        with pytest.raises(EnvironmentProblem) as exc:
            es.SettingsLock(tmp_path).acquire()
        assert f"another clusterbench process (PID {child.pid}) is changing system settings" in str(exc.value)
        assert exc.value.exit_code == 1
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    es.SettingsLock(tmp_path).acquire().release()  # the kernel freed it with its holder


def test_a_tampered_or_broken_journal_is_kept_and_nothing_runs(tmp_path):
    before = Path("/proc/sys/kernel/core_pattern").read_text()
    tampered = {"format": es.JOURNAL_FORMAT, "version": 1, "hosts": {"localhost": [
        {"key": "sysctl.net.ipv4.tcp_sack", "kind": "sysctl", "target": "kernel.core_pattern",
         "original": "|/bin/false", "value": "0"}]}}
    (tmp_path / "journal-2-1.json").write_text(json.dumps(tampered))
    (tmp_path / "journal-1-1.json").write_text('{"format": "clusterbench-settings-journal", "hosts": [')
    messages = es.restore_pending(tmp_path)
    assert messages[0] == ("journal-2-1.json: localhost: will not restore: sysctl.net.ipv4.tcp_sack: target "
                           "'kernel.core_pattern' is not its sysctl")
    assert "journal-1-1.json: cannot read this journal" in messages[2]
    assert Path("/proc/sys/kernel/core_pattern").read_text() == before
    assert sorted(p.name for p in es.pending_journals(tmp_path)) == ["journal-1-1.json", "journal-2-1.json"]


def test_cli_lists_the_allow_list_and_restores_nothing_when_nothing_is_pending():
    listed = cli("system", "settings")
    assert listed.returncode == 0, listed.stderr
    assert all(key in listed.stdout for key in ss.ALLOWED)
    out = cli("system", "restore")
    assert out.returncode == 0 and "nothing to restore" in out.stdout
    bad = cli("system", "check", "sysctl.kernel.core_pattern=x")
    assert bad.returncode == 2 and "is not a setting clusterbench may change" in bad.stderr


# --- on the virtual cluster


def vc(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                         env=os.environ | {"CLUSTERBENCH_VC_NAME": VC_NAME})
    if check:
        assert out.returncode == 0, out.stdout + out.stderr
    return out


@pytest.fixture(scope="module")
def nodes():
    """snode1 and snode2, up for this module (taken down at its end if it brought them up)."""
    if os.geteuid() != 0 or not shutil.which("sshd"):
        pytest.skip("the virtual cluster needs root and openssh-server (make setup as root)")
    ours = not (STATE / "size").exists()
    if ours:
        vc("up", "2", "--name", VC_NAME, "--prefix", "snode", "--subnet", "10.80.0", "--port", "7017", "--no-slurm")
    host_sack = Path("/proc/sys/net/ipv4/tcp_sack").read_text()
    yield NODES
    assert Path("/proc/sys/net/ipv4/tcp_sack").read_text() == host_sack  # this machine's own never changed
    if ours:
        vc("down", "--name", VC_NAME)


def snapshot(node: str) -> dict:
    """What the node says, read inside its namespaces (not through clusterbench, not over ssh)."""
    out = vc("exec", node, "bash", "-c", "ip -o link show dev eth0; echo @; ip -o route show table main; echo @; "
                                         "sysctl -n net.ipv4.tcp_sack; cat /sys/class/net/eth0/queues/rx-0/rps_cpus")
    link, routes, rest = out.stdout.split("@\n")
    sack, rps = rest.split()
    return {"mtu": int(re.search(r" mtu (\d+) ", link).group(1)), "routes": routes, "tcp_sack": sack, "rps": rps}


@pytest.fixture
def journal(nodes, tmp_path):
    """A journal folder; at the end, the nodes are as they were at the start."""
    before = {n: snapshot(n) for n in nodes}
    folder = tmp_path / "settings-journal"
    yield folder
    es.restore_pending(folder)
    assert {n: snapshot(n) for n in nodes} == before


TUNED = {"mtu": 9000, "rto_min": "5ms", "sysctl.net.ipv4.tcp_sack": 0, "rps": "0-1",
         "mca.btl_tcp_eager_limit": 131072}


def assert_tuned(node: str, before: dict) -> None:
    now = snapshot(node)
    assert now["mtu"] == 9000 and now["tcp_sack"] == "0" and now["rps"] == "3"
    subnet = re.search(r"^10\.80\.0\.0/24 .*$", now["routes"], flags=re.M).group(0)
    assert subnet.rstrip().endswith("rto_min lock 5ms")
    assert "rto_min" not in now["routes"].replace(subnet, "")  # the default route is not the run's route
    assert before["mtu"] == 1500 and before["tcp_sack"] == "1" and "rto_min" not in before["routes"]


@cluster
def test_applied_on_the_nodes_then_restored_exactly(nodes, journal):
    before = {n: snapshot(n) for n in nodes}
    es.preflight(nodes, [TUNED, {"mtu": 1500}], nodes)
    applied = es.apply(journal, nodes, TUNED, nodes)
    assert applied.env == {"OMPI_MCA_btl_tcp_eager_limit": "131072"}
    for n in nodes:
        assert_tuned(n, before[n])
    saved = json.loads(next(journal.glob("journal-*.json")).read_text())
    assert {i["key"]: i["original"] for i in saved["hosts"]["snode2"]} == {
        "mtu": "1500", "rto_min": "", "sysctl.net.ipv4.tcp_sack": "1", "rps": "0"}
    messages = es.restore(applied)
    assert messages[0].startswith("snode1: restored rps=0 (/sys/class/net/eth0/queues/rx-0/rps_cpus), "
                                  "sysctl.net.ipv4.tcp_sack=1, rto_min=(none) (10.80.0.0/24 dev eth0")
    assert {n: snapshot(n) for n in nodes} == before
    assert es.pending_journals(journal) == [] and es.restore(applied) == []  # twice is harmless


@cluster
def test_the_context_manager_restores_after_an_exception_and_ctrl_c(nodes, journal):
    before = {n: snapshot(n) for n in nodes}
    for interruption in (RuntimeError("the run failed"), KeyboardInterrupt()):
        with pytest.raises(type(interruption)):
            with es.applied_settings(journal, nodes, {"mtu": 9000, "rto_min": "5ms"}, nodes):
                assert snapshot("snode1")["mtu"] == 9000
                raise interruption
        assert {n: snapshot(n) for n in nodes} == before and es.pending_journals(journal) == []


CHILD = """
import json, sys, time
from pathlib import Path
from clusterbench.execution.settings import apply
applied = apply(Path(sys.argv[1]), ["snode1", "snode2"], json.loads(sys.argv[2]), ["snode1", "snode2"])
print("applied", flush=True)
time.sleep(300)
"""


def apply_in_child(journal: Path) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(journal), json.dumps(TUNED)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = child.stdout.readline().strip()
    assert line == "applied", child.stderr.read() if child.poll() is not None else line
    return child


@cluster
def test_kill_9_leaves_a_journal_that_restore_pending_and_the_cli_put_back(nodes, journal):
    before = {n: snapshot(n) for n in nodes}
    db = journal.parent / "results.db"
    assert es.journal_dir_for(db) == journal
    for restorer in ("restore_pending", "cli"):
        child = apply_in_child(journal)
        try:
            for n in nodes:
                assert_tuned(n, before[n])
            # While it runs: a second apply is refused, and so is a restore (it would undo a live run).
            with pytest.raises(EnvironmentProblem, match=f"PID {child.pid}"):
                es.apply(journal, nodes, {"mtu": 1400}, nodes)
            busy = cli("system", "restore", "--db", str(db))
            assert busy.returncode == 1 and f"PID {child.pid}" in busy.stderr
            assert snapshot("snode1")["mtu"] == 9000
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        assert len(es.pending_journals(journal)) == 1
        assert snapshot("snode2")["mtu"] == 9000  # nothing restored it yet
        if restorer == "restore_pending":
            messages = es.restore_pending(journal)
            assert len(messages) == 2 and "snode2: restored" in messages[1]
        else:
            out = cli("system", "restore", "--db", str(db))
            assert out.returncode == 0, out.stderr
            assert "snode1: restored" in out.stdout and "snode2: restored" in out.stdout
        assert {n: snapshot(n) for n in nodes} == before
        assert es.pending_journals(journal) == []
    assert "nothing to restore" in cli("system", "restore", "--db", str(db)).stdout


@cluster
def test_refused_before_anything_changes(nodes, journal):
    before = {n: snapshot(n) for n in nodes}
    for bad in ({"mtu": 9000, "sysctl.kernel.core_pattern": "|/tmp/x"}, {"rto_min": "5ms", "mtu": 65536},
                {"mtu": 9000, "sysctl.net.ipv4.tcp_sack": "1; touch /tmp/pwned"}):
        with pytest.raises(UserInputError) as exc:
            es.apply(journal, nodes, bad, nodes)
        assert exc.value.exit_code == 2
    # Valid everywhere, but a node cannot take it: refused by what the nodes answered.
    with pytest.raises(UserInputError) as exc:
        es.apply(journal, nodes, {"mtu": 9000, "governor": "performance", "coalesce.adaptive-rx": "on"}, nodes)
    assert str(exc.value).splitlines()[1:3] == [
        "snode1, snode2: governor=performance: no cpufreq scaling_governor here (no frequency scaling driver)",
        "snode1, snode2: coalesce.adaptive-rx=on: eth0: ethtool -c: netlink error: Operation not supported"]
    assert exc.value.exit_code == 2
    assert {n: snapshot(n) for n in nodes} == before and es.pending_journals(journal) == []


@cluster
def test_a_crash_between_journal_and_first_change_restores_harmless_originals(nodes, journal):
    """The journal is on disk, nothing was changed yet (the process died there): restoring writes
    back the values the nodes hold anyway."""
    before = {n: snapshot(n) for n in nodes}
    settings = ss.validate({"mtu": 9000, "rto_min": "5ms", "sysctl.net.ipv4.tcp_sack": 0})
    plans, problems = es._plan(es._read(nodes, [settings], nodes), settings)
    assert problems == [] and sorted(plans) == nodes
    es.Journal.create(journal, settings, plans)
    messages = es.restore_pending(journal)
    assert [m.split(": ", 1)[1][:17] for m in messages] == ["snode1: restored ", "snode2: restored "]
    assert {n: snapshot(n) for n in nodes} == before and es.pending_journals(journal) == []


def sshd_up(node: str) -> bool:
    line = next(x for x in vc("status", "--name", VC_NAME).stdout.splitlines() if x.startswith(node + " "))
    return line.split()[3] == "up"


@cluster
def test_a_node_lost_part_way_restores_the_others_and_keeps_its_journal(nodes, journal, monkeypatch):
    """snode2's sshd stops between the read and the change, as a node that dies would."""
    before = {n: snapshot(n) for n in nodes}
    real_read = es._read

    def read_then_lose_snode2(*args, **kwargs):
        states = real_read(*args, **kwargs)
        vc("sshd", "snode2", "stop", "--name", VC_NAME)
        return states

    monkeypatch.setattr(es, "_read", read_then_lose_snode2)
    try:
        with pytest.raises(EnvironmentProblem) as exc:
            es.apply(journal, nodes, {"mtu": 9000, "sysctl.net.ipv4.tcp_sack": 0}, nodes)
        assert not sshd_up("snode2")
        text = str(exc.value)
        assert "snode2: mtu=9000 (eth0): " in text and "snode1: restored sysctl.net.ipv4.tcp_sack=1, mtu=1500" in text
        assert "snode2: unreachable, nothing restored" in text
        assert {n: snapshot(n) for n in nodes} == before  # snode1 put back, snode2 never reached
        [kept] = es.pending_journals(journal)
        assert list(json.loads(kept.read_text())["hosts"]) == ["snode2"]
        down = cli("system", "restore", "--db", str(journal.parent / "results.db"))
        assert down.returncode == 1, down.stdout + down.stderr
        assert "snode2: unreachable" in down.stdout and "could not be fully restored" in down.stderr
    finally:
        if not sshd_up("snode2"):
            vc("sshd", "snode2", "start", "--name", VC_NAME)
    assert es.restore_pending(journal)[0].startswith(f"{kept.name}: snode2: restored")
    assert es.pending_journals(journal) == []


@cluster
def test_a_non_root_login_is_refused_with_exit_2(nodes, tmp_path):
    """The nodes reached as a user without root: ssh logs in as root, then drops to uid 65534
    before running clusterbench's script, as a site's non-root account would."""
    wrapper = tmp_path / "ssh-as-nobody"
    wrapper.write_text('#!/bin/bash\nhost=${@: -2:1}; cmd=${@: -1}\n'
                       'exec ssh "${@:1:$#-2}" "$host" "setpriv --reuid=65534 --regid=65534 --clear-groups '
                       'bash -c $(printf %q "$cmd")"\n')
    wrapper.chmod(0o755)
    out = cli("system", "check", "sysctl.net.ipv4.tcp_sack=0", "mtu=9000", "mca.btl_tcp_eager_limit=131072",
              "--host", "snode1", env={"CLUSTERBENCH_SSH": str(wrapper)})
    assert out.returncode == 2, out.stderr
    assert "snode1: sysctl.net.ipv4.tcp_sack=0: needs root (the settings run as uid 65534 there)" in out.stderr
    assert "snode1: mtu=9000: needs root" in out.stderr and "run clusterbench as root" in out.stderr
    ok = cli("system", "check", "sysctl.net.ipv4.tcp_sack=0", "mtu=9000", "--host", "snode1", "--host", "snode2")
    assert ok.returncode == 0 and "2 setting(s) can be applied on snode1, snode2" in ok.stdout
