"""Benchmark plugins (entry points of `clusterbench.benchmarks`) are still found, while a listing on a machine
without any no longer imports importlib.metadata to find that out (bench/registry.py, issue 32)."""

from __future__ import annotations

import os
import subprocess
import sys

from clusterbench.bench import registry


def _plugin(folder) -> None:
    dist = folder / "cbplugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: cbplugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[clusterbench.benchmarks]\ntoyplug = cbplugin_mod:Toy\n")
    (folder / "cbplugin_mod.py").write_text("from clusterbench.bench.base import Benchmark\n\n\n"
                                            "class Toy(Benchmark):\n    name = 'toyplug'\n")


def test_a_plugin_on_the_path_is_seen_and_loaded(tmp_path, monkeypatch):
    _plugin(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert registry._plugins_may_exist()
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    try:
        assert "toyplug" in [cls.name for cls in registry.registered()]
    finally:
        registry._table().pop("toyplug", None)


def test_what_the_look_cannot_see_into_is_left_to_importlib_metadata(tmp_path, monkeypatch):
    archive = tmp_path / "some.zip"
    archive.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip file on sys.path
    monkeypatch.syspath_prepend(str(archive))
    assert registry._plugins_may_exist()


def test_without_plugins_the_registry_does_not_import_importlib_metadata(tmp_path):
    code = ("import sys; from clusterbench.bench import registry\n"
            "found = registry._plugins_may_exist(); registry.registered()\n"
            "print(found, 'importlib.metadata' in sys.modules)")
    env = dict(os.environ) | {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, timeout=120)
    found, loaded = out.stdout.split()
    assert found == "True" or loaded == "False", out.stderr
