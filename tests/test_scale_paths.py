"""The fast paths of issue 32 give what the plain ones gave: identities served from a dataset's table, and
files imported many per commit (each still all or nothing, the ones before an interruption kept)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from clusterbench.analysis import identity
from clusterbench.analysis.dataset import load
from clusterbench.analysis.select import parse_selection
from clusterbench.store.db import Store
from clusterbench.store.importer import import_paths

FIXTURES = Path(__file__).parent / "fixtures" / "outputs" / "this-machine"


def _records_frame(runs: dict[str, dict], hostnames: dict) -> pd.DataFrame:
    """identity_frame as it was written first: one dict per run, then DataFrame.from_dict."""
    records = {rid: identity.run_identity(run, hostnames.get(run.get("system_id") or "")) for rid, run in runs.items()}
    return pd.DataFrame.from_dict(records, orient="index") if records else pd.DataFrame()


def _store(tmp_path: Path) -> Path:
    db = tmp_path / "results.db"
    with Store(db) as store:
        report = import_paths(store, [str(FIXTURES)], tags={"system": "here"})
    assert sum(f.stored for f in report.files) >= 10
    return db


def test_identity_frames_of_a_dataset_equal_the_records_frame(tmp_path):
    db = _store(tmp_path)
    with Store(db, read_only=True) as store:
        data = load(store, parse_selection([], store), names=set())
    hostnames = {sid: s.get("hostname") for sid, s in data.systems.items()}
    whole = data.identity()
    pd.testing.assert_frame_equal(whole, _records_frame(data.runs, hostnames))
    ids = list(data.runs)
    for subset in (ids[:1], ids[::3], list(reversed(ids)), [i for i in ids if data.runs[i]["benchmark"] == "imb"]):
        runs = {i: data.runs[i] for i in subset}
        served = identity.identity_frame(runs, hostnames)  # from the dataset's table
        pd.testing.assert_frame_equal(served, _records_frame(runs, hostnames))
    changed = {i: dict(data.runs[i]) for i in ids[:2]}  # other run objects: worked out, not served
    changed[ids[0]]["params"] = dict(changed[ids[0]]["params"], threads=7)
    fresh = identity.identity_frame(changed, hostnames)
    assert fresh.loc[ids[0], "threads"] == 7
    assert identity.varying_keys(whole) == [c for c in whole.columns
                                           if whole[c].astype(object).map(identity.shown).nunique() > 1]


def test_flags_are_decided_once_and_again_for_a_replaced_run(tmp_path):
    db = _store(tmp_path)
    with Store(db, read_only=True) as store:
        data = load(store, parse_selection([], store), names=set())
    rid = next(iter(data.runs))
    assert data.flags(rid) == [] and data.counts(rid)
    data.runs[rid] = dict(data.runs[rid], excluded="rerun after the fix")
    assert data.flags(rid) == ["excluded"] and not data.counts(rid) and rid not in data.counted_ids()


def test_an_interrupted_import_keeps_the_files_before_it(tmp_path):
    folder = tmp_path / "outputs"
    shutil.copytree(FIXTURES, folder)
    db = tmp_path / "results.db"
    seen = []

    def stop_at_the_fourth(rep):
        seen.append(rep)
        if len(seen) == 4:
            raise KeyboardInterrupt

    with Store(db) as store, pytest.raises(KeyboardInterrupt):
        import_paths(store, [str(folder)], on_file=stop_at_the_fourth)
    with Store(db, read_only=True) as store:
        kept = store.run_count()
    assert kept == sum(r.stored for r in seen) > 0  # the 4 files done are committed, nothing after
    with Store(db) as store:
        again = import_paths(store, [str(folder)])
    assert sum(f.duplicates for f in again.files) == kept  # and the next import stores only the rest
    assert sum(f.stored for f in again.files) > 0
