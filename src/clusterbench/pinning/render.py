"""Show a `Prediction`: the pinning picture (text and SVG), srun-style masks, and JSON.

The picture is the one drawn by hand in JSC's pinning studies: one block per NUMA domain (or socket),
a column per core, the first hardware thread of every core in the "physical" row and its SMT siblings
in the rows below, and in every cell who is bound there. Blocks follow the physical order of their
cores (hwloc's logical core order) and are labelled with the OS number, because NUMA domains may be
numbered out of order (LLNL Lassen's are 0 and 8).

What a cell shows (one rule for text and SVG, so the two never disagree):

- `3`    task 3 is bound there (the prediction has no thread places for it);
- `3.1`  thread 1 of task 3 is bound there, and nothing else is. The thread number is kept: it is what
         tells `close` from `spread`, and at most 11 characters wide (`65535.65535`) it stays readable;
- `a`    a marker: several tasks, or several threads, may run there (a wide mask such as
         --cpu-bind=sockets, an unbound task, threads sharing a place). One marker per distinct set of
         owners, explained once in the legend ("a: tasks 0-7 share CPUs 0-63") instead of crammed in a cell;
- `-`    a CPU of a task on which none of its bound threads runs (cores the threads leave idle);
- `.`    no task at all.

Text is for terminals: a block wider than `width` (200 columns by default) is cut into equal runs of
cores, so a 256-PU node fits. The SVG is self-contained (no scripts, links or external fonts; it is
embedded in HTML reports), one colour per task from Paul Tol's colour-blind-safe "muted" palette,
cycling after nine tasks, with a tooltip per cell. It is sized to its text: the title, subtitle, block
headings and legend lines wrap at the width of the grid (at least 640 px), every line is measured at
CHAR_EM font sizes a character (DejaVu Sans Mono's advance is 0.602), and the picture is as wide as
its widest line, so a long launcher command line wraps instead of running out of the picture.
"""

from __future__ import annotations

import hashlib
import html
import math
import re
import textwrap
from dataclasses import dataclass, field

from clusterbench.errors import UserInputError
from clusterbench.pinning.model import Prediction, TaskPlacement, cpu_mask
from clusterbench.system.topology import Topology, compress_cpulist

TEXT_WIDTH = 200
SVG_MAX_COLUMNS = 32  # cores per block row in the SVG (about 1300 px with the widest cells)
SVG_MIN_WIDTH = 640.0  # px: text wraps at the grid's width, or this when the grid is narrower
CHAR_EM = 0.62  # width of a monospace character in font sizes (DejaVu Sans Mono: 0.602), with a margin
EMPTY, IDLE = ".", "-"
# Paul Tol's "muted" qualitative scheme (https://personal.sron.nl/~pault/), distinct for colour-blind readers.
PALETTE = ("#CC6677", "#332288", "#DDCC77", "#117733", "#88CCEE", "#882255", "#44AA99", "#999933", "#AA4499")
Owner = tuple[int, int | None]  # (task rank, thread number or None when the task's threads are not placed)


# --------------------------------------------------------------------------- layout shared by text and SVG

@dataclass
class Cell:
    pu: int | None  # None: this core has fewer hardware threads than the row
    text: str = ""
    owners: tuple[Owner, ...] = ()
    idle_ranks: tuple[int, ...] = ()  # tasks that own the CPU but bound no thread to it


@dataclass
class Block:
    title: str  # "NUMA 8", "socket 1"
    detail: str  # which socket / NUMA domains, cores and PUs it holds
    cores: list[int]  # core numbers (index in Topology.cores), one column each
    rows: list[list[Cell]]  # rows[k][j]: the k-th hardware thread of core cores[j]


@dataclass
class Layout:
    title: str
    subtitle: str
    blocks: list[Block]
    row_labels: list[str]
    markers: dict[tuple[Owner, ...], str] = field(default_factory=dict)
    legend: list[str] = field(default_factory=list)  # one line per marker
    ranks: list[int] = field(default_factory=list)  # tasks on this node
    notes: list[str] = field(default_factory=list)


def _options_text(pred: Prediction) -> str:
    """The options as a command line would show them: '-n 8 --cpu-bind=cores OMP_PLACES=cores'."""
    parts = []
    for key, value in pred.options.items():
        key = str(key)
        if value is True:
            parts.append(key)
        elif value is None or value is False:
            continue
        elif key.startswith("-") and not key.startswith("--"):
            parts.append(f"{key} {value}")
        else:
            parts.append(f"{key}={value}")
    return " ".join(parts)


def _title(pred: Prediction) -> str:
    who = pred.launcher + (f" ({pred.flavour})" if pred.flavour else "")
    options = _options_text(pred)
    return f"{who}: {options}" if options else who


def _subtitle(pred: Prediction, node: int, ntasks: int) -> str:
    t = pred.topology
    smt = f" (SMT {t.threads_per_core})" if t.threads_per_core > 1 else " (no SMT)"
    model = f"{t.model_name}, " if t.model_name else ""
    return (f"node {node} of {pred.nodes}: {ntasks} task{'s' if ntasks != 1 else ''}; {model}{t.sockets} sockets, "
            f"{t.numa_domains} NUMA domains, {t.cores_total} cores, {t.pus_total} PUs{smt} [{t.source}]")


def _owners(tasks: list[TaskPlacement]) -> tuple[dict[int, list[Owner]], dict[int, list[int]]]:
    """Per PU: who is bound there, and which tasks own it without a thread on it."""
    owners: dict[int, list[Owner]] = {}
    idle: dict[int, list[int]] = {}
    for task in tasks:
        if task.threads:
            placed = set().union(*task.threads)
            for t, cpus in enumerate(task.threads):
                for pu in cpus:
                    owners.setdefault(pu, []).append((task.rank, t))
            for pu in task.cpus - placed:
                idle.setdefault(pu, []).append(task.rank)
        else:
            for pu in task.cpus:
                owners.setdefault(pu, []).append((task.rank, None))
    return owners, idle


def _marker_name(index: int) -> str:
    """a, b, ..., z, aa, ab, ...: short enough for a cell, never a number (numbers are tasks)."""
    name = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        name = chr(ord("a") + rest) + name
    return name


def _describe(owners: tuple[Owner, ...]) -> str:
    """(0,None),(1,None) -> 'tasks 0-1'; (3,0),(3,1) -> 'task 3 threads 0-1'."""
    whole = sorted({r for r, t in owners if t is None})
    threads: dict[int, list[int]] = {}
    for r, t in owners:
        if t is not None:
            threads.setdefault(r, []).append(t)
    parts = []
    if whole:
        parts.append(("task " if len(whole) == 1 else "tasks ") + compress_cpulist(whole))
    for r in sorted(threads):
        ts = sorted(threads[r])
        parts.append(f"task {r} thread{'s' if len(ts) > 1 else ''} {compress_cpulist(ts)}")
    return ", ".join(parts)


def _cell_text(cell: Cell, markers: dict[tuple[Owner, ...], str]) -> str:
    if cell.pu is None:
        return ""
    if not cell.owners:
        return IDLE if cell.idle_ranks else EMPTY
    if len(cell.owners) == 1:
        rank, thread = cell.owners[0]
        return str(rank) if thread is None else f"{rank}.{thread}"
    return markers.setdefault(cell.owners, _marker_name(len(markers)))


def _groups(topo: Topology, rows: str) -> list[tuple[str, list[int]]]:
    """(title, core numbers) per block, blocks in the physical order of their first core."""
    core_first = [min(c) for c in topo.cores]
    if rows == "numa":
        numa_of = {pu: d.os_index for d in topo.numa for pu in d.cpus}
        key = [numa_of.get(pu) for pu in core_first]
        title = "NUMA {}"
    else:
        pkg_of = {pu: i for i, pkg in enumerate(topo.packages) for pu in pkg}
        key = [pkg_of.get(pu) for pu in core_first]
        title = "socket {}"
    blocks: dict[object, list[int]] = {}
    for core, k in enumerate(key):
        blocks.setdefault(k, []).append(core)
    return [(title.format("?" if k is None else k), cores) for k, cores in blocks.items()]


def _detail(topo: Topology, cores: list[int], rows: str) -> str:
    pus = sorted(pu for c in cores for pu in topo.cores[c])
    pkg_of = {pu: i for i, pkg in enumerate(topo.packages) for pu in pkg}
    numa_of = {pu: d.os_index for d in topo.numa for pu in d.cpus}
    if rows == "numa":
        where = sorted({pkg_of[pu] for pu in pus if pu in pkg_of})
        around = "socket " + ",".join(map(str, where)) if where else ""
    else:
        where = sorted({numa_of[pu] for pu in pus if pu in numa_of})
        around = ("NUMA " + ",".join(map(str, where))) if where else ""
    parts = [around, f"cores {compress_cpulist(cores)}", f"PUs {compress_cpulist(pus)}"]
    return " | ".join(p for p in parts if p)


def _row_labels(depth: int) -> list[str]:
    if depth == 1:
        return ["physical"]
    if depth == 2:
        return ["physical", "SMT"]
    return ["physical"] + [f"SMT{k}" for k in range(1, depth)]


def layout(pred: Prediction, node: int = 0, rows: str = "numa") -> Layout:
    """The picture as data: blocks, rows, cells with their text, markers and legend."""
    if rows not in ("numa", "socket"):
        raise UserInputError(f"unknown picture rows {rows!r}", hint="numa or socket", where="rows")
    if not 0 <= node < max(pred.nodes, 1):
        raise UserInputError(f"node {node} is not in this prediction (nodes 0-{pred.nodes - 1})", where="node")
    topo = pred.topology
    tasks = pred.on_node(node)
    owners, idle = _owners(tasks)
    depth = topo.threads_per_core
    out = Layout(_title(pred), _subtitle(pred, node, len(tasks)), [], _row_labels(depth),
                 ranks=sorted(t.rank for t in tasks), notes=list(pred.notes))
    kind = rows if topo.numa else "socket"  # a topology without NUMA facts is drawn by socket
    for title, cores in _groups(topo, kind):
        grid = [[_cell(topo, c, k, owners, idle, out.markers) for c in cores] for k in range(depth)]
        out.blocks.append(Block(title, _detail(topo, cores, kind), cores, grid))
    out.legend = _legend(out)
    return out


def _cell(topo: Topology, core: int, k: int, owners: dict[int, list[Owner]], idle: dict[int, list[int]],
          markers: dict[tuple[Owner, ...], str]) -> Cell:
    """The cell of the k-th hardware thread of `core` (empty when the core has fewer)."""
    pus = sorted(topo.cores[core])
    pu = pus[k] if k < len(pus) else None
    cell = Cell(pu, owners=tuple(sorted(set(owners.get(pu, ())), key=_owner_key)),
                idle_ranks=tuple(sorted(idle.get(pu, ()))))
    cell.text = _cell_text(cell, markers)
    return cell


def _owner_key(owner: Owner) -> tuple[int, int]:
    return owner[0], -1 if owner[1] is None else owner[1]


def _legend(lay: Layout) -> list[str]:
    cpus: dict[str, list[int]] = {}
    for block in lay.blocks:
        for row in block.rows:
            for cell in row:
                if cell.pu is not None and len(cell.owners) > 1:
                    cpus.setdefault(cell.text, []).append(cell.pu)
    lines = []
    for owners, marker in lay.markers.items():
        where = cpus.get(marker, [])
        noun = "CPU" if len(where) == 1 else "CPUs"
        lines.append(f"{marker}: {_describe(owners)} share {noun} {compress_cpulist(where)}")
    return lines


KEY_TEXT = (f"r = task r, r.t = thread t of task r, letters = shared (see below), "
            f"{IDLE} = a task's CPU with no thread on it, {EMPTY} = no task")


# --------------------------------------------------------------------------- text

def _chunks(cores: list[int], per_line: int) -> list[list[int]]:
    """Cut a block's cores into equal runs of at most per_line (16+16, not 30+2)."""
    if len(cores) <= per_line:
        return [cores]
    n = math.ceil(len(cores) / per_line)
    size = math.ceil(len(cores) / n)
    return [cores[i:i + size] for i in range(0, len(cores), size)]


def picture_text(pred: Prediction, node: int = 0, rows: str = "numa", width: int = TEXT_WIDTH) -> str:
    """The pinning picture of one node as plain text, no line longer than `width` (see the module doc).

    The prediction's notes are not part of it: a terminal shows them apart (the SVG, which travels
    alone into reports, carries them)."""
    lay = layout(pred, node, rows)
    label_w = max(len("core"), *(len(s) for s in lay.row_labels))
    cell_w = max([len(str(c)) for b in lay.blocks for c in b.cores]
                 + [len(cell.text) for b in lay.blocks for row in b.rows for cell in row] + [1])
    per_line = max(1, (width - label_w) // (cell_w + 1))
    lines = _wrap(lay.title, width) + _wrap(lay.subtitle, width)
    for block in lay.blocks:
        index = {core: j for j, core in enumerate(block.cores)}
        for part, cores in enumerate(_chunks(block.cores, per_line)):
            lines.append("")
            lines.append(f"{block.title} | {block.detail}" if part == 0 else f"{block.title} (continued)")
            lines.append("core".ljust(label_w) + "".join(f" {c:>{cell_w}}" for c in cores))
            for label, row in zip(lay.row_labels, block.rows, strict=True):
                cells = [row[index[c]].text for c in cores]
                lines.append((label.ljust(label_w) + "".join(f" {t:>{cell_w}}" for t in cells)).rstrip())
    lines += [""] + _wrap("key: " + KEY_TEXT, width)
    for line in lay.legend:
        lines += _wrap(line, width)
    return "\n".join(lines) + "\n"


def _wrap(line: str, width: int) -> list[str]:
    """Titles and legend lines wrap at the width, continuation lines indented (the grid always fits)."""
    return textwrap.wrap(line, width=width, subsequent_indent="  ", break_on_hyphens=False) or [""]


# --------------------------------------------------------------------------- SVG

def task_colour(rank: int) -> str:
    return PALETTE[rank % len(PALETTE)]


def _ink(fill: str) -> str:
    """Black or white text, whichever reads better on `fill` (WCAG relative luminance)."""
    def channel(hex2: str) -> float:
        v = int(hex2, 16) / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(fill[i:i + 2]) for i in (1, 3, 5))
    return "#000000" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.18 else "#ffffff"


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _tooltip(cell: Cell, core: int, block: Block) -> str:
    who = _describe(cell.owners) if cell.owners else (
        f"{'task' if len(cell.idle_ranks) == 1 else 'tasks'} {compress_cpulist(list(cell.idle_ranks))} "
        "(no thread bound here)" if cell.idle_ranks else "no task")
    return f"CPU {cell.pu} (core {core}, {block.title}): {who}"


class _Svg:
    """Accumulates SVG elements and the picture's height; sizes in px."""

    CELL_H, GAP, LABEL_W, FONT = 22, 2, 78, 12

    def __init__(self, cell_w: int, uid: str):
        self.cell_w, self.uid, self.parts, self.y, self.width = cell_w, uid, [], 0.0, 0.0

    def text(self, x: float, y: float, content: str, size: int = 12, weight: str = "normal",
             anchor: str = "start", fill: str = "#222222") -> None:
        self.parts.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" font-weight="{weight}" '
                          f'text-anchor="{anchor}" fill="{fill}">{_esc(content)}</text>')
        self.width = max(self.width, x + (len(content) * size * CHAR_EM if anchor == "start" else 0))

    def lines(self, text: str, width: float, size: int, first: float, then: float, **style) -> None:
        """A text wrapped to `width` px, its first line `first` px below the current y, the others `then`."""
        for i, line in enumerate(_svg_wrap(text, width, size)):
            self.y += first if i == 0 else then
            self.text(0, self.y, line, size=size, **style)

    def cell(self, x: float, y: float, cell: Cell, core: int, block: Block) -> None:
        w, h = self.cell_w, self.CELL_H
        if cell.pu is None:
            return
        if len(cell.owners) == 1:
            fill, opacity = task_colour(cell.owners[0][0]), "1"
        elif cell.owners:
            fill, opacity = f"url(#{self.uid}-shared)", "1"
        elif cell.idle_ranks:
            fill, opacity = task_colour(cell.idle_ranks[0]), "0.25"
        else:
            fill, opacity = "#ffffff", "1"
        owners = " ".join(f"{r}" if t is None else f"{r}.{t}" for r, t in cell.owners)
        self.parts.append(
            f'<rect class="cell" x="{x:.1f}" y="{y:.1f}" width="{w}" height="{h}" fill="{fill}" '
            f'fill-opacity="{opacity}" stroke="#999999" stroke-width="0.6" data-pu="{cell.pu}" '
            f'data-core="{core}" data-owners="{owners}" data-text="{_esc(cell.text)}">'
            f'<title>{_esc(_tooltip(cell, core, block))}</title></rect>')
        ink = _ink(fill) if len(cell.owners) == 1 else "#222222"
        self.parts.append(f'<text class="label" x="{x + w / 2:.1f}" y="{y + h / 2 + 4:.1f}" font-size="{self.FONT}" '
                          f'text-anchor="middle" fill="{ink}" pointer-events="none">{_esc(cell.text)}</text>')


class _CommaWrapper(textwrap.TextWrapper):
    """Breaks at spaces and after commas ('map_cpu:0,1,2,...' breaks after a number, not inside one)."""

    wordsep_simple_re = re.compile(r"(\s+|(?<=,)(?=\S))")


def _svg_wrap(text: str, width: float, size: int) -> list[str]:
    """Lines of at most `width` px at this font size, continuation lines indented."""
    chars = max(20, int(width / (size * CHAR_EM)))
    return _CommaWrapper(width=chars, subsequent_indent="  ", break_on_hyphens=False).wrap(text) or [""]


def _svg_block(svg: _Svg, block: Block, labels: list[str], width: float) -> None:
    index = {core: j for j, core in enumerate(block.cores)}
    step = svg.cell_w + svg.GAP
    for part, cores in enumerate(_chunks(block.cores, SVG_MAX_COLUMNS)):
        heading = f"{block.title} | {block.detail}" if part == 0 else f"{block.title} (continued)"
        svg.lines(heading, width, 13, 26, 17, weight="bold")
        svg.y += 8
        svg.text(svg.LABEL_W - 8, svg.y + 14, "core", size=11, anchor="end", fill="#555555")
        for j, core in enumerate(cores):
            svg.text(svg.LABEL_W + j * step + svg.cell_w / 2, svg.y + 14, str(core), size=11, anchor="middle",
                     fill="#555555")
        svg.y += 18
        for label, row in zip(labels, block.rows, strict=True):
            svg.text(svg.LABEL_W - 8, svg.y + svg.CELL_H / 2 + 4, label, size=11, anchor="end", fill="#555555")
            for j, core in enumerate(cores):
                svg.cell(svg.LABEL_W + j * step, svg.y, row[index[core]], core, block)
            svg.y += svg.CELL_H + svg.GAP
        svg.width = max(svg.width, svg.LABEL_W + len(cores) * step)


def _svg_legend(svg: _Svg, lay: Layout, width: float) -> None:
    svg.y += 30
    svg.text(0, svg.y, "Tasks", size=13, weight="bold")
    x, svg.y = 0.0, svg.y + 10
    for rank in lay.ranks:
        label = f"task {rank}"
        item_w = 24 + len(label) * 12 * CHAR_EM + 14
        if x + item_w > width and x > 0:
            x, svg.y = 0.0, svg.y + 22
        colour = task_colour(rank)
        svg.parts.append(f'<rect class="swatch" x="{x:.1f}" y="{svg.y:.1f}" width="18" height="16" fill="{colour}" '
                         f'stroke="#999999" stroke-width="0.6" data-rank="{rank}"/>')
        svg.text(x + 24, svg.y + 12.5, label, size=12)
        x += item_w
    svg.y += 22
    lines = [("Key", KEY_TEXT)] + [("", line) for line in lay.legend]
    lines += [("Notes" if i == 0 else "", n) for i, n in enumerate(lay.notes)]
    chars = max(40, int(width / (12 * CHAR_EM)))
    for heading, line in lines:
        if heading:
            svg.y += 24
            svg.text(0, svg.y, heading, size=13, weight="bold")
        for piece in textwrap.wrap(line, width=chars) or [""]:
            svg.y += 17
            svg.text(0, svg.y, piece, size=12)


def picture_svg(pred: Prediction, node: int = 0, rows: str = "numa") -> str:
    """The pinning picture of one node as a standalone SVG document (see the module doc)."""
    lay = layout(pred, node, rows)
    longest = max([len(str(c)) for b in lay.blocks for c in b.cores]
                  + [len(cell.text) for b in lay.blocks for row in b.rows for cell in row] + [1])
    uid = "cbpin-" + hashlib.sha1(picture_text(pred, node, rows).encode()).hexdigest()[:8]
    svg = _Svg(cell_w=max(28, math.ceil(longest * 12 * CHAR_EM) + 10), uid=uid)
    columns = max([min(len(b.cores), SVG_MAX_COLUMNS) for b in lay.blocks] + [0])
    grid_w = max(SVG_MIN_WIDTH, svg.LABEL_W + columns * (svg.cell_w + svg.GAP))
    svg.lines(lay.title, grid_w, 16, 22, 20, weight="bold")
    svg.lines(lay.subtitle, grid_w, 12, 20, 16, fill="#444444")
    for block in lay.blocks:
        _svg_block(svg, block, lay.row_labels, grid_w)
    _svg_legend(svg, lay, grid_w)
    width, height = math.ceil(max(svg.width, grid_w)) + 16, math.ceil(svg.y) + 16
    defs = (f'<defs><pattern id="{uid}-shared" width="6" height="6" patternUnits="userSpaceOnUse" '
            f'patternTransform="rotate(45)"><rect width="6" height="6" fill="#e8e8e8"/>'
            f'<line x1="0" y1="0" x2="0" y2="6" stroke="#b0b0b0" stroke-width="2.5"/></pattern></defs>')
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="-8 -8 {width} {height}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" '
            f'role="img" aria-labelledby="{uid}-title">')
    body = [head, f'<title id="{uid}-title">{_esc(lay.title)}</title>', defs,
            f'<rect x="-8" y="-8" width="{width}" height="{height}" fill="#ffffff"/>', *svg.parts, "</svg>"]
    return "\n".join(body) + "\n"


# --------------------------------------------------------------------------- masks and JSON

def hex_masks(pred: Prediction) -> list[str]:
    """One line per task in the shape of srun --cpu-bind=verbose's report
    ('cpu-bind=MASK - node 0, task  3  3: mask 0xf000 set'), with the node's index where srun prints
    the host name and without the process id. An unbound task shows NONE and its whole-node mask."""
    width = len(str(max((t.rank for t in pred.tasks), default=0)))
    local: dict[int, int] = {}
    lines = []
    for task in pred.tasks:
        here = local.get(task.node, 0)
        local[task.node] = here + 1
        kind = "MASK" if task.bound else "NONE"
        lines.append(f"cpu-bind={kind} - node {task.node}, task {task.rank:>{width}} {here:>{width}}: "
                     f"mask {cpu_mask(task.cpus)} set")
    return lines


def _jsonable(value: object) -> object:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_jsonable(v) for v in value)
    return str(value)


def _topology_summary(topo: Topology) -> dict:
    return {"source": topo.source, "hostname": topo.hostname, "model_name": topo.model_name,
            "sockets": topo.sockets, "cores": topo.cores_total, "pus": topo.pus_total,
            "threads_per_core": topo.threads_per_core,
            "packages": [compress_cpulist(p) for p in topo.packages],
            "numa": [{"os_index": d.os_index, "cpus": compress_cpulist(d.cpus)} for d in topo.numa],
            "l3_groups": [compress_cpulist(g) for g in topo.l3_groups]}


def _task_json(task: TaskPlacement) -> dict:
    return {"rank": task.rank, "node": task.node, "bound": task.bound,
            "cpus": compress_cpulist(sorted(task.cpus)), "cpu_list": sorted(task.cpus), "mask": cpu_mask(task.cpus),
            "threads": [{"thread": i, "cpus": compress_cpulist(sorted(c)), "cpu_list": sorted(c), "mask": cpu_mask(c)}
                        for i, c in enumerate(task.threads)]}


def prediction_json(pred: Prediction) -> dict:
    """Everything about a prediction as plain JSON data: launcher, options, notes, a topology summary,
    every task with its CPUs (as a cpulist, a list and a mask) and its threads' CPUs, and the masks."""
    return {"launcher": pred.launcher, "flavour": pred.flavour, "nodes": pred.nodes,
            "options": _jsonable(pred.options), "notes": list(pred.notes),
            "topology": _topology_summary(pred.topology),
            "tasks": [_task_json(t) for t in pred.tasks],
            "masks": hex_masks(pred)}
