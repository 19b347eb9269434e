"""Which kernels a BLAS chose on this CPU, and whether a better one exists.

A BLAS built for many CPUs (OpenBLAS's DYNAMIC_ARCH, as Debian ships it) picks its kernels at load
time from the CPU it recognises. A CPU newer than the library falls back to generic kernels without a
word: Debian 12's OpenBLAS 0.3.21 does not know Sapphire Rapids (family 6, model 207) and runs its
"Prescott" SSE3 kernels there, 10.8 Gflop/s of DGEMM per core against 75 with
`OPENBLAS_CORETYPE=SkylakeX`. HPL then reads 16% of Rpeak and nothing says why.

Here: the core OpenBLAS chose (`openblas_get_corename`, `openblas_get_config`, through ctypes in a
child process with the run's OPENBLAS_CORETYPE, so this process never loads a BLAS), the widest core
the CPU's flags allow (AVX-512, AVX2, AVX, SSE), and the verdict: `native` (the chosen core uses the
CPU's widest vectors), `fallback` (a narrower core: the remedy is OPENBLAS_CORETYPE=<that core>), or
`unknown`. A user's own OPENBLAS_CORETYPE is honoured (it is the run's environment) and recorded.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

# OpenBLAS core names by the widest vector instructions their kernels use (larger: wider)
WIDTH = {
    "SapphireRapids": 4, "Cooperlake": 4, "SkylakeX": 4,
    "Haswell": 3, "Zen": 3, "Excavator": 3, "Steamroller": 3,
    "Sandybridge": 2, "Bulldozer": 2, "Piledriver": 2,
    "Nehalem": 1, "Core2": 1, "Penryn": 1, "Dunnington": 1, "Prescott": 1, "Barcelona": 1, "Opteron": 1,
    "Opteron_SSE3": 1, "Atom": 1, "Bobcat": 1, "Katmai": 0, "Coppermine": 0, "Northwood": 0, "Banias": 0,
    "Athlon": 0, "Generic": 0,
}
PROBE_TIMEOUT_S = 20.0
_PROBE = ("import ctypes, json, sys\n"
          "found = {}\n"
          "for path in sys.argv[1:]:\n"
          "    out = found[path] = {}\n"
          "    try:\n"
          "        lib = ctypes.CDLL(path)\n"
          "    except OSError:\n"
          "        continue\n"
          "    for name in ('openblas_get_corename', 'openblas_get_config'):\n"
          "        f = getattr(lib, name, None)\n"
          "        if f is not None:\n"
          "            f.restype = ctypes.c_char_p\n"
          "            out[name] = (f() or b'').decode('ascii', 'replace')[:300]\n"
          "print(json.dumps(found))\n")
CACHE_FILE = "blas-kernels.json"  # in clusterbench's cache folder: a library's choice per CPU and setting
MAX_CACHE_ENTRIES = 256


def cpu_flags(cpuinfo: str | None = None) -> tuple[str, set[str]]:
    """(vendor, flags) of the first CPU in /proc/cpuinfo."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")[:200_000]
        except OSError:
            return "", set()
    vendor, flags = "", set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "vendor_id" and not vendor:
            vendor = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
        if vendor and flags:
            break
    return vendor, flags


def best_core(vendor: str, flags: set[str]) -> str | None:
    """The OpenBLAS core with the widest kernels this CPU can run (what DYNAMIC_ARCH should pick)."""
    amd = "AMD" in vendor
    if "avx512f" in flags and "avx512vl" in flags and "avx512bw" in flags:
        return "Cooperlake" if "avx512_bf16" in flags and not amd else "SkylakeX"
    if "avx2" in flags and "fma" in flags:
        return "Zen" if amd else "Haswell"
    if "avx" in flags:
        return "Bulldozer" if amd else "Sandybridge"
    if "sse3" in flags or "pni" in flags:
        return "Barcelona" if amd else "Prescott"
    return None


def _library_width(core: str) -> int | None:
    for name, width in WIDTH.items():
        if core.lower() == name.lower():
            return width
    return None


def openblas_cores(libraries: list[str], coretype: str | None) -> dict[str, dict | None]:
    """{library: {'core', 'config'} or None (not OpenBLAS, not loadable)} with OPENBLAS_CORETYPE=`coretype`
    (None: unset). One child process loads those not known yet; the answers are kept on disk per
    library file (path, size, time), CPU and setting, so a run pays the ~40 ms of that child once."""
    cpu = _cpu_key()
    keys = {lib: _key(lib, coretype, cpu) for lib in libraries}
    cache = _read_cache()
    missing = [lib for lib, key in keys.items() if key is not None and key not in cache]
    if missing:
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
        if coretype:
            env["OPENBLAS_CORETYPE"] = coretype
        env["OPENBLAS_NUM_THREADS"] = "1"
        try:
            out = subprocess.run([sys.executable, "-I", "-S", "-c", _PROBE, *missing], capture_output=True,
                                 text=True, env=env, timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
            found = json.loads(out.stdout) if out.returncode == 0 else {}
        except (OSError, subprocess.SubprocessError, ValueError):
            found = {}
        for lib in missing:
            answer = found.get(lib) if isinstance(found.get(lib), dict) else {}
            core = answer.get("openblas_get_corename")
            cache[keys[lib]] = {"core": core, "config": answer.get("openblas_get_config")} if core else None
        _write_cache(cache)
    return {lib: cache.get(key) if key is not None else None for lib, key in keys.items()}


def openblas_core(library: str, coretype: str | None) -> dict | None:
    return openblas_cores([library], coretype)[library]


@functools.cache
def _cpu_key() -> str:
    vendor, flags = cpu_flags()
    return f"{vendor}:{best_core(vendor, flags)}:{len(flags)}"


def _key(library: str, coretype: str | None, cpu: str) -> str | None:
    try:
        st = os.stat(library)
    except OSError:
        return None
    return f"{os.path.realpath(library)}|{st.st_size}|{int(st.st_mtime)}|{coretype or ''}|{cpu}"


def _cache_path() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "clusterbench" / CACHE_FILE


def _read_cache() -> dict:
    try:
        data = json.loads(_cache_path().read_text()[:1_000_000])
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_cache(cache: dict) -> None:
    """Atomically; a cache that cannot be written costs the next run the child process, nothing else."""
    path = _cache_path()
    kept = dict(list(cache.items())[-MAX_CACHE_ENTRIES:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(kept))
        os.replace(tmp, path)
    except OSError:
        pass


def judge(library: str, coretype: str | None, cpuinfo: str | None = None, chosen: dict | None = None) -> dict | None:
    """The run facts of one BLAS library: its chosen core, the CPU's best, the verdict and remedy
    (`chosen`: openblas_cores' answer for it, when already asked)."""
    chosen = chosen or openblas_core(library, coretype)
    if chosen is None:
        return None
    vendor, flags = cpu_flags(cpuinfo)
    best = best_core(vendor, flags)
    out = {"library": library, "core": chosen["core"], "config": chosen["config"], "cpu_best": best,
           "openblas_coretype": coretype}
    have, want = _library_width(chosen["core"]), _library_width(best) if best else None
    if have is None or want is None:
        out["verdict"] = "unknown"
    elif have >= want:
        out["verdict"] = "native"
    else:
        out["verdict"] = "fallback"
        out["remedy"] = f"OPENBLAS_CORETYPE={best}"
        out["why"] = (f"OpenBLAS runs its {chosen['core']} kernels on a CPU that has the instructions of its "
                      f"{best} kernels" + (" (OPENBLAS_CORETYPE asked for it)" if coretype else
                                           " (the library does not recognise this CPU)"))
    return out
