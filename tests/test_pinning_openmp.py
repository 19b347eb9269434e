"""OpenMP thread placement (clusterbench.pinning.openmp) against three oracles, each named in its test:

(a) the real libgomp of this machine: tests/fixtures/pinning/openmp/threads_affinity.c compiled with
    `gcc -fopenmp`, run under OMP_PLACES / OMP_PROC_BIND / OMP_NUM_THREADS (and under `taskset -c`),
    each thread printing its sched_getaffinity; OMP_DISPLAY_ENV=true gives libgomp's resolved place list;
(b) the worked examples of the OpenMP Examples document (OpenMP/Examples, affinity/affinity.tex,
    section "proc_bind Clause", examples affinity.1-5), quoted below;
(c) GCC's libgomp sources (libgomp/config/linux/affinity.c gomp_affinity_init_level_1 and
    gomp_affinity_init_numa_domains; libgomp/team.c gomp_team_start; libgomp/env.c parse_places_var,
    parse_one_place, initialize_env), for what the 2-CPU test machine cannot show (SMT, NUMA, sockets).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import time

import pytest

from clusterbench.errors import UserInputError
from clusterbench.pinning.model import Prediction, TaskPlacement
from clusterbench.pinning.openmp import (
    format_places,
    parse_places,
    parse_proc_bind,
    place_of_thread,
    resolve,
    thread_places,
    with_threads,
)
from clusterbench.system.sources import from_hwloc_synthetic, from_sysfs, topology_from_file
from clusterbench.system.topology import NumaDomain
from conftest import LOCAL_FIXTURES, TOPOLOGY

PROGRAM = LOCAL_FIXTURES / "pinning" / "openmp" / "threads_affinity.c"


# --------------------------------------------------------------------------- (a) the real libgomp

@dataclasses.dataclass
class Run:
    threads: list[frozenset[int]]  # per thread, thread 0 first
    places: str  # libgomp's resolved OMP_PLACES (OMP_DISPLAY_ENV)
    stderr: str


@pytest.fixture(scope="module")
def libgomp(tmp_path_factory):
    """A runner of the compiled probe: (nthreads, places, bind, cpu=None) -> Run."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: no real libgomp to compare with")
    binary = tmp_path_factory.mktemp("omp") / "threads_affinity"
    built = subprocess.run([gcc, "-fopenmp", "-O1", "-o", str(binary), str(PROGRAM)],
                           capture_output=True, text=True, timeout=120)
    if built.returncode:
        pytest.skip(f"gcc -fopenmp cannot build here (no libgomp?): {built.stderr.strip()[:120]}")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_", "KMP_"))}

    def run(nthreads: int, places: str | None, bind: str | None, cpu: int | None = None) -> Run:
        env = dict(base, OMP_NUM_THREADS=str(nthreads), OMP_DISPLAY_ENV="true")
        if places is not None:
            env["OMP_PLACES"] = places
        if bind is not None:
            env["OMP_PROC_BIND"] = bind
        argv = [str(binary)]
        if cpu is not None:
            if shutil.which("taskset") is None:
                pytest.skip("taskset is not installed: cannot narrow the mask")
            argv = ["taskset", "-c", str(cpu), *argv]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        threads = {}
        for m in re.finditer(r"^thread (\d+) cpus ([\d,]*)$", done.stdout, re.M):
            threads[int(m.group(1))] = frozenset(int(c) for c in m.group(2).split(",") if c)
        assert sorted(threads) == list(range(nthreads)), done.stdout
        shown = re.search(r"OMP_PLACES = '([^']*)'", done.stderr)
        return Run([threads[i] for i in range(nthreads)], shown.group(1) if shown else "", done.stderr)

    return run


@pytest.fixture(scope="module")
def live():
    """The live node's topology and this process's CPUs (the mask every child inherits)."""
    mask = frozenset(os.sched_getaffinity(0))
    if len(mask) < 2:
        pytest.skip("needs at least 2 CPUs in this process's affinity mask")
    return from_sysfs(), mask


def _cases(a: int, b: int) -> list[tuple[str | None, str | None, int]]:
    """(OMP_PLACES, OMP_PROC_BIND, threads) on the process's first (a) and last (b) CPU."""
    ten = f"{{{a}}},{{{b}}},{{{a},{b}}},{{{b}}},{{{a}}},{{{a},{b}}},{{{a}}},{{{b}}},{{{a},{b}}},{{{b}}}"
    three = f"{{{b}}},{{{a}}},{{{a},{b}}}"
    return [
        (None, None, 3), ("threads", None, 3), (None, "true", 3), (None, "close", 5), ("threads", "spread", 5),
        ("threads", None, 7), ("cores", "master", 3), ("threads", "primary", 3), ("sockets", None, 2),
        ("numa_domains", None, 2), ("ll_caches", None, 2), ("threads(1)", None, 2), ("THREADS", None, 2),
        ("cores( 1 )", "close", 2), ("threads", "false", 3), ("threads", "spread,close", 3),
        (f"{{{b}}},{{{a}}}", None, 3), (f"{{{a},{b}}}", None, 3), (f"{a},{b}", "close", 2),
        (f" {{ {b} }} , {{ {a} }} ", None, 2), (f"{{{a}}}:2:{b - a}", None, 2),
        (f"{{{a},{b}}},!{{{a},{b}}},{{{b}}}", None, 2), (f"{{{a},{b},!{a}}}", None, 2),
        (ten, "spread", 4), (ten, "spread", 3), (ten, "spread", 7), (ten, "spread", 12), (ten, "close", 4),
        (ten, "close", 13), (ten, "primary", 4), (three, "close", 5), (three, "spread", 7), (three, None, 2),
    ]


def _check(run: Run, topo, mask, nthreads, places, bind) -> None:
    predicted = thread_places(topo, mask, nthreads, places, bind)
    if predicted:
        assert run.threads == list(predicted)
    else:
        assert run.threads == [mask] * nthreads
    assert run.places == format_places(resolve(topo, mask, nthreads, places, bind).places)


def test_libgomp_oracle_whole_mask(libgomp, live):
    """(a) Every setting of _cases on the process's own mask: same CPUs per thread, same place list."""
    topo, mask = live
    a, b = min(mask), max(mask)
    for places, bind, nthreads in _cases(a, b):
        if places == "ll_caches" and not topo.l3_groups:
            continue  # libgomp then takes the highest cache level sysfs shows; we know only L3 groups
        run = libgomp(nthreads, places, bind)
        _check(run, topo, mask, nthreads, places, bind)


def test_libgomp_oracle_narrowed_mask(libgomp, live):
    """(a) Under `taskset -c CPU` (a launcher's narrowed mask) libgomp builds places only from that CPU:
    named places shrink to it, explicit places outside it are dropped, and when none is left OMP_PLACES
    is rejected (threads unbound) unless OMP_PROC_BIND asks for binding (then one place per thread)."""
    topo, mask = live
    a, b = min(mask), max(mask)
    narrow = frozenset([b])
    for places, bind, nthreads in [("threads", None, 2), (None, "true", 2), ("cores", "spread", 2),
                                   (f"{{{a}}},{{{b}}}", None, 2), (f"{{{a}}}", None, 2), (f"{{{a}}}", "close", 2),
                                   (f"{{{a}:{b - a + 1}}}", None, 3), ("sockets", "close", 2)]:
        run = libgomp(nthreads, places, bind, cpu=b)
        _check(run, topo, narrow, nthreads, places, bind)
    reduced = libgomp(2, f"{{{a}}},{{{b}}}", None, cpu=b)
    assert "Number of places reduced" in reduced.stderr  # libgomp's warning for the place it dropped
    rejected = libgomp(2, f"{{{a}}}", None, cpu=b)
    assert "None of the places contain usable logical CPUs" in rejected.stderr
    notes = resolve(topo, narrow, 2, f"{{{a}}}", None).notes
    assert any("rejects" in n for n in notes) and any("not bound" in n for n in notes)


def test_libgomp_more_threads_than_places_order(libgomp, live):
    """(a) T > P: libgomp fills places with T // P consecutive threads, then puts the T % P left over
    one each on places 0, 1, ... - with 2 places and 5 threads the places are 0,0,1,1,0, not the
    0,0,0,1,1 one might read into the spec's "consecutive" wording."""
    topo, mask = live
    a, b = min(mask), max(mask)
    run = libgomp(5, f"{{{a}}},{{{b}}}", "close")
    assert run.threads == [frozenset([x]) for x in (a, a, b, b, a)]
    assert [place_of_thread("close", t, 5, 2) for t in range(5)] == [0, 0, 1, 1, 0]


def test_libgomp_cpu_outside_node_is_refused_where_libgomp_warns(libgomp, live):
    """(a) A place naming a CPU the node lacks: libgomp drops it with a warning (or rejects the whole
    variable when the CPU is beyond its cpuset); we refuse it, since a prediction from a typo misleads."""
    topo, mask = live
    outside = max(topo.pus) + 1
    run = libgomp(2, f"{{{min(mask)}}},{{{outside}}}", None)
    assert all(outside not in cpus for cpus in run.threads)
    assert "Number of places reduced" in run.stderr or "out of range" in run.stderr
    with pytest.raises(UserInputError) as err:
        thread_places(topo, mask, 2, f"{{{min(mask)}}},{{{outside}}}", None)
    assert err.value.where == "OMP_PLACES" and f"CPU {outside}" in err.value.message


# --------------------------------------------------------------------------- (b) the OpenMP Examples document

@pytest.fixture
def examples_machine():
    """The machine of OpenMP/Examples affinity.tex: "two sockets, each equipped with a quad-core
    processor and configured to execute two hardware threads simultaneously on each core ... the
    hardware threads 0,1 form the first physical core"."""
    return from_hwloc_synthetic("package:2 core:4 pu:2")


EIGHT_PLACES = "{0,1},{2,3},{4,5},{6,7},{8,9},{10,11},{12,13},{14,15}"


def _place_numbers(places_text, topo, threads):
    places = parse_places(places_text, topo).explicit
    return [places.index(t) for t in threads]


def test_examples_equivalent_place_lists(examples_machine):
    """(b) "The following equivalent place list declarations consist of eight places (which we designate
    as p0 to p7): OMP_PLACES="{0,1},{2,3},{4,5},{6,7},{8,9},{10,11},{12,13},{14,15}" or
    OMP_PLACES="{0:2}:8:2"."""
    assert parse_places(EIGHT_PLACES, examples_machine) == parse_places("{0:2}:8:2", examples_machine)
    assert len(parse_places("{0:2}:8:2", examples_machine).explicit) == 8


@pytest.mark.parametrize("bind, nthreads, expected, quote", [
    ("spread", 4, [0, 2, 4, 6], "thread 0 executes on p0 ... thread 1 executes on p2 ... thread 2 executes on p4 "
                                "... thread 3 executes on p6 (affinity.1, spread, T <= P)"),
    ("spread", 16, [t // 2 for t in range(16)], "threads 0,1 execute on p0 ... threads 14,15 execute on p7 "
                                                "(affinity.2, spread, T > P)"),
    ("close", 4, [0, 1, 2, 3], "thread 0 executes on p0 ... thread 3 executes on p3 (affinity.3, close, T <= P)"),
    ("close", 16, [t // 2 for t in range(16)], "threads 0,1 execute on p0 ... threads 14,15 execute on p7 "
                                               "(affinity.4, close, T > P)"),
    ("primary", 4, [0, 0, 0, 0], "threads 0-3 execute on p0 (affinity.5, primary)"),
    ("master", 4, [0, 0, 0, 0], "master is the OpenMP 4.0 name of primary"),
])
def test_examples_document(examples_machine, bind, nthreads, expected, quote):
    """(b) OpenMP Examples, affinity.tex, with the primary thread "initially started on p0" (libgomp
    always starts it on the first place)."""
    topo = examples_machine
    threads = thread_places(topo, frozenset(topo.pus), nthreads, EIGHT_PLACES, bind)
    assert _place_numbers(EIGHT_PLACES, topo, threads) == expected, quote


def test_spread_uneven_partition_libgomp_order(examples_machine):
    """(c) 10 places, 4 threads, spread: libgomp's gomp_team_start cuts P into T subpartitions of
    P // T places, the first P % T of them one longer (3,3,2,2), and binds each thread to the first
    place of its own: places 0, 3, 6, 8. (Also checked on the real libgomp with ten places built
    from two CPUs in test_libgomp_oracle_whole_mask.)"""
    topo = examples_machine
    ten = ",".join(f"{{{c}}}" for c in range(10))
    threads = thread_places(topo, frozenset(topo.pus), 4, ten, "spread")
    assert [min(t) for t in threads] == [0, 3, 6, 8]


# --------------------------------------------------------------------------- (c) libgomp's sources, on the fixtures

@pytest.fixture(scope="module")
def epyc():
    return topology_from_file(TOPOLOGY / "epyc7742-synthetic.xml")


def _cores_mask(topo, cores):
    return frozenset(pu for c in cores for pu in topo.cores[c])


def test_threads_places_go_core_by_core(epyc):
    """(c) gomp_affinity_init_level_1 visits CPUs in order and emits every in-mask SMT sibling of a
    core together, so with Linux numbering (core 0 = PUs 0,128) the `threads` places are
    {0},{128},{1},{129},... and OMP_PROC_BIND=true with 4 threads puts two threads on each core."""
    mask = _cores_mask(epyc, range(4))
    binding = resolve(epyc, mask, 4, "threads", None)
    assert format_places(binding.places) == "{0},{128},{1},{129},{2},{130},{3},{131}"
    assert binding.threads == (frozenset([0]), frozenset([128]), frozenset([1]), frozenset([129]))
    assert thread_places(epyc, mask, 4, None, "true") == binding.threads  # true without places = threads


def test_cores_sockets_numa_ll_caches(epyc):
    """(c) One place per object, only the CPUs inside the mask, in the order of the object's first CPU."""
    mask = _cores_mask(epyc, [14, 15, 16, 17])  # straddles NUMA 0 and 1
    assert format_places(resolve(epyc, mask, 1, "cores", None).places) == "{14,142},{15,143},{16,144},{17,145}"
    assert format_places(resolve(epyc, mask, 1, "cores(2)", None).places) == "{14,142},{15,143}"
    assert format_places(resolve(epyc, mask, 1, "numa_domains", None).places) == "{14:2,142:2},{16:2,144:2}"
    assert format_places(resolve(epyc, mask, 1, "sockets", None).places) == "{14:4,142:4}"
    l3 = from_hwloc_synthetic("package:2 numa:4 l3:4(size=16MB) core:4 pu:2(indexes=core)")
    assert format_places(resolve(l3, _cores_mask(l3, range(2, 6)), 1, "ll_caches", None).places) == (
        "{2:2,130:2},{4:2,132:2}")


def test_numa_domains_follow_os_numbers():
    """(c) gomp_affinity_init_numa_domains reads /sys/devices/system/node/online, so NUMA places come
    in OS-number order (Lassen: 0 then 8; a node whose domain 1 holds the first cores: 0 first)."""
    lassen = topology_from_file(TOPOLOGY / "coral-lassen.xml")
    places = resolve(lassen, frozenset(lassen.pus), 2, "numa_domains", "spread").places
    assert [min(p) for p in places] == [8, 96]
    swapped = from_hwloc_synthetic("package:1 numa:2 core:2 pu:1")
    swapped.numa = [NumaDomain(1, [0, 1]), NumaDomain(0, [2, 3])]
    assert resolve(swapped, frozenset(range(4)), 2, "numa_domains", None).places == (
        frozenset([2, 3]), frozenset([0, 1]))


def test_places_without_proc_bind_bind_like_true(epyc):
    """(c) initialize_env: OMP_PLACES parsed and OMP_PROC_BIND unset -> bind_var = true (close)."""
    mask = _cores_mask(epyc, range(8))
    assert resolve(epyc, mask, 2, "cores", None).policy == "close"
    assert thread_places(epyc, mask, 2, "cores", None) == (frozenset([0, 128]), frozenset([1, 129]))
    assert thread_places(epyc, mask, 2, "cores", "false") == ()  # false wins: OMP_PLACES ignored
    assert thread_places(epyc, mask, 2, None, None) == ()
    assert thread_places(epyc, mask, 2, "  ", " ") == ()  # blank = rejected by libgomp = unset


def test_explicit_places_cut_to_the_mask(epyc):
    """(c) gomp_affinity_finalize_place_list: every place ANDed with the mask, empty ones dropped."""
    mask = _cores_mask(epyc, range(4, 8))
    binding = resolve(epyc, mask, 4, "{0:4}:4:4", "spread")
    assert format_places(binding.places) == "{4:4}"
    assert binding.threads == (frozenset(range(4, 8)),) * 4
    assert any("keeps 1 of the 4 places" in n for n in binding.notes)
    cut = resolve(epyc, mask, 1, "{0:8}", None)
    assert format_places(cut.places) == "{4:4}" and any("cut down" in n for n in cut.notes)


def test_place_syntax(epyc):
    """(c) parse_one_place: intervals inside and between places, negative strides, exclusions, bare numbers."""
    def places(text):
        return format_places(parse_places(text, epyc).explicit)

    assert places("{0:4:2}") == "{0,2,4,6}"
    assert places("{4:2}:3:-2") == "{4:2},{2:2},{0:2}"
    assert places("{0:4,!1}") == "{0,2:2}"
    assert places("{!1,0:4}") == "{0,2:2}"  # removals apply after additions, whatever the order
    assert places("0,5,7:2") == "{0},{5},{7},{8}"
    assert places("{0,1},{2},!{0,1}") == "{2}"
    assert places("{0:99999999:0}") == "{0}"  # libgomp accepts a zero stride: one CPU, named many times
    assert places("{0}:65535:0").count("{0}") == 65535


@pytest.mark.parametrize("text, fragment", [
    ("core", "unknown place name 'core'"),
    ("numa", "unknown place name 'numa'"),
    ("threads(0)", "no places"),
    ("threads(x)", "malformed"),
    ("cores(2)x", "malformed"),
    ("{0:4", "expected ',' or '}'"),
    ("{}", "expected a number"),
    ("{0,}", "expected a number"),
    ("{0}:0", "length between 1 and 65535"),
    ("{0}:65536", "length between 1 and 65535"),
    ("{0:0}", "length of at least 1"),
    ("{0},,{1}", "expected '{' or a CPU number"),
    ("{0};{1}", "expected ','"),
    ("{!0:2}", "cannot have a length"),
    ("!{0}:2", "cannot have a length"),
    ("{256}", "CPU 256 is not a CPU of this node"),
    ("{0:99999999}", "reaches CPU 99999998"),
    ("{0:4}:100:4", "leave this node's CPUs"),
    ("{0:4}:2:-4", "leave this node's CPUs"),
    ("{1},!{0}", "not in the list before it"),
    ("{0},!{0}", "every place listed is removed"),
    ("{0:2,!5}", "excludes a CPU its place does not contain"),
    ("{0,!0}", "excludes all its CPUs"),
    ("{1234567890}", "far beyond"),
    ("{0}:40000,{1}:40000", "at most 65536"),
])
def test_bad_places_are_refused(epyc, text, fragment):
    with pytest.raises(UserInputError) as err:
        thread_places(epyc, frozenset(epyc.pus), 2, text, None)
    assert err.value.where == "OMP_PLACES"
    assert fragment in err.value.message
    assert err.value.exit_code == 2


def test_hostile_sizes_are_bounded_before_expanding(epyc):
    """`{0:99999999}` and a 65 535-copy list are judged from their end points, not enumerated."""
    started = time.perf_counter()
    for text in ("{0:99999999}", "{0:99999999:1}", "{0:256}:65535:1", "{200:999999:-1}"):
        with pytest.raises(UserInputError):
            parse_places(text, epyc)
    with pytest.raises(UserInputError):
        parse_places("{" + "0," * 200_000 + "0}", epyc)  # longer than any sane OMP_PLACES
    assert time.perf_counter() - started < 2.0


@pytest.mark.parametrize("value, expected", [
    ("close", "close"), (" SPREAD ", "spread"), ("master", "primary"), ("primary", "primary"), ("true", "true"),
    ("False", "false"), ("spread,close", "spread"), ("close , master", "close"), (None, None), ("", None),
])
def test_proc_bind_values(value, expected):
    assert parse_proc_bind(value) == expected


@pytest.mark.parametrize("value", ["closed", "yes", "true,close", "false,spread", "spread,true", "spread,,close"])
def test_bad_proc_bind_is_refused(value):
    """(c) parse_bind_var: only the six names; true and false cannot start a list, nor appear in one."""
    with pytest.raises(UserInputError) as err:
        parse_proc_bind(value)
    assert err.value.where == "OMP_PROC_BIND"


@pytest.mark.parametrize("nthreads", [0, -1, 65537, 2.5, True])
def test_bad_thread_counts(epyc, nthreads):
    with pytest.raises(UserInputError) as err:
        thread_places(epyc, frozenset(epyc.pus), nthreads, "cores", None)
    assert err.value.where == "OMP_NUM_THREADS"


def test_places_fallback_when_none_is_in_the_mask(epyc):
    """(c)+(a) No place inside the mask: libgomp rejects OMP_PLACES; with OMP_PROC_BIND set it still
    binds, to one place per hardware thread of the mask."""
    mask = _cores_mask(epyc, [64, 65])
    assert thread_places(epyc, mask, 2, "{0:4}", None) == ()
    assert thread_places(epyc, mask, 2, "{0:4}", "spread") == (frozenset([64]), frozenset([65]))


# --------------------------------------------------------------------------- a whole prediction

def _epyc_prediction(epyc, bound=True):
    tasks = [TaskPlacement(r, 0, frozenset(d.cpus), bound=bound) for r, d in enumerate(epyc.numa)]
    return Prediction(epyc, tasks, "srun", flavour="slurm", options={"-n": 8, "--cpu-bind": "ldoms"},
                      notes=["from the launcher"])


def test_with_threads_fills_every_task(epyc):
    pred = with_threads(_epyc_prediction(epyc), 3, "cores", "spread")
    assert [len(t.threads) for t in pred.tasks] == [3] * 8
    for task in pred.tasks:
        first = 16 * task.rank  # NUMA r holds cores 16r..16r+15; spread over 16 cores: 16r, 16r+6, 16r+11
        assert task.threads == tuple(frozenset([c, c + 128]) for c in (first, first + 6, first + 11))
        assert all(t <= task.cpus for t in task.threads)
    assert pred.options["OMP_NUM_THREADS"] == 3 and pred.options["OMP_PLACES"] == "cores"
    assert pred.notes[0] == "from the launcher"


def test_with_threads_unbound_and_notes(epyc):
    plain = _epyc_prediction(epyc)
    assert all(t.threads == () for t in with_threads(plain, 4, None, None).tasks)
    crowded = with_threads(plain, 4, None, "true")
    assert any(n.startswith("tasks 0-7: threads share cores") for n in crowded.notes)
    assert any("OMP_PLACES is unset" in n for n in crowded.notes)
    implied = with_threads(plain, 4, "cores", None)
    assert any("binds as OMP_PROC_BIND=true" in n for n in implied.notes)
    assert "OMP_PROC_BIND" not in implied.options
    ignored = with_threads(plain, 4, "cores", "false")
    assert all(t.threads == () for t in ignored.tasks) and any("ignores OMP_PLACES" in n for n in ignored.notes)
    with pytest.raises(UserInputError):
        with_threads(plain, 4, "cores", "sideways")
    assert plain.tasks[0].threads == () and plain.notes == ["from the launcher"]  # the input is not changed
