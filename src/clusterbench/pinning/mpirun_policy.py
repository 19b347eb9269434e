"""Open MPI 4.1's reading of --map-by, --rank-by and --bind-to, and the defaults it fills in.

Read from orte/mca/rmaps/base/rmaps_base_frame.c (the option words and modifiers),
opal/mca/hwloc/base/hwloc_base_frame.c (--bind-to) and rmaps_base_map_job.c (the defaults), and
checked against recordings of mpirun.openmpi 4.1.4 (tests/fixtures/pinning/mpirun/openmpi/).
Open MPI accepts any leading part of a mapping or ranking word ("--map-by soc" is socket), but
only whole binding words; both are case-insensitive. Errors say what mpirun would say.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterbench.errors import UserInputError

# mapping words in the order Open MPI tries them as prefixes; None: a word we do not model
_MAP_WORDS = (("slot", "slot"), ("node", "node"), ("seq", None), ("core", "core"), ("l1cache", None),
              ("l2cache", None), ("l3cache", "l3cache"), ("socket", "socket"), ("numa", "numa"),
              ("board", None), ("hwthread", "hwthread"), ("dist", None))
_RANK_WORDS = (("slot", "slot"), ("node", "node"), ("hwthread", "hwthread"), ("core", "core"),
               ("l1cache", None), ("l2cache", None), ("l3cache", "l3cache"), ("socket", "socket"),
               ("numa", "numa"), ("board", "node"))  # one board per node: Open MPI ranks them alike
_PPR_WORDS = (("node", "node"), ("hwthread", "hwthread"), ("thread", "hwthread"), ("core", "core"),
              ("socket", "socket"), ("skt", "socket"), ("l1cache", None), ("l2cache", None),
              ("l3cache", "l3cache"), ("numa", "numa"))
_BIND_WORDS = {"hwthread": "hwthread", "core": "core", "l3cache": "l3cache", "socket": "socket",
               "numa": "numa", "l1cache": None, "l2cache": None, "board": None, "cpu-list": None,
               "cpulist": None}
OBJECT_NAMES = {"hwthread": "HWTHREAD", "core": "CORE", "l3cache": "L3CACHE", "socket": "SOCKET",
                "numa": "NUMA", "slot": "SLOT", "node": "NODE", "ppr": "PPR", "none": "NONE"}


@dataclass
class Policy:
    """What mpirun will do, after its defaults: the mapping object, its modifiers, the ranking and
    the binding, and whether each was asked for (Open MPI treats asked-for policies more strictly)."""

    map: str  # slot node hwthread core l3cache socket numa ppr
    map_given: bool = False
    ppr: tuple[int, str] | None = None  # ppr:N:obj
    pe: int = 0  # :PE=n, cpus per rank
    span: bool = False
    oversubscribe: bool | None = None  # None: not said (= not allowed)
    rank: str = "slot"
    rank_mode: str = ""  # "", span, fill
    bind: str = "none"
    bind_given: bool = False
    overload: bool = False  # binding may put more ranks than cpus on an object
    hwthreads: bool = False  # hardware threads count as cpus (--use-hwthread-cpus, --map-by hwthread)
    why: list[str] = field(default_factory=list)  # where each default came from, for Prediction.notes


def _prefix(word: str, table, what: str, where: str):
    """Open MPI's strncasecmp(given, word, strlen(given)): the first word the input begins."""
    low = word.lower()
    for full, ours in table:
        if low and full.startswith(low):
            if ours is None:
                raise UserInputError(f"{where} {word} ({full}) is valid for Open MPI but not modelled here",
                                     where=where, hint="model it with " + _choices(table))
            return ours
    raise UserInputError(f"The specified {what} policy is not recognized: {word!r} (Open MPI refuses it too)",
                         where=where, hint="one of " + _choices(table))


def _choices(table) -> str:
    return ", ".join(full for full, ours in table if ours is not None)


def _modifiers(text: str, policy: Policy, where: str) -> None:
    """The comma-separated modifiers after a mapping word: PE=n, SPAN, OVERSUBSCRIBE, NOOVERSUBSCRIBE."""
    for mod in filter(None, text.split(",")):
        low = mod.lower()
        if "span".startswith(low):
            policy.span = True
        elif low.startswith("pe"):
            value = low.partition("=")[2]
            if not value.isdigit() or not 1 <= int(value) <= 65536:
                raise UserInputError(f"{mod}: PE needs a number of cpus per rank, e.g. PE=4", where=where)
            policy.pe = int(value)
        elif "oversubscribe".startswith(low):
            policy.oversubscribe = True
        elif "nooversubscribe".startswith(low):
            policy.oversubscribe = False
        else:
            raise UserInputError(f"unrecognized modifier {mod!r} in {where} (Open MPI refuses it too)",
                                 where=where, hint="modifiers: PE=n, SPAN, OVERSUBSCRIBE, NOOVERSUBSCRIBE")


def _parse_map(map_by: str | None, policy: Policy) -> None:
    where = "--map-by"
    if not map_by:
        return
    word, colon, mods = map_by.partition(":")
    if not word:  # ":PE=2": modifiers alone map by socket (recorded: BYSOCKET, ranking by slot)
        policy.map = "socket"
        _modifiers(mods, policy, where)
        return
    if colon and word.lower() and "ppr".startswith(word.lower()):
        count, _, rest = mods.partition(":")
        obj, _, ppr_mods = rest.partition(":")
        if "," in obj:
            raise UserInputError(f"{map_by}: ppr patterns with several levels are not modelled", where=where)
        if not count.isdigit() or not 1 <= int(count) <= 65536 or not obj:
            raise UserInputError(f"{map_by} is not a valid ppr pattern (Open MPI refuses it too)", where=where,
                                 hint="ppr:N:object[:PE=n], e.g. ppr:2:socket")
        policy.map, policy.map_given = "ppr", True
        policy.ppr = (int(count), _prefix(obj, _PPR_WORDS, "ppr object", where))
        _modifiers(ppr_mods, policy, where)
        return
    policy.map = _prefix(word, _MAP_WORDS, "mapping", where)
    policy.map_given = True
    if policy.map == "hwthread":
        policy.hwthreads = True  # Open MPI: mapping to hwthreads makes them the cpus
    _modifiers(mods, policy, where)


def _parse_rank(rank_by: str | None, policy: Policy) -> bool:
    if not rank_by:
        return False
    where = "--rank-by"
    parts = rank_by.split(":")
    if len(parts) > 2:
        raise UserInputError(f"The specified ranking policy is not recognized: {rank_by!r}", where=where)
    policy.rank = _prefix(parts[0], _RANK_WORDS, "ranking", where)
    if len(parts) == 2:
        low = parts[1].lower()
        if low and "span".startswith(low):
            policy.rank_mode = "span"
        elif low and "fill".startswith(low):
            policy.rank_mode = "fill"
        else:
            raise UserInputError(f"unrecognized ranking modifier {parts[1]!r}", where=where, hint="span or fill")
    return True


def _parse_bind(bind_to: str | None, policy: Policy) -> None:
    if not bind_to:
        return
    where = "--bind-to"
    if bind_to.lower().startswith("none"):
        policy.bind, policy.bind_given = "none", True
        return
    word, colon, quals = bind_to.partition(":")
    for qual in filter(None, quals.split(",")):
        low = qual.lower()
        if "if-supported".startswith(low):
            continue
        if "overload-allowed".startswith(low) or "oversubscribe-allowed".startswith(low):
            policy.overload = True
        elif "ordered".startswith(low):
            raise UserInputError("--bind-to ...:ordered applies to --cpu-list, which is not modelled", where=where)
        else:
            raise UserInputError(f"Unknown qualifier to binding policy: {bind_to!r}", where=where,
                                 hint="qualifiers: overload-allowed, if-supported")
    if not word:  # ":overload-allowed" qualifies the default binding
        return
    low = word.lower()
    if low not in _BIND_WORDS:
        raise UserInputError(f"The specified binding policy is not recognized: {word!r} (Open MPI refuses it too)",
                             where=where, hint="none, hwthread, core, l3cache, socket or numa")
    if _BIND_WORDS[low] is None:
        raise UserInputError(f"--bind-to {word} is valid for Open MPI but not modelled here", where=where,
                             hint="none, hwthread, core, l3cache, socket or numa")
    policy.bind, policy.bind_given = _BIND_WORDS[low], True


def resolve(*, np: int, map_by: str | None, rank_by: str | None, bind_to: str | None,
            oversubscribe: bool, hwthread_cpus: bool, has_numa: bool, has_socket: bool) -> Policy:
    """The options as mpirun 4.1 completes them before mapping (rmaps_base_frame.c, rmaps_base_map_job.c)."""
    policy = Policy(map="", hwthreads=hwthread_cpus)
    _parse_map(map_by, policy)
    _parse_bind(bind_to, policy)
    explicit_bind = policy.bind_given
    rank_given = _parse_rank(rank_by, policy)
    if oversubscribe and policy.oversubscribe is None:
        policy.oversubscribe = True
    if not rank_given:  # the ranking follows a mapping word that was given, else by slot
        given_obj = policy.map_given and policy.map not in ("ppr", "")
        policy.rank = policy.map if given_obj else "slot"
    _cpus_per_rank(policy)
    if not policy.map:
        _default_map(policy, np, has_numa, has_socket)
    if not policy.bind_given:
        _default_bind(policy, np, has_numa, has_socket)
    if oversubscribe and not explicit_bind:  # recorded: --oversubscribe lets default and PE bindings overload,
        policy.overload = True  # but not a --bind-to without :overload-allowed
    return policy


def _cpus_per_rank(policy: Policy) -> None:
    """PE=n binds every rank to n cores (hwthreads with --use-hwthread-cpus) and needs a mapping
    object with several cpus; without a mapping it maps by NUMA."""
    if not policy.pe:
        return
    cpu = "hwthread" if policy.hwthreads else "core"
    if policy.bind_given and policy.bind not in (cpu, "none"):
        raise UserInputError(
            f"PE={policy.pe} binds each rank to {policy.pe} {cpu}s, which conflicts with --bind-to {policy.bind}",
            where="--bind-to", hint=f"leave --bind-to out or give --bind-to {cpu}")
    if not policy.bind_given:
        policy.bind, policy.bind_given = cpu, True  # Open MPI counts this binding as asked for
        policy.why.append(f"PE={policy.pe} binds each rank to {policy.pe} {cpu}s")
    if policy.pe > 1:
        if policy.map_given and (policy.map == "hwthread" or (policy.map == "core" and not policy.hwthreads)):
            raise UserInputError(
                f"A request for multiple cpus-per-proc (PE={policy.pe}) was given, but also a mapping to an "
                f"object level that cannot support that directive ({policy.map}) - Open MPI refuses this",
                where="--map-by", hint=f"--map-by slot:PE={policy.pe}, socket:PE={policy.pe} or numa:PE={policy.pe}")
        if not policy.map:
            policy.map, policy.map_given = "numa", True
            policy.why.append("PE>1 without a mapping object maps by NUMA")


def _default_map(policy: Policy, np: int, has_numa: bool, has_socket: bool) -> None:
    if np <= 2:
        policy.map = "hwthread" if policy.hwthreads else "core"
        reason = "np <= 2"
    else:
        policy.map = "numa" if has_numa else "socket" if has_socket else "slot"
        reason = "np > 2"
    policy.why.append(f"mapping by {policy.map}: Open MPI's default for {reason}")


def _default_bind(policy: Policy, np: int, has_numa: bool, has_socket: bool) -> None:
    objects = ("hwthread", "core", "l3cache", "socket", "numa")
    if policy.map_given and policy.map in objects:
        policy.bind = policy.map
        reason = f"binding to {policy.bind}: the default after --map-by {policy.map}"
    elif np <= 2:
        policy.bind = "hwthread" if policy.hwthreads else "core"
        reason = f"binding to {policy.bind}: Open MPI's default for np <= 2"
    else:
        policy.bind = "numa" if has_numa else "socket" if has_socket else "none"
        reason = f"binding to {policy.bind}: Open MPI's default for np > 2"
    policy.why.append(reason)
