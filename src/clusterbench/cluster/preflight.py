"""Check a cluster before spending hours on it: the problems that silently spoil a study.

Every node must answer over ssh, call itself by the name it is listed under, resolve every
node's name to the same address as the head does, run the same benchmark binaries (checksums),
the same BLAS variant, MPI and kernel, keep its clock close to the head's, and take part in an
MPI hello-world across all nodes. What differs is decided against the majority of the nodes,
so the odd node out is the one named. Free memory is reported, not judged: its minimum is
what sizes N. Given a directory (the results store's runs directory), every node must see the
head's: a file written there by the head must be there, with the same contents, on each node.
Every node must also reach what a run makes it execute (the Python and the placement probe, the
build caches, the benchmark binaries; cluster/staging.py), or have it staged (`--stage`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.build.sources import sha256_of
from clusterbench.cluster import staging
from clusterbench.cluster.facts import NodeFacts, gather
from clusterbench.errors import EnvironmentProblem
from clusterbench.launch.hosts import Inventory, is_local
from clusterbench.launch.remote import run_everywhere

CLOCK_SKEW_LIMIT_S = 1.0
CHECKSUM_OF = "checksum of "


@dataclass
class Problem:
    node: str
    check: str
    detail: str
    hint: str | None = None  # what to do about it, when the detail does not say


@dataclass
class Preflight:
    facts: list[NodeFacts]
    problems: list[Problem] = field(default_factory=list)
    staged: str | None = None  # the node-local folder what the nodes could not see was copied to

    @property
    def ok(self) -> bool:
        return not self.problems

    def min_available_bytes(self) -> int | None:
        values = [f.memory.available_bytes for f in self.facts if f.memory]
        return min(values) if values else None

    def problems_of(self, node: str) -> list[Problem]:
        return [p for p in self.problems if p.node == node]

    def to_dict(self) -> dict:
        return {"ok": self.ok, "nodes": [f.to_dict() for f in self.facts],
                "problems": [p.__dict__ for p in self.problems],
                "min_available_bytes": self.min_available_bytes(), "staged": self.staged}


def check_cluster(inv: Inventory, binaries: list[str] = (), mpi_hello: bool = True,
                  skew_limit_s: float = CLOCK_SKEW_LIMIT_S,
                  on_node: Callable[[NodeFacts], None] | None = None,
                  mpis: tuple[str | None, ...] = (None,), shared_dir: Path | None = None,
                  stage: bool | None = None) -> Preflight:
    """Every check on the nodes of `inv`; the MPI hello-world once with each MPI in `mpis`; with
    `shared_dir`, that every node that answers sees that directory as the head does. Every node
    must reach what a run makes it execute (`node_paths`): with `stage` (None: `--stage` or
    CLUSTERBENCH_STAGE, cluster/staging.py) what it cannot is copied to it instead. The
    hello-world is left out while a node cannot reach what it would run: it would only fail."""
    facts = gather(inv.names, binaries, on_node=on_node)
    result = Preflight(facts)
    result.problems += reachability(facts)
    up = [f for f in facts if f.reachable]
    result.problems += names(up, inv.names)
    result.problems += checksums(up, list(binaries))
    for label, attribute in (("BLAS variant", "blas"), ("MPI version", "mpi"), ("kernel", "kernel")):
        result.problems += odd_ones_out(up, label, lambda f, a=attribute: getattr(f, a))
    result.problems += clocks(up, skew_limit_s)
    if shared_dir is not None and up:
        result.problems += shared_directory([f.host for f in up], shared_dir)
    unreached = []
    if up:
        unreached = node_paths([f.host for f in up], list(binaries), staging.requested() if stage is None else stage)
        staged = staging.staged()
        unreachable = {(p.node, p.detail) for p in unreached}
        result.problems = [p for p in result.problems if not _said_otherwise(p, staged, unreachable)]
        result.problems += unreached
        result.staged = staged.folder if staged is not None else None
    if mpi_hello and up and len(up) == len(facts) and not any(p.check == PATHS_CHECK for p in unreached):
        for mpi in mpis:
            result.problems += hello_world(inv, mpi=mpi)
    return result


def _said_otherwise(problem: Problem, staged, unreachable: set[tuple[str, str]]) -> bool:
    """A binary's checksum problem that the paths check explains better: the node cannot reach it
    (named there with the fixes), or it is staged (its copy is the head's file)."""
    if not problem.check.startswith(CHECKSUM_OF):
        return False
    path = problem.check[len(CHECKSUM_OF):]
    return (staged is not None and staged.under_roots(path)) or any(
        node == problem.node and detail.startswith(f"cannot reach {path} (") for node, detail in unreachable)


def reachability(facts: list[NodeFacts]) -> list[Problem]:
    return [Problem(f.host, "reachable", f"no answer over ssh: {f.error}") for f in facts if not f.reachable]


def names(facts: list[NodeFacts], listed: list[str]) -> list[Problem]:
    """A node must call itself what it is listed as, and see every node where the head does."""
    problems = []
    head = {name: _resolve(name) for name in listed}
    for f in facts:
        short = (f.hostname or "").split(".")[0]
        if f.hostname and short != f.host.split(".")[0] and f.hostname != f.host:
            problems.append(Problem(f.host, "host name", f"listed as {f.host} but calls itself {f.hostname}"))
        for name, ip in f.resolved.items():
            if not ip:
                problems.append(Problem(f.host, "name resolution", f"cannot resolve {name}"))
            elif head.get(name) and ip != head[name] and not ip.startswith("127."):
                problems.append(Problem(f.host, "name resolution",
                                        f"resolves {name} to {ip}, the head to {head[name]}"))
    return problems


def _resolve(name: str) -> str | None:
    try:
        return socket.gethostbyname(name)
    except OSError:
        return None


def checksums(facts: list[NodeFacts], binaries: list[str]) -> list[Problem]:
    """Every node must run the binary the head planned with (the majority, if the head has none)."""
    problems = []
    for path in binaries:
        label = f"{CHECKSUM_OF}{path}"
        reference = local_sha256(path)
        if reference is None:
            problems += odd_ones_out(facts, label, lambda f, p=path: f.checksums.get(p), missing=f"{path} is missing")
            continue
        for f in facts:
            digest = f.checksums.get(path)
            if digest is None:
                problems.append(Problem(f.host, label, f"{path} is missing"))
            elif digest != reference:
                problems.append(Problem(f.host, label, f"{_short(digest)} where the head has {_short(reference)}"))
    return problems


def local_sha256(path: str) -> str | None:
    try:
        return sha256_of(Path(path))
    except OSError:
        return None


def odd_ones_out(facts: list[NodeFacts], label: str, value: Callable[[NodeFacts], object],
                 missing: str | None = None) -> list[Problem]:
    """Nodes whose value differs from the most common one (or is missing, when that is a problem)."""
    values = {f.host: value(f) for f in facts}
    present = [v for v in values.values() if v is not None]
    problems = []
    if missing:
        problems += [Problem(h, label, missing) for h, v in values.items() if v is None]
    if len(set(present)) <= 1:
        return problems
    common, _ = Counter(present).most_common(1)[0]
    for host, v in values.items():
        if v is not None and v != common:
            problems.append(Problem(host, label, f"{_short(v)} where the other nodes have {_short(common)}"))
    return problems


def _short(value: object) -> str:
    text = str(value)
    return text[:12] + "..." if len(text) == 64 else text  # a sha256


def clocks(facts: list[NodeFacts], limit_s: float) -> list[Problem]:
    return [Problem(f.host, "clock", f"{f.clock_skew_s:+.2f} s from the head (limit {limit_s} s)")
            for f in facts if f.clock_skew_s is not None
            and abs(f.clock_skew_s) - (f.clock_uncertainty_s or 0) > limit_s]


SHARED_CHECK = "shared results directory"
SHARED_HINT = ("the results directory must be on a filesystem every node mounts at the same path, such as an "
               "NFS home: set CLUSTERBENCH_DB (or --db) to a database there")


def shared_directory(hosts: list[str], folder: Path, timeout_s: float = 30.0) -> list[Problem]:
    """Every node of `hosts` must see the head's `folder`: a file with a unique token, written there
    by the head, is read on each node over ssh, then removed. A node that does not see it (its own
    /tmp, a local disk, a mount missing) is named with the path. The folder is made if missing
    (the runs directory of a new store), and removed again if it is still empty."""
    folder = Path(os.path.abspath(folder))
    made = [p for p in (folder, *folder.parents) if not p.exists()]
    token = uuid.uuid4().hex
    probe = folder / f".clusterbench-shared-{token[:12]}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.write_text(token + "\n")
    except OSError as exc:
        staging.remove_made(made)
        return [Problem("head", SHARED_CHECK, f"cannot write to {folder}: {exc.strerror or exc}",
                        "give a directory the head can write to")]
    try:
        answers = run_everywhere(hosts, f"cat -- {shlex.quote(str(probe))}", timeout_s)
    finally:
        probe.unlink(missing_ok=True)
        staging.remove_made(made)
    problems = []
    for a in answers:
        if a.unreachable and not a.stdout:
            problems.append(Problem(a.host, SHARED_CHECK, f"cannot tell whether {folder} is shared: {a.stderr.strip()}",
                                    SHARED_HINT))
        elif a.stdout.strip() != token:
            seen = "another file under that name" if a.ok else "no file the head wrote there"
            problems.append(Problem(a.host, SHARED_CHECK, f"{folder} is not the head's directory here: {seen}",
                                    SHARED_HINT))
    return problems


PATHS_CHECK = "reaches what it runs"
PATHS_HINT = ("put it on a file system every node mounts at the same path (a shared home or project space); for "
              "the build cache set CLUSTERBENCH_CACHE to a folder there; or copy it to a node-local folder on each "
              "node with --stage (or CLUSTERBENCH_STAGE=1)")
SAMPLER_CHECK = "python3 for the sampler"


def node_paths(hosts: list[str], binaries: list[str], stage: bool = False) -> list[Problem]:
    """Every node must reach what a multi-node run makes it execute (cluster/staging.py: the Python
    and the probe, the build caches, the benchmark binaries), asked in one ssh per node. With
    `stage`, what some node cannot reach is copied to every node instead, and only a failed copy is
    a problem. A node without python3 is named too: its activity sampler cannot run."""
    wanted = staging.needs(binaries)
    sight = staging.look(hosts, wanted)
    problems = [Problem(h, SAMPLER_CHECK, "no python3 on the PATH of a command run over ssh: the node's "
                        "activity is not sampled", "install python3 on the node")
                for h, found in sight.python3.items() if not found and not is_local(h)]  # here: this Python
    problems += [Problem(h, PATHS_CHECK, f"cannot tell what it reaches: {why}") for h, why in sight.unanswered.items()]
    unseen = sight.shown()
    if not unseen:
        return problems
    if stage:
        try:
            staging.stage(hosts, sight)
            return problems
        except EnvironmentProblem as exc:
            return [*problems, Problem("all", PATHS_CHECK, f"staging failed: {exc.message}", exc.hint)]
    for host, missing in unseen.items():
        for need in missing:
            problems.append(Problem(host, PATHS_CHECK, f"cannot reach {need.path} ({need.what})", PATHS_HINT))
    return problems


# A hello-world that does not answer in time is started once more before it is a problem: a start over ssh that
# hangs once (a node starved by other work, a wire-up that stalled) is not a broken node; one that hangs twice is.
HELLO_ATTEMPTS = 2


def _probe(cmd: list[str], timeout_s: float) -> subprocess.CompletedProcess | None:
    """mpirun of the probe, or None when it did not answer within `timeout_s`. It runs in a process group of its
    own, killed whole on a timeout or an interrupt: mpirun, its ssh clients and so the daemons they started on
    the nodes, so that nothing of it competes with a second attempt or outlives the preflight."""
    # from "/": Hydra starts remote ranks in mpiexec's working directory, which need not
    # exist on the nodes (a checkout under a node-private /tmp); "/" exists everywhere
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/",
                            env=dict(os.environ) | {"OMP_NUM_THREADS": "1"}, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        return None
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=10)  # a process that left the group may still hold the pipes


def hello_world(inv: Inventory, timeout_s: float = 60.0, mpi: str | None = None) -> list[Problem]:
    """One rank per node of the affinity probe (a real MPI program, built with MPI `mpi`); every
    node must answer."""
    from clusterbench.bench.registry import benchmark_class
    from clusterbench.launch.site import Site
    from clusterbench.launch.spec import Launch, Placement
    from clusterbench.native import build as native

    check = "MPI hello-world" + (f" ({mpi})" if mpi else "")
    try:
        binary = native.build("affinity", mpi=True, openmp=True, mpi_choice=mpi).binary
    except Exception as exc:  # noqa: BLE001 - no compiler is a preflight finding, not a crash
        return [Problem("all", check, f"cannot build the probe: {exc}")]
    nodes = len(inv.hosts)
    probe = Launch((str(binary),), Placement(ranks=nodes, nodes=nodes, bind_to="none", map_by="node", mpi=mpi),
                   {"OMP_NUM_THREADS": "1"})
    with tempfile.TemporaryDirectory(prefix="clusterbench-preflight-") as folder:
        # the hostfile goes to `folder`, read by mpirun here; the nodes never see it
        try:
            cmd = Site("mpirun", inv).for_run(Path(folder)).launch_command(probe)
        except Exception as exc:  # noqa: BLE001 - no mpirun is a preflight finding, not a crash
            return [Problem("all", check, f"cannot launch the probe: {exc}")]
        for _ in range(HELLO_ATTEMPTS):
            out = _probe(cmd, timeout_s)
            if out is not None:
                break
        else:
            return [Problem("all", check, f"no answer within {timeout_s:.0f} s, {HELLO_ATTEMPTS} times: "
                            f"{' '.join(cmd)}")]
    seen = {row["host"] for row in benchmark_class("affinity").placement_lines(out.stdout)}
    if out.returncode != 0 and not seen:
        tail = " | ".join(out.stderr.strip().splitlines()[-3:])[:300]
        return [Problem("all", check, f"mpirun failed (exit code {out.returncode}): {tail}")]
    return [Problem(h.name, check, "no rank started on this node")
            for h in inv.hosts if h.name not in seen and h.name.split(".")[0] not in seen]
