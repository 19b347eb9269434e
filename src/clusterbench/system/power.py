"""Power drawn while a run runs, from what the node offers: RAPL energy counters (Linux
powercap) or the BMC through `ipmitool dcmi power reading`.

RAPL counts the energy of the CPU packages (and DRAM on some parts) in microjoules; the
mean power is the difference over the run divided by its duration, with the counter's
wrap-around handled. IPMI gives the whole node's instantaneous draw, so it is sampled
every few seconds in a thread and averaged. Neither is the wall-socket figure the
Green500 asks for (RAPL leaves out fans, disks and the power supply), so the report names
the source next to the number.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

POWERCAP = "/sys/class/powercap"
_DOMAIN = re.compile(r"^intel-rapl:\d+$")  # top-level package domains; sub-zones are inside them
_IPMI_WATTS = re.compile(r"Instantaneous power reading:\s*([0-9.]+)\s*Watts", re.IGNORECASE)


@dataclass
class PowerReading:
    watts: float
    joules: float
    seconds: float
    source: str  # "rapl" or "ipmi"


class RaplMeter:
    """Sums the package domains' energy counters between start() and stop()."""

    source = "rapl"

    def __init__(self, domains: list[Path]):
        self.domains = domains
        self._start: list[int] = []
        self._t0 = 0.0

    def start(self) -> None:
        self._start = [_read_int(d / "energy_uj") for d in self.domains]
        self._t0 = time.monotonic()

    def stop(self) -> PowerReading | None:
        seconds = time.monotonic() - self._t0
        total_uj = 0
        for domain, before in zip(self.domains, self._start, strict=True):
            after = _read_int(domain / "energy_uj")
            if after < before:  # the counter wrapped
                after += _read_int(domain / "max_energy_range_uj")
            total_uj += after - before
        if seconds <= 0:
            return None
        return PowerReading(total_uj / 1e6 / seconds, total_uj / 1e6, seconds, self.source)


class IpmiMeter:
    """Averages `ipmitool dcmi power reading` samples taken every `interval_s` seconds."""

    source = "ipmi"

    def __init__(self, ipmitool: str, interval_s: float = 2.0):
        self.ipmitool = ipmitool
        self.interval_s = interval_s
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def sample(self) -> float | None:
        try:
            out = subprocess.run([self.ipmitool, "dcmi", "power", "reading"], capture_output=True, text=True,
                                 timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        m = _IPMI_WATTS.search(out)
        return float(m.group(1)) if m else None

    def start(self) -> None:
        self._samples, self._t0 = [], time.monotonic()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            watts = self.sample()
            if watts is not None:
                self._samples.append(watts)
            if self._stop.wait(self.interval_s):
                return

    def stop(self) -> PowerReading | None:
        self._stop.set()
        if self._thread:
            self._thread.join()
        seconds = time.monotonic() - self._t0
        if not self._samples:
            return None
        watts = sum(self._samples) / len(self._samples)
        return PowerReading(watts, watts * seconds, seconds, self.source)


def meter(powercap: str | None = None) -> RaplMeter | IpmiMeter | None:
    """A fresh meter of the best kind this node offers, or None. $CLUSTERBENCH_POWERCAP points
    at another powercap tree; CLUSTERBENCH_POWER=off disables measuring."""
    if os.environ.get("CLUSTERBENCH_POWER", "").lower() == "off":
        return None
    kind, where = _discover(powercap or os.environ.get("CLUSTERBENCH_POWERCAP", POWERCAP))
    if kind == "rapl":
        return RaplMeter(where)
    if kind == "ipmi":
        return IpmiMeter(where)
    return None


@functools.lru_cache(maxsize=8)
def _discover(powercap: str):
    """Looked up once per process: asking the BMC costs a second or more."""
    root = Path(powercap)
    if root.is_dir():
        domains = sorted(d for d in root.iterdir() if _DOMAIN.match(d.name) and _readable(d / "energy_uj"))
        if domains:
            return "rapl", domains
    ipmitool = shutil.which("ipmitool")
    if ipmitool and IpmiMeter(ipmitool).sample() is not None:
        return "ipmi", ipmitool
    return None, None


def _read_int(path: Path) -> int:
    return int(path.read_text().strip())


def _readable(path: Path) -> bool:
    try:
        _read_int(path)
    except (OSError, ValueError):
        return False
    return True
