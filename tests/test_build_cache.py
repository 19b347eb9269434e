"""The one build cache (clusterbench.build.cache) under the kernels' builds and the official ones.

Real compilers and real processes: two processes that build the same thing at the same moment
must end with one entry built once; a failed build leaves nothing behind; an entry replaced by a
forced rebuild is replaced whole; a cache folder that cannot be made is a clear error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from clusterbench.build import cache, registry
from clusterbench.errors import EnvironmentProblem
from clusterbench.native import build as native

# Run in two processes at once: each waits for the `go` file, then builds. The official recipe
# sleeps inside its build so that the second process surely arrives while the first holds the lock.
RACER = textwrap.dedent('''
    import json, os, sys, time
    from pathlib import Path

    kind, go, source = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    from clusterbench.build import common
    from clusterbench.native import build as native

    RECIPE = common.Recipe("hello", "hello", "hello", (), markers=("hello.c",), hint="a folder with hello.c")

    def build_hello():
        cc = native.find_compiler(mpi=False)
        with common.start(RECIPE, source, {"toolchain": native.toolchain_identity(cc)}, False, print) as job:
            if job.cached:
                return job.cached
            time.sleep(1)
            binary = job.work / "hello"
            common.run_logged([cc, "hello.c", "-o", str(binary)], job.root, job.logfile, print, "compile")
            return job.install({"hello": binary}, job.entry("hello"), print)

    go.with_name(f"{go.name}.ready.{os.getpid()}").touch()
    while not go.exists():
        time.sleep(0.002)
    if kind == "kernel":
        made = native.build("stream", mpi=False, openmp=True)
    else:
        made = build_hello()
    print(json.dumps({"binary": str(made.binary), "rebuilt": made.rebuilt}))
''')


def race(kind: str, tmp_path: Path, cache_dir: Path, source: Path | None = None) -> list[dict]:
    """Start two processes building the same thing, release them together, their results."""
    go = tmp_path / f"go-{kind}"
    env = dict(os.environ) | {"CLUSTERBENCH_CACHE": str(cache_dir)}
    racers = [subprocess.Popen([sys.executable, "-c", RACER, kind, str(go), str(source or tmp_path)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
              for _ in range(2)]
    deadline = time.monotonic() + 120
    while (len(list(tmp_path.glob(f"{go.name}.ready.*"))) < 2 and time.monotonic() < deadline
           and all(racer.poll() is None for racer in racers)):
        time.sleep(0.01)  # until both have imported clusterbench and wait for `go` (or one died)
    go.touch()
    results = []
    for racer in racers:
        out, err = racer.communicate(timeout=300)
        assert racer.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def leftovers(root: Path) -> list[str]:
    """What a build may leave beside its entries besides lock files: workspaces, staging, old entries."""
    return sorted(p.name for p in root.iterdir() if "-build-" in p.name or ".old-" in p.name
                  or (p.name.startswith(".") and not p.name.endswith(".lock")))


def test_the_key_digests_every_input_and_not_their_order():
    inputs = {"toolchain": {"compiler": "/usr/bin/gcc", "version": ["gcc 12"]}, "flags": ["-O3"], "source": "ab"}
    key = cache.key(inputs)
    assert len(key) == 16 and int(key, 16) >= 0
    assert cache.key(dict(reversed(list(inputs.items())))) == key
    assert cache.key(inputs | {"flags": ["-O2"]}) != key
    assert cache.key(inputs | {"toolchain": {"compiler": "/usr/bin/clang", "version": ["gcc 12"]}}) != key
    assert cache.entry(Path("/c"), "osu", inputs) == Path(f"/c/osu-{key}")
    assert cache.key_of(Path(f"/c/lulesh2.0-{key}")) == key


def test_a_kernel_build_is_keyed_by_the_same_function(tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(tmp_path / "cache"))
    made = native.build("stream", mpi=False, openmp=True)
    recorded = json.loads((made.binary.parent / "build.json").read_text())
    assert made.key == cache.key({k: v for k, v in recorded.items() if k != "command"})
    assert made.binary.parent == tmp_path / "cache" / f"stream-{made.key}"


def test_two_processes_building_one_kernel_compile_it_once(tmp_path):
    root = tmp_path / "cache"
    first, second = race("kernel", tmp_path, root)
    assert first["binary"] == second["binary"]
    assert sorted([first["rebuilt"], second["rebuilt"]]) == [False, True]
    entry = Path(first["binary"]).parent
    assert sorted(p.name for p in entry.iterdir()) == ["build.json", "stream"]
    assert [p.name for p in root.iterdir() if not p.name.startswith(".")] == [entry.name]
    assert leftovers(root) == []
    ran = subprocess.run([first["binary"], "100000", "2"], capture_output=True, text=True,
                         env={"OMP_NUM_THREADS": "1"}, timeout=120)
    assert "Solution Validates" in ran.stdout, ran.stdout + ran.stderr


def test_two_processes_building_one_official_build_build_it_once(tmp_path):
    source = tmp_path / "hello-1.0"
    source.mkdir()
    (source / "hello.c").write_text('#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n')
    root = tmp_path / "cache"
    first, second = race("official", tmp_path, root, source)
    assert first["binary"] == second["binary"]
    assert sorted([first["rebuilt"], second["rebuilt"]]) == [False, True]
    builds = root / "builds"
    entry = Path(first["binary"]).parent
    assert sorted(p.name for p in entry.iterdir()) == ["build.log", "hello", "provenance.json"]
    assert leftovers(builds) == []
    entries = json.loads((builds / "registry.json").read_text())
    assert [e["binary"] for e in entries] == [first["binary"]] and entries[0]["key"] == cache.key_of(entry)
    assert subprocess.run([first["binary"]], capture_output=True, text=True).stdout == "hello\n"


def test_a_failed_kernel_build_leaves_only_its_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(tmp_path / "cache"))
    broken = tmp_path / "stream.c"
    broken.write_text("int main(void) { return undefined_symbol; }\n")
    monkeypatch.setattr(native, "source_path", lambda kernel: broken)
    with pytest.raises(native.BuildError, match="compiling the stream kernel failed"):
        native.build("stream", mpi=False)
    (left,) = (tmp_path / "cache").iterdir()  # no entry, no workspace: the lock file alone
    assert left.name.startswith(".stream-") and left.name.endswith(".lock")


def test_publish_replaces_an_entry_whole(tmp_path):
    final = tmp_path / "root" / "osu-0123456789abcdef"
    for files in (("osu_latency", "osu_bw"), ("osu_latency",)):
        staged = tmp_path / "staged"
        staged.mkdir()
        for name in files:
            (staged / name).write_text(f"{files}\n")
        with cache.locked(cache.lock_file(final)):
            cache.publish(staged, final)
    assert [p.read_text() for p in final.iterdir()] == ["('osu_latency',)\n"]
    assert sorted(p.name for p in final.parent.iterdir()) == [".osu-0123456789abcdef.lock", final.name]


def test_a_forced_official_rebuild_replaces_the_entry(tmp_path, monkeypatch):
    from clusterbench.build import common

    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "src"
    source.mkdir()
    (source / "hello.c").write_text("int main(void) { return 0; }\n")
    recipe = common.Recipe("hello", "hello", "hello", (), markers=("hello.c",), hint="a folder with hello.c")

    def build(force: bool, text: str) -> common.Built:
        with common.start(recipe, source, {"cc": "none"}, force, lambda _msg: None) as job:
            if job.cached:
                return job.cached
            (job.work / "hello").write_text(text)
            return job.install({"hello": job.work / "hello"}, job.entry("hello"), lambda _msg: None)

    made = [build(False, "first\n"), build(False, "second\n"), build(True, "forced\n")]
    assert [m.rebuilt for m in made] == [True, False, True]
    assert len({m.binary for m in made}) == 1 and made[0].binary.read_text() == "forced\n"
    assert [e["binary"] for e in registry.load()] == [str(made[0].binary)]
    assert leftovers(registry.builds_root()) == []


def test_a_cache_that_cannot_be_made_is_a_clear_error(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("CLUSTERBENCH_CACHE", str(blocker))
    with pytest.raises(EnvironmentProblem, match="cannot create") as info:
        native.build("stream", mpi=False)
    assert "CLUSTERBENCH_CACHE" in info.value.hint
