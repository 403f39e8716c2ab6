"""The one release pipeline: the same bytes from every engine, interface and input format; refusals before any charge."""

from __future__ import annotations

import io
import json
import sqlite3
import uuid
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpsynth.cli import main
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema


def _table(n: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    age = rng.integers(18, 90, n)
    return pd.DataFrame({
        "age": age,
        "sex": rng.choice(["female", "male"], n, p=[0.4, 0.6]),
        "city": rng.choice(["Paris", "Oslo", "Rome", "Lima"], n),
        "income": np.round(rng.gamma(2.0, 15_000, n) * (age / 50), 2),
        "score": np.round(rng.normal(0.5, 0.2, n), 3),
    })


def _schema() -> Schema:
    return Schema((
        NumericColumn(name="age", lower=18, upper=90, bins=8, integer=True),
        CategoricalColumn(name="sex", categories=("female", "male")),
        CategoricalColumn(name="city", categories=("Paris", "Oslo", "Rome", "Lima")),
        NumericColumn(name="income", lower=0, upper=200_000, bins=10, decimals=2),
        NumericColumn(name="score", lower=-1, upper=2, bins=6),
    ))


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same table as CSV (LF), CSV (CRLF, columns swapped, rows shuffled), Parquet and Excel."""
    d = tmp_path_factory.mktemp("identity")
    df = _table()
    (d / "schema.json").write_text(_schema().to_json(), encoding="utf-8")
    df.to_csv(d / "data.csv", index=False)
    df.to_parquet(d / "data.parquet", index=False)
    df.to_excel(d / "data.xlsx", index=False)
    return {"dir": d, "csv": d / "data.csv", "parquet": d / "data.parquet", "xlsx": d / "data.xlsx",
            "schema": d / "schema.json"}


def _cli_zip(stored: dict[str, Path], source: Path, engine: str, tmp: Path, *extra: str) -> tuple[bytes, bytes]:
    out, z = tmp / f"syn-{engine}-{source.suffix[1:]}.csv", tmp / f"r-{engine}-{source.suffix[1:]}.zip"
    ledger = tmp / f"l-{uuid.uuid4().hex}.sqlite"
    assert main(["ledger", "init", "--ledger", str(ledger)]) == 0
    code = main(["release", str(source), "--schema", str(stored["schema"]), "--epsilon", "1", "--delta", "1e-6",
                 "--seed", "11", "--ledger", str(ledger), "--out", str(out),
                 "--zip-out", str(z), "--engine", engine, *extra])
    assert code == 0
    return out.read_bytes(), z.read_bytes()


def test_the_python_api_chooses_the_method_as_the_command_line_does(stored: dict[str, Path], tmp_path: Path) -> None:
    """With no method given, the API decides it from public inputs as the CLI and the dashboard do ("auto"): on a
    table whose full histogram would be noise (3,840 cells at ε = 1) both release marginals, the same bytes."""
    _, zip0 = _cli_zip(stored, stored["csv"], "pandas", tmp_path)
    import dpsynth

    rel = dpsynth.release(_table(), _schema(), epsilon=1.0, delta=1e-6, seed=11, dataset_label="data",
                          ledger=dpsynth.Ledger(tmp_path / "api.sqlite"))
    card = json.loads(zipfile.ZipFile(io.BytesIO(zip0)).read("card.json"))
    assert card["method"]["name"] == rel.card["method"]["name"] == "marginals"
    assert rel.zip() == zip0


@pytest.mark.parametrize("method", ["histogram", "marginals"])
def test_same_bytes_from_every_engine_and_format(stored: dict[str, Path], tmp_path: Path, method: str) -> None:
    runs = {
        ("pandas", "csv"): _cli_zip(stored, stored["csv"], "pandas", tmp_path, "--method", method),
        ("duckdb", "csv"): _cli_zip(stored, stored["csv"], "duckdb", tmp_path, "--method", method),
        ("pandas", "parquet"): _cli_zip(stored, stored["parquet"], "pandas", tmp_path, "--method", method),
        ("duckdb", "parquet"): _cli_zip(stored, stored["parquet"], "duckdb", tmp_path, "--method", method),
        ("pandas", "xlsx"): _cli_zip(stored, stored["xlsx"], "pandas", tmp_path, "--method", method),
    }
    (syn0, zip0), *rest = runs.values()
    for key, (syn, z) in runs.items():
        assert syn == syn0, f"synthetic file differs on {key}"
        assert z == zip0, f"release zip differs on {key}"
    files = {i.filename: zipfile.ZipFile(io.BytesIO(zip0)).read(i) for i in zipfile.ZipFile(io.BytesIO(zip0)).infolist()}
    assert files["synthetic.csv"] == syn0
    card = json.loads(files["card.json"])
    assert "engine" not in card and card["method"]["name"] == method
    # the Python API gives the same zip for the same seed
    import dpsynth

    rel = dpsynth.release(_table(), _schema(), epsilon=1.0, delta=1e-6, method=method, seed=11, dataset_label="data",
                          ledger=dpsynth.Ledger(tmp_path / "api.sqlite"))
    assert rel.zip() == zip0


def test_same_bytes_with_pair_factors(stored: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model with pair factors (cliques capped at two columns, so pairs lie outside them) gives the
    same bytes on both engines and from both formats, and loads back to its own bytes."""
    from dpsynth.marginals import budget as marginals_budget
    from dpsynth.marginals import fit as marginals_fit
    from dpsynth.release import Release

    monkeypatch.setattr(marginals_budget, "CLIQUE_LIMITS", ((0.0, 100, 2),))
    # this table's columns are nearly independent: apply every measured pair, not only those off the model
    monkeypatch.setattr(marginals_fit, "SKIP_NULL_Z", -1e9)
    a = _cli_zip(stored, stored["csv"], "pandas", tmp_path, "--method", "marginals", "--epsilon", "30", "--budget", "30")
    b = _cli_zip(stored, stored["parquet"], "duckdb", tmp_path, "--method", "marginals", "--epsilon", "30", "--budget", "30")
    assert a == b
    files = {i.filename: zipfile.ZipFile(io.BytesIO(a[1])).read(i) for i in zipfile.ZipFile(io.BytesIO(a[1])).infolist()}
    model = json.loads(files["model.json"])
    assert model.get("factors"), "the release needs pair factors"
    rel = Release.load(tmp_path / "r-pandas-csv.zip")
    assert rel.synthetic_bytes() == a[0] and rel.zip() == a[1]


def test_same_bytes_with_auto_method_and_threshold(stored: dict[str, Path], tmp_path: Path) -> None:
    a = _cli_zip(stored, stored["csv"], "pandas", tmp_path, "--threshold", "3", "--method", "histogram")
    b = _cli_zip(stored, stored["parquet"], "duckdb", tmp_path, "--threshold", "3", "--method", "histogram")
    assert a == b
    a = _cli_zip(stored, stored["csv"], "pandas", tmp_path, "--method", "auto", "--expected-rows", "50000")
    b = _cli_zip(stored, stored["parquet"], "duckdb", tmp_path, "--method", "auto", "--expected-rows", "50000")
    assert a == b


@pytest.mark.parametrize("method", ["histogram", "marginals"])
def test_a_semicolon_csv_with_decimal_commas_releases_the_same_bytes_on_both_engines(
        stored: dict[str, Path], tmp_path: Path, method: str) -> None:
    """The table written the European way (semicolons, decimal commas, a dot grouping thousands) is the same table:
    the same release on either engine as the comma CSV's (the default engine follows the file's size)."""
    d = tmp_path / "euro"
    d.mkdir()
    df = _table().astype(object)
    df["income"] = [f"{v:,.2f}".replace(",", "_").replace(".", ",").replace("_", ".") for v in _table()["income"]]
    df["score"] = [repr(v).replace(".", ",") for v in _table()["score"]]
    text = df.to_csv(index=False, sep=";")
    assert any("." in v and "," in v for v in df["income"])  # e.g. 126.895,90
    (d / "data.csv").write_text(text, encoding="utf-8")
    ref = _cli_zip(stored, stored["csv"], "pandas", tmp_path, "--method", method)
    for engine in ("pandas", "duckdb"):
        assert _cli_zip(stored, d / "data.csv", engine, tmp_path, "--method", method) == ref, engine


def test_spark_counts_to_the_same_bytes(stored: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    a = _cli_zip(stored, stored["parquet"], "pandas", tmp_path)
    b = _cli_zip(stored, stored["parquet"], "spark", tmp_path)
    assert a == b


def test_a_release_loads_back_and_resamples_its_own_bytes(stored: dict[str, Path], tmp_path: Path) -> None:
    from dpsynth.release import Release

    for method in ("histogram", "marginals"):
        syn, z = _cli_zip(stored, stored["csv"], "pandas", tmp_path, "--method", method)
        rel = Release.load(z)
        assert rel.synthetic_bytes() == syn and rel.zip() == z
        out = tmp_path / f"again-{method}.csv"
        assert main(["resample", str(tmp_path / "r-pandas-csv.zip"), "--rows", str(rel.rows), "--out", str(out),
                     "--seed", "1"]) == 0
        assert len(pd.read_csv(out)) == rel.rows


def test_sparse_and_escaped_histograms_resample_from_their_own_files(tmp_path: Path) -> None:
    import dpsynth
    from dpsynth.release import Release

    schema = Schema(tuple(NumericColumn(name=f"v{i}", lower=0, upper=100, bins=100) for i in range(4))  # 10^8 cells
                    + (CategoricalColumn(name="c", categories=("=a", "+b", "-1")),))
    rng = np.random.default_rng(0)
    df = pd.DataFrame({**{f"v{i}": rng.normal(50, 5, 4000).round(1) for i in range(4)},
                       "c": rng.choice(["=a", "+b", "-1"], 4000)})
    rel = dpsynth.release(df, schema, epsilon=2.0, seed=3, threshold=8, method="histogram")
    assert rel.sparse is not None
    back = Release.from_files(rel.files())
    assert back.synthetic_bytes() == rel.synthetic_bytes()
    hist = tmp_path / "h.csv"
    hist.write_bytes(rel.files()["histogram.csv"])
    (tmp_path / "s.json").write_text(schema.to_json(), encoding="utf-8")
    assert main(["resample", str(hist), "--schema", str(tmp_path / "s.json"), "--rows", "50", "--out",
                 str(tmp_path / "o.csv")]) == 0
    small = Schema((CategoricalColumn(name="c", categories=("=a", "+b", "-1")),))
    rel2 = dpsynth.release(df[["c"]], small, epsilon=1.0, seed=1)
    assert Release.from_files(rel2.files()).result.counts.tolist() == rel2.noisy_counts.tolist()


def test_hourly_bins_over_epoch_seconds_have_distinct_labels() -> None:
    import dpsynth

    start = 1_700_000_000
    schema = Schema((NumericColumn(name="t", lower=start, upper=start + 86_400, bins=24),))
    df = pd.DataFrame({"t": np.random.default_rng(0).integers(start, start + 86_400, 500)})
    rel = dpsynth.release(df, schema, epsilon=1.0, seed=1)
    assert rel.histogram["t"].nunique() == 24 and len(rel.files()["histogram.csv"]) > 0


# ---------------------------------------------------------------- refusable inputs: exit 2, one line, nothing charged


def _spent(ledger: Path) -> float:
    if not ledger.exists():
        return 0.0
    with sqlite3.connect(ledger) as con:
        return float(con.execute("SELECT COALESCE(SUM(epsilon), 0) FROM spends").fetchone()[0])


def _catalogue(d: Path) -> dict[str, tuple[list[str], str]]:
    """name → (extra CLI args or a replacement input/schema, what the one line must mention)."""
    bad_values = d / "bad.csv"
    df = _table(200).astype({"income": object})
    df.loc[5, "income"] = "lots"
    df.to_csv(bad_values, index=False)
    unknown = d / "unknown.csv"
    df2 = _table(200)
    df2.loc[3, "city"] = "Atlantis"
    df2.to_csv(unknown, index=False)
    missing_col = d / "missing.csv"
    _table(200).drop(columns=["score"]).to_csv(missing_col, index=False)
    drafted = d / "drafted.json"
    raw = json.loads(_schema().to_json())
    raw["columns"][0]["provenance"] = "data"
    drafted.write_text(json.dumps(raw), encoding="utf-8")
    return {
        "rows over the cap": (["--rows", "60000000"], "rows"),
        "marginals with 1e13 rows": (["--method", "marginals", "--rows", "10000000000000"], "rows"),
        "output in a missing folder": (["--out", str(d / "nope" / "s.csv")], "does not exist"),
        "card in a missing folder": (["--card-out", str(d / "nope" / "card.json")], "does not exist"),
        "zip in a missing folder": (["--zip-out", str(d / "nope" / "r.zip")], "does not exist"),
        "output is a folder": (["--out", str(d)], "folder"),
        "threshold with marginals": (["--method", "marginals", "--threshold", "3"], "threshold"),
        "zero epsilon": (["--epsilon", "0"], "ε"),
        "negative epsilon": (["--epsilon", "-1"], "ε"),
        "ID column on DuckDB": (["--engine", "duckdb", "--id-column", "city"], "--engine pandas"),
        "not a number": (["@input", str(bad_values)], "income"),
        "unknown category": (["@input", str(unknown)], "city"),
        "missing column": (["@input", str(missing_col)], "score"),
        "drafted schema": (["@schema", str(drafted)], "data"),
        "over budget": (["--budget", "0.5"], "budget"),
    }


@pytest.mark.parametrize("engine", ["pandas", "duckdb"])
def test_refusable_inputs_exit_2_with_one_line_and_charge_nothing(stored: dict[str, Path], tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture, engine: str) -> None:
    for name, (extra, mention) in _catalogue(tmp_path).items():
        if engine == "duckdb" and name == "ID column on DuckDB":
            continue
        ledger = tmp_path / f"ledger-{engine}-{abs(hash(name))}.sqlite"
        assert main(["ledger", "init", "--ledger", str(ledger)]) == 0
        source, schema = str(stored["csv"]), str(stored["schema"])
        args = list(extra)
        if args and args[0] == "@input":
            source, args = args[1], []
        elif args and args[0] == "@schema":
            schema, args = args[1], []
        base = ["release", source, "--schema", schema, "--epsilon", "1", "--ledger", str(ledger),
                "--out", str(tmp_path / "o.csv"), "--engine", engine]
        # later options win in argparse: the catalogue's entry overrides the base
        code = main([*base, *args])
        err = capsys.readouterr().err.strip().splitlines()
        errors = [line for line in err if line.startswith("error:")]
        assert code == 2, f"{name}: exit {code}"
        assert len(errors) == 1 and "Traceback" not in "\n".join(err), f"{name}: {err}"
        assert mention.lower() in errors[0].lower(), f"{name}: {errors[0]}"
        assert _spent(ledger) == 0.0, f"{name}: charged"


def test_the_marginals_fit_reads_the_value_models_bin_counts_and_the_card_says_so() -> None:
    """The value model is released before the marginals and its bin counts of every numeric column are
    one-way observations of the fit; with no value model (share 0) there are none."""
    import dpsynth

    df, schema = _table(), _schema()
    rel = dpsynth.release(df, schema, epsilon=1.0, delta=1e-9, method="marginals", seed=4)
    cap = rel.model.params["capacity"]
    assert cap["one_way_observations"] == 3  # age, income, score
    assert "the one-ways of 3 numeric columns also fitted to the value model's released bin counts" in cap["text"]
    from dpsynth.card import card_markdown

    assert cap["text"] in card_markdown(rel.card)
    none = dpsynth.release(df, schema, epsilon=1.0, delta=1e-9, method="marginals", seed=4, value_share=0)
    assert none.values is None
    assert none.model.params["capacity"]["one_way_observations"] == 0
    assert "value model's released bin counts" not in none.model.params["capacity"]["text"]
