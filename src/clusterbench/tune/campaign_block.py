"""`clusterbench tune --campaign FILE`: a campaign file's block as the tuner's options.

The block's `space:` is the search space, its `params:` are fixed, the campaign's `cluster:` section
says where the trials run (read as `campaign run` reads it: campaign/load.where_it_runs), and every
refusal points into the file.
"""

from __future__ import annotations

from pathlib import Path

from clusterbench.bench.registry import benchmark_class
from clusterbench.campaign.expand import site_key
from clusterbench.campaign.load import where_it_runs
from clusterbench.campaign.spec import CampaignError, load_campaign
from clusterbench.errors import UserInputError
from clusterbench.tune.session import TuneOptions


def options_from_campaign(path: Path, block_name: str | None, options: TuneOptions, benchmark: str):
    """`options` completed from a campaign file's block of the benchmark (its space: and params:, the
    campaign's env and timeouts), with the site and system the campaign runs on and the site's key;
    every refusal located in the file (CampaignError, exit 2)."""
    campaign, source = load_campaign(path)
    blocks = [(i, b) for i, b in enumerate(campaign.benchmarks) if b.benchmark == benchmark
              and (block_name is None or b.label == block_name)]
    if not blocks:
        raise CampaignError(f"no {benchmark} block{' named ' + repr(block_name) if block_name else ''} to tune",
                            source, ("benchmarks",),
                            hint=f"add a block with benchmark: {benchmark} and a space:, or give --block NAME")
    i, block = blocks[0]
    site, system = where_it_runs(campaign, source)

    def option(key: str) -> str:
        loc = ("benchmarks", i, "space", key) if key in block.space else ("benchmarks", i, "space")
        return f"{source.where(loc)}: benchmarks[{i}].{'space.' + key if key in block.space else 'space'}"

    declared = {p.name: p for p in benchmark_class(benchmark).parameters}
    fixed = {}
    for name, value in block.params.items():
        if name not in declared:
            raise CampaignError(f"{benchmark} has no parameter {name!r}", source, ("benchmarks", i, "params", name))
        try:
            fixed[name] = declared[name].check(value)
        except UserInputError as exc:
            raise CampaignError(exc.message, source, ("benchmarks", i, "params", name)) from None
    if campaign.cluster.mpi and "mpi" not in fixed:
        fixed["mpi"] = campaign.cluster.mpi
    n = fixed.pop(benchmark_class(benchmark).tuning.fidelity, None)
    options.space = dict(block.space) | options.space
    options.fixed = fixed | options.fixed
    options.n = options.n or n
    if "nodes" in fixed:
        options.nodes = fixed.pop("nodes")
    options.option = option
    options.timeout_s = block.timeout_s or campaign.timeout_s
    options.env = {k: str(v) for k, v in (campaign.env | block.env).items()}
    return options, site, site_key(campaign), system
