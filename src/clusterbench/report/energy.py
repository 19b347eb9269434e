"""Energy and lists section: GFlops/W of the best HPL run, and where the system would stand
on a TOP500 edition by Rmax, in that edition's Green500 order by efficiency, and by HPCG.

The power figure is the user's (`--power-watts`, e.g. read off a wall meter during the run)
or the one measured during the best run itself (RAPL or IPMI, stored as `power_w`). The Rmax
and HPCG metrics are the benchmarks' declaration (bench/declare.py): `energy` uses in the roles
`rmax` and `hpcg`, in Gflop/s.
"""

from __future__ import annotations

from clusterbench.analysis import lists
from clusterbench.analysis.dataset import Dataset
from clusterbench.bench import registry
from clusterbench.report import repeats
from clusterbench.report.model import Options, Section, Table

POWER = "power_w"  # measured beside a run (system/power.py), not a benchmark's metric
NEIGHBOUR_COLUMNS = ["position", "TOP500 rank", "system", "site", "country", "Rmax (TFlop/s)", "power (kW)",
                     "GFlops/W", "HPCG (TFlop/s)", "runs"]


def drawn(role: str) -> list[str]:
    """The metrics declared for this role (rmax, hpcg)."""
    return list(dict.fromkeys(d.spec.name for d in registry.drawn("energy", role)))


def metrics() -> set[str]:
    return {*drawn("rmax"), *drawn("hpcg"), POWER}


def section(data: Dataset, options: Options) -> Section | None:
    best = _best(data, drawn("rmax"))
    rmax, rmax_run = (options.rmax_gflops, None) if options.rmax_gflops else best
    if rmax is None:
        return None
    power, power_from = _power(data, options, rmax_run)
    hpcg, hpcg_run = _best(data, drawn("hpcg"))
    edition, entries = lists.load(options.top500_edition)
    title = lists.edition_title(edition)
    ours = _tied(data, drawn("rmax"), rmax) if rmax_run else []  # the runs behind this system's row (a tie: all)
    out = Section("energy", "Energy and lists", [
        f"Placement on {title} (bundled list data from TOP500.org; see the data README). "
        "The efficiency order is derived from the systems of that edition with a power figure, "
        "so it approximates the Green500, which also admits systems outside the TOP500."])
    summary = Table("energy-summary", "Efficiency and placement", ["figure", "value", "source", "runs"], [])
    summary.rows.append(["Rmax (Gflop/s)", rmax, "given with --rmax" if rmax_run is None else
                         "best valid HPL run (flagged runs excluded)" + (f", a tie of {len(ours)}" if len(ours) > 1
                                                                          else ""), ours])
    at_rmax = lists.by_rmax(entries, rmax)
    summary.rows.append([f"{title} rank by Rmax", _position(at_rmax, "TOP500"), "", []])
    out.tables.append(summary)
    out.tables.append(_neighbours("energy-rmax-neighbours", f"Neighbours by Rmax on {title}",
                                  at_rmax, rmax / 1000, None, None, ours))
    if power:
        efficiency = rmax / power
        at_eff = lists.by_efficiency(entries, efficiency)
        summary.rows[1:1] = [["power during HPL (W)", power, power_from, ours if "measured" in power_from else []],
                             ["efficiency (GFlops/W)", efficiency, "Rmax / power", ours]]
        summary.rows.append([f"position by efficiency ({title}, Green500 order)", _position(at_eff, "power"),
                             "", []])
        out.tables.append(_neighbours("energy-green500-neighbours",
                                      f"Neighbours by efficiency ({title}, Green500 order)",
                                      at_eff, rmax / 1000, power / 1000, efficiency, ours))
    else:
        out.paragraphs.append("No power figure: give --power-watts (measured at the wall during HPL), or run "
                              "where RAPL energy counters or `ipmitool dcmi power reading` are available.")
    if hpcg:
        at_hpcg = lists.by_hpcg(entries, hpcg)
        summary.rows.append(["HPCG (Gflop/s)", hpcg, "best valid HPCG run (flagged runs excluded)",
                             _tied(data, drawn("hpcg"), hpcg)])
        summary.rows.append([f"position by HPCG ({title})", _position(at_hpcg, "HPCG"), "", []])
    return out


def _best(data: Dataset, names: list[str]) -> tuple[float | None, str | None]:
    """The best value of a counted run (a truncated, suspect, disturbed or excluded run is never the best
    placed on a list) and its run; of a tie, the first run by id (`_tied` names them all)."""
    rows = data.of(*names)
    if not rows.empty:
        rows = rows[repeats.counted_mask(data, rows["run_id"]).to_numpy()]
    if rows.empty:
        return None, None
    top = rows[rows["value"] == rows["value"].max()]
    return float(top["value"].iloc[0]), sorted(top["run_id"])[0]


def _tied(data: Dataset, names: list[str], value: float | None) -> list[str]:
    """Every counted run whose value equals the best: a tie is shown as one."""
    rows = data.of(*names)
    if value is None or rows.empty:
        return []
    rows = rows[repeats.counted_mask(data, rows["run_id"]).to_numpy() & (rows["value"] == value).to_numpy()]
    return sorted(set(rows["run_id"]))


def _power(data: Dataset, options: Options, run_id: str | None) -> tuple[float | None, str]:
    if options.power_watts:
        return options.power_watts, "given with --power-watts"
    rows = data.of(POWER)
    rows = rows[rows["run_id"] == run_id]
    if rows.empty:
        return None, ""
    rec = rows.iloc[0]
    return float(rec["value"]), f"measured during the run ({rec['labels'].get('source', '?')})"


def _position(p: lists.Placement, order: str) -> str:
    """'170 (among 206 systems with a power figure)'."""
    if order == "TOP500":
        if p.position > p.of:
            return f"below the list (#{p.of} has {p.above.rmax_tflops:g} TFlop/s)"
        return f"{p.position} (of {p.of})"
    return f"{p.position} (among {p.of} systems with {order} figures)"


def _neighbours(slug: str, title: str, p: lists.Placement, rmax_tflops: float, power_kw: float | None,
                efficiency: float | None, runs: list[str]) -> Table:
    def row(position: int, e: lists.Entry) -> list:
        return [position, e.rank, e.name, e.site, e.country, e.rmax_tflops, e.power_kw, e.gflops_per_watt,
                e.hpcg_tflops, []]

    rows = []
    if p.above:
        rows.append(row(p.position - 1, p.above))
    rows.append([p.position, "-", "this system", "", "", rmax_tflops, power_kw, efficiency, None, runs])
    if p.below:
        rows.append(row(p.position + 1, p.below))
    return Table(slug, title, NEIGHBOUR_COLUMNS, rows)
