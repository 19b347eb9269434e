"""`pingpong`: latency and bandwidth between two ranks by the IMB PingPong method (own C kernel).

Message sizes 0 and 2^min_log2 .. 2^max_log2 bytes; warm-up; repetitions per size by IMB's
policy (at most `iter`, fewer for large messages so that each size moves about 40 MiB, or
`volume_mib`; more, up to `iter`, for at least `min_time_s` per size when given), or `iter` for
every size with `iter_policy: off`; each size's timed loop `rounds` times (default 5), the median
loop being the figure. One-way time in microseconds, bandwidth in MB/s (10^6 bytes);
latency is the 0-byte time. Where the two ranks sit is the placement:
`map_by: core` keeps them on one socket, `map_by: socket` puts them on two, `map_by: node`
on two nodes.
"""

from __future__ import annotations

import re
from pathlib import Path

from clusterbench.bench.declare import MetricSpec, ReportUse, merit
from clusterbench.bench.imb.sizing import IMB_OVERALL_VOLUME, exchange_seconds
from clusterbench.bench.metrics import Metric, Outcome
from clusterbench.bench.native import GUESS_START_S, KERNEL_PARAMS, NativeKernel
from clusterbench.bench.params import Param
from clusterbench.errors import UserInputError
from clusterbench.system.discover import SystemInfo

MAX_LOG2 = 30  # 1 GiB messages: beyond, buffers stop being a message-passing question
MAX_VOLUME_MIB = 64 * 1024  # a size's volume under the dynamic policy: 64 GiB is hours on a slow link
MAX_MIN_TIME_S = 60.0  # a size's time floor: more is a soak test, not a ping-pong
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)(?:\s+([\d.]+)\s+([\d.]+))?\s*$", re.M)
_HOSTS = re.compile(r"rank 0 on (\S+), rank 1 on (\S+)")


MAX_ROUNDS = 50


def parse_pingpong(text: str) -> list[tuple[int, int, float, float]]:
    """(bytes, repetitions, one-way us, MB/s) per size: the median round's when there were rounds."""
    return [(int(b), int(r), float(t), float(bw)) for b, r, t, bw, _, _ in _ROW.findall(text)]


def round_spreads(text: str) -> dict[int, float]:
    """{bytes: (slowest - fastest round) / median, in %} when the kernel ran several rounds."""
    return {int(b): round(100.0 * (float(hi) - float(lo)) / float(t), 1)
            for b, _, t, _, lo, hi in _ROW.findall(text) if lo and hi and float(t) > 0}


def _volume(point: dict) -> int:
    """Bytes each size moves at most under the dynamic policy."""
    return point["volume_mib"] * 2**20 if point.get("volume_mib") else IMB_OVERALL_VOLUME


class PingPong(NativeKernel):
    name = "pingpong"
    kernel = "pingpong"
    needs_mpi = True
    default_ranks = 2
    threaded_default = False
    metrics = (  # the network section draws the per-size figures (MB/s = 10^6 byte/s)
        MetricSpec("pingpong_time_us", "us", False, ("bytes",), negative_not_applicable=True,
                   uses=(ReportUse("network", "latency", "ping-pong", order=10),)),
        MetricSpec("pingpong_bandwidth", "MB/s", True, ("bytes",), negative_not_applicable=True,
                   uses=(ReportUse("network", "bandwidth", "ping-pong", order=10),
                         ReportUse("tuning", "headline", order=20, pick=("bytes", "largest")))),
        # a tuning study's table gives the latency at the smallest size, then the bandwidth at the largest
        MetricSpec("latency_us", "us", False, ("bytes",), negative_not_applicable=True,
                   uses=(ReportUse("tuning", "headline", order=10, pick=("bytes", "smallest")),)),
        merit(MetricSpec("peak_bandwidth", "MB/s", True, ("bytes",), negative_not_applicable=True)),
    )
    parameters = (
        Param("min_log2", int, 0, "smallest non-zero size is 2^min_log2 bytes (0 bytes is always measured)",
              minimum=0),
        Param("max_log2", int, 22, f"largest size is 2^max_log2 bytes (at most {MAX_LOG2})", minimum=0),
        Param("iter", int, 1000, "repetitions per size (the most, with the dynamic policy)", minimum=1),
        Param("iter_policy", str, "dynamic", "dynamic (IMB's default: fewer repetitions for large messages) "
              "or off", choices=("dynamic", "off")),
        Param("volume_mib", int, None, "MiB each size moves at most with the dynamic policy (default: IMB's 40); "
              "less makes large sizes quick on a slow link", minimum=1, maximum=MAX_VOLUME_MIB),
        Param("min_time_s", float, None, "seconds each size runs at least with the dynamic policy (more "
              "repetitions, up to iter, as its timed warm-up says; default: none, IMB's policy alone): a size "
              "measured in milliseconds is moved by one wake-up of another process", minimum=0.001,
              maximum=MAX_MIN_TIME_S),
        Param("rounds", int, 5, "timed loops per size; the median is the figure, the fastest and slowest give its "
              "spread (one loop of a few milliseconds is moved by one wake-up of another process)",
              minimum=1, maximum=MAX_ROUNDS),
        *KERNEL_PARAMS,
    )

    @classmethod
    def check(cls, point: dict, system: SystemInfo) -> None:
        if point["max_log2"] > MAX_LOG2:
            raise UserInputError(f"max_log2={point['max_log2']}: messages of 2^{point['max_log2']} bytes are above "
                                 f"the limit of 2^{MAX_LOG2} (1 GiB)")
        if point["min_log2"] > point["max_log2"]:
            raise UserInputError(f"min_log2={point['min_log2']} is larger than max_log2={point['max_log2']}")
        if point["ranks"] < 2:
            raise UserInputError("ranks: ping-pong needs at least 2 ranks")

    @classmethod
    def estimate_s(cls, point: dict, system: SystemInfo) -> float | None:
        """Two messages per repetition, repetitions as pingpong.c chooses them, warm-up included."""
        dynamic = point["iter_policy"] == "dynamic"
        guess = exchange_seconds(point["min_log2"], point["max_log2"], point["iter"], dynamic, _volume(point))
        if dynamic and point.get("min_time_s"):  # every size (0 B and min_log2..max_log2) lasts at least that
            guess = max(guess, (point["max_log2"] - point["min_log2"] + 2) * point["min_time_s"])
        return GUESS_START_S + guess * (point.get("rounds") or 1)

    def arguments(self) -> list[str]:
        p = self.point
        args = [str(p["min_log2"]), str(p["max_log2"]), str(p["iter"]), p["iter_policy"], str(_volume(p))]
        rounds = p.get("rounds") or 1
        if rounds > 1:  # the time floor's place is kept (0: none)
            return args + [f"{p['min_time_s']:g}" if p.get("min_time_s") else "0", str(rounds)]
        return args + [f"{p['min_time_s']:g}"] if p.get("min_time_s") else args

    def parse(self, workdir: Path) -> Outcome:
        text = self.stdout(workdir)
        rows = parse_pingpong(text)
        hosts = _HOSTS.search(text)
        out = Outcome(facts={"hosts": list(hosts.groups()) if hosts else None})
        spreads = round_spreads(text)
        if spreads:  # how steady each size was over its rounds: a wide spread is a busy node or link
            out.facts["round_spread_percent"] = {str(k): v for k, v in spreads.items()}
        expected = self.point["max_log2"] - self.point["min_log2"] + 2
        if len(rows) != expected or "# done" not in text:
            out.invalidate(f"expected {expected} message sizes and the end marker, found {len(rows)} rows")
        for size, reps, usec, mbs in rows:
            labels = {"bytes": size, "repetitions": reps}
            out.metrics.append(Metric("pingpong_time_us", usec, "us", False, labels, out.valid))
            out.metrics.append(Metric("pingpong_bandwidth", mbs, "MB/s", True, labels, out.valid))
        if rows:
            out.metrics.append(Metric("latency_us", rows[0][2], "us", False, {"bytes": rows[0][0]}, out.valid))
            peak = max(rows, key=lambda r: r[3])
            out.metrics.append(Metric("peak_bandwidth", peak[3], "MB/s", True, {"bytes": peak[0]}, out.valid))
        return out
