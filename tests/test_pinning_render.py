"""The pinning picture (text and SVG), the srun-style masks and the JSON of a Prediction
(clusterbench.pinning.render), on hand-built predictions over the topology fixtures.

The assertions are about structure - which blocks, rows and columns there are and which task or
thread number lands in which cell - not about exact bytes, so the drawing can change without
rewriting the tests.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from clusterbench.errors import UserInputError
from clusterbench.pinning.model import Prediction, TaskPlacement, parse_mask
from clusterbench.pinning.openmp import with_threads
from clusterbench.pinning.render import PALETTE, hex_masks, picture_svg, picture_text, prediction_json
from clusterbench.system.sources import from_hwloc_synthetic, topology_from_file
from clusterbench.system.topology import NumaDomain
from conftest import TOPOLOGY

SVG = "{http://www.w3.org/2000/svg}"


def load(name):
    return topology_from_file(TOPOLOGY / name)


@pytest.fixture(scope="module")
def epyc():
    return load("epyc7742-synthetic.xml")


def parse_picture(text: str) -> dict[str, dict]:
    """Blocks of a text picture, in order: title -> {'detail', 'cores', row label -> cells}; the parts
    of a block cut to fit the width are joined again."""
    blocks: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("key:"):
            break
        head = re.match(r"^((?:NUMA|socket) \S+)(?: \| (.*)| \(continued\))$", line)
        if head:
            current = blocks.setdefault(head.group(1), {"detail": head.group(2), "cores": []})
            continue
        if current is None or not line.strip():
            continue
        label, *cells = line.split()
        if label == "core":
            current["cores"] += [int(c) for c in cells]
        else:
            current.setdefault(label, []).extend(cells)
    return blocks


def cell_of(blocks: dict, topo, pu: int) -> str:
    """The text shown for `pu` in a parsed picture."""
    core = topo.core_index(pu)
    row = sorted(topo.cores[core]).index(pu)
    for block in blocks.values():
        if core in block["cores"]:
            labels = [k for k in block if k not in ("detail", "cores")]
            return block[labels[row]][block["cores"].index(core)]
    raise KeyError(pu)


def numa_tasks(topo, threads=None, bound=True):
    """One task per NUMA domain (srun --cpu-bind=ldoms), threads given per rank by `threads(rank)`."""
    tasks = []
    for rank, domain in enumerate(topo.numa):
        t = threads(rank) if threads else ()
        tasks.append(TaskPlacement(rank, 0, frozenset(domain.cpus), bound=bound, threads=t))
    return tasks


# --------------------------------------------------------------------------- text picture

def test_epyc_8_tasks_3_threads(epyc):
    """Thread t of task r bound to core 16r+t: 'r.t' in the physical row there, '-' on the rest of the
    task's CPUs (no thread), 8 NUMA blocks of 16 cores, physical and SMT rows apart."""
    def threads(rank):
        return tuple(frozenset([16 * rank + t]) for t in range(3))

    pred = Prediction(epyc, numa_tasks(epyc, threads), "srun", flavour="slurm",
                      options={"-n": 8, "--cpu-bind": "ldoms", "OMP_NUM_THREADS": 3})
    text = picture_text(pred)
    blocks = parse_picture(text)
    assert list(blocks) == [f"NUMA {i}" for i in range(8)]
    for i, block in enumerate(blocks.values()):
        assert block["cores"] == list(range(16 * i, 16 * i + 16))
        assert set(block) == {"detail", "cores", "physical", "SMT"}
        assert block["physical"][:3] == [f"{i}.0", f"{i}.1", f"{i}.2"]
        assert block["physical"][3:] == ["-"] * 13 and block["SMT"] == ["-"] * 16
    assert blocks["NUMA 1"]["detail"] == "socket 0 | cores 16-31 | PUs 16-31,144-159"
    assert blocks["NUMA 7"]["detail"].startswith("socket 1 |")
    assert text.splitlines()[0] == "srun (slurm): -n 8 --cpu-bind=ldoms OMP_NUM_THREADS=3"
    assert all(len(line) <= 200 for line in text.splitlines())


def test_epyc_threads_placed_by_openmp(epyc):
    """OMP_PLACES=cores spread puts thread 1 of task r on core 16r+6, both hardware threads."""
    pred = with_threads(Prediction(epyc, numa_tasks(epyc), "srun"), 3, "cores", "spread")
    blocks = parse_picture(picture_text(pred))
    for rank in range(8):
        core = 16 * rank + 6
        assert cell_of(blocks, epyc, core) == f"{rank}.1"
        assert cell_of(blocks, epyc, core + 128) == f"{rank}.1"


def test_pascal_one_task_per_core():
    """cts1-pascal: 36 tasks, task c on core c (PUs c and c+36): c in both rows of column c."""
    topo = load("cts1-pascal.xml")
    tasks = [TaskPlacement(c, 0, frozenset(pus)) for c, pus in enumerate(topo.cores)]
    blocks = parse_picture(picture_text(Prediction(topo, tasks, "srun", options={"--cpu-bind": "cores"})))
    assert list(blocks) == ["NUMA 0", "NUMA 1"]
    assert blocks["NUMA 0"]["cores"] == list(range(18)) and blocks["NUMA 1"]["cores"] == list(range(18, 36))
    for block in blocks.values():
        assert block["physical"] == [str(c) for c in block["cores"]] == block["SMT"]
    assert cell_of(blocks, topo, 36) == "0" and cell_of(blocks, topo, 71) == "35"


def test_quartz_without_smt_has_only_the_physical_row():
    topo = load("cts1-quartz-smt1.xml")
    tasks = [TaskPlacement(r, 0, frozenset(range(9 * r, 9 * r + 9))) for r in range(4)]
    text = picture_text(Prediction(topo, tasks, "openmpi"), rows="socket")
    blocks = parse_picture(text)
    assert list(blocks) == ["socket 0", "socket 1"]
    for block in blocks.values():
        assert set(block) == {"detail", "cores", "physical"}
    assert blocks["socket 0"]["physical"] == ["0"] * 9 + ["1"] * 9
    assert not [line for line in text.splitlines() if line.startswith("SMT")] and "(no SMT)" in text


def test_lassen_numa_os_numbers_and_smt4():
    """coral-lassen: NUMA domains 0 and 8, SMT4 rows, core 0 = PUs 8-11 (PUs 0-7 are not usable)."""
    topo = load("coral-lassen.xml")
    tasks = [TaskPlacement(0, 0, frozenset([9])), TaskPlacement(1, 0, frozenset(range(96, 100)))]
    blocks = parse_picture(picture_text(Prediction(topo, tasks, "srun")))
    assert list(blocks) == ["NUMA 0", "NUMA 8"]
    assert set(blocks["NUMA 8"]) == {"detail", "cores", "physical", "SMT1", "SMT2", "SMT3"}
    assert blocks["NUMA 0"]["SMT1"][0] == "0" and blocks["NUMA 0"]["physical"][0] == "."
    assert blocks["NUMA 8"]["cores"][0] == 20
    assert [blocks["NUMA 8"][row][0] for row in ("physical", "SMT1", "SMT2", "SMT3")] == ["1"] * 4
    assert blocks["NUMA 0"]["detail"] == "socket 0 | cores 0-19 | PUs 8-87"


def test_numa_blocks_keep_physical_order_with_os_numbers():
    """A node whose NUMA domain 1 holds the first cores: its block comes first, labelled 1."""
    topo = from_hwloc_synthetic("package:1 numa:2 core:4 pu:2(indexes=core)")
    first, second = topo.numa
    topo.numa = [NumaDomain(0, second.cpus), NumaDomain(1, first.cpus)]
    tasks = [TaskPlacement(0, 0, frozenset(first.cpus)), TaskPlacement(1, 0, frozenset(second.cpus))]
    blocks = parse_picture(picture_text(Prediction(topo, tasks, "srun")))
    assert list(blocks) == ["NUMA 1", "NUMA 0"]
    assert blocks["NUMA 1"]["cores"] == [0, 1, 2, 3] and blocks["NUMA 1"]["physical"] == ["0"] * 4


def test_topology_without_numa_facts_is_drawn_by_socket():
    topo = from_hwloc_synthetic("package:2 core:2 pu:1")
    topo.numa = []
    tasks = [TaskPlacement(0, 0, frozenset([0, 1])), TaskPlacement(1, 0, frozenset([3]))]
    blocks = parse_picture(picture_text(Prediction(topo, tasks, "srun"), rows="numa"))
    assert list(blocks) == ["socket 0", "socket 1"]
    assert blocks["socket 0"]["physical"] == ["0", "0"] and blocks["socket 1"]["physical"] == [".", "1"]


def test_wide_masks_get_a_marker_and_a_legend(epyc):
    """--cpu-bind=sockets: four tasks on every CPU of a socket; one marker per socket, explained once."""
    tasks = [TaskPlacement(r, 0, frozenset(epyc.packages[r // 4])) for r in range(8)]
    text = picture_text(Prediction(epyc, tasks, "srun", options={"--cpu-bind": "sockets"}), rows="socket")
    blocks = parse_picture(text)
    assert blocks["socket 0"]["cores"] == list(range(64))  # cut in two to fit, joined here
    assert set(blocks["socket 0"]["physical"] + blocks["socket 0"]["SMT"]) == {"a"}
    assert set(blocks["socket 1"]["physical"]) == {"b"}
    assert "a: tasks 0-3 share CPUs 0-63,128-191" in text.splitlines()
    assert "b: tasks 4-7 share CPUs 64-127,192-255" in text.splitlines()
    assert "socket 0 (continued)" in text
    assert all(len(line) <= 200 for line in text.splitlines())


def test_unbound_task_and_shared_places(epyc):
    """An unbound task covers the node; a thread pair on one CPU is a marker too."""
    everything = frozenset(epyc.pus)
    tasks = [TaskPlacement(0, 0, everything, bound=False),
             TaskPlacement(1, 0, frozenset([5, 133]), threads=(frozenset([5]), frozenset([5]), frozenset([133])))]
    text = picture_text(Prediction(epyc, tasks, "none"))
    blocks = parse_picture(text)
    assert cell_of(blocks, epyc, 0) == "0" and cell_of(blocks, epyc, 255) == "0"
    assert cell_of(blocks, epyc, 5) == "a" and cell_of(blocks, epyc, 133) == "b"
    lines = text.splitlines()
    assert "a: task 0, task 1 threads 0-1 share CPU 5" in lines
    assert "b: task 0, task 1 thread 2 share CPU 133" in lines


@pytest.mark.parametrize("rows", ["numa", "socket"])
@pytest.mark.parametrize("width", [200, 120, 80])
def test_256_pus_fit_the_width(epyc, rows, width):
    tasks = [TaskPlacement(pu, 0, frozenset([pu]), threads=(frozenset([pu]),)) for pu in epyc.pus]
    text = picture_text(Prediction(epyc, tasks, "srun"), rows=rows, width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    blocks = parse_picture(text)
    assert sorted(c for b in blocks.values() for c in b["cores"]) == list(range(128))
    assert cell_of(blocks, epyc, 200) == "200.0"


def test_bad_rows_and_node(epyc):
    pred = Prediction(epyc, numa_tasks(epyc), "srun")
    with pytest.raises(UserInputError):
        picture_text(pred, rows="core")
    with pytest.raises(UserInputError):
        picture_svg(pred, node=1)


def test_second_node_only_shows_its_tasks(epyc):
    tasks = [TaskPlacement(0, 0, frozenset([0])), TaskPlacement(1, 1, frozenset([1]))]
    blocks = parse_picture(picture_text(Prediction(epyc, tasks, "srun", nodes=2), node=1))
    assert cell_of(blocks, epyc, 0) == "." and cell_of(blocks, epyc, 1) == "1"


# --------------------------------------------------------------------------- SVG

def svg_cells(svg_text):
    root = ET.fromstring(svg_text)
    return root, {int(r.get("data-pu")): r for r in root.iter(f"{SVG}rect") if r.get("class") == "cell"}


def test_svg_is_self_contained_and_matches_the_text(epyc):
    def threads(rank):
        return tuple(frozenset([16 * rank + t]) for t in range(3))

    pred = Prediction(epyc, numa_tasks(epyc, threads), "srun", options={"--cpu-bind": "ldoms"})
    svg = picture_svg(pred)
    root, cells = svg_cells(svg)
    assert root.tag == f"{SVG}svg" and int(root.get("width")) > 0 and int(root.get("height")) > 0
    assert not [e for e in root.iter() if e.tag in (f"{SVG}script", f"{SVG}image", f"{SVG}foreignObject")]
    assert not re.search(r"(href|@import|url\(\s*['\"]?(?!#))", svg)
    ids = {e.get("id") for e in root.iter() if e.get("id")}
    assert set(re.findall(r"url\(#([^)]+)\)", svg)) <= ids
    assert "--cpu-bind=ldoms" in root.find(f"{SVG}title").text
    blocks = parse_picture(picture_text(pred))
    assert sorted(cells) == epyc.pus
    for pu, rect in cells.items():
        assert rect.get("data-text") == cell_of(blocks, epyc, pu)
    assert cells[16].get("fill") == PALETTE[1] and cells[16].get("data-owners") == "1.0"
    bound_fills = {cells[16 * r].get("fill") for r in range(8)}
    assert len(bound_fills) == 8  # one colour per task
    swatches = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "swatch"]
    assert [int(s.get("data-rank")) for s in swatches] == list(range(8))


def test_svg_shared_cells_use_the_pattern_and_legend(epyc):
    tasks = [TaskPlacement(r, 0, frozenset(epyc.packages[r // 4])) for r in range(8)]
    svg = picture_svg(Prediction(epyc, tasks, "srun", options={"--cpu-bind": "sockets"}))
    root, cells = svg_cells(svg)
    assert cells[0].get("fill").startswith("url(#") and cells[0].get("data-text") == "a"
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "a: tasks 0-3 share CPUs 0-63,128-191" in texts


def test_svg_in_headless_chromium(epyc, tmp_path):
    """Chromium draws the picture: the task colours are on screen (not a blank or broken image)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed")
    image = pytest.importorskip("PIL.Image")
    pred = with_threads(Prediction(epyc, numa_tasks(epyc), "srun", options={"--cpu-bind": "ldoms"}),
                        4, "cores", "close")
    page = tmp_path / "pin.svg"
    page.write_text(picture_svg(pred))
    shot = tmp_path / "pin.png"
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                           "--window-size=1400,900", page.as_uri()], capture_output=True, text=True, timeout=120)
    if done.returncode or not shot.exists():
        pytest.skip(f"chromium could not take a screenshot here: {done.stderr.strip()[-120:]}")
    pixels = image.open(shot).convert("RGB")
    counts = {}
    for n, colour in pixels.getcolors(maxcolors=1 << 20):
        counts[colour] = n
    for rank in range(4):  # the first four NUMA blocks are on the first screen
        rgb = tuple(int(PALETTE[rank][i:i + 2], 16) for i in (1, 3, 5))
        assert counts.get(rgb, 0) > 500, f"task {rank}'s colour {PALETTE[rank]} is not drawn"


# --------------------------------------------------------------------------- masks and JSON

def test_hex_masks(epyc):
    tasks = [TaskPlacement(0, 0, frozenset([0, 128])), TaskPlacement(1, 0, frozenset([1, 129])),
             TaskPlacement(2, 1, frozenset(epyc.pus), bound=False)]
    lines = hex_masks(Prediction(epyc, tasks, "srun", nodes=2))
    assert len(lines) == 3
    assert lines[0] == "cpu-bind=MASK - node 0, task 0 0: mask 0x100000000000000000000000000000001 set"
    for line, task in zip(lines, tasks, strict=True):
        assert parse_mask(re.search(r"mask (0x[0-9a-f]+) set", line).group(1)) == task.cpus
    assert lines[2].startswith("cpu-bind=NONE - node 1, task 2 0:")


def test_prediction_json_has_everything():
    topo = load("coral-lassen.xml")
    tasks = [TaskPlacement(r, 0, frozenset(range(8 + 40 * r, 48 + 40 * r))) for r in range(2)]
    pred = with_threads(Prediction(topo, tasks, "openmpi", options={"--map-by": "numa", "flags": {"x"}}),
                        2, "cores", "spread")
    data = prediction_json(pred)
    json.dumps(data)  # plain JSON all the way down
    assert data["launcher"] == "openmpi" and data["options"]["OMP_PLACES"] == "cores"
    assert [d["os_index"] for d in data["topology"]["numa"]] == [0, 8]
    assert data["topology"]["threads_per_core"] == 4
    first = data["tasks"][0]
    assert first["cpus"] == "8-47" and first["mask"] == hex(sum(1 << c for c in range(8, 48)))
    assert [t["cpus"] for t in first["threads"]] == ["8-11", "28-31"]
    assert data["masks"] == hex_masks(pred)
    assert any("OMP_PROC_BIND" in n or "libgomp" in n for n in data["notes"]) or data["notes"] == []
