"""A node's system state as facts (issue 18, deliverable 1): the script, its parser, the clock.

Parsed answers are real: captured on this VM and in a network namespace (tests/fixtures/state,
README there), or produced by running the script here, in the root namespace (read only) and in a
temporary namespace `cbst-<pid>` with a veth pair whose MTU, RPS and route rto_min are set.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from clusterbench.errors import UserInputError
from clusterbench.system import state as st
from clusterbench.system.state import SECTIONS, flatten, parse_state, state_script
from clusterbench.system.state_parse import MAX_FLAT_KEYS
from clusterbench.system.state_text import MAX_TEXT_CHARS

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "state"
NS = f"cbst-{os.getpid()}"


def run(script: str, env: dict | None = None, netns: str | None = None) -> str:
    argv = [shutil.which("bash") or "/bin/bash", "-c", script]
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def fixture_state(name: str, host: str = "vm") -> dict:
    return parse_state((FIXTURES / name).read_text(), host)


def measured_apart(a: dict, b: dict) -> set[str]:
    """Keys of two flattened states that differ, leaving out the measured ones."""
    fa, fb = flatten(a), flatten(b)
    return {k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k) and not k.startswith("measured.")}


# --------------------------------------------------------------------------- captured answers

def test_captured_vm_answer_gives_its_facts():
    s = fixture_state("answer-vm.txt")
    assert s["notes"] == []
    assert s["kernel"]["release"] == "6.18.44-fc-v657"
    # No debugfs, no preempt= and no /boot/config: uname -v is all there is, and it says so.
    assert s["kernel"]["preempt"] == "dynamic" and "uname -v" in s["kernel"]["preempt_source"]
    assert s["kernel"]["cmdline"] == {"mitigations": "auto,no_guest_host,no_guest_guest"}
    assert s["cpu"] == {"online": "0-1", "smt": {"control": "notsupported", "active": "0"}, "cpufreq": "absent"}
    assert s["memory"] == {"thp_enabled": "madvise", "thp_defrag": "madvise", "numa_balancing": "0"}
    assert s["tcp"] == {"sack": "1", "timestamps": "1", "rmem": "4096 131072 33554432", "wmem": "4096 16384 4194304",
                        "congestion_control": "bbr", "rmem_max": "4194304", "wmem_max": "4194304"}
    assert "lo" not in s["nic"]
    eth0 = s["nic"]["eth0"]
    assert (eth0["mtu"], eth0["driver"], eth0["speed_mbps"]) == ("1400", "virtio_net", "unknown")
    assert eth0["coalesce"] == {"adaptive_rx": "off", "rx-usecs": "0", "rx-frames": "1", "tx-usecs": "0",
                                "tx-frames": "1"}
    assert eth0["ring"] == {"rx_max": "256", "tx_max": "256", "rx": "256", "tx": "256", "tx_push": "off"}
    assert eth0["offload"]["tcp-segmentation-offload"] == "on"
    assert eth0["offload"]["large-receive-offload"] == "off fixed"
    assert eth0["rps"] == {"rps_cpus": "all 1 rx queues: none", "rps_flow_cnt": "all 1 rx queues: 0"}
    # eth0 is virtio2 on PCI 0000:00:03.0: its queues' IRQs 37-39, not virtio0's or virtio4's.
    assert eth0["irq"] == {"virtio2-config": "0-1", "virtio2-input.0": "0-1", "virtio2-output.0": "0-1"}
    assert s["nic"]["linkvcv1"]["driver"] == "veth" and s["nic"]["linkvcv1"]["coalesce"] == "unsupported"
    assert s["route"]["192.0.2.1"] == {"address": "192.0.2.1", "dev": "eth0", "src": "192.0.2.2",
                                       "rto_min": "default",
                                       "route": "192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2"}
    assert s["route"]["localhost"]["route"] == "local (not in the main table)"


def test_captured_mpi_facts_say_where_each_value_came_from():
    mpi = fixture_state("answer-vm.txt")["mpi"]
    assert mpi["env"] == {"OMPI_MCA_btl_tcp_eager_limit": "131072", "MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE": "65536"}
    assert mpi["openmpi_version"] == "4.1.4"
    assert mpi["openmpi"]["btl_tcp_eager_limit"] == "131072"
    assert mpi["openmpi_source"]["btl_tcp_eager_limit"] == "environment"
    assert mpi["openmpi"]["btl_tcp_rndv_eager_limit"] == "65536"  # a default, kept: it is a limit that applies
    assert mpi["openmpi"]["btl_vader_eager_limit"] == "4096"
    assert (mpi["openmpi"]["pml"], mpi["openmpi_source"]["pml"]) == (
        "^ucx", "file (/etc/openmpi/openmpi-mca-params.conf:69)")
    assert mpi["conf"]["/etc/openmpi/openmpi-mca-params.conf"]["btl"] == "^uct,openib,ofi"
    assert "pml_ob1_priority" not in mpi["openmpi"]  # a default that is not a limit or a selection


def test_captured_clock_is_converted_with_the_microarchitecture():
    s = fixture_state("answer-vm.txt")
    assert s["clock"]["flops_per_cycle"] == "32" and "Sapphire" in s["clock"]["flops_per_cycle_reason"]
    assert (s["clock"]["vector_doubles"], s["clock"]["chains"]) == ("8", "16")
    clock = s["measured"]["clock"]
    assert clock["gflops"] == 85.1998 and clock["ghz"] == pytest.approx(85.1998 / 32, abs=1e-4)
    assert clock["rpeak_gflops"] == pytest.approx(2 * 85.1998, abs=0.01)
    assert s["measured"]["collect"]["ompi_info_cache"] == "miss"
    assert 0.1 < s["measured"]["collect"]["ompi_info_seconds"] < 1


def test_captured_namespace_answer_has_mtu_rps_and_rto_min():
    s = fixture_state("answer-netns.txt", "ns")
    assert set(s["nic"]) == {"cbst-a", "cbst-b"}
    a = s["nic"]["cbst-a"]
    assert (a["mtu"], a["driver"], a["coalesce"], a["ring"]) == ("9000", "veth", "unsupported", "unsupported")
    assert a["rps"] == {"rps_cpus": "all 1 rx queues: 0", "rps_flow_cnt": "all 1 rx queues: 32"}
    assert s["nic"]["cbst-b"]["rps"]["rps_cpus"] == "all 1 rx queues: none"
    assert s["net"]["rps_sock_flow_entries"] == "absent"  # only the first namespace has it
    route = s["route"]
    assert route["10.231.0.2"]["rto_min"] == "5ms"
    assert route["10.232.1.1"] | {} == {
        "address": "10.232.1.1", "dev": "cbst-a", "via": "10.231.0.2", "src": "10.231.0.1", "rto_min": "20ms",
        "mtu": "1400", "route": "10.232.0.0/16 via 10.231.0.2 dev cbst-a mtu 1400 rto_min lock 20ms"}
    assert route["10.99.0.1"] == {"address": "10.99.0.1", "error": "RTNETLINK answers: Network is unreachable"}
    assert route["localhost"]["rto_min"] == "default"
    assert s["measured"]["collect"] == {"seconds": 0.1234, "ompi_info_cache": "hit"}


def test_each_captured_ethtool_answer_is_read_alone():
    """The single-command captures, put in an answer the way the script frames them."""
    def answer(kind: str, target: str) -> str:
        blocks = "".join(f"@@cb:ethtool_{o} nic0\n{(FIXTURES / f'ethtool-{o}-{kind}.txt').read_text()}"
                         for o in "ickg")
        return f"@@cb:nics\nnic0 {target}\n{blocks}@@cb:end\n"

    virtio = parse_state(answer("virtio-eth0", "../../devices/pci0000:00/0000:00:03.0/virtio2/net/nic0"), "h")
    veth = parse_state(answer("veth", "../../devices/virtual/net/nic0"), "h")
    v, e = virtio["nic"]["nic0"], veth["nic"]["nic0"]
    assert v["driver"] == "virtio_net" and e["driver"] == "veth"
    assert v["coalesce"]["rx-frames"] == "1" and e["coalesce"] == "unsupported"
    assert v["ring"]["rx"] == "256" and e["ring"] == "unsupported"
    assert len(v["offload"]) == 63 and len(e["offload"]) == 63  # every feature line of the captures
    assert v["offload"]["generic-receive-offload"] == "on" and e["offload"]["generic-receive-offload"] == "off"
    assert e["offload"]["tx-checksum-sctp"] == "on" and v["offload"]["tx-checksum-sctp"] == "off fixed"
    assert v["mtu"] == "absent"  # no files section: absent, not invented


# --------------------------------------------------------------------------- flatten and sections

def test_flatten_gives_dotted_keys_and_measured_apart():
    s = fixture_state("answer-vm.txt")
    flat = flatten(s)
    assert flat["nic.eth0.mtu"] == "1400"
    assert flat["tcp.sack"] == "1"
    assert flat["route.192.0.2.1.rto_min"] == "default"
    assert flat["kernel.preempt"] == "dynamic"
    assert flat["mpi.openmpi.btl_tcp_eager_limit"] == "131072"
    assert flat["measured.clock.ghz"] == "2.662"
    assert not any(k.startswith("clock.") and k.endswith(("gflops", "ghz")) for k in flat)
    assert "host" not in flat and "format" not in flat
    assert {k.split(".", 1)[0] for k in flat} <= set(SECTIONS)
    assert set(SECTIONS.values()) == {"hardware", "software", "settings", "mpi", "measured"}
    json.dumps(s)  # JSON-able as it is stored


def test_flatten_of_states_differing_in_mtu_differs_in_that_key_only():
    a = fixture_state("answer-netns.txt")
    b = parse_state((FIXTURES / "answer-netns.txt").read_text().replace(
        "/sys/class/net/cbst-a/mtu:9000", "/sys/class/net/cbst-a/mtu:1500"), "vm")
    assert measured_apart(a, b) == {"nic.cbst-a.mtu"}


# --------------------------------------------------------------------------- hostile answers

def test_huge_answer_is_clipped_and_bounded():
    line = "/proc/sys/net/ipv4/tcp_sack:" + "9" * 10_000 + "\n"
    text = "@@cb:files\n" + line * 300 + "@@cb:nics\n" + "".join(f"n{i} x\n" for i in range(200_000))
    s = parse_state(text, "h")
    assert len(text) > MAX_TEXT_CHARS
    assert any("clipped" in n for n in s["notes"]) and any("no end marker" in n for n in s["notes"])
    assert len(s["nic"]) <= 64 and any("network interfaces" in n for n in s["notes"])
    assert len(s["tcp"]["sack"]) < 3000
    assert len(json.dumps(s)) < 200_000 and len(flatten(s)) < MAX_FLAT_KEYS


def test_huge_sections_and_key_counts_are_bounded():
    text = ("@@cb:ethtool_k eth0\n" + "".join(f"f{i}: on\n" for i in range(50_000))
            + "@@cb:nics\neth0 ../../devices/virtual/net/eth0\n"
            + "".join(f"@@cb:route_get p{i}\naddress 10.0.0.1\n10.0.0.1 dev eth0\n" for i in range(5000))
            + "@@cb:mpienv\n" + "".join(f"OMPI_MCA_x{i}={'v' * 5000}\n" for i in range(5000))
            + "@@cb:ompi_info\ncache hit\n" + "".join(f"p{i}\tv\tdefault\n" for i in range(50_000))
            + "@@cb:end\n")
    s = parse_state(text, "h")
    assert len(s["nic"]["eth0"]["offload"]) <= 512
    assert len(s["route"]) <= 256 and len(s["mpi"]["env"]) <= 512
    assert all(len(v) <= 1100 for v in s["mpi"]["env"].values())
    assert len(s["mpi"]["openmpi"]) <= 1024
    assert len(json.dumps(s)) < 2_000_000


@pytest.mark.parametrize("text", [
    "", "garbage\n\x00\x01\xff" * 1000, "@@cb:files\n:::\n/:\n@@cb:\n@@cb:clock\ngflops nan\nexit 0\n",
    "@@cb:clock\ngflops 1e400\nexit 0\n@@cb:lscpu\nModel name: x\n",
    "@@cb:clock\ngflops 80\nexit 0\nvector_doubles 99999999999\n@@cb:lscpu\nCore(s) per socket: zz\n",
    "@@cb:routes\nunreachable\n\n@@cb:route_get p\naddress 999.1.1.1\n999.1.1.1 dev x\n@@cb:end",
    "@@cb:interrupts\n1\t\t\n" + "2\t0\tx\n" * 10 + "@@cb:nics\n" + "a" * 99 + " t\n/ \n@@cb:end",
    "@@cb:files\n/sys/devices/system/cpu/cpufreq/policy0/affected_cpus:0-99999999\n"
    "/sys/devices/system/cpu/cpufreq/policy1/affected_cpus:x\n/sys/class/net/e/queues/rx-0/rps_cpus:"
    + "f" * 5000 + "\n@@cb:nics\ne t\n@@cb:end",
])
def test_garbage_and_missing_sections_do_not_crash(text):
    s = parse_state(text, "h")
    assert s["kernel"]["release"] == "absent" and isinstance(flatten(s), dict)
    json.dumps(s)


def test_missing_sections_are_absent_not_invented():
    s = parse_state("@@cb:end\n", "h")
    assert s["tcp"]["sack"] == "absent" and s["cpu"]["cpufreq"] == "absent" and s["nic"] == {}
    assert s["mpi"]["openmpi"] == "not read" and "clock" not in s and s["notes"] == []


def test_clock_failures_are_recorded():
    missing = parse_state("@@cb:clock\nmissing /x/fmaclock\n@@cb:end\n", "h")
    assert missing["clock"] == {"status": "binary missing: /x/fmaclock"} and "clock" not in missing["measured"]
    crashed = parse_state("@@cb:clock\nIllegal instruction\nexit 132\n@@cb:end\n", "h")
    assert crashed["clock"]["status"].startswith("failed (exit 132)")


# --------------------------------------------------------------------------- the script's inputs

def test_hostile_peer_is_refused_and_would_run_nothing(tmp_path):
    target = tmp_path / "x"
    hostile = [f"$(touch {target})", f"`touch {target}`", f"a;touch {target}", f"a\ntouch {target}", "-oProxy=x"]
    for peer in hostile:
        with pytest.raises(UserInputError):
            state_script(peers=[peer])
    # Below the check, the script quotes them anyway: running it creates nothing.
    out = run(st._script({}, hostile, None, 100))
    assert not target.exists()
    assert "unresolved" in parse_state(out, "h")["route"][f"$(touch {target})"]["address"]


def test_hostile_mpi_values_and_clock_path_run_nothing(tmp_path):
    target = tmp_path / "y"
    value = f"$(touch {target})`touch {target}`;touch {target}\n'\"touch {target}"
    script = state_script({"OMPI_MCA_btl_tcp_eager_limit": value, "PATH": "/evil", "LD_PRELOAD": "/evil.so"},
                          clock_binary=f"/nonexistent/$(touch {target})")
    assert "/evil" not in script  # only MPI variables are exported
    s = parse_state(run(script), "h")
    assert not target.exists()
    assert s["mpi"]["env"]["OMPI_MCA_btl_tcp_eager_limit"] == value.replace("\n", "\\n")
    assert s["clock"]["status"] == f"binary missing: /nonexistent/$(touch {target})"


def test_inputs_are_bounded():
    with pytest.raises(UserInputError, match="at most 256"):
        state_script(peers=[f"n{i}" for i in range(257)])
    with pytest.raises(UserInputError):
        state_script(peers="node1")
    with pytest.raises(UserInputError):
        state_script({"OMPI_MCA_bad-name": "1"})
    with pytest.raises(UserInputError):
        state_script({"OMPI_MCA_x": "v" * 5000})
    with pytest.raises(UserInputError):
        state_script({f"OMPI_MCA_x{i}": "1" for i in range(300)})
    for ms in (9, 5001, True, 10.5):
        with pytest.raises(UserInputError):
            state_script(clock_binary="/x", clock_ms=ms)
    assert "10.0.0.1" in state_script(peers=["10.0.0.1", "node-1.example", "fe80::1", "10.0.0.1"])


# --------------------------------------------------------------------------- this machine

def test_script_on_this_machine_gives_its_facts(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    s = parse_state(run(state_script(), env), "local")
    assert s["notes"] == []
    assert s["kernel"]["release"] == platform.release()
    assert s["tcp"]["sack"] == Path("/proc/sys/net/ipv4/tcp_sack").read_text().strip()
    assert s["tcp"]["congestion_control"] == Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    nics = {p.name for p in Path("/sys/class/net").iterdir()} - {"lo"}
    assert set(s["nic"]) == nics and "lo" not in s["nic"]
    for name in nics:
        assert s["nic"][name]["mtu"] == (Path("/sys/class/net") / name / "mtu").read_text().strip()
    version = platform.uname().version
    if "PREEMPT_RT" in version:
        assert s["kernel"]["preempt"] == "rt"
    elif "PREEMPT_DYNAMIC" not in version and "PREEMPT" in version.split():
        assert s["kernel"]["preempt"] == "full"
    if shutil.which("ompi_info"):
        assert s["mpi"]["openmpi"]["btl_tcp_eager_limit"].isdigit()


@pytest.mark.skipif(not shutil.which("ompi_info"), reason="needs Open MPI's ompi_info")
def test_ompi_info_answer_is_cached_per_environment_and_conf(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), HOME=str(tmp_path))

    def collect(mpi_env: dict) -> dict:
        return parse_state(run(state_script(mpi_env), env), "h")

    first, second = collect({}), collect({})
    assert first["measured"]["collect"]["ompi_info_cache"] == "miss"
    assert second["measured"]["collect"]["ompi_info_cache"] == "hit"
    assert first["mpi"]["openmpi"] == second["mpi"]["openmpi"]
    assert len(list((tmp_path / "cache" / "clusterbench").glob("ompi_info-*.txt"))) == 1
    exported = collect({"OMPI_MCA_btl_tcp_eager_limit": "131072"})
    assert exported["measured"]["collect"]["ompi_info_cache"] == "miss"
    assert exported["mpi"]["openmpi"]["btl_tcp_eager_limit"] == "131072"
    assert exported["mpi"]["openmpi_source"]["btl_tcp_eager_limit"] == "environment"
    (tmp_path / ".openmpi").mkdir()
    user_conf = tmp_path / ".openmpi" / "mca-params.conf"
    user_conf.write_text("btl_tcp_eager_limit = 262144\n")
    from_file = collect({})
    assert from_file["measured"]["collect"]["ompi_info_cache"] == "miss"
    assert from_file["mpi"]["openmpi"]["btl_tcp_eager_limit"] == "262144"
    assert from_file["mpi"]["openmpi_source"]["btl_tcp_eager_limit"].startswith(f"file ({user_conf}")
    assert from_file["mpi"]["conf"][str(user_conf)] == {"btl_tcp_eager_limit": "262144"}


def test_absent_tools_are_recorded_as_absent(tmp_path):
    """No ethtool, no ompi_info: only the tools the script cannot do without are on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("grep", "find", "awk", "ip", "getent", "sha256sum", "stat", "cat", "head", "mkdir", "lscpu"):
        if shutil.which(tool):
            (bin_dir / tool).symlink_to(shutil.which(tool))
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)}
    s = parse_state(run(state_script(peers=["127.0.0.1"]), env), "h")
    assert s["mpi"]["openmpi"] == "absent"
    assert all(nic["driver"] == "ethtool absent" and nic["offload"] == "ethtool absent" for nic in s["nic"].values())
    assert s["route"]["127.0.0.1"]["rto_min"] == "default" and s["notes"] == []


def test_warm_script_is_fast(tmp_path):
    """Target 0.2 s per node with a warm cache; bounded at 1 s here, where other tests share 2 cores."""
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    script = state_script(peers=["127.0.0.1"])
    run(script, env)
    s = parse_state(run(script, env), "h")
    assert s["measured"]["collect"]["seconds"] < 1.0


# --------------------------------------------------------------------------- the clock

@pytest.fixture(scope="module")
def clock_binary() -> str:
    from clusterbench.errors import MissingToolError
    from clusterbench.native.build import BuildError, clock_binary

    try:
        return str(clock_binary())
    except (MissingToolError, BuildError) as exc:
        pytest.skip(f"no C compiler to build fmaclock: {exc}")


def test_measured_clock_is_near_the_cpuinfo_clock(clock_binary, tmp_path):
    s = parse_state(run(state_script(clock_binary=clock_binary, clock_ms=200),
                        dict(os.environ, XDG_CACHE_HOME=str(tmp_path))), "local")
    assert s["clock"]["status"] == "measured", s["clock"]
    mhz = [float(m) for m in re.findall(r"^cpu MHz\s*:\s*([\d.]+)", Path("/proc/cpuinfo").read_text(), re.M)]
    if not mhz or s["clock"]["flops_per_cycle"] == "unknown":
        pytest.skip("no 'cpu MHz' in /proc/cpuinfo or no flops/cycle for this CPU")
    ghz = s["measured"]["clock"]["ghz"]
    # Turbo can run 1.7x above the reported (base) clock; two cores shared with other tests can halve a
    # slice, and the kernel reports the best of ten.
    assert 0.4 * max(mhz) / 1000 < ghz < 2.0 * max(mhz) / 1000, (ghz, mhz)
    assert s["measured"]["clock"]["gflops"] >= s["measured"]["clock"]["gflops_mean"] > 0
    assert 0.2 <= s["measured"]["clock"]["seconds"] < 1.0
    assert s["measured"]["collect"]["clock_seconds"] < 2.0


def test_clock_kernel_refuses_bad_arguments(clock_binary):
    for args in (["--ms", "5"], ["--ms", "6000"], ["--ms", "x"], ["--cpu", "-1"], ["--cpu", "99999"], ["--bogus"]):
        done = subprocess.run([clock_binary, *args], capture_output=True, text=True, timeout=10)
        assert done.returncode == 2 and done.stderr, args
    done = subprocess.run([clock_binary, "--ms", "10", "--cpu", "0"], capture_output=True, text=True, timeout=10)
    fields = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert done.returncode == 0 and fields["cpu"] == "0"
    assert int(fields["flops_per_iteration"]) == 2 * int(fields["vector_doubles"]) * int(fields["chains"])


# --------------------------------------------------------------------------- a namespace with a veth

def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def netns():
    """A namespace `cbst-<pid>`: veth cbst-a (10.231.0.1/24, MTU 9000, RPS on CPU 0, 32 flows) and
    cbst-b, a route to 10.232.0.0/16 with rto_min 20 ms; removed at the end."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2 for a network namespace")
    try:
        _ip("netns", "add", NS)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot create a network namespace: {exc.stderr}")
    try:
        _ip("-n", NS, "link", "add", "cbst-a", "type", "veth", "peer", "name", "cbst-b")
        _ip("-n", NS, "addr", "add", "10.231.0.1/24", "dev", "cbst-a")
        for dev in ("lo", "cbst-a", "cbst-b"):
            _ip("-n", NS, "link", "set", dev, "up")
        _ip("-n", NS, "link", "set", "cbst-a", "mtu", "9000")
        _ip("-n", NS, "route", "add", "10.232.0.0/16", "via", "10.231.0.2", "rto_min", "20ms")
        run("echo 1 > /sys/class/net/cbst-a/queues/rx-0/rps_cpus; "
            "echo 32 > /sys/class/net/cbst-a/queues/rx-0/rps_flow_cnt", netns=NS)
        yield NS
    finally:
        subprocess.run(["ip", "netns", "del", NS], capture_output=True, timeout=30)


def test_namespace_state_has_the_settings_made(netns, tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    s = parse_state(run(state_script(peers=["10.231.0.2", "10.232.0.9"]), env, netns), "ns")
    assert set(s["nic"]) == {"cbst-a", "cbst-b"}
    a = s["nic"]["cbst-a"]
    assert (a["mtu"], a["rps"]["rps_cpus"], a["rps"]["rps_flow_cnt"]) == ("9000", "all 1 rx queues: 0",
                                                                          "all 1 rx queues: 32")
    if shutil.which("ethtool"):
        assert a["driver"] == "veth" and a["offload"]["tcp-segmentation-offload"] in ("on", "off")
    assert s["route"]["10.231.0.2"]["rto_min"] == "default"
    assert s["route"]["10.232.0.9"]["rto_min"] == "20ms" and s["route"]["10.232.0.9"]["via"] == "10.231.0.2"


def test_namespace_states_differing_in_mtu_differ_in_that_key_only(netns, tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    script = state_script(peers=["10.232.0.9"])
    run(script, env, netns)  # warms the ompi_info cache, so hit/miss does not differ either
    before = parse_state(run(script, env, netns), "ns")
    _ip("-n", netns, "link", "set", "cbst-a", "mtu", "1500")
    try:
        after = parse_state(run(script, env, netns), "ns")
    finally:
        _ip("-n", netns, "link", "set", "cbst-a", "mtu", "9000")
    assert measured_apart(before, after) == {"nic.cbst-a.mtu"}
    assert (flatten(before)["nic.cbst-a.mtu"], flatten(after)["nic.cbst-a.mtu"]) == ("9000", "1500")
