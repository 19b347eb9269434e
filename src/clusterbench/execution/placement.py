"""Every MPI run is watched: each rank runs under the placement probe, and the run's stored facts
say where its ranks and threads really ran, what was predicted, and whether the two agree.

`wrapped` puts pinning/probe.py between the launcher and the program (the launcher binds the probe,
the program inherits the binding); `verdict` reads the probes' records after the run, predicts the
placement for the node the ranks really ran on (its CPU layout comes back with the records) and
compares (pinning/verify.py). Lines the launcher printed about bindings (Open MPI's
--report-bindings, srun's --cpu-bind=verbose) are kept beside them when present.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from clusterbench.errors import UserInputError
from clusterbench.launch.predict import predict
from clusterbench.launch.site import Site
from clusterbench.launch.spec import Launch
from clusterbench.pinning import probe
from clusterbench.pinning.mpirun import parse_report_bindings
from clusterbench.pinning.slurm import parse_cpu_bind_verbose
from clusterbench.pinning.verify import PROBE_DIR, compare, read_observations
from clusterbench.system.sources import from_lscpu_parse, from_sysfs
from clusterbench.system.topology import compress_cpulist

PROBE = Path(probe.__file__).resolve()
MAX_LOG_BYTES = 8 << 20  # of stdout/stderr searched for the launcher's binding report


def wrapped(launch: Launch, workdir: Path) -> Launch:
    """`launch` with each rank started through the probe (a launch without placement is unchanged)."""
    if launch.placement is None:
        return launch
    program = (sys.executable, "-I", "-S", "-c", probe.LOADER, str(PROBE), str(workdir / PROBE_DIR), "--",
               *launch.program)
    return dataclasses.replace(launch, program=program)


def verdict(site: Site, launch: Launch, workdir: Path, env: dict[str, str]) -> dict | None:
    """The placement facts of a finished run (None for a run without placement)."""
    if launch.placement is None:
        return None
    observed = read_observations(workdir)
    layout = next((r.node_layout for r in observed if r.node_layout), "")
    topology = from_lscpu_parse(layout, source="probe node layout") if layout else from_sysfs()
    openmp = not observed or any(r.openmp_runtimes for r in observed)
    if not openmp:  # OMP_PLACES/OMP_PROC_BIND are read by an OpenMP runtime, and none was loaded
        env = {k: v for k, v in env.items() if k not in ("OMP_PLACES", "OMP_PROC_BIND")}
    try:
        pred = predict(site, launch, topology, env)
    except UserInputError as exc:  # a launch the calculators cannot model (say so; the run stands)
        return {"verdict": "unpredicted", "problems": [str(exc)], "observed": _observed_only(observed)}
    if pred is None:
        return None
    if not openmp:
        pred.notes.append("the program loaded no OpenMP runtime: OMP_PLACES and OMP_PROC_BIND do not apply")
    hosts = [h.name for h in site.hosts_for(launch.placement.nodes)] or None
    check = compare(pred, observed, hosts, launch.placement.threads)
    facts = check.to_facts() | {"prediction": pred.to_dict(), "node_layout": layout}
    if pred.effective:  # what the launcher did once its defaults are filled in, checked against the probes
        facts["effective"] = pred.effective | {"checked": "by the probes: " + str(check.verdict)}
    if len({r.node_layout for r in observed if r.node_layout}) > 1:
        facts["problems"].append("the nodes' CPU layouts differ; predicted with the first node's")
    reported = _reported(workdir, topology)
    if reported:
        facts["reported"] = reported
    return facts


def _observed_only(observed: list) -> list[dict]:
    return [{"rank": r.rank, "host": r.host, "observed": compress_cpulist(sorted(r.launcher_cpus))}
            for r in observed]


def _reported(workdir: Path, topology) -> list[dict]:
    """What the launcher itself said about the bindings, when it said anything."""
    rows: list[dict] = []
    for name in ("stderr.txt", "stdout.txt"):
        path = workdir / name
        try:
            with path.open("rb") as f:
                text = f.read(MAX_LOG_BYTES).decode(errors="replace")
        except OSError:
            continue
        for row in parse_report_bindings(text, topology) + parse_cpu_bind_verbose(text):
            cpus = row.get("cpus")
            rows.append({k: v for k, v in row.items() if k != "cpus"}
                        | {"cpus": None if cpus is None else compress_cpulist(sorted(cpus))})
    return rows[:4096]
