"""The command line: release, schema, ledger, resample, preview; bad input exits 2 with one line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsynth.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def files(tmp_path, small_df, small_schema):
    data = tmp_path / "data.csv"
    small_df.to_csv(data, index=False)
    schema = tmp_path / "schema.json"
    schema.write_text(small_schema.to_json())
    for name in ("ledger.sqlite", "l.sqlite", "one.sqlite"):  # a ledger named with --ledger must exist
        assert main(["ledger", "init", "--ledger", str(tmp_path / name)]) == 0
    return tmp_path, data, schema


def test_release_writes_everything_and_charges_ledger(files, capsys):
    tmp, data, schema = files
    led = tmp / "ledger.sqlite"
    code = main(["release", str(data), "--schema", str(schema), "--epsilon", "1", "--out", str(tmp / "s.csv"),
                 "--histogram-out", str(tmp / "h.csv"), "--card-out", str(tmp / "card.json"), "--ledger", str(led),
                 "--budget", "2", "--seed", "1"])
    assert code == 0
    synth = pd.read_csv(tmp / "s.csv")
    assert list(synth.columns) == ["age", "colour"]
    assert len(pd.read_csv(tmp / "h.csv")) == 20
    card = json.loads((tmp / "card.json").read_text())
    assert card["privacy"]["epsilon"] == 1.0
    assert (tmp / "card.md").exists()
    assert main(["ledger", "--ledger", str(led)]) == 0
    out = capsys.readouterr().out
    assert "spent ε = 1 of 2" in out
    # the second and third releases: 1 + 1 fits, a third does not
    assert main(["release", str(data), "--schema", str(schema), "--epsilon", "1", "--out", str(tmp / "s2.csv"),
                 "--ledger", str(led)]) == 0
    assert main(["release", str(data), "--schema", str(schema), "--epsilon", "0.5", "--out", str(tmp / "s3.csv"),
                 "--ledger", str(led)]) == 2
    err = capsys.readouterr().err
    assert "exceeding the privacy budget" in err
    assert not (tmp / "s3.csv").exists()


def test_resample_from_released_histogram(files):
    tmp, data, schema = files
    main(["release", str(data), "--schema", str(schema), "--epsilon", "1", "--out", str(tmp / "s.csv"),
          "--histogram-out", str(tmp / "h.csv"), "--ledger", str(tmp / "l.sqlite"), "--seed", "2"])
    assert main(["resample", str(tmp / "h.csv"), "--schema", str(schema), "--rows", "777", "--out", str(tmp / "r.csv")]) == 0
    assert len(pd.read_csv(tmp / "r.csv")) == 777


def test_schema_draft_warns(files, capsys):
    tmp, data, _ = files
    assert main(["schema", str(data), "--out", str(tmp / "draft.json")]) == 0
    assert "NOT private" in capsys.readouterr().err
    draft = json.loads((tmp / "draft.json").read_text())
    assert all(c["provenance"] == "data" for c in draft["columns"])


def test_preview_touches_no_data(files, capsys):
    _, _, schema = files
    assert main(["preview", "--schema", str(schema), "--epsilon", "1", "--expected-rows", "30"]) == 0
    out = capsys.readouterr().out
    assert "20 cells" in out and "warning" in out


@pytest.mark.parametrize("flags", [[], ["--delta", "1e-6"], ["--mechanism", "laplace", "--rows", "40"],
                                   ["--delta", "1e-6", "--method", "histogram", "--threshold", "2"]])
def test_preview_states_the_noise_the_release_then_adds(files, capsys, flags):
    """The same flags give the preview and the release the same per-cell noise (the value model's share of ε
    comes off first; before, the preview stated the noise of the whole ε)."""
    tmp, data, schema = files
    assert main(["preview", "--schema", str(schema), "--epsilon", "1", *flags]) == 0
    stated = float(re.search(r"standard deviation ([0-9.]+) per cell", capsys.readouterr().out).group(1))
    assert main(["release", str(data), "--schema", str(schema), "--epsilon", "1", "--out", str(tmp / "s.csv"),
                 "--card-out", str(tmp / "c.json"), "--ledger", str(tmp / "one.sqlite"), "--seed", "1", *flags]) == 0
    card = json.loads((tmp / "c.json").read_text())
    assert stated == pytest.approx(card["mechanism"]["noise_std"], abs=0.005)


@pytest.mark.parametrize("content, fragment", [
    (b"", "empty"),
    (b"age,colour\n1,red\n2,red,extra\n", "Expected 2 fields"),
    (b"age,colour\n\xff\xfe\xfa,red\n", "not UTF-8"),
    (b"age,colour\n5,purple\n", "purple"),
])
def test_bad_input_exits_2_with_one_line(files, capsys, content, fragment):
    tmp, _, schema = files
    bad = tmp / "bad.csv"
    bad.write_bytes(content)
    code = main(["release", str(bad), "--schema", str(schema), "--epsilon", "1", "--out", str(tmp / "o.csv"),
                 "--ledger", str(tmp / "l.sqlite")])
    err = capsys.readouterr().err
    assert code == 2
    assert fragment in err
    assert "Traceback" not in err
    assert len([ln for ln in err.splitlines() if ln.startswith("error:")]) == 1


def test_module_entry_point_no_traceback(tmp_path):
    out = subprocess.run([sys.executable, "-m", "dpsynth", "release", str(tmp_path / "nope.csv"), "--schema",
                          str(tmp_path / "nope.json"), "--epsilon", "1", "--out", str(tmp_path / "o.csv")],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2
    assert "does not exist" in out.stderr and "Traceback" not in out.stderr


def test_same_file_has_one_budget_across_engines(files):
    """pandas and DuckDB engines key the ledger by the table's identity: no second budget by switching engine."""
    from dpsynth.accounting import Ledger
    from dpsynth.identity import table_identity

    tmp, data, schema = files
    led = tmp / "one.sqlite"
    base = ["release", str(data), "--schema", str(schema), "--epsilon", "1", "--ledger", str(led), "--budget", "1.5"]
    assert main([*base, "--out", str(tmp / "a.csv"), "--engine", "pandas"]) == 0
    assert main([*base, "--out", str(tmp / "b.csv"), "--engine", "duckdb"]) == 2
    ledger = Ledger(led, create=False)
    assert [d["dataset_id"] for d in ledger.datasets()] == [table_identity(data)]


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_auto_engine_counts_on_duckdb_what_memory_cannot_hold(files, monkeypatch, capsys, kind: str):
    """A file under 50 MB with more rows than memory takes was refused by the automatic engine ('use the command
    line with the DuckDB engine') while a larger file of the same rows was released: now it is counted on DuckDB,
    the same release as --engine duckdb, and nothing is charged before."""
    import zipfile

    import dpsynth.io as dio

    tmp, data, schema = files
    if kind == "parquet":
        src = tmp / "d.parquet"
        pd.read_csv(data).to_parquet(src, index=False)
        data = src
    rows = len(pd.read_csv(data)) if kind == "csv" else len(pd.read_parquet(data))
    real = dio.Limits
    monkeypatch.setattr(dio, "Limits", lambda: real(max_rows=rows - 1))
    base = ["release", str(data), "--schema", str(schema), "--epsilon", "1", "--seed", "4", "--method", "marginals"]
    for name in ("a", "b", "c"):
        assert main(["ledger", "init", "--ledger", str(tmp / f"{name}.sqlite")]) == 0
    assert main([*base, "--out", str(tmp / "a.csv"), "--zip-out", str(tmp / "a.zip"), "--ledger", str(tmp / "a.sqlite")]) == 0
    assert "Counting it on the DuckDB engine instead" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp / "b.csv"), "--zip-out", str(tmp / "b.zip"), "--ledger", str(tmp / "b.sqlite"),
                 "--engine", "duckdb"]) == 0
    a, b = zipfile.ZipFile(tmp / "a.zip"), zipfile.ZipFile(tmp / "b.zip")
    assert {n: a.read(n) for n in a.namelist()} == {n: b.read(n) for n in b.namelist()}
    assert main([*base, "--out", str(tmp / "c.csv"), "--ledger", str(tmp / "c.sqlite"), "--engine", "pandas"]) == 2
    from dpsynth.accounting import Ledger

    assert Ledger(tmp / "c.sqlite", create=False).spends() == []


@pytest.mark.parametrize("engine", ["auto", "pandas", "duckdb"])
def test_id_column_past_memory_names_the_limit_not_a_dead_end(files, monkeypatch, capsys, engine: str):
    """Several rows per person are bounded in memory only: a table past the in-memory limits once got 'use the
    command line with the DuckDB engine', which refuses an ID column. Now the refusal says why and what works,
    and nothing is charged."""
    import dpsynth.io as dio
    from dpsynth.accounting import Ledger

    tmp, data, schema = files
    df = pd.read_csv(data)
    df.insert(0, "person", np.arange(len(df)) // 2)
    df.to_csv(data, index=False)
    real = dio.Limits
    monkeypatch.setattr(dio, "Limits", lambda: real(max_rows=len(df) - 1))
    code = main(["release", str(data), "--schema", str(schema), "--epsilon", "1", "--seed", "4", "--id-column",
                 "person", "--max-rows-per-person", "2", "--out", str(tmp / "s.csv"), "--ledger",
                 str(tmp / "l.sqlite"), "--engine", engine])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "row per record" in err and ("sample of people" in err if engine != "duckdb" else "pandas engine" in err)
    assert "use the command line with the DuckDB engine" not in err
    assert Ledger(tmp / "l.sqlite", create=False).spends() == [] and not (tmp / "s.csv").exists()


def test_id_column_with_the_automatic_engine_counts_a_big_file_in_memory(files, monkeypatch, capsys):
    """The automatic engine picks DuckDB for a big file, which counts one row per record: with an ID column it
    stays in memory (the release is the same on every engine) instead of refusing a file that fits there."""
    import dpsynth.engines as eng

    tmp, data, schema = files
    df = pd.read_csv(data)
    df.insert(0, "person", np.arange(len(df)) // 2)
    df.to_csv(data, index=False)
    monkeypatch.setattr(eng, "default_engine", lambda path: "duckdb")
    assert main(["release", str(data), "--schema", str(schema), "--epsilon", "1", "--seed", "4", "--id-column",
                 "person", "--max-rows-per-person", "2", "--out", str(tmp / "s.csv"), "--ledger",
                 str(tmp / "l.sqlite")]) == 0
    assert "counted on the pandas engine" in capsys.readouterr().out


def test_marginals_release_and_resample_from_model(files):
    tmp, data, schema = files
    assert main(["release", str(data), "--schema", str(schema), "--epsilon", "1", "--method", "marginals",
                 "--out", str(tmp / "s.csv"), "--model-out", str(tmp / "m.json"), "--histogram-out", str(tmp / "marg.csv"),
                 "--card-out", str(tmp / "c.json"), "--ledger", str(tmp / "l.sqlite"), "--seed", "3"]) == 0
    card = json.loads((tmp / "c.json").read_text())
    assert card["method"]["name"] == "marginals"
    assert "marginal" in pd.read_csv(tmp / "marg.csv").columns
    assert main(["resample", str(tmp / "m.json"), "--schema", str(schema), "--rows", "321", "--out", str(tmp / "r.csv")]) == 0
    r = pd.read_csv(tmp / "r.csv")
    assert len(r) == 321 and r["age"].between(0, 100).all()


def test_out_and_zip_out_draw_the_synthetic_rows_once(files, monkeypatch):
    """--out with --zip-out: the rows are drawn once and the zip holds the file's very bytes."""
    import zipfile

    from dpsynth.release import Release

    drawn = []
    real = Release.sampler

    def sampler(self, *args, **kwargs):
        drawn.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Release, "sampler", sampler)
    tmp, data, schema = files
    assert main(["release", str(data), "--schema", str(schema), "--epsilon", "1", "--method", "marginals",
                 "--out", str(tmp / "s.csv"), "--zip-out", str(tmp / "r.zip"), "--ledger", str(tmp / "l.sqlite"),
                 "--seed", "3"]) == 0
    with zipfile.ZipFile(tmp / "r.zip") as z:
        assert z.read("synthetic.csv") == (tmp / "s.csv").read_bytes()
    assert len(drawn) == 1


def test_out_of_memory_is_one_line_not_a_traceback(files, capsys, monkeypatch):
    """An allocation failure while writing (e.g. under ulimit -v) exits 2 with one line saying the spend stays."""
    import pyarrow as pa

    import dpsynth.writer as output

    def fail(*_a, **_k):
        raise pa.ArrowMemoryError("malloc of size 4194304 failed")

    monkeypatch.setattr(output, "write_synthetic_csv", fail)
    tmp, data, schema = files
    code = main(["release", str(data), "--schema", str(schema), "--epsilon", "1", "--out", str(tmp / "o.csv"),
                 "--engine", "duckdb", "--ledger", str(tmp / "l.sqlite")])
    err = capsys.readouterr().err
    assert code == 2 and "out of memory" in err and "malloc of size" in err and "Traceback" not in err
    assert "stays recorded" in err


@pytest.mark.parametrize("flags, fragment", [(["--epsilon", "1e-9"], "below 0.0001"),
                                             (["--epsilon", "1", "--delta", "5e-324"], "Use δ = 0")])
def test_preview_refuses_what_the_release_refuses(files, capsys, flags, fragment):
    """A budget the release refuses before any charge gets the same one-line refusal from the preview, instead of a
    forecast (ε = 10⁻⁹) or a message about an infinite ε (δ = 5e-324)."""
    tmp, data, schema = files
    assert main(["preview", "--schema", str(schema), *flags]) == 2
    assert fragment in capsys.readouterr().err
    assert main(["release", str(data), "--schema", str(schema), *flags, "--out", str(tmp / "s.csv"),
                 "--ledger", str(tmp / "one.sqlite")]) == 2
    assert fragment in capsys.readouterr().err


def test_preview_at_the_smallest_epsilon_says_the_columns_come_out_independent(files, capsys):
    """Three columns at ε = 10⁻⁴: the plan buys no pair, and the preview says so instead of '0 tables of two columns,
    each count off by about ±inf'."""
    tmp, _, _ = files
    schema = tmp / "three.json"
    schema.write_text(json.dumps({"columns": [
        {"name": "age", "type": "numeric", "lower": 0, "upper": 100, "bins": 10, "integer": True},
        {"name": "c", "type": "categorical", "categories": ["a", "b"]},
        {"name": "x", "type": "numeric", "lower": 0, "upper": 10, "bins": 5}]}))
    assert main(["preview", "--schema", str(schema), "--epsilon", "1e-4", "--method", "marginals"]) == 0
    out = capsys.readouterr().out
    assert "±inf" not in out and "no table of two columns" in out


@pytest.mark.parametrize("flags, fragment", [
    (["--out", "o.csv", "--histogram-out", "o.csv"], "synthetic and tables outputs are the same file"),
    (["--out", "o.csv", "--histogram-out", "./sub/../o.csv"], "same file"),
    (["--out", "o.csv", "--card-out", "c.md"], "card and card summary (.md) outputs are the same file"),
    (["--out", "c.md", "--card-out", "c.json"], "synthetic and card summary (.md) outputs"),
    (["--out", "o.xlsx"], "must end in .csv or .parquet"),
    (["--out", "o"], "must end in .csv or .parquet"),
    (["--out", "o.csv", "--model-out", "m.json", "--method", "histogram"], "model output applies to the marginals"),
    (["--out", "data.csv"], "would overwrite"),  # the real table itself
    (["--out", "o.csv", "--card-out", "schema.json"], "would overwrite"),
    (["--out", "o.csv", "--histogram-out", "one.sqlite"], "would overwrite"),  # the budget's record
])
def test_outputs_that_would_clobber_or_mislabel_are_refused_before_any_charge(files, capsys, monkeypatch, flags,
                                                                               fragment):
    """Two outputs naming one file wrote one over the other (the synthetic rows lost to the histogram), a synthetic
    table named .xlsx held CSV text, and a model output for a histogram release was silently not written: each was
    a charged release."""
    tmp, data, schema = files
    (tmp / "sub").mkdir()
    monkeypatch.chdir(tmp)
    led = tmp / "one.sqlite"
    kept = {p: p.read_bytes() for p in (data, schema)}
    assert main(["release", str(data), "--schema", str(schema), "--epsilon", "1", *flags, "--ledger", str(led)]) == 2
    assert fragment in capsys.readouterr().err
    assert "ε = 1" not in _ledger_text(led)
    assert {p: p.read_bytes() for p in kept} == kept


def _ledger_text(led: Path) -> str:
    from dpsynth.accounting import Ledger

    return " ".join(f"ε = {s.epsilon:g}" for s in Ledger(led, create=False).spends())
