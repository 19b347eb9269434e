"""`iperf3`: TCP throughput and retransmits between a server and a client (`iperf3 -J`).

A one-off server (`iperf3 -s -1`) starts, the client runs for `time` seconds with `parallel`
streams and prints JSON; throughput is the receiver's bits per second (in Gbit/s), with the
sender's retransmits. By default both ends run on this machine; with `between_nodes: true` the
server runs on the run's first node and the client on its second, started as the two ranks of one
mpirun (or srun) so that the site puts them on the nodes, which is how `clusterbench run -w
--iperf` measures every pair's TCP link. A run whose JSON has an "error" or no end summary is
invalid.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from clusterbench.bench.declare import MetricSpec, merit
from clusterbench.bench.metrics import Metric, Outcome
from clusterbench.bench.native import GUESS_START_S
from clusterbench.bench.official import BINARY_PARAM, OfficialBinary
from clusterbench.bench.params import Param
from clusterbench.bench.placement import MPI_PARAM
from clusterbench.launch.spec import Launch, Placement
from clusterbench.system.discover import SystemInfo
from clusterbench.system.mpi import default_mpi_name

SERVER_WAIT_S = 30  # how long the client waits for the server's node to say it listens


def iperf3_outcome(text: str) -> Outcome:
    out = Outcome()
    try:
        data = json.loads(text[text.index("{"):]) if "{" in text else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        out.invalidate("no iperf3 JSON in the output")
        return out
    if data.get("error"):
        out.invalidate(f"iperf3: {data['error']}")
    end = data.get("end") or {}
    received, sent = end.get("sum_received") or {}, end.get("sum_sent") or {}
    start = data.get("start") or {}
    out.facts.update({"iperf3_version": start.get("version"), "connected": start.get("connected"),
                      "protocol": (start.get("test_start") or {}).get("protocol")})
    if "bits_per_second" not in received:
        out.invalidate("iperf3 printed no end summary (aborted?)")
        return out
    out.metrics.append(Metric("tcp_throughput", received["bits_per_second"] / 1e9, "Gbit/s", True))
    out.metrics.append(Metric("tcp_throughput_sent", sent.get("bits_per_second", 0) / 1e9, "Gbit/s", True))
    if "retransmits" in sent:
        out.metrics.append(Metric("tcp_retransmits", sent["retransmits"], "count", False))
    return out.whole_run_validity()


class Iperf3(OfficialBinary):
    name = "iperf3"
    binary_names = ("iperf3",)
    env_var = "CLUSTERBENCH_IPERF3"
    install_hint = "apt-get install iperf3"
    metrics = (merit(MetricSpec("tcp_throughput", "Gbit/s", True)), MetricSpec("tcp_throughput_sent", "Gbit/s", True),
               MetricSpec("tcp_retransmits", "count", False))
    default_ranks = 1
    threaded_default = False
    parameters = (
        Param("time", int, 5, "seconds of transfer (-t)", minimum=1),
        Param("parallel", int, 1, "parallel streams (-P)", minimum=1),
        Param("port", int, 5201, "TCP port of the server", minimum=1),
        Param("server", str, "127.0.0.1", "address the client connects to (the server listens on it)"),
        Param("between_nodes", bool, False, "server on the run's first node, client on its second (two ranks "
              "of one mpirun); `server` is then the first node's host name"),
        MPI_PARAM,
        BINARY_PARAM,
    )

    @classmethod
    def resolve(cls, point: dict, system: SystemInfo) -> None:
        if point.get("between_nodes"):
            point.update(ranks=2, threads=1, nodes=2, bind_to="none", mpi=point.get("mpi") or default_mpi_name())
        else:
            point.update(ranks=1, threads=1, bind_to="none")

    @classmethod
    def estimate_s(cls, point: dict, system: SystemInfo) -> float | None:
        return GUESS_START_S + point["time"] + 1

    def launch(self) -> Launch:
        """A server and a client on this node, in one script: no MPI placement (or, between nodes,
        the same script as two ranks: the first node serves, the second connects)."""
        if self.point.get("between_nodes"):
            return self._between_nodes()
        p, binary = self.point, shlex.quote(str(self.binary))
        server = f"{binary} -s -1 -B {shlex.quote(p['server'])} -p {p['port']}"
        client = (f"{binary} -c {shlex.quote(p['server'])} -p {p['port']} -t {p['time']} -P {p['parallel']} -J")
        # Start the client once the server listens (ss), so no probe uses up the one-off server.
        script = (f"{server} > server.txt 2>&1 & srv=$!; "
                  f"for i in $(seq 100); do ss -Hltn 'sport = :{p['port']}' | grep -q . && break; sleep 0.05; done; "
                  f"{client}; rc=$?; kill $srv 2>/dev/null; wait $srv 2>/dev/null; exit $rc")
        return Launch(("bash", "-c", script), None, self.env(), {"binary": str(self.binary), "server": p["server"]})

    def _between_nodes(self) -> Launch:
        """Rank 0 starts the server, waits until it listens and writes its host name into the run
        directory (shared by the nodes); rank 1 waits for that name and runs the client. The rank
        comes from whichever launcher started the script (Open MPI, Hydra, srun)."""
        p, binary = self.point, shlex.quote(str(self.binary))
        port = int(p["port"])
        script = (
            'rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-}}}; '
            'if [ "$rank" = 0 ]; then '
            f"{binary} -s -1 -p {port} > server.txt 2>&1 & srv=$!; "
            f"for i in $(seq 200); do ss -Hltn 'sport = :{port}' | grep -q . && break; sleep 0.05; done; "
            "hostname > server-host.tmp && mv server-host.tmp server-host; wait $srv; "
            "else "
            f"for i in $(seq {SERVER_WAIT_S * 10}); do [ -s server-host ] && break; sleep 0.1; done; "
            f'{binary} -c "$(cat server-host)" -p {port} -t {int(p["time"])} -P {int(p["parallel"])} -J; fi')
        placement = Placement(ranks=2, threads=1, nodes=2, bind_to="none", mpi=p.get("mpi"))
        return Launch(("bash", "-c", script), placement, self.env(), {"binary": str(self.binary),
                                                                        "between_nodes": True})

    def parse(self, workdir: Path) -> Outcome:
        return iperf3_outcome(self.stdout(workdir))
