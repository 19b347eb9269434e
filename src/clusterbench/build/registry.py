"""Built benchmark binaries and their provenance, so campaigns find them without a path.

`clusterbench build hpl` records each build (binary, source and its checksum, version, BLAS
link, flags, compiler) in `registry.json` under the builds folder of the cache. The newest
build whose binary still exists is the default `xhpl`; a run stores the provenance of the
binary it used among its facts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from clusterbench.build import cache


def builds_root() -> Path:
    """$CLUSTERBENCH_CACHE/builds, else $XDG_CACHE_HOME/clusterbench/builds."""
    return cache.cache_dir("builds")


def _registry_file() -> Path:
    return builds_root() / "registry.json"


def load() -> list[dict]:
    try:
        entries = json.loads(_registry_file().read_text())
    except (OSError, ValueError):
        return []
    return entries if isinstance(entries, list) else []


def register(entry: dict) -> None:
    """Add (or replace, by binary path) one build; the file is rewritten under a lock, and renamed
    into place whole (the build cache's lock and rename), so readers never see half a file."""
    path = _registry_file()
    with cache.locked(path.with_suffix(".lock")):
        entries = [e for e in load() if e.get("binary") != entry["binary"]]
        entries.append(entry)
        partial = path.with_suffix(f".{os.getpid()}")
        partial.write_text(json.dumps(entries, indent=2))
        cache.publish(partial, path)


def builds(name: str) -> list[dict]:
    """Registered builds of `name` whose binary is still there, newest first."""
    found = [(e.get("built_at", ""), k, e) for k, e in enumerate(load())
             if e.get("name") == name and os.access(e.get("binary", ""), os.X_OK)]
    return [e for _, _, e in sorted(found, key=lambda t: t[:2], reverse=True)]  # same second: later entry


def provenance(binary: str) -> dict | None:
    """The registered provenance of this binary (by its real path), if clusterbench built it."""
    real = os.path.realpath(binary)
    return next((e for e in load() if os.path.realpath(e.get("binary", "")) == real), None)
