"""HPCG's local grid, derived as HPCG derives and checks it.

nx, ny, nz are multiples of 8 (three coarse multigrid levels halve them), no dimension is more
than 8 x another (HPCG's aspect-ratio check), about 715 bytes of data per grid point (the "Bytes
per equation" of HPCG 3.1 reports), and for a list-grade run data of at least 25% of the node's
memory and a run time of at least 1800 s.
"""

from __future__ import annotations

HPCG_BYTES_PER_POINT = 715
HPCG_MIN_DIM = 16
HPCG_MAX_ASPECT = 8
HPCG_LIST_FRACTION = 0.25
HPCG_OFFICIAL_S = 1800


def hpcg_dims(memory_bytes: int, ranks: int, fraction: float = HPCG_LIST_FRACTION) -> tuple[int, int, int]:
    """The largest local grid (nx, ny, nz), multiples of 8 and near-cubic, whose data fits
    `fraction` of the memory shared by `ranks` processes. ValueError if even 16^3 does not."""
    points = memory_bytes * fraction / max(ranks, 1) / HPCG_BYTES_PER_POINT
    side = int(round(points ** (1 / 3))) // 8 * 8
    while side > HPCG_MIN_DIM and side ** 3 > points:
        side -= 8
    if side < HPCG_MIN_DIM or side ** 3 > points:
        raise ValueError(f"{fraction:.0%} of {memory_bytes / 2**30:.1f} GiB over {ranks} rank(s) cannot hold "
                         f"the smallest HPCG grid ({HPCG_MIN_DIM}^3)")
    dims = [side, side, side]
    for axis in (2, 1):  # grow nz, then ny, by 8 while the data still fits
        while (dims[0] * dims[1] * dims[2] // dims[axis]) * (dims[axis] + 8) <= points \
                and dims[axis] + 8 <= HPCG_MAX_ASPECT * min(dims):
            dims[axis] += 8
    return dims[0], dims[1], dims[2]


def hpcg_memory(dims: tuple[int, int, int], ranks: int) -> int:
    """Bytes of HPCG data for this local grid over all ranks (the planning estimate)."""
    return dims[0] * dims[1] * dims[2] * ranks * HPCG_BYTES_PER_POINT


def hpcg_dims_problem(dims: tuple[int, int, int]) -> str | None:
    """Why HPCG would refuse (or not accept) these local dimensions, or None."""
    if any(d % 8 for d in dims):
        return f"local dimensions {dims} must be multiples of 8"
    if min(dims) < HPCG_MIN_DIM:
        return f"local dimensions {dims} must be at least {HPCG_MIN_DIM}"
    if max(dims) > HPCG_MAX_ASPECT * min(dims):
        return f"local dimensions {dims}: the largest is more than {HPCG_MAX_ASPECT} x the smallest"
    return None
