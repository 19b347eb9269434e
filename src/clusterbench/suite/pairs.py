"""Every pair of nodes, in rounds of disjoint pairs: all links measured, no two at once on one node.

A ping-pong between two nodes measures their link only if neither node is busy with another
pair at the same time. A round-robin tournament (the circle method) gives exactly that: with N
nodes, N - 1 rounds (N even) or N rounds (N odd, one node resting each round), each node in at
most one pair per round, every pair exactly once. All pairs of a round run at once, so the whole
matrix takes N - 1 pair-times instead of N(N - 1)/2.
"""

from __future__ import annotations

MAX_NODES = 512  # 130,816 pairs: beyond that, an all-pairs run is not what anyone wants


def rounds(nodes: list[str]) -> list[list[tuple[str, str]]]:
    """The rounds of disjoint pairs covering every pair of `nodes` once; pairs ordered as the nodes are."""
    if len(nodes) != len(set(nodes)):
        raise ValueError("a node is listed twice")
    if len(nodes) > MAX_NODES:
        raise ValueError(f"{len(nodes)} nodes: all pairs of more than {MAX_NODES} nodes are not measured")
    order = {n: i for i, n in enumerate(nodes)}
    ring: list[str | None] = list(nodes) + ([None] if len(nodes) % 2 else [])
    out: list[list[tuple[str, str]]] = []
    for _ in range(len(ring) - 1):
        half = len(ring) // 2
        pairs = []
        for a, b in zip(ring[:half], reversed(ring[half:]), strict=True):
            if a is not None and b is not None:
                pairs.append((a, b) if order[a] < order[b] else (b, a))
        out.append(sorted(pairs, key=lambda p: (order[p[0]], order[p[1]])))
        ring = [ring[0], ring[-1], *ring[1:-1]]  # the first stays, the others turn one place
    return [r for r in out if r]
