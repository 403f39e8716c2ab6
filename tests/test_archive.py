"""The release archive (issue 11): a charged release is never lost.

- a release recorded through :func:`archived_release` is archived complete, its files byte-identical
  to what the release produced, and its ledger spend carries its id;
- an error marks it failed, saying whether ε was charged;
- ``kill -9`` at several points (before the charge, after it, mid-archive, after) leaves, for every
  charged release, a complete entry or a failed one saying why, never nothing; the index stays sound;
- concurrent releases from several processes share one archive without corrupting it, and a recovery
  run by another process leaves releases still in flight alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsynth.accounting import Ledger, PrivacyBudget
from dpsynth.archive import (
    INTERRUPTED_CHARGED,
    INTERRUPTED_FREE,
    Archive,
    ArchiveError,
    archive_path_for,
    archived_release,
    release_archive_files,
)
from dpsynth.artifacts import release_files
from dpsynth.errors import BudgetExceededError
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
SCHEMA = Schema((
    NumericColumn(name="age", lower=0, upper=100, bins=5, integer=True),
    CategoricalColumn(name="ward", categories=("north", "south", "east")),
))


def table(n: int = 200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(0, 101, n).astype(str), "ward": rng.choice(["north", "south", "east"], n)})


def test_archive_sits_beside_the_ledger_unless_moved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPSYNTH_ARCHIVE", raising=False)
    assert archive_path_for(tmp_path / "ledger.sqlite") == tmp_path / "ledger-archive"
    monkeypatch.setenv("DPSYNTH_ARCHIVE", str(tmp_path / "elsewhere"))
    assert archive_path_for(tmp_path / "ledger.sqlite") == tmp_path / "elsewhere"


@pytest.mark.parametrize("method", ["histogram", "marginals"])
def test_a_release_is_archived_byte_for_byte_and_linked_to_its_spend(method: str, tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite")
    archive = Archive(tmp_path / "archive", ledger=ledger)
    rel, entry = archived_release(table(), SCHEMA, ledger=ledger, archive=archive, dataset_id="d",
                                  dataset_label="wards", epsilon=0.5, method=method, seed=3)
    assert entry.status == "complete" and entry.charged and entry.method == method
    files = archive.get(entry.release_id)
    assert files == {**release_files(rel), "schema.json": SCHEMA.to_json().encode()}
    assert files["synthetic.csv"] == rel.synthetic_bytes()  # the one writer's bytes
    [spend] = ledger.spends("d")
    assert spend.release_id == entry.release_id
    assert ledger.spends_for_release(entry.release_id) == [spend]
    # a fresh process's view: the same entry and the same bytes, exported to a folder
    again = Archive(tmp_path / "archive")
    [listed] = again.list()
    assert (listed.release_id, listed.label, listed.epsilon, listed.status) == (entry.release_id, "wards", 0.5, "complete")
    out = again.export(entry.release_id, tmp_path / "out")
    assert {p.name: p.read_bytes() for p in out} == files
    assert again.zip(entry.release_id) == again.zip(entry.release_id)


def test_a_refused_release_is_failed_with_nothing_spent(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.register("d", PrivacyBudget(0.2))
    archive = Archive.for_ledger(ledger)
    with pytest.raises(BudgetExceededError):
        archived_release(table(), SCHEMA, ledger=ledger, archive=archive, dataset_id="d", epsilon=0.5, seed=1)
    [entry] = archive.list()
    assert entry.status == "failed" and entry.charged is False
    assert entry.reason.startswith("refused by the ledger: not enough ε left") and "nothing spent" in entry.reason
    with pytest.raises(ArchiveError, match="failed"):
        archive.get(entry.release_id)


def test_an_error_after_the_charge_is_failed_saying_eps_was_charged(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite")
    archive = Archive.for_ledger(ledger)

    def boom(*args: object, **kwargs: object) -> None:
        ledger.register("d", PrivacyBudget(4.0))
        ledger.charge("d", PrivacyBudget(0.5), mechanism="m", purpose="p")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        archived_release(table(), SCHEMA, ledger=ledger, archive=archive, dataset_id="d", epsilon=0.5, run=boom)
    [entry] = archive.list()
    assert entry.status == "failed" and entry.charged is True
    assert "disk full" in entry.reason and "ε was charged" in entry.reason
    assert ledger.spends("d")[0].release_id == entry.release_id


def test_a_damaged_blob_is_reported_not_returned(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite")
    archive = Archive(tmp_path / "a", ledger=ledger)
    _, entry = archived_release(table(), SCHEMA, ledger=ledger, archive=archive, dataset_id="d", epsilon=0.5, seed=1)
    blob = next(p for p in (tmp_path / "a" / "blobs").rglob("*") if p.is_file())
    blob.write_bytes(b"x" + blob.read_bytes()[1:])
    with pytest.raises(ArchiveError, match="damaged"):
        archive.get(entry.release_id)


def test_a_file_streamed_from_disk_is_archived(tmp_path: Path) -> None:
    big = tmp_path / "synthetic.csv"
    big.write_bytes(b"a,b\n" + b"1,2\n" * 600_000)  # larger than one copy chunk
    archive = Archive(tmp_path / "a")
    entry = archive.begin(dataset_id="d", label="x", epsilon=1.0, delta=0.0, method="histogram")
    archive.complete(entry.release_id, {"synthetic.csv": big, "card.json": b"{}"})
    assert archive.get(entry.release_id)["synthetic.csv"] == big.read_bytes()


# ---------------------------------------------------------------- kill -9

CHILD = textwrap.dedent("""
    import os, signal, sys
    import numpy as np, pandas as pd
    from dpsynth import archive as archive_mod
    from dpsynth.accounting import Ledger, PrivacyBudget
    from dpsynth.archive import Archive, archived_release
    from dpsynth.schema import CategoricalColumn, NumericColumn, Schema

    ledger_path, archive_path, kill_at, kill_iter, loops = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    schema = Schema((NumericColumn(name="age", lower=0, upper=100, bins=5, integer=True),
                     CategoricalColumn(name="ward", categories=("north", "south", "east"))))
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"age": rng.integers(0, 101, 200).astype(str), "ward": rng.choice(["north", "south", "east"], 200)})
    ledger = Ledger(ledger_path)
    archive = Archive(archive_path, ledger=ledger)
    state = {"i": -1, "blobs": 0}

    def die(point):
        if kill_at == point and state["i"] == kill_iter:
            os.kill(os.getpid(), signal.SIGKILL)

    put = Archive._put
    def killing_put(self, data):
        out = put(self, data)
        state["blobs"] += 1
        die(f"blob {state['blobs']}")
        return out
    Archive._put = killing_put
    begin = Archive.begin
    def killing_begin(self, **kw):
        die("before begin")
        return begin(self, **kw)
    Archive.begin = killing_begin

    print("ready", flush=True)
    for i in range(loops):
        state["i"], state["blobs"] = i, 0
        rel, entry = archived_release(df, schema, ledger=ledger, archive=archive, dataset_id="d",
                                      budget=PrivacyBudget(1000.0), epsilon=0.01, purpose=f"run {i}",
                                      progress=lambda f, m: die(f"progress {f:g}"))
        die("archived")
        print(f"archived {i} {entry.release_id}", flush=True)
""")


def run_child(tmp_path: Path, kill_at: str = "never", kill_iter: int = -1, loops: int = 4,
              kill_after: float | None = None) -> tuple[int, list[str]]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "ledger.sqlite"), str(tmp_path / "archive"),
                             kill_at, str(kill_iter), str(loops)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=tmp_path)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.strip() == "ready", proc.stderr.read() if proc.stderr else first
    if kill_after is not None:
        try:
            proc.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode in (0, -signal.SIGKILL), stderr
    return proc.returncode, [line.split()[2] for line in stdout.splitlines() if line.startswith("archived ")]


def check_invariant(tmp_path: Path) -> dict[str, str]:
    """Every charged release is complete or failed-with-a-reason; complete ones read back intact."""
    ledger = Ledger(tmp_path / "ledger.sqlite", create=False)
    archive = Archive(tmp_path / "archive", ledger=ledger)
    entries = {e.release_id: e for e in archive.list()}  # recovers the killed run's entry
    charged = {s.release_id for s in ledger.spends("d")}
    assert None not in charged  # every spend is linked to an archive entry
    for rid in charged:
        e = entries[rid]  # never nothing
        assert e.status in ("complete", "failed"), e
        if e.status == "complete":
            files = archive.get(rid)
            assert {"synthetic.csv", "histogram.csv", "card.json", "card.md", "schema.json"} <= set(files)
            assert json.loads(files["card.json"])["privacy"]["epsilon"] == 0.01
        else:
            assert e.reason == INTERRUPTED_CHARGED and e.charged
    for rid, e in entries.items():
        assert e.status != "pending"
        if rid not in charged:
            assert e.status == "failed" and e.reason == INTERRUPTED_FREE and e.charged is False
    return {rid: e.status for rid, e in entries.items()}


@pytest.mark.parametrize("point,charged_at_kill,entry_at_kill", [
    ("before begin", False, None),
    ("progress 0.02", False, "failed"),  # checking the data (the entry is made just before the charge)
    ("progress 0.45", False, "failed"),  # entry pending, about to charge
    ("progress 0.5", True, "failed"),  # charged, before any noise
    ("progress 1", True, "failed"),  # release built, not archived
    ("blob 1", True, "failed"),  # one file stored
    ("blob 5", True, "failed"),  # every file stored, index not yet updated
    ("archived", True, "complete"),
])
def test_kill_at_each_step_leaves_every_charged_release_archived_or_failed(
        point: str, charged_at_kill: bool, entry_at_kill: str | None, tmp_path: Path) -> None:
    status, shown = run_child(tmp_path, kill_at=point, kill_iter=2, loops=4)
    assert status == -signal.SIGKILL and len(shown) == 2
    statuses = check_invariant(tmp_path)
    assert [statuses[r] for r in shown] == ["complete", "complete"]
    killed = [r for r in statuses if r not in shown]
    assert len(killed) == (0 if entry_at_kill is None else 1)
    if entry_at_kill:
        assert statuses[killed[0]] == entry_at_kill
    ledger = Ledger(tmp_path / "ledger.sqlite", create=False)
    assert len(ledger.spends("d")) == 2 + charged_at_kill


def test_kill_at_random_times_never_loses_a_charged_release(tmp_path: Path) -> None:
    total = 0
    for k, delay in enumerate([0.4, 0.9, 1.7]):
        (tmp_path / str(k)).mkdir()
        status, shown = run_child(tmp_path / str(k), loops=100_000, kill_after=delay)
        assert status == -signal.SIGKILL
        statuses = check_invariant(tmp_path / str(k))
        assert all(statuses[r] == "complete" for r in shown)
        total += len(shown)
    assert total > 0


# ---------------------------------------------------------------- concurrency

LAUNCHER = textwrap.dedent("""
    import json, os, sys
    import pandas as pd
    from dpsynth.accounting import Ledger, PrivacyBudget
    from dpsynth.archive import Archive, archived_release
    from dpsynth.errors import BudgetExceededError
    from dpsynth.schema import CategoricalColumn, Schema

    ledger_path, archive_path = sys.argv[1], sys.argv[2]
    schema = Schema((CategoricalColumn(name="ward", categories=("north", "south", "east")),))
    df = pd.DataFrame({"ward": ["north", "south", "east"] * 50})
    Ledger(ledger_path).register("d", PrivacyBudget(0.6))
    r, w = os.pipe()
    pids = []
    for i in range(12):
        pid = os.fork()
        if pid == 0:
            os.close(w)
            os.read(r, 1)
            try:
                ledger = Ledger(ledger_path, create=False)
                archived_release(df, schema, ledger=ledger, archive=Archive(archive_path, ledger=ledger),
                                 dataset_id="d", epsilon=0.1)
                code = 0
            except BudgetExceededError:
                code = 3
            except BaseException:
                import traceback; traceback.print_exc()
                code = 1
            os._exit(code)
        pids.append(pid)
    os.close(r)
    os.write(w, b"x" * 12)
    os.close(w)
    print(json.dumps([os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids]))
""")


def test_concurrent_releases_from_processes_share_one_archive(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", LAUNCHER, str(tmp_path / "l.sqlite"), str(tmp_path / "a")],
                         capture_output=True, text=True, env=ENV, timeout=300, check=True)
    codes = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(codes) == [0] * 6 + [3] * 6, out.stderr
    ledger = Ledger(tmp_path / "l.sqlite", create=False)
    archive = Archive(tmp_path / "a", ledger=ledger)
    entries = archive.list()
    assert sorted(e.status for e in entries) == ["complete"] * 6 + ["failed"] * 6
    assert {s.release_id for s in ledger.spends("d")} == {e.release_id for e in entries if e.status == "complete"}
    for e in entries:
        if e.status == "complete":
            assert len(archive.get(e.release_id)["synthetic.csv"]) > 0
        else:
            assert "nothing spent" in e.reason


HOLDER = textwrap.dedent("""
    import sys, time
    from dpsynth.archive import Archive
    a = Archive(sys.argv[1])
    e = a.begin(dataset_id="d", label="x", epsilon=1.0, delta=0.0, method="histogram")
    print(e.release_id, flush=True)
    sys.stdin.readline()
    a.complete(e.release_id, {"card.json": b"{}"})
    print("done", flush=True)
""")


def test_recovery_leaves_a_release_in_flight_alone(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "a")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=ENV)
    assert proc.stdin is not None and proc.stdout is not None
    rid = proc.stdout.readline().strip()
    archive = Archive(tmp_path / "a")
    assert archive.recover() == [] and archive.entry(rid).status == "pending"
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "done"
    proc.wait(timeout=30)
    assert archive.entry(rid).status == "complete"


def test_release_archive_files_takes_a_streamed_synthetic_file(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.sqlite")
    rel, _ = archived_release(table(), SCHEMA, ledger=ledger, dataset_id="d", epsilon=1.0, seed=2,
                              archive=Archive(tmp_path / "a"))
    path = tmp_path / "s.csv"
    path.write_bytes(b"age,ward\n")
    assert release_archive_files(rel, synthetic=path)["synthetic.csv"] == path


def test_another_process_cannot_fail_a_release_in_flight(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "a")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=ENV)
    assert proc.stdin is not None and proc.stdout is not None
    rid = proc.stdout.readline().strip()
    with pytest.raises(ArchiveError, match="still being recorded"):
        Archive(tmp_path / "a").fail(rid, "meddling")
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "done"
    proc.wait(timeout=30)
    assert Archive(tmp_path / "a").entry(rid).status == "complete"


def test_the_archived_zip_is_the_first_download_byte_for_byte(tmp_path: Path) -> None:
    from dpsynth.artifacts import release_zip

    ledger = Ledger(tmp_path / "l.sqlite")
    archive = Archive(tmp_path / "a", ledger=ledger)
    rel, entry = archived_release(table(), SCHEMA, ledger=ledger, archive=archive, dataset_id="d", epsilon=1.0,
                                  method="marginals", seed=4)
    assert Archive(tmp_path / "a").zip(entry.release_id, names=list(release_files(rel))) == release_zip(rel)
