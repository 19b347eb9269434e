"""From a campaign file to the runs to make, on the machine or nodes they will run on.

The whole set-up before anything runs, shared by `campaign run` and the dry run of `plan FILE`:
parse and validate the file, take the campaign's lock (as soon as its name is known, before
the slow steps, so that a second runner stops at once), find where it runs (its `cluster:`
section), plan for the compute nodes rather than for a login node (their facts gathered over
ssh), expand, and refuse a run that asks for more nodes than the site has. Errors point into
the file (`CampaignError`, exit code 2). What the preflight of the nodes must check is said
here too (`preflight_target`); running it, with its progress on the terminal, is the caller's.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from clusterbench.campaign.engine import block_instances, campaign_lock
from clusterbench.campaign.expand import expand
from clusterbench.campaign.spec import Campaign, CampaignError, CampaignSource, load_campaign
from clusterbench.campaign.where import site_from_section, system_from_facts
from clusterbench.cluster.facts import gather
from clusterbench.errors import EnvironmentProblem, UserInputError
from clusterbench.execution.request import PlannedRun
from clusterbench.execution.settings import preflight as settings_preflight
from clusterbench.launch.hosts import Inventory
from clusterbench.launch.site import Site
from clusterbench.pinning.strategies import launcher_options
from clusterbench.store.db import Store, default_db_path
from clusterbench.system.discover import SystemInfo, discover
from clusterbench.system.settings import machine_keys


@dataclass
class LoadedCampaign:
    """A campaign ready to run: its file, its runs, and the system and site they are planned for."""

    path: Path
    campaign: Campaign
    source: CampaignSource
    runs: list[PlannedRun]
    system: SystemInfo  # the compute nodes (one of them, the smallest memory) for a multi-node site
    site: Site


def load_runs(path: Path, lock: ExitStack | None = None) -> LoadedCampaign:
    """Parse, validate and expand the campaign file at `path`. With `lock`, the campaign's lock on
    the database is entered into it (a second runner of the same campaign stops: exit code 1)."""
    campaign, source = load_campaign(path)
    if lock is not None:
        lock.enter_context(campaign_lock(default_db_path(), campaign.name, strict=False))
    site, system = where_it_runs(campaign, source)
    runs = expand(campaign, source, system)
    _check_node_counts(runs, site, source)
    _check_pinning(runs, site, source)
    _check_settings(campaign, runs, site, source)
    return LoadedCampaign(Path(path), campaign, source, runs, system, site)


def where_it_runs(campaign: Campaign, source: CampaignSource) -> tuple[Site, SystemInfo]:
    """The campaign's site (its `cluster:` section; errors located there) and the system its runs are
    planned for: one compute node (facts gathered over ssh; the smallest memory) when the site has
    nodes, else this machine. Shared by `campaign run`, `plan FILE` and `tune --campaign`."""
    local = discover()
    try:
        site = site_from_section(campaign.cluster)
    except UserInputError as exc:
        raise CampaignError(exc.message, source, ("cluster",), hint=exc.hint) from None
    if site.inventory:  # only mpirun and slurm sites have one
        return site, system_from_facts(gather(site.inventory.names), local)
    return site, local


def _check_node_counts(runs: list[PlannedRun], site: Site, source: CampaignSource) -> None:
    limit = site.max_nodes()
    for run in runs:
        nodes = run.params.get("nodes") or 1
        if limit is not None and nodes > limit:
            where = "this machine" if site.launcher == "local" else f"the {limit} host(s) of cluster.hosts"
            raise CampaignError(f"block {run.block!r} asks for nodes={nodes}, more than {where}", source,
                                ("cluster",), hint="lower nodes:, or list more hosts in cluster.hosts")


def _check_pinning(runs: list[PlannedRun], site: Site, source: CampaignSource) -> None:
    """Every strategy named is known and can be said to this site's launcher, before anything runs."""
    seen: set[tuple] = set()
    for run in runs:
        name = run.params.get("pinning")
        key = (name, run.params.get("mpi"), run.block)
        if not name or key in seen:
            continue
        seen.add(key)
        try:
            launcher_options(name, site.launcher_kind(run.params.get("mpi")), 1, 1, site.strategies)
        except UserInputError as exc:
            raise CampaignError(f"block {run.block!r}: {exc.message}", source, ("benchmarks",), hint=exc.hint) from None


def _check_settings(campaign: Campaign, runs: list[PlannedRun], site: Site, source: CampaignSource) -> None:
    """Every distinct set of `system:` settings can be applied on the nodes (the key exists there,
    root where the kernel needs it), asked in one round trip before anything runs: exit code 2."""
    wanted = list({json.dumps(w, sort_keys=True): w for w in (r.settings for r in runs) if machine_keys(w)}.values())
    if not wanted:
        return
    first = next((i for i, b in enumerate(campaign.benchmarks) if b.system), None)
    loc = ("system",) if campaign.system or first is None else ("benchmarks", first, "system")
    batch = site.batch()
    if batch:
        raise CampaignError(f"system settings are applied over ssh on the run's nodes, which a {batch[0].upper()} "
                            "site does not name before its jobs start", source, loc,
                            hint=f"use launcher: mpirun with the allocation's hosts (hosts: {batch[0]}) for a tuning "
                                 "study")
    hosts = site.inventory.names if site.inventory else ["localhost"]
    try:
        settings_preflight(hosts, wanted, hosts)
    except EnvironmentProblem:  # a node that does not answer: the environment, not the file (exit code 1)
        raise
    except UserInputError as exc:
        raise CampaignError(exc.message, source, loc, hint=exc.hint) from None


@dataclass(frozen=True)
class PreflightTarget:
    """What the preflight of a campaign checks: the nodes its widest run uses, the binaries that
    must be the same on each, and every MPI its runs name (None: the mpirun on PATH)."""

    inventory: Inventory
    binaries: list[str]
    mpis: tuple[str | None, ...]


def preflight_target(loaded: LoadedCampaign) -> PreflightTarget | None:
    """None when there are no nodes to check: a local site, or `cluster.preflight: false`."""
    site, runs = loaded.site, loaded.runs
    if not (site.inventory and loaded.campaign.cluster.preflight):
        return None
    nodes = max((r.params.get("nodes") or 1 for r in runs), default=1)
    inv = Inventory(site.inventory.first(nodes), site.inventory.source)
    mpis = tuple(sorted({r.params["mpi"] for r in runs if r.params.get("mpi")})) or (None,)
    return PreflightTarget(inv, binaries_of(runs), mpis)


def binaries_of(runs: list[PlannedRun]) -> list[str]:
    """The benchmark binaries the campaign will start (their checksums must match on every node)."""
    found = (getattr(bench, "binary", None) for bench in block_instances(runs))
    return list(dict.fromkeys(str(b) for b in found if b))


def record(store: Store, loaded: LoadedCampaign) -> None:
    """The system and the campaign file as they are when it runs: the provenance of its runs."""
    info = loaded.system
    store.remember_system(info)
    store.save_campaign(loaded.campaign.name, str(loaded.path), loaded.path.read_text(),
                        loaded.campaign.description)
