"""What each node is, read over ssh in one round trip: cores, memory, software, clock, checksums.

One shell script runs on every node and prints labelled sections; the parser turns them into
`NodeFacts`. The same parsers as for this machine are used (lscpu text -> Topology,
/proc/meminfo -> Memory), so a remote node is described exactly like the local one.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from clusterbench.launch.remote import Answer, run_everywhere
from clusterbench.system.microarch import estimate_peak
from clusterbench.system.mpi import parse_mpirun_version
from clusterbench.system.software import Memory, parse_meminfo, variant_of_path
from clusterbench.system.sources import from_lscpu_text
from clusterbench.system.topology import Topology

_SECTION = re.compile(r"^@@cb:(\w+)$", re.M)


def probe_script(names: list[str], binaries: list[str]) -> str:
    """The shell script each node runs. Clock first: it is what the round trip blurs."""
    files = " ".join(shlex.quote(b) for b in binaries)
    hosts = " ".join(shlex.quote(n) for n in names)
    return "\n".join([
        "echo @@cb:clock; date +%s.%N",
        "echo @@cb:hostname; hostname",
        "echo @@cb:lscpu; LC_ALL=C lscpu 2>/dev/null",
        "echo @@cb:meminfo; cat /proc/meminfo",
        "echo @@cb:kernel; uname -r",
        "echo @@cb:os; (. /etc/os-release 2>/dev/null && echo \"$PRETTY_NAME\")",
        "echo @@cb:mpi; mpirun --version 2>&1 | head -n 3",
        "echo @@cb:blas; for f in /etc/alternatives/libblas.so.3*; do [ -e \"$f\" ] && readlink \"$f\"; done",
        f"echo @@cb:resolve; for h in {hosts}; do",
        "  echo \"$h $(getent ahostsv4 \"$h\" | awk 'NR==1{print $1}')\"; done",
        f"echo @@cb:sha256; for f in {files}; do sha256sum \"$f\" 2>/dev/null || echo \"missing $f\"; done",
        "echo @@cb:end",
    ])


@dataclass
class NodeFacts:
    host: str  # the name in the inventory
    reachable: bool
    error: str | None = None
    hostname: str | None = None
    topology: Topology | None = None
    memory: Memory | None = None
    kernel: str | None = None
    os: str | None = None
    mpi: str | None = None
    blas: str | None = None
    clock_skew_s: float | None = None
    clock_uncertainty_s: float | None = None
    resolved: dict[str, str] = field(default_factory=dict)  # name -> IPv4 as this node sees it
    checksums: dict[str, str | None] = field(default_factory=dict)  # path -> sha256 (None: missing)

    @property
    def cores(self) -> int | None:
        return self.topology.cores_total if self.topology else None

    @property
    def rpeak_gflops(self) -> float | None:
        return estimate_peak(self.topology).rpeak_gflops if self.topology else None

    def to_dict(self) -> dict:
        return {"host": self.host, "reachable": self.reachable, "error": self.error, "hostname": self.hostname,
                "cores": self.cores, "sockets": self.topology.sockets if self.topology else None,
                "model": self.topology.model_name if self.topology else None,
                "memory_total_bytes": self.memory.total_bytes if self.memory else None,
                "memory_available_bytes": self.memory.available_bytes if self.memory else None,
                "kernel": self.kernel, "os": self.os, "mpi": self.mpi, "blas": self.blas,
                "clock_skew_s": self.clock_skew_s, "resolved": self.resolved, "checksums": self.checksums,
                "rpeak_gflops": self.rpeak_gflops}


def sections(text: str) -> dict[str, str]:
    parts = _SECTION.split(text)
    return {parts[i]: parts[i + 1].strip("\n") for i in range(1, len(parts) - 1, 2)}


def parse_probe(answer: Answer, sent_at: float, answered_at: float) -> NodeFacts:
    """NodeFacts from one node's answer; `sent_at`/`answered_at` (epoch s) bound its clock reading."""
    if not answer.ok and "@@cb:end" not in answer.stdout:
        message = (answer.stderr.strip().splitlines() or [f"exit code {answer.exit_code}"])[-1]
        return NodeFacts(answer.host, False, error=message)
    s = sections(answer.stdout)
    facts = NodeFacts(answer.host, True, hostname=s.get("hostname", "").strip() or None,
                      kernel=s.get("kernel", "").strip() or None, os=s.get("os", "").strip() or None)
    if s.get("lscpu"):
        try:
            facts.topology = from_lscpu_text(s["lscpu"], source=f"lscpu on {answer.host}")
        except Exception as exc:  # noqa: BLE001 - an odd lscpu must not hide the other facts
            facts.error = f"lscpu not understood: {exc}"
    if s.get("meminfo"):
        facts.memory = parse_meminfo(s["meminfo"], f"/proc/meminfo on {answer.host}")
    impl, version = parse_mpirun_version(s.get("mpi", ""))
    facts.mpi = f"{impl} {version}" if impl else ("not found" if "not found" in s.get("mpi", "") else None)
    links = s.get("blas", "").split()
    facts.blas = variant_of_path(links[0]) if links else None
    try:
        clock = float(s.get("clock", "").strip())
        facts.clock_skew_s = clock - (sent_at + answered_at) / 2
        facts.clock_uncertainty_s = (answered_at - sent_at) / 2
    except ValueError:
        pass
    for line in s.get("resolve", "").splitlines():
        name, _, ip = line.partition(" ")
        facts.resolved[name] = ip.strip()
    for line in s.get("sha256", "").splitlines():
        if line.startswith("missing "):
            facts.checksums[line[len("missing "):]] = None
        elif "  " in line:
            digest, path = line.split("  ", 1)
            facts.checksums[path] = digest
    return facts


def gather(hosts: list[str], binaries: list[str] = (), timeout_s: float = 30.0,
           on_node: Callable[[NodeFacts], None] | None = None) -> list[NodeFacts]:
    """Facts of all hosts in parallel, in the hosts' order."""
    script = probe_script(hosts, list(binaries))
    out: dict[str, NodeFacts] = {}
    sent_at = time.time()  # all nodes are asked at once

    def answered(answer: Answer) -> None:
        facts = parse_probe(answer, sent_at, time.time())
        out[answer.host] = facts
        if on_node:
            on_node(facts)

    run_everywhere(hosts, script, timeout_s, on_answer=answered)
    return [out[h] for h in hosts]
