"""The release archive in the dashboard: a release survives the session that made it (reload, another tab),
runs to completion on the server, and the dataset's schema work comes back with the same table."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dpsynth import jobs
from dpsynth.accounting import Ledger
from dpsynth.archive import Archive
from dpsynth.ui_state import SOURCE_LABELS
from tests.test_app_pages import APP, TIMEOUT, no_exception, released, state_of, uploaded, with_public_bounds


@pytest.fixture
def ledger_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.sqlite"
    monkeypatch.setenv("DPSYNTH_LEDGER", str(path))
    return path


def test_a_release_is_shown_again_in_a_new_session_with_the_same_zip(ledger_path: Path) -> None:
    at = released(ledger_path)
    no_exception(at)
    first = state_of(at)
    assert first.release is not None and first.release.archive_id
    zip_first = first.release_zip
    # a reload is a new session: nothing in memory, the archive still holds the release
    again = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    again.switch_page("pages/11_releases.py").run()
    no_exception(again)
    buttons = [b for b in again.get("download_button") if b.proto.label.startswith("Download the release")]
    assert len(buttons) == 1
    [entry] = Archive.for_ledger(Ledger(ledger_path, create=False)).list()
    assert entry.status == "complete" and entry.release_id == first.release.archive_id
    from dpsynth.release import Release

    assert Release.from_files(Archive.for_ledger(Ledger(ledger_path, create=False)).get(entry.release_id)).zip() == zip_first


def test_a_release_finishes_on_the_server_when_the_page_is_left(ledger_path: Path, monkeypatch) -> None:
    """The release runs on its own thread: leaving the page (the script stops) does not stop it."""
    gate = threading.Event()
    real_start = jobs.start

    def slow_start(run, **kw):  # noqa: ANN001, ANN202 - hold the job until the page has gone
        def held(progress):  # noqa: ANN001, ANN202
            gate.wait(30)
            return run(progress)

        return real_start(held, **kw)

    monkeypatch.setattr(jobs, "start", slow_start)
    at = with_public_bounds(uploaded(ledger_path))
    state = state_of(at)
    schema, _ = state.schema()
    state.start_release(schema)  # what the button does, without waiting on the page
    at.switch_page("pages/1_data.py").run()  # the curator goes elsewhere
    no_exception(at)
    job = state.release_job()
    assert job is not None and job.status == "running"
    gate.set()
    jobs.wait(job, timeout=120)
    assert job.status == "done"
    at.switch_page("pages/4_release.py").run()  # coming back re-attaches to the finished release
    no_exception(at)
    assert state_of(at).release is not None and any("Released" in s.value for s in at.success)
    [entry] = Archive.for_ledger(Ledger(ledger_path, create=False)).list()
    assert entry.status == "complete"


def test_schema_work_comes_back_with_the_same_table(ledger_path: Path) -> None:
    at = uploaded(ledger_path)
    at.switch_page("pages/2_schema.py").run()
    state = state_of(at)
    table = state.schema_table.copy()
    table.loc[0, "bins"] = 7
    table.loc[0, "source"] = SOURCE_LABELS["public"]  # the curator declared this row public
    for f in ("src_lower", "src_upper", "src_bins", "src_categories"):
        table.loc[0, f] = "public"
    state.schema_table = table
    state.save_schema_work()
    other = uploaded(ledger_path)  # the same file in a new session
    restored = state_of(other)
    assert restored.schema_restored and int(restored.schema_table.loc[0, "bins"]) == 7
    # rows still read off the data are never written to disk: they are drafted afresh
    kept = restored.schema_store().load(restored.dataset_id)
    assert list(kept["column"]) == [table.loc[0, "column"]]
