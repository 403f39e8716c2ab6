"""The command line of issue 11: ``archive list|get``, ``release`` printing its archive id,
``ledger init``, ``ledger set-total`` with a reason, and refusals that name ε or δ."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dpsynth.accounting import Ledger, PrivacyBudget
from dpsynth.archive import INTERRUPTED_CHARGED
from dpsynth.cli import main

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


@pytest.fixture
def files(tmp_path: Path, small_df, small_schema, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path, Path]:
    monkeypatch.delenv("DPSYNTH_ARCHIVE", raising=False)
    data = tmp_path / "data.csv"
    small_df.to_csv(data, index=False)
    schema = tmp_path / "schema.json"
    schema.write_text(small_schema.to_json())
    led = tmp_path / "ledger.sqlite"
    assert main(["ledger", "init", "--ledger", str(led)]) == 0
    return tmp_path, data, schema, led


def release_args(data: Path, schema: Path, led: Path, out: Path, *extra: str) -> list[str]:
    return ["release", str(data), "--schema", str(schema), "--epsilon", "1", "--out", str(out), "--ledger", str(led),
            "--label", "people", *extra]


@pytest.mark.parametrize("engine", ["pandas", "duckdb"])
def test_release_prints_its_archive_id_and_archive_get_gives_the_same_bytes(files, capsys, engine: str) -> None:
    tmp, data, schema, led = files
    assert main(release_args(data, schema, led, tmp / "s.csv", "--engine", engine, "--card-out",
                             str(tmp / "card.json"))) == 0
    out = capsys.readouterr().out
    rid = re.search(r"Archived as (\S+)", out).group(1)
    assert main(["archive", "list", "--ledger", str(led)]) == 0
    [line] = capsys.readouterr().out.strip().splitlines()
    assert line.startswith(rid) and "people" in line and "ε = 1" in line and "δ = 0" in line
    assert "histogram" in line and "complete" in line
    assert main(["archive", "get", rid, "--out", str(tmp / "got"), "--ledger", str(led)]) == 0
    assert "Wrote 6 files" in capsys.readouterr().out  # synthetic, histogram, value model, schema, card (JSON, Markdown)
    got = tmp / "got"
    assert (got / "synthetic.csv").read_bytes() == (tmp / "s.csv").read_bytes()
    assert (got / "card.json").read_bytes() == (tmp / "card.json").read_bytes()
    assert {"histogram.csv", "card.md", "schema.json"} <= {p.name for p in got.iterdir()}
    [spend] = Ledger(led, create=False).spends()
    assert spend.release_id == rid
    assert main(["archive", "list", "--ledger", str(led), "--json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)
    assert entry["release_id"] == rid and entry["status"] == "complete" and entry["label"] == "people"


def test_a_named_ledger_that_does_not_exist_is_not_created(files, capsys) -> None:
    tmp, data, schema, _ = files
    missing = tmp / "typo.sqlite"
    assert main(release_args(data, schema, missing, tmp / "s.csv")) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "ledger init --ledger" in err
    assert not missing.exists() and not (tmp / "s.csv").exists()
    assert main(["ledger", "--ledger", str(missing)]) == 2
    assert "ledger init" in capsys.readouterr().err and not missing.exists()
    assert main(["ledger", "init", "--ledger", str(missing)]) == 0
    assert main(["ledger", "init", "--ledger", str(missing)]) == 2  # never overwritten
    assert "never overwritten" in capsys.readouterr().err


def test_the_default_ledger_is_created_on_first_use_with_a_message(files, capsys, monkeypatch) -> None:
    tmp, data, schema, _ = files
    monkeypatch.setenv("DPSYNTH_LEDGER", str(tmp / "home" / "ledger.sqlite"))
    args = ["release", str(data), "--schema", str(schema), "--epsilon", "1", "--out", str(tmp / "s.csv")]
    assert main(args) == 0
    assert "First use: created the privacy ledger" in capsys.readouterr().err
    assert main(args) == 0
    assert "First use" not in capsys.readouterr().err
    assert (tmp / "home" / "ledger-archive" / "index.sqlite").exists()


def test_set_total_needs_a_reason_is_an_event_and_never_goes_below_the_spend(files, capsys) -> None:
    tmp, data, schema, led = files
    assert main(release_args(data, schema, led, tmp / "s.csv", "--budget", "2")) == 0
    ds = Ledger(led, create=False).datasets()[0]["dataset_id"]
    base = ["ledger", "set-total", "--ledger", str(led), "--dataset", ds[:10]]
    assert main([*base, "--epsilon", "5"]) == 2
    assert "reason" in capsys.readouterr().err
    assert main([*base, "--epsilon", "0.5", "--reason", "tighten"]) == 2
    assert "below the ε already spent" in capsys.readouterr().err
    assert main([*base, "--epsilon", "5", "--delta", "1e-5", "--reason", "board approved 2026-11"]) == 0
    assert main(["ledger", "--ledger", str(led)]) == 0
    out = capsys.readouterr().out
    assert "ε = 2, δ = 1e-06 → ε = 5, δ = 1e-05  (board approved 2026-11)" in out
    assert main(["ledger", "--ledger", str(led), "--json"]) == 0
    events = json.loads(capsys.readouterr().out)["budget_events"]
    assert [(e["old_epsilon"], e["new_epsilon"], e["reason"]) for e in events] == [
        (None, 2.0, "first total, set when the dataset was registered"), (2.0, 5.0, "board approved 2026-11")]
    # the hex the listing shows after `table:` names the dataset as well (the README's `--dataset 3f2a`)
    assert ":" in ds
    hexpart = ds.partition(":")[2][:6]
    assert main(["ledger", "set-total", "--ledger", str(led), "--dataset", hexpart, "--epsilon", "6",
                 "--reason", "approved by the data owner"]) == 0


def test_a_refusal_names_delta_when_delta_is_exhausted(files, capsys) -> None:
    tmp, data, schema, led = files
    assert main(release_args(data, schema, led, tmp / "s.csv", "--delta", "1e-6", "--budget", "4",
                             "--budget-delta", "1e-6")) == 0
    assert main(release_args(data, schema, led, tmp / "s2.csv", "--delta", "1e-6")) == 2
    err = capsys.readouterr().err
    assert "Not enough δ left" in err and "Remaining: ε = 3, δ = 0" in err and "set-total" in err
    assert "Not enough ε" not in err


KILLED = textwrap.dedent("""
    import os, signal, sys
    from dpsynth import accounting
    from dpsynth.cli import main

    charge = accounting.Ledger.charge
    def charge_then_die(self, *a, **k):
        spend = charge(self, *a, **k)
        os.kill(os.getpid(), signal.SIGKILL)
    accounting.Ledger.charge = charge_then_die
    main(sys.argv[1:])
""")


@pytest.mark.parametrize("engine", ["pandas", "duckdb"])
def test_kill_9_right_after_the_charge_is_listed_as_failed(files, capsys, engine: str) -> None:
    tmp, data, schema, led = files
    proc = subprocess.run([sys.executable, "-c", KILLED, *release_args(data, schema, led, tmp / "s.csv",
                                                                       "--engine", engine)],
                          env=ENV, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    [spend] = Ledger(led, create=False).spends()
    assert main(["archive", "list", "--ledger", str(led), "--json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)
    assert entry["release_id"] == spend.release_id
    assert entry["status"] == "failed" and entry["reason"] == INTERRUPTED_CHARGED and entry["charged"] is True
    assert main(["archive", "get", spend.release_id, "--out", str(tmp / "got"), "--ledger", str(led)]) == 2
    assert "interrupted after the charge" in capsys.readouterr().err


def test_concurrent_cli_releases_are_each_archived(files, capsys) -> None:
    tmp, data, schema, led = files
    Ledger(led, create=False).register("x", PrivacyBudget(1.0))  # another dataset in the same ledger
    procs = [subprocess.Popen([sys.executable, "-m", "dpsynth", *release_args(data, schema, led, tmp / f"s{i}.csv",
                                                                              "--budget", "10")],
                              env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outs
    ids = [re.search(r"Archived as (\S+)", o).group(1) for o, _ in outs]
    assert main(["archive", "list", "--ledger", str(led), "--json"]) == 0
    entries = {e["release_id"]: e for e in json.loads(capsys.readouterr().out)}
    assert set(entries) == set(ids) and all(e["status"] == "complete" for e in entries.values())
    for i, rid in enumerate(ids):
        assert main(["archive", "get", rid, "--out", str(tmp / f"got{i}"), "--ledger", str(led)]) == 0
        assert (tmp / f"got{i}" / "synthetic.csv").read_bytes() == (tmp / f"s{i}.csv").read_bytes()


@pytest.mark.parametrize("method", ["histogram", "marginals"])
def test_archive_get_rows_resamples_without_budget_or_returns_the_original(files, capsys, method: str) -> None:
    import pandas as pd

    tmp, data, schema, led = files
    assert main(release_args(data, schema, led, tmp / "s.csv", "--method", method, "--rows", "300")) == 0
    rid = re.search(r"Archived as (\S+)", capsys.readouterr().out).group(1)
    spent = Ledger(led, create=False).spent(Ledger(led, create=False).datasets()[0]["dataset_id"])
    assert main(["archive", "get", rid, "--out", str(tmp / "same"), "--ledger", str(led), "--rows", "300"]) == 0
    assert (tmp / "same" / "synthetic.csv").read_bytes() == (tmp / "s.csv").read_bytes()
    assert main(["archive", "get", rid, "--out", str(tmp / "more"), "--ledger", str(led), "--rows", "1234"]) == 0
    assert "no privacy budget used" in capsys.readouterr().out
    more = pd.read_csv(tmp / "more" / "synthetic.csv")
    assert len(more) == 1234 and list(more.columns) == list(pd.read_csv(tmp / "s.csv").columns)
    after = Ledger(led, create=False)
    assert after.spent(after.datasets()[0]["dataset_id"]) == spent


@pytest.mark.parametrize("case", ["negative rows", "too many rows", "out is a file"])
def test_archive_get_refuses_before_writing_anything(files, capsys, case: str) -> None:
    tmp, data, schema, led = files
    assert main(release_args(data, schema, led, tmp / "s.csv")) == 0
    rid = re.search(r"Archived as (\S+)", capsys.readouterr().out).group(1)
    out = tmp / "got"
    args = {"negative rows": ["--rows", "-5"], "too many rows": ["--rows", "100000000"], "out is a file": []}[case]
    if case == "out is a file":
        out.write_text("mine", encoding="utf-8")
    assert main(["archive", "get", rid, "--out", str(out), "--ledger", str(led), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("rows" in err or "is a file" in err)
    if case == "out is a file":
        assert out.read_text(encoding="utf-8") == "mine"
    else:
        assert not out.exists()
