"""Where the OpenMP runtime puts the threads of one task: OMP_PLACES, OMP_PROC_BIND, OMP_NUM_THREADS.

The model is GCC's libgomp (the runtime of `gcc -fopenmp`, and the one most Linux clusters run),
read from its sources (libgomp/env.c: parse_places_var, parse_one_place, parse_bind_var and
initialize_env; libgomp/config/linux/affinity.c: gomp_affinity_init_level, gomp_affinity_finalize_place_list;
libgomp/team.c: gomp_team_start) and checked against the real libgomp (tests/test_pinning_openmp.py).
What it does, and so what this module does:

- Places are built only from the CPUs of the task's affinity mask (what the launcher gave it).
  An abstract name (`threads`, `cores`, `ll_caches`, `numa_domains`, `sockets`, optionally `(n)`) makes
  one place per hardware object, holding only that object's CPUs inside the mask, in the order of the
  object's lowest CPU in the mask (NUMA domains: in the order of their OS numbers); `(n)` keeps the first
  n. `threads` goes core by core, so with Linux numbering (core 0 = PUs 0 and 128) the places are
  {0},{128},{1},{129},... An explicit list is intersected with the mask: places left empty are dropped
  (libgomp warns "Number of places reduced"); when none is left libgomp rejects OMP_PLACES altogether.
- OMP_PLACES set and OMP_PROC_BIND unset: libgomp binds as OMP_PROC_BIND=true. OMP_PROC_BIND=true
  (or close/spread/primary) without OMP_PLACES: the places are `threads`, one per hardware thread of
  the mask. OMP_PROC_BIND=false, or both unset: threads are not bound (they float over the mask).
- The initial thread is bound to the first place, so thread 0 is always on place 0. `true` distributes
  like `close`. With more threads than places (T > P), `close` and `spread` both put T // P consecutive
  threads on each place and the remaining T % P threads one each on places 0, 1, ... (libgomp's order:
  with 2 places and 5 threads, places 0,0,1,1,0 - verified on the real runtime). With T <= P, `spread`
  cuts the places into T runs, the first P % T runs one place longer, and binds each thread to the first
  place of its run. Only the outermost level of an OMP_PROC_BIND list matters for one parallel region.

Where libgomp only warns and carries on, this module refuses, because a prediction built on a typo is
worse than an error: unknown names, malformed lists, counts of 0, places naming a CPU the node does not
have (libgomp silently drops those when the place has another CPU), or an invalid OMP_PROC_BIND all
raise `UserInputError` (exit 2). Sizes are bounded before anything is expanded: `{0:99999999}` is
checked by its end points, never enumerated.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from clusterbench.errors import UserInputError
from clusterbench.pinning.model import Prediction
from clusterbench.system.topology import Topology, compress_cpulist

MAX_THREADS = 65536
MAX_PLACES = 65536  # libgomp's own limit on the length of an explicit place list
ABSTRACT_NAMES = ("threads", "cores", "ll_caches", "numa_domains", "sockets")
BIND_KINDS = ("false", "true", "master", "primary", "close", "spread")
_NESTED_KINDS = ("master", "primary", "close", "spread")  # allowed after the first element of a list
_PLACES_HINT = ("use threads, cores, ll_caches, numa_domains or sockets (optionally with a count, e.g. "
                "cores(8)), or an explicit list such as {0:4},{4:4} or {0:4}:4:4")
_MAX_TEXT = 1 << 16  # characters of OMP_PLACES we are willing to read


# --------------------------------------------------------------------------- parsed settings

@dataclass(frozen=True)
class Places:
    """OMP_PLACES after parsing, before a task's mask is applied.

    Either an abstract name with an optional count, or an explicit list of CPU sets (already checked
    against the node's CPUs). `None` for the whole object means OMP_PLACES is unset.
    """

    name: str | None = None  # one of ABSTRACT_NAMES
    count: int | None = None  # the `(n)` of an abstract name
    explicit: tuple[frozenset[int], ...] = ()

    def __str__(self) -> str:
        if self.name:
            return self.name + (f"({self.count})" if self.count is not None else "")
        return format_places(self.explicit)


def format_places(places) -> str:
    """A place list the way libgomp's OMP_DISPLAY_ENV prints it: '{0:2},{4},{6:2}' (runs as first:length)."""
    out = []
    for place in places:
        runs = compress_cpulist(sorted(place)).split(",")
        parts = []
        for run in runs:
            first, _, last = run.partition("-")
            parts.append(first if not last else f"{first}:{int(last) - int(first) + 1}")
        out.append("{" + ",".join(parts) + "}")
    return ",".join(out)


@dataclass(frozen=True)
class ThreadBinding:
    """What libgomp does in one task: the bind policy in force, its place list, where each thread goes.

    `threads` is empty when the threads are not bound (they float over the task's CPUs). `notes` say
    where libgomp departs from what the settings seem to ask for (places outside the mask, implied
    binding), in words a user can act on.
    """

    policy: str  # "false", "close", "spread", "primary" ("true" behaves as "close"; "master" = "primary")
    places: tuple[frozenset[int], ...]
    threads: tuple[frozenset[int], ...]
    notes: tuple[str, ...] = ()


def _error(message: str, where: str, hint: str | None = None) -> UserInputError:
    return UserInputError(message, hint=hint, where=where)


def parse_proc_bind(text: str | None) -> str | None:
    """OMP_PROC_BIND -> its outermost policy ('false', 'true', 'primary', 'close', 'spread'), None if unset.

    Case and blanks are ignored as libgomp ignores them; `master` is the old name of `primary`. A
    blank value counts as unset: libgomp rejects it and then behaves exactly as if it were unset.
    """
    if text is None or not text.strip():
        return None
    items = [item.strip().lower() for item in text.split(",")]
    hint = "one of false, true, primary (master), close, spread, or a list such as spread,close"
    if items[0] not in BIND_KINDS:
        raise _error(f"unknown OMP_PROC_BIND value {items[0]!r}", "OMP_PROC_BIND", hint)
    if len(items) > 1:
        if items[0] in ("false", "true"):
            raise _error(f"{items[0]} cannot start a list of OMP_PROC_BIND policies", "OMP_PROC_BIND", hint)
        bad = [i for i in items[1:] if i not in _NESTED_KINDS]
        if bad:
            raise _error(f"unknown OMP_PROC_BIND value {bad[0]!r} in the list", "OMP_PROC_BIND", hint)
    return "primary" if items[0] == "master" else items[0]


def _check_threads(nthreads: int) -> None:
    if isinstance(nthreads, bool) or not isinstance(nthreads, int) or not 1 <= nthreads <= MAX_THREADS:
        raise _error(f"the number of threads must be between 1 and {MAX_THREADS}, not {nthreads!r}",
                     "OMP_NUM_THREADS")


# --------------------------------------------------------------------------- OMP_PLACES grammar

class _Scanner:
    """A cursor over OMP_PLACES that skips blanks the way libgomp's parser does (isspace)."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def take(self, char: str) -> bool:
        if self.peek() == char:
            self.pos += 1
            return True
        return False

    def number(self, signed: bool = False) -> int:
        """An unsigned (or, for strides, signed) decimal; at most 9 digits, far above any CPU number."""
        self.skip()
        m = re.compile(r"[+-]?\d+" if signed else r"\+?\d+").match(self.text, self.pos)
        if not m:
            raise self.fail("expected a number")
        digits = m.group().lstrip("+-")
        if len(digits) > 9:
            raise _error(f"number {m.group()} is far beyond any CPU of this node", "OMP_PLACES", _PLACES_HINT)
        self.pos = m.end()
        return int(m.group())

    def fail(self, what: str) -> UserInputError:
        shown = self.text if len(self.text) <= 80 else self.text[:77] + "..."
        return _error(f"malformed value {shown!r}: {what} at character {self.pos + 1}", "OMP_PLACES",
                      _PLACES_HINT)


@dataclass
class _Place:
    """One place of an explicit list as written: CPUs added, CPUs removed (`!n`), then `:len:stride`."""

    added: list[tuple[int, int, int]]  # (first, count, stride) intervals
    removed: list[int]
    negated: bool = False  # `!{...}`: remove an identical earlier place
    length: int = 1
    stride: int = 1


def _interval(scan: _Scanner, allow_len: bool) -> tuple[int, int, int]:
    """`n`, `n:len` or `n:len:stride` -> (n, len, stride)."""
    first = scan.number()
    length, stride = 1, 1
    if allow_len and scan.take(":"):
        length = scan.number()
        if length == 0:
            raise scan.fail("an interval needs a length of at least 1")
        if scan.take(":"):
            stride = scan.number(signed=True)
    return first, length, stride


def _parse_place(scan: _Scanner) -> _Place:
    negated = scan.take("!")
    place = _Place(added=[], removed=[], negated=negated)
    if scan.take("{"):
        while True:
            if scan.take("!"):
                place.removed.append(scan.number())
                if scan.peek() == ":":
                    raise scan.fail("an excluded CPU (!n) cannot have a length")
            else:
                place.added.append(_interval(scan, allow_len=True))
            if scan.take("}"):
                break
            if not scan.take(","):
                raise scan.fail("expected ',' or '}' inside a place")
        if not place.added:
            raise scan.fail("a place needs at least one CPU")
    else:  # a bare CPU number is a place of its own (OpenMP 5.1, libgomp since GCC 12)
        if not scan.peek().isdigit():
            raise scan.fail("expected '{' or a CPU number")
        place.added.append((scan.number(), 1, 1))
    if scan.take(":"):
        if negated:
            raise scan.fail("an excluded place (!{...}) cannot have a length")
        place.length = scan.number()
        if not 1 <= place.length < MAX_PLACES:
            raise scan.fail(f"a place interval needs a length between 1 and {MAX_PLACES - 1}")
        if scan.take(":"):
            place.stride = scan.number(signed=True)
    return place


def _check_cpu(cpu: int, topo_cpus: frozenset[int]) -> None:
    if cpu not in topo_cpus:
        raise _error(f"CPU {cpu} is not a CPU of this node (its CPUs are {compress_cpulist(sorted(topo_cpus))})",
                     "OMP_PLACES", _PLACES_HINT)


def _interval_cpus(first: int, length: int, stride: int, topo_cpus: frozenset[int]) -> set[int]:
    """The CPUs of `first:length:stride`, after checking its end points so a huge length is never expanded."""
    if length == 1 or stride == 0:
        _check_cpu(first, topo_cpus)
        return {first}
    last = first + (length - 1) * stride
    if not (0 <= min(first, last) and max(first, last) <= max(topo_cpus)):
        raise _error(f"the interval {first}:{length}:{stride} reaches CPU {last}, beyond this node's CPUs "
                     f"({compress_cpulist(sorted(topo_cpus))})", "OMP_PLACES", _PLACES_HINT)
    cpus = set(range(first, last + (1 if stride > 0 else -1), stride))
    for cpu in sorted(cpus):
        _check_cpu(cpu, topo_cpus)
    return cpus


def _place_cpus(place: _Place, topo_cpus: frozenset[int]) -> frozenset[int]:
    cpus: set[int] = set()
    for first, length, stride in place.added:
        cpus |= _interval_cpus(first, length, stride, topo_cpus)
    for cpu in place.removed:  # libgomp removes after adding, whatever the order written
        if cpu not in cpus:
            raise _error(f"!{cpu} excludes a CPU its place does not contain", "OMP_PLACES", _PLACES_HINT)
        cpus.discard(cpu)
    if not cpus:
        raise _error("a place excludes all its CPUs", "OMP_PLACES", _PLACES_HINT)
    return frozenset(cpus)


def _copies(base: frozenset[int], length: int, stride: int, topo_cpus: frozenset[int]) -> list[frozenset[int]]:
    """`{...}:length:stride`: the place and its copies shifted by stride, each CPU checked (ends first)."""
    if stride == 0:
        return [base] * length
    shift = (length - 1) * stride
    if not (0 <= min(base) + shift and max(base) + shift <= max(topo_cpus)):
        raise _error(f"{length} copies of the place {format_places([base])} {stride:+d} apart leave this node's "
                     f"CPUs ({compress_cpulist(sorted(topo_cpus))})", "OMP_PLACES", _PLACES_HINT)
    out = []
    for k in range(length):
        copy = frozenset(c + k * stride for c in base)
        for cpu in sorted(copy):
            _check_cpu(cpu, topo_cpus)
        out.append(copy)
    return out


def _explicit_list(text: str, topo: Topology) -> tuple[frozenset[int], ...]:
    scan = _Scanner(text)
    written: list[_Place] = []
    while True:
        written.append(_parse_place(scan))
        if scan.peek() == "":
            break
        if not scan.take(","):
            raise scan.fail("expected ',' between places")
    total = sum(p.length for p in written if not p.negated) + any(p.negated for p in written)
    if total > MAX_PLACES:
        raise _error(f"{total} places listed; libgomp accepts at most {MAX_PLACES}", "OMP_PLACES")
    topo_cpus = frozenset(topo.pus)
    places: list[frozenset[int]] = []
    for place in written:
        base = _place_cpus(place, topo_cpus)
        if place.negated:
            if base not in places:
                raise _error(f"!{format_places([base])} removes a place that is not in the list before it",
                             "OMP_PLACES", _PLACES_HINT)
            places.remove(base)  # the first equal one, as libgomp does
        else:
            places.extend(_copies(base, place.length, place.stride, topo_cpus))
    if not places:
        raise _error("every place listed is removed again", "OMP_PLACES", _PLACES_HINT)
    return tuple(places)


_ABSTRACT = re.compile(r"\s*([A-Za-z_]+)\s*(?:\(\s*(\+?\d{1,9})\s*\)\s*)?$")


def parse_places(text: str | None, topo: Topology) -> Places | None:
    """OMP_PLACES -> `Places` (None when unset or blank: libgomp rejects a blank value and then
    behaves as if it were unset). Raises UserInputError for anything libgomp would reject, and for
    places naming CPUs this node does not have."""
    if text is None or not text.strip():
        return None
    if len(text) > _MAX_TEXT:
        raise _error(f"OMP_PLACES is {len(text)} characters long; at most {_MAX_TEXT} are accepted", "OMP_PLACES")
    stripped = text.strip()
    if stripped[0].isalpha():
        word = re.match(r"[A-Za-z_]+", stripped).group()
        if word.lower() not in ABSTRACT_NAMES:
            raise _error(f"unknown place name {word!r}", "OMP_PLACES", _PLACES_HINT)
        m = _ABSTRACT.match(stripped)
        if not m:
            raise _error(f"malformed value {stripped!r}: expected {word.lower()} or {word.lower()}(n)",
                         "OMP_PLACES", _PLACES_HINT)
        count = int(m.group(2)) if m.group(2) else None
        if count == 0:
            raise _error(f"{word.lower()}(0) asks for no places at all", "OMP_PLACES", _PLACES_HINT)
        return Places(name=m.group(1).lower(), count=count)
    return Places(explicit=_explicit_list(stripped, topo))


# --------------------------------------------------------------------------- places of one task

def _abstract_places(topo: Topology, name: str, mask: frozenset[int]) -> list[frozenset[int]]:
    """libgomp's gomp_affinity_init_level: one place per object, only the CPUs inside the mask."""
    if name == "numa_domains":
        domains = sorted(topo.numa, key=lambda d: d.os_index)
        return [p for p in (frozenset(d.cpus) & mask for d in domains) if p]
    groups = {"threads": topo.cores, "cores": topo.cores, "sockets": topo.packages,
              "ll_caches": topo.l3_domains()}[name]
    group_of = {pu: i for i, g in enumerate(groups) for pu in g}
    seen: set[int] = set()
    places: list[frozenset[int]] = []
    for cpu in sorted(mask):
        g = group_of.get(cpu)
        if g is None or g in seen:
            continue
        seen.add(g)
        inside = frozenset(groups[g]) & mask
        if name == "threads":
            places.extend(frozenset([pu]) for pu in sorted(inside))
        else:
            places.append(inside)
    return places


def task_places(topo: Topology, places: Places | None, mask: frozenset[int]) -> tuple[list[frozenset[int]], str]:
    """The place list libgomp builds inside `mask`, and a note when it is not what OMP_PLACES says.

    An empty list means libgomp rejected OMP_PLACES for this task (no place has a CPU in the mask).
    """
    if places is None:
        return _abstract_places(topo, "threads", mask), ""
    if places.name:
        found = _abstract_places(topo, places.name, mask)
        if places.count is not None:
            found = found[:places.count]
        note = "" if found else f"OMP_PLACES={places} finds no {places.name} in the task's CPUs"
        return found, note
    kept = [p & mask for p in places.explicit]
    kept = [p for p in kept if p]
    if not kept:
        return [], ("no place of OMP_PLACES has a CPU inside the task's CPUs, so libgomp rejects "
                    "OMP_PLACES (\"None of the places contain usable logical CPUs\")")
    if len(kept) < len(places.explicit):
        return kept, (f"libgomp keeps {len(kept)} of the {len(places.explicit)} places of OMP_PLACES: "
                      "the others have no CPU inside the task's CPUs")
    if any(a != b for a, b in zip(kept, places.explicit, strict=True)):
        return kept, "places of OMP_PLACES are cut down to the task's CPUs"
    return kept, ""


# --------------------------------------------------------------------------- threads onto places

def place_of_thread(policy: str, thread: int, nthreads: int, nplaces: int) -> int:
    """The place index of `thread` in a team of `nthreads` started on place 0 (libgomp's gomp_team_start)."""
    if policy == "primary":
        return 0
    if nthreads > nplaces:  # close and spread alike: runs of T // P, then the rest one per place
        per, filled = nthreads // nplaces, (nthreads // nplaces) * nplaces
        return thread // per if thread < filled else thread - filled
    if policy == "spread":
        size, longer = divmod(nplaces, nthreads)
        if thread < longer:
            return thread * (size + 1)
        return longer * (size + 1) + (thread - longer) * size
    return thread  # close (and true) with T <= P


def resolve(topo: Topology, task_cpus: frozenset[int], nthreads: int, places: str | Places | None,
            proc_bind: str | None) -> ThreadBinding:
    """Everything libgomp decides for one task; `thread_places` and `with_threads` read it."""
    _check_threads(nthreads)
    parsed = parse_places(places, topo) if isinstance(places, str) or places is None else places
    bind = parse_proc_bind(proc_bind)
    mask = frozenset(task_cpus)
    if bind == "false" or (bind is None and parsed is None) or not mask:
        return ThreadBinding("false", (), ())
    notes: list[str] = []
    found, note = task_places(topo, parsed, mask)
    if note:
        notes.append(note)
    if not found and bind is None:
        notes.append("OMP_PROC_BIND is unset, so the threads are not bound")
        return ThreadBinding("false", (), (), tuple(notes))
    if not found:
        found = _abstract_places(topo, "threads", mask)
        notes.append(f"OMP_PROC_BIND={proc_bind.strip()} binds to one place per hardware thread instead")
    policy = {None: "close", "true": "close"}.get(bind, bind)
    threads = tuple(found[place_of_thread(policy, t, nthreads, len(found))] for t in range(nthreads))
    return ThreadBinding(policy, tuple(found), threads, tuple(notes))


def thread_places(topo: Topology, task_cpus: frozenset[int], nthreads: int,
                  places: str | None, proc_bind: str | None) -> tuple[frozenset[int], ...]:
    """One CPU set per OpenMP thread (thread 0 first) of a task whose affinity mask is `task_cpus`,
    or () when libgomp does not bind the threads (they float over the task's CPUs)."""
    return resolve(topo, task_cpus, nthreads, places, proc_bind).threads


# --------------------------------------------------------------------------- a whole prediction

def _crowding(topo: Topology, mask: frozenset[int], threads: tuple[frozenset[int], ...]) -> str:
    """A note when two threads share a core while a core of the task has none (OMP_PROC_BIND=true
    with the default `threads` places on an SMT node does this: threads 0 and 1 on one core)."""
    core_of = {pu: i for i, c in enumerate(topo.cores) for pu in c}
    used: dict[int, int] = {}
    for cpus in threads:
        cores = {core_of[pu] for pu in cpus if pu in core_of}
        if len(cores) == 1:
            core = cores.pop()
            used[core] = used.get(core, 0) + 1
    task_cores = {core_of[pu] for pu in mask if pu in core_of}
    idle = task_cores - {core_of[pu] for cpus in threads for pu in cpus if pu in core_of}
    if idle and any(n > 1 for n in used.values()):
        return (f"threads share cores while {len(idle)} of the task's cores {'has' if len(idle) == 1 else 'have'} "
                "no thread (hardware-thread places with SMT); OMP_PLACES=cores puts one thread per core")
    return ""


def _ranks_text(ranks: list[int]) -> str:
    return ("task " if len(ranks) == 1 else "tasks ") + compress_cpulist(ranks)


def with_threads(pred: Prediction, nthreads: int, places: str | None, proc_bind: str | None) -> Prediction:
    """The prediction with every task's threads placed as libgomp would (TaskPlacement.threads filled,
    () where they are not bound), the OpenMP settings added to its options and what libgomp does
    differently from what they seem to say added to its notes (one note per kind, naming the tasks)."""
    _check_threads(nthreads)
    parsed = parse_places(places, pred.topology)
    bind = parse_proc_bind(proc_bind)  # raises on a bad value even when no task needs it
    tasks, by_note = [], {}
    for task in pred.tasks:
        binding = resolve(pred.topology, task.cpus, nthreads, parsed, proc_bind)
        tasks.append(dataclasses.replace(task, threads=binding.threads))
        crowded = _crowding(pred.topology, task.cpus, binding.threads) if binding.threads else ""
        for note in (*binding.notes, crowded):
            if note:
                by_note.setdefault(note, []).append(task.rank)
    notes = list(pred.notes)
    if parsed is not None and bind is None:
        notes.append("OMP_PLACES is set and OMP_PROC_BIND is not: libgomp binds as OMP_PROC_BIND=true (close)")
    if parsed is not None and bind == "false":
        notes.append("OMP_PROC_BIND=false: libgomp ignores OMP_PLACES and leaves the threads unbound")
    if parsed is None and bind not in (None, "false"):
        notes.append("OMP_PLACES is unset: libgomp binds to one place per hardware thread (OMP_PLACES=threads)")
    if parsed is not None and parsed.name == "ll_caches" and not pred.topology.l3_groups:
        notes.append("the topology names no L3 caches; ll_caches is taken as one place per NUMA domain")
    notes += [f"{_ranks_text(sorted(ranks))}: {note}" for note, ranks in by_note.items()]
    options = dict(pred.options)
    options["OMP_NUM_THREADS"] = nthreads
    for key, value in (("OMP_PLACES", places), ("OMP_PROC_BIND", proc_bind)):
        if value is not None:
            options[key] = value
    return dataclasses.replace(pred, tasks=tasks, notes=notes, options=options)
