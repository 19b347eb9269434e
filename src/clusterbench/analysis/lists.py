"""Where a result would stand on a TOP500 edition: by Rmax, by efficiency (the Green500
order of that edition) and by HPCG, with the systems just above and below.

The lists are bundled (src/clusterbench/data/top500, see its README for the source). The
Green500 order is derived by sorting the edition's systems with a power figure on GFlops/W;
the real Green500 also admits systems outside the TOP500, so the position is approximate,
and the report says so.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources

from clusterbench.errors import UserInputError

MONTHS = {"06": "June", "11": "November"}


@dataclass
class Entry:
    rank: int
    name: str
    site: str
    country: str
    rmax_tflops: float
    rpeak_tflops: float
    hpcg_tflops: float | None
    power_kw: float | None
    gflops_per_watt: float | None


@dataclass
class Placement:
    position: int  # where the result would be, 1-based
    of: int  # systems in this order
    above: Entry | None
    below: Entry | None


def editions() -> list[str]:
    """Bundled editions, oldest first: ['2020-06', '2020-11', ...]."""
    names = [p.name for p in resources.files("clusterbench.data").joinpath("top500").iterdir()]
    return sorted(f"{n[7:11]}-{n[11:13]}" for n in names if n.startswith("top500_") and n.endswith(".csv"))


def edition_title(edition: str) -> str:
    year, month = edition.split("-")
    return f"TOP500, {MONTHS.get(month, month)} {year}"


def load(edition: str | None = None) -> tuple[str, list[Entry]]:
    known = editions()
    edition = edition or known[-1]
    if edition not in known:
        raise UserInputError(f"no bundled TOP500 list {edition!r}", hint="choose from " + ", ".join(known))
    path = resources.files("clusterbench.data").joinpath("top500", f"top500_{edition.replace('-', '')}.csv")
    with path.open(encoding="utf-8", newline="") as fh:
        return edition, [_entry(row) for row in csv.DictReader(fh)]


def _entry(row: dict) -> Entry:
    def num(key: str) -> float | None:
        return float(row[key]) if row[key].strip() else None

    return Entry(int(row["rank"]), row["name"].strip() or row["computer"].strip(), row["site"].strip(),
                 row["country"].strip(), float(row["rmax_tflops"]), float(row["rpeak_tflops"]),
                 num("hpcg_tflops"), num("power_kw"), num("efficiency_gflops_per_watt"))


def place(entries: list[Entry], value: float, key: str) -> Placement:
    """Position of `value` among the entries that have `key`, highest first; ties go behind."""
    ranked = sorted((e for e in entries if getattr(e, key) is not None), key=lambda e: -getattr(e, key))
    ahead = sum(1 for e in ranked if getattr(e, key) > value)
    return Placement(ahead + 1, len(ranked), ranked[ahead - 1] if ahead else None,
                     ranked[ahead] if ahead < len(ranked) else None)


def by_rmax(entries: list[Entry], rmax_gflops: float) -> Placement:
    return place(entries, rmax_gflops / 1000.0, "rmax_tflops")


def by_efficiency(entries: list[Entry], gflops_per_watt: float) -> Placement:
    return place(entries, gflops_per_watt, "gflops_per_watt")


def by_hpcg(entries: list[Entry], hpcg_gflops: float) -> Placement:
    return place(entries, hpcg_gflops / 1000.0, "hpcg_tflops")
