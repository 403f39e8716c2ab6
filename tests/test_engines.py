"""Counting engines give the counts, report and errors of dpsynth.binning.encode exactly."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsynth.binning import encode
from dpsynth.engines import CellCounts, default_engine, get_engine
from dpsynth.errors import InputError
from dpsynth.histogram import cell_index
from dpsynth.identity import table_identity
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema


def edge_schema(policy: str = "missing") -> Schema:
    return Schema((
        # edges that are not exact decimals: lower + j·h rounds differently from j·h
        NumericColumn(name="x", lower=-0.3, upper=0.7, bins=7, missing=True),
        NumericColumn(name="age", lower=16, upper=96, bins=10, integer=True),
        CategoricalColumn(name="colour", categories=("red", "green", "it's, \"blue\""), missing=True,
                          on_unknown=policy),
        NumericColumn(name="w", lower=1e-3, upper=1e3, bins=13),
    ))


def edge_table(n: int = 3000, seed: int = 5) -> pd.DataFrame:
    """Text cells: values on every edge and one ulp either side, below/above the bounds, blanks, unknowns."""
    rng = np.random.default_rng(seed)
    sch = edge_schema()
    cols = {}
    for col in (sch.column("x"), sch.column("age"), sch.column("w")):
        e = col.edges()
        special = np.concatenate([e, np.nextafter(e, -np.inf), np.nextafter(e, np.inf),
                                  [col.lower - 1, col.upper + 1, col.upper * 10]])
        body = rng.uniform(col.lower - 0.2 * (col.upper - col.lower), col.upper + 0.2 * (col.upper - col.lower), n)
        vals = np.concatenate([special, body])[:n]
        text = np.array([repr(float(v)) for v in vals], dtype=object)
        if col.integer:
            text = np.where(rng.random(n) < 0.5, np.array([str(int(round(v))) for v in vals], dtype=object), text)
        cols[col.name] = text
    cols["x"][rng.random(n) < 0.05] = ""
    cols["x"][7] = "  0.1 "
    cols["x"][8] = "+.5e-1"
    cols["colour"] = rng.choice(["red", "green", "it's, \"blue\"", "", "  ", "purple", "Red"], n,
                                p=[0.4, 0.2, 0.2, 0.05, 0.05, 0.05, 0.05]).astype(object)
    df = pd.DataFrame(cols)
    df["age"] = df["age"].astype(object)
    return df[["x", "age", "colour", "w"]]


def reference(df: pd.DataFrame, schema: Schema) -> CellCounts:
    enc = encode(df, schema)
    return CellCounts.from_cell_index(cell_index(enc.codes, schema.sizes), schema, enc.report)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    d = tmp_path_factory.mktemp("engines")
    df = edge_table()
    csv, pq = d / "t.csv", d / "t.parquet"
    df.to_csv(csv, index=False)
    df.to_parquet(pq, index=False)
    return {"df": df, "csv": csv, "parquet": pq}


@pytest.mark.parametrize("policy", ["missing", "drop"])
@pytest.mark.parametrize("kind", ["df", "csv", "parquet"])
def test_duckdb_matches_encode_on_edges(files: dict, kind: str, policy: str) -> None:
    schema = edge_schema(policy)
    ref = reference(files["df"], schema)
    got = get_engine("duckdb").count(files[kind], schema)
    assert not got.is_sparse
    np.testing.assert_array_equal(got.dense, ref.dense)
    assert got.report == ref.report
    assert got.report.columns[0].clamped_low > 0 and got.report.columns[0].clamped_high > 0
    assert (got.report.rows_dropped > 0) == (policy == "drop")


def test_value_on_upper_goes_to_last_bin_and_edges_split_right() -> None:
    col = NumericColumn(name="v", lower=-0.3, upper=0.7, bins=7)
    e = col.edges()
    df = pd.DataFrame({"v": [repr(float(v)) for v in e]})
    got = get_engine("duckdb").count(df, Schema((col,))).dense
    # each inner edge opens its bin (side='right'); lower → bin 0; upper → last bin
    np.testing.assert_array_equal(got, [1, 1, 1, 1, 1, 1, 2])


def test_typed_parquet_columns(tmp_path) -> None:
    rng = np.random.default_rng(1)
    n = 2000
    df = pd.DataFrame({
        "f": np.where(rng.random(n) < 0.1, np.nan, rng.normal(50, 30, n)),
        "i": pd.array(np.where(rng.random(n) < 0.1, None, rng.integers(-5, 120, n)), dtype="Int64"),
        "c": pd.Series(np.where(rng.random(n) < 0.1, None, rng.choice(["a", "b", "z"], n)), dtype=object),
    })
    schema = Schema((
        NumericColumn(name="f", lower=0, upper=100, bins=9, missing=True),
        NumericColumn(name="i", lower=0, upper=100, bins=4, integer=True, missing=True),
        CategoricalColumn(name="c", categories=("a", "b"), missing=True, on_unknown="missing"),
    ))
    path = tmp_path / "typed.parquet"
    df.to_parquet(path, index=False)
    ref = reference(df, schema)
    for src in (path, df):
        got = get_engine("duckdb").count(src, schema)
        np.testing.assert_array_equal(got.dense, ref.dense)
        assert got.report == ref.report


def test_sparse_output_for_large_domains(files: dict) -> None:
    schema = edge_schema()
    ref = reference(files["df"], schema)
    for name in ("pandas", "duckdb"):
        got = get_engine(name).count(files["csv"], schema, max_dense_cells=10)
        assert got.is_sparse
        idx, cnt = ref.occupied()
        np.testing.assert_array_equal(got.cells, idx)
        np.testing.assert_array_equal(got.counts, cnt)
        np.testing.assert_array_equal(got.to_dense(), ref.dense)


def _error(fn) -> str:
    with pytest.raises(InputError) as info:
        fn()
    return str(info.value)


@pytest.mark.parametrize("case", ["not_a_number", "nan_text", "infinite", "empty", "unknown", "cat_empty"])
def test_errors_match_encode(case: str, tmp_path) -> None:
    n = 50
    x = np.array([str(v) for v in range(n)], dtype=object)
    c = np.array(["a"] * n, dtype=object)
    num = NumericColumn(name="num col", lower=0, upper=10, bins=2)
    cat = CategoricalColumn(name="cat", categories=("a", "b"))
    if case == "not_a_number":
        x[[3, 9, 11]] = ["12x", " abc ", "1_000"]
    elif case == "nan_text":
        x[4] = "NaN"
    elif case == "infinite":
        x[[5, 6]] = ["inf", "-1e999"]
    elif case == "empty":
        x[[2, 40]] = ""
    elif case == "unknown":
        c[[1, 2, 30]] = ["zz", "b ", "zz"]
    else:
        c[17] = ""
    df = pd.DataFrame({"num col": x, "cat": c})
    csv = tmp_path / "e.csv"
    df.to_csv(csv, index=False)
    schema = Schema((num, cat))
    expected = _error(lambda: encode(pd.read_csv(csv, dtype=str, keep_default_na=False, na_values=[""]), schema))
    assert "num col" in expected or "'cat'" in expected
    assert _error(lambda: get_engine("duckdb").count(csv, schema)) == expected
    assert _error(lambda: get_engine("duckdb").count(df, schema)) == expected
    assert _error(lambda: get_engine("pandas").count(csv, schema)) == expected


def test_missing_column_and_bool_column(tmp_path) -> None:
    df = pd.DataFrame({"flag": [True, False, True], "a": ["1", "2", "3"]})
    path = tmp_path / "b.parquet"
    df.to_parquet(path, index=False)
    schema = Schema((NumericColumn(name="flag", lower=0, upper=1, bins=2),))
    assert _error(lambda: get_engine("duckdb").count(path, schema)) == _error(lambda: encode(df, schema))
    schema2 = Schema((NumericColumn(name="nope", lower=0, upper=1, bins=2),))
    assert _error(lambda: get_engine("duckdb").count(path, schema2)) == _error(lambda: encode(df, schema2))
    assert "does not exist" in _error(lambda: get_engine("duckdb").count(tmp_path / "absent.csv", schema))


def test_ragged_csv_is_an_input_error(tmp_path) -> None:
    path = tmp_path / "r.csv"
    path.write_text("a,b\n1,2\n3,4,5\n", encoding="utf-8")
    msg = _error(lambda: get_engine("duckdb").count(path, Schema((NumericColumn(name="a", lower=0, upper=9, bins=3),))))
    assert "r.csv" in msg


@pytest.mark.parametrize(("text", "needle"), [
    ("age, sex \n30,F\n40,M\n", "' sex ' for 'sex'"),  # DuckDB alone would trim the header's spaces
    ("AGE,sex\n30,F\n40,M\n", "'AGE' for 'age'"),
    ("age,sex,sex\n30,F,F\n40,M,M\n", "two columns named 'sex'"),  # DuckDB alone would rename one
    ("age,sex\n", "has a header but no data rows"),  # DuckDB alone would count no rows and release
    ("age;sex\n30;F\n40;M\n", None),
    ("\ufeffage,sex\n30,F\n40,M\n", None),
    ("age,sex\n30,F\x00\n40,M\n", "contains a NUL byte on line 2"),  # DuckDB alone would read the NUL as text
    ("age,sex\n30,F\n40,M\n".encode("utf-16"), None),  # DuckDB alone would refuse it
    ("age,sex\n30,F\n4\u00e9,M\n".encode("latin-1"), "byte 0xe9 on line 3"),
    # decimal commas in a file not delimited by commas are numbers, cell by cell (DuckDB alone refused them)
    ("age;sex\n30,5;F\n1.030,5;M\n-2,0;F\n", None),
    ("age\tsex\n30,5\tF\n45\tM\n", None),
    ("age,sex\n30,F\n\n40,M,5\n", "but row 2 has 3"),  # DuckDB alone: "Error when sniffing file"
    # a no-break space is no padding on any engine (pandas alone stripped it: released there, refused here)
    ("age,sex\n\u00a030,F\n40,M\n", "are not numbers (row 1"),
    ("age,sex\n30,\u00a0\n40,M\n", "not in its category list (first at row 1"),
    ("age,Age,sex\n30,1,F\n40,2,M\n", "differ only in case"),  # both engines failed in DuckDB's binder
    # text after a closing quote: read as 'Fx' in memory, "Error when sniffing file" from DuckDB
    ("age,sex\n30,\"F\"x\n40,M\n", "line 2 is not well-formed CSV"),
    ("age,sex\n30,F\n40,M\n41,12\" M\n", "not in its category list"),  # an inch mark is text, alike
    # spaces beside quotes: DuckDB read ' "F"' and '"F" ' as 'F' (after one space before; after two, the text),
    # pyarrow read the text ' "F"' and refused '"F" '; a quote closing early ("x,"y) was 'x,y' in memory
    ("age,sex\n30, \"F\"\n40,M\n", "line 2 has a value with spaces before its opening quote"),
    ("age,sex\n30,F\n40,  \"M\"\n", "line 3 has a value with spaces before its opening quote"),
    ("age,sex\r\n30,F\r\n40, \"\"\r\n", "line 3 has a value with spaces before its opening quote"),
    ("age,sex\n30,\"F\" \n40,M\n", "line 2 is not well-formed CSV"),
    ("age,sex\n30,\"F,\"M\n", "line 2 is not well-formed CSV"),
    ("age,sex\n30,F\n40, \"M\"\n41,\"F", "unclosed quote: the quote that opens a value on line 4"),
    ("age,sex\n30,\"F\"\n40,\"M\"\"\"\n", "not in its category list"),  # a doubled quote inside: alike
    (" age,sex\n30,F\n", "' age' for 'age'"),
    ("age,sex\n30,\"he said, \"\"hi\"\"\"\n", "not in its category list"),
    # lines ending in two ways: DuckDB refused the file ('Error when sniffing file') or misread it, pyarrow read it
    ("age,sex\n30,F\r\n40,M\r\n", "line 1 ends with LF (Unix) and line 2 with CRLF (Windows)"),
    ("age,sex\r\n30,F\r\n40,M\n41,F\r\n", "line 1 ends with CRLF (Windows) and line 3 with LF (Unix)"),
    ("age,sex\r\n30,\"F\nx\"\r\n40,M\r\n", "not in its category list"),  # a line feed inside a value is text
    # a trailing delimiter gives a row one field too many: DuckDB alone dropped the empty field and released it
    ("age,sex\n30,F,\n40,M\n", "but row 1 has 3"),
    ("age,sex\n30,F\n40,M,", "but row 2 has 3"),
    ("age,sex\r\n30,F\r\n40,M,\r\n", "but row 2 has 3"),
    # a row of one quoted value: pyarrow's message guessed 'an unclosed quote starting in row 2'
    ("age,sex\n30,F\n\"\"\n", "but row 2 has 1"),
    # a cell longer than read_table's limit, in the schema or beside it: DuckDB alone counted the row
    pytest.param("age,sex\n30,F\n40," + "M" * 10_001 + "\n", "a cell of column 'sex' (row 2) is longer than 10,000"
                 " characters", id="a long cell"),
    pytest.param("age,sex,note\n30,F,x\n40,M," + "y" * 10_001 + "\n41,F," + "z" * 10_002 + "\n",
                 "a cell of column 'note' (row 3) is longer than 10,000 characters", id="a long cell outside the schema"),
    pytest.param("age,sex,note\n30,F," + "\u00e9" * 10_000 + "\n", None, id="20,000 bytes in 10,000 characters"),
    (b"\xfe\xff" + "age,sex\n30,F\n40,M\n".encode("utf-16-be"), "big-endian UTF-16"),  # DuckDB alone refused it
])
def test_a_csv_file_has_the_same_columns_and_refusals_on_both_engines(tmp_path, text: str | bytes,
                                                                      needle: str | None) -> None:
    """The header is read and checked once, as dpsynth.io.read_table does, whichever engine counts (the default
    engine follows the file's size, which must not change what is released or refused)."""
    from dpsynth.io import read_table

    path = tmp_path / "t.csv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    schema = Schema((NumericColumn(name="age", lower=0, upper=100, bins=10),
                     CategoricalColumn(name="sex", categories=("F", "M"))))

    def in_memory() -> CellCounts:
        enc = encode(read_table(path), schema)
        return CellCounts.from_cell_index(cell_index(enc.codes, schema.sizes), schema, enc.report)

    if needle is None:
        assert np.array_equal(get_engine("duckdb").count(path, schema).to_dense(), in_memory().to_dense())
    else:
        msg = _error(lambda: get_engine("duckdb").count(path, schema))
        assert needle in msg and msg == _error(in_memory)


def test_a_csv_file_reads_alike_on_spark(tmp_path) -> None:
    """Spark reads a CSV file as read_table does: its delimiter, exact names, byte checks and decimal commas; a ragged
    row is read_table's message, not a Py4JJavaError traceback from Spark's FAILFAST mode."""
    pytest.importorskip("pyspark")
    from dpsynth.io import read_table

    schema = Schema((NumericColumn(name="age", lower=0, upper=100, bins=10, missing=True),
                     CategoricalColumn(name="sex", categories=("F", "M"), missing=True)))
    spark = get_engine("spark")
    for i, data in enumerate([b"age, sex \n30,F\n", b"age,sex,sex\n30,F,F\n", b"age,sex\n", b"age;sex\n30,5;F\n1.030,5;M\n",
                              b"age\tsex\n30,5\tF\n", b"age,sex\n30,F\x00\n", "age,sex\n30,F\n".encode("utf-16"),
                              b'age,sex\n,F\n40,""\n', b"age,sex\n30,F\n40\n", b"age,sex\n30, \"F\"\n",
                              b"age,sex,note\n30,F,a\n40,M," + b"y" * 10_001 + b"\n"]):
        path = tmp_path / f"s{i}.csv"
        path.write_bytes(data)

        def in_memory(path: Path = path) -> CellCounts:
            enc = encode(read_table(path), schema)
            return CellCounts.from_cell_index(cell_index(enc.codes, schema.sizes), schema, enc.report)

        got = []
        for count in (in_memory, lambda path=path: spark.count(path, schema)):
            try:
                got.append(count().to_dense().tolist())
            except InputError as exc:
                got.append(str(exc))
        assert got[0] == got[1], data


def test_decimal_commas_and_grouped_numbers_read_alike_on_both_engines(tmp_path) -> None:
    """Every cell form read_table turns into a number in a semicolon file, categories included, counts alike."""
    cells = ["3,5", "-2,25", "+1,0", "1.234,5", "12.345", "1,2,3", "1.23", " 4,5", "7", "1.2345,6", "0,5", ""]
    rng = np.random.default_rng(3)
    age = rng.choice(cells, 400)
    label = rng.choice(["1,5", "2.000", "x", "1,5 "], 400)
    path = tmp_path / "d.csv"
    path.write_text("age;label\n" + "".join(f"{a};{b}\n" for a, b in zip(age, label, strict=True)), encoding="utf-8")
    schema = Schema((NumericColumn(name="age", lower=-10, upper=20_000, bins=40, missing=True),
                     CategoricalColumn(name="label", categories=("1.5", "2000"), missing=True, on_unknown="missing")))
    from dpsynth.io import read_table

    try:
        enc = encode(read_table(path), schema)
        mem: object = CellCounts.from_cell_index(cell_index(enc.codes, schema.sizes), schema, enc.report).to_dense().tolist()
    except InputError as exc:
        mem = str(exc)
    try:
        duck: object = get_engine("duckdb").count(path, schema).to_dense().tolist()
    except InputError as exc:
        duck = str(exc)
    assert duck == mem


def test_progress_is_reported(files: dict) -> None:
    seen: list[float] = []
    get_engine("duckdb").count(files["csv"], edge_schema(), progress=lambda f, _m: seen.append(f))
    assert seen and seen[-1] == 1.0 and all(0.0 <= f <= 1.0 for f in seen)


def test_engine_choice(tmp_path) -> None:
    small = tmp_path / "s.csv"
    small.write_text("a\n1\n", encoding="utf-8")
    assert default_engine(small) == "pandas"
    assert default_engine(small, threshold_bytes=1) == "duckdb"
    assert "Unknown engine" in _error(lambda: get_engine("polars"))


def test_spark_missing_gives_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    from dpsynth.engines.spark_engine import SparkEngine

    msg = _error(lambda: SparkEngine().count("x.csv", edge_schema()))
    assert "pip install pyspark" in msg


@pytest.mark.slow
def test_spark_local_mode_matches_encode(files: dict) -> None:
    """One Spark session (local mode; JVM start-up dominates): CSV, Parquet, and an error message."""
    engine = get_engine("spark", master="local[1]")
    try:
        for policy in ("missing", "drop"):
            schema = edge_schema(policy)
            ref = reference(files["df"], schema)
            for kind in ("csv", "parquet"):
                got = engine.count(files[kind], schema)
                np.testing.assert_array_equal(got.dense, ref.dense)
                assert got.report == ref.report
        bad = files["df"].copy()
        bad.loc[[4, 9], "age"] = ["forty", "12,5"]
        schema = edge_schema()
        assert _error(lambda: engine.count(bad, schema)) == _error(lambda: encode(bad, schema))
    finally:
        engine.spark.stop()


# ---- integration: release_from_source, the fast CSV writer, the CLI -------------------------------

def small_schema_for_release() -> Schema:
    return Schema((
        NumericColumn(name="x", lower=-0.3, upper=0.7, bins=7, missing=True),
        CategoricalColumn(name="colour", categories=("red", "green", "=sum(A1)"), missing=True, on_unknown="missing"),
    ))


def test_release_from_source_dense_with_ledger(files: dict, tmp_path) -> None:
    from dpsynth.accounting import Ledger
    from dpsynth.release import release_from_source

    ledger = Ledger(tmp_path / "l.sqlite")
    out = tmp_path / "syn.csv"
    rel = release_from_source(files["csv"], small_schema_for_release(), epsilon=1.0, seed=3, ledger=ledger,
                              dataset_label="t", synthetic_path=out)
    assert "engine" not in rel.card and rel.card["method"]["name"] == "histogram"  # the engine never shows
    assert len(rel.histogram) == small_schema_for_release().n_cells and rel.sparse is None
    syn = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert len(syn) == rel.card["post_processing"]["synthetic_rows"] == max(0, int(rel.noisy_counts.sum()))
    assert set(syn["colour"]) <= {"red", "green", "'=sum(A1)", ""}  # formula-like label escaped
    x = pd.to_numeric(syn["x"].replace("", np.nan))
    assert x.min() >= -0.3 and x.max() <= 0.7
    (ds,) = ledger.datasets()
    assert ds["dataset_id"] == table_identity(files["csv"]) and ds["spent_epsilon"] == 1.0


def test_release_from_source_sparse_path_for_huge_domain(tmp_path) -> None:
    from dpsynth.release import release_from_source

    rng = np.random.default_rng(0)
    schema = Schema(tuple(NumericColumn(name=f"v{i}", lower=0, upper=100, bins=100) for i in range(4)))  # 10^8 cells
    df = pd.DataFrame({f"v{i}": rng.normal(50, 5, 5000).round(1).astype(str) for i in range(4)})
    path = tmp_path / "big.parquet"
    df.to_parquet(path, index=False)
    rel = release_from_source(path, schema, epsilon=2.0, seed=1, threshold=8, method="histogram")
    assert rel.sparse is not None and rel.card["released_tables"]["threshold"] == 8
    assert len(rel.histogram) == len(rel.sparse.cells) < 10_000
    assert (rel.histogram["count"] >= 8).all()
    # the rows are drawn from the listed cells, as many as a noisy count of the rows of its own: the listed
    # counts' sum (a few hundred: 5,000 rows spread over 10^8 cells rarely reach 8) and the unclamped total
    # (spread √N·sd ≈ 7,000) are both further from n (plan.histogram_row_total)
    assert rel.plan.row_total == "count"
    assert len(rel.synthetic) == rel.card["released_tables"]["noisy_row_count"] == rel.rows
    assert abs(rel.rows - 5000) < 6 * rel.plan.histogram_rows_mechanism().noise_std()
    assert len(rel.resample(100, rng=np.random.default_rng(2))) == 100


def test_infeasible_sparse_release_is_refused_before_spending(tmp_path) -> None:
    from dpsynth.accounting import Ledger
    from dpsynth.release import release_from_source

    ledger = Ledger(tmp_path / "l.sqlite")
    schema = Schema(tuple(NumericColumn(name=f"v{i}", lower=0, upper=1, bins=1000) for i in range(4)))
    msg = _error(lambda: release_from_source(tmp_path / "absent.csv", schema, epsilon=1.0, ledger=ledger,
                                              method="histogram"))
    assert "threshold of about" in msg
    assert ledger.datasets() == []


def test_fast_writer_matches_decode_and_safe_csv(tmp_path) -> None:
    import io

    from dpsynth import noise
    from dpsynth.binning import decode
    from dpsynth.io import to_safe_csv
    from dpsynth.writer import write_synthetic_csv

    schema = Schema((
        NumericColumn(name="age", lower=0, upper=100, bins=5, integer=True, missing=True),
        NumericColumn(name="=x", lower=-1, upper=1, bins=3, missing=True),
        CategoricalColumn(name="colour", categories=("red", "-green", "a,b", 'q"u\note'), missing=True),
    ))
    cells = np.random.default_rng(0).integers(0, schema.n_cells, 5000)
    codes = np.stack(np.unravel_index(cells, schema.sizes), axis=1)
    ref = pd.read_csv(io.BytesIO(to_safe_csv(decode(codes, schema, rng=noise.seeded_rng(1)))), dtype=str, keep_default_na=False)
    path = tmp_path / "o.csv"
    write_synthetic_csv(cells, schema, path, rng=noise.seeded_rng(1))
    got = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert list(got.columns) == list(ref.columns) == ["age", "'=x", "colour"]
    pd.testing.assert_series_equal(got["age"], ref["age"])
    pd.testing.assert_series_equal(got["colour"], ref["colour"])
    np.testing.assert_array_equal(pd.to_numeric(got["'=x"].replace("", np.nan)), pd.to_numeric(ref["'=x"].replace("", np.nan)))
    chunked = tmp_path / "c.csv"
    write_synthetic_csv(cells, schema, chunked, rng=noise.seeded_rng(1), chunk_rows=777)
    assert len(pd.read_csv(chunked)) == 5000


def test_cli_engine_flag(files: dict, tmp_path, capsys: pytest.CaptureFixture) -> None:
    from dpsynth.cli import main

    schema_path = tmp_path / "s.json"
    schema_path.write_text(small_schema_for_release().to_json(), encoding="utf-8")
    base = ["release", str(files["parquet"]), "--schema", str(schema_path), "--epsilon", "1", "--seed", "1",
            "--ledger", str(tmp_path / "l.sqlite"), "--out", str(tmp_path / "o.csv")]
    assert main(["ledger", "init", "--ledger", str(tmp_path / "l.sqlite")]) == 0
    assert main([*base, "--engine", "duckdb", "--progress", "--histogram-out", str(tmp_path / "h.csv")]) == 0
    captured = capsys.readouterr()
    assert "duckdb engine" in captured.out and "100%" in captured.err
    assert len(pd.read_csv(tmp_path / "h.csv")) == small_schema_for_release().n_cells
    assert main([*base, "--engine", "duckdb", "--id-column", "colour"]) == 2
    assert "--engine pandas" in capsys.readouterr().err
    assert main([*base, "--engine", "pandas", "--threshold", "3"]) == 0  # post-processing options behave the same everywhere


def test_marginals_from_one_scan(files: dict) -> None:
    schema = edge_schema()
    counts = get_engine("duckdb").count(files["parquet"], schema, max_dense_cells=10)  # sparse
    assert counts.is_sparse and counts.report.rows_dropped == 0
    for names in (["colour"], ["w", "x"], ["age", "colour", "x"]):
        np.testing.assert_array_equal(counts.marginal(names), reference(files["df"], schema.select(names)).dense)
    codes, cnt = counts.occupied_codes()
    assert codes.shape == (len(cnt), 4) and cnt.sum() == len(files["df"]) - counts.report.rows_dropped


@pytest.mark.parametrize(("lower", "upper", "bins"), [(-0.3, 0.7, 9973), (1e-7, 3e-7, 1000), (-1e6, 1.7e6, 4321),
                                                     (0.1, 0.30000000000000004, 3), (-5.5, -0.25, 10_000),
                                                     (1e-7, 3e-7, 24), (-0.3, 0.7, 25), (-1e6, 1.7e6, 17), (0, 1, 1)])
def test_every_edge_and_its_neighbours_match_encode(lower: float, upper: float, bins: int) -> None:
    col = NumericColumn(name="v", lower=lower, upper=upper, bins=bins)
    e = col.edges()
    values = np.concatenate([e, np.nextafter(e, -np.inf), np.nextafter(e, np.inf)])
    df = pd.DataFrame({"v": values})  # float64 column: no text parsing involved
    schema = Schema((col,))
    np.testing.assert_array_equal(get_engine("duckdb").count(df, schema).dense, reference(df, schema).dense)


def test_numeric_text_syntax_fuzzed_against_pandas() -> None:
    """Random strings over a number-ish alphabet: DuckDB's per-row status and bin equal encode's rules."""
    import duckdb

    from dpsynth.engines import sql as S

    rng = np.random.default_rng(3)
    alphabet = np.array(list("0123456789+-.eE_ xinfaINFAdDpP,"))
    strs = {"".join(alphabet[rng.integers(0, len(alphabet), k)]) for k in rng.integers(1, 7, 30_000)}
    strs = sorted(strs | {" 12 ", "1_0", "+-3", "-+3", "1e999", "nan", "Infinity", "0x10", "", "  "})
    col = NumericColumn(name="v", lower=-50, upper=50, bins=7, missing=True)
    text = pd.Series(strs, dtype="string").str.strip()
    empty = (text == "").to_numpy()
    # reference: pandas' parser as in encode (inputs here have no exponent long enough to misround)
    vals = pd.to_numeric(text.mask(text == ""), errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    expected = np.where(empty, S.MISSING, np.where(np.isnan(vals), S.BAD, np.where(np.isinf(vals), S.INF, -1)))
    ok = expected == -1
    expected[ok & (vals < -50)] = S.LOW
    expected[ok & (vals > 50)] = S.HIGH
    expected[expected == -1] = S.OK
    con = duckdb.connect()
    con.register("src", pd.DataFrame({"v": strs}))
    q = S.staged_sql(Schema((col,)), {"v": "VARCHAR"}, "src", "duckdb", row_numbers=True)
    got = con.execute(f"SELECT __r, st_0, code_0 FROM ({q}) ORDER BY __r").fetchnumpy()
    np.testing.assert_array_equal(got["st_0"], expected)
    fine = np.isin(expected, [S.OK, S.LOW, S.HIGH])
    ref_codes = encode(pd.DataFrame({"v": np.where(fine, np.array(strs, dtype=object), "")}), Schema((col,))).codes[:, 0]
    np.testing.assert_array_equal(got["code_0"][fine], ref_codes[fine])
    # the one-pass query the engine runs: same status in the flags, same cell wherever it is used
    fq, _ = S.fast_rows_sql(Schema((col,)), {"v": "VARCHAR"}, "src", row_numbers=True)
    fast = con.execute(f"SELECT __r, cell, f0 FROM ({fq}) ORDER BY __r").fetchnumpy()
    np.testing.assert_array_equal(fast["f0"] & 7, expected)
    np.testing.assert_array_equal(fast["cell"][fine | (expected == S.MISSING)],
                                  np.where(expected == S.MISSING, col.bins, ref_codes)[fine | (expected == S.MISSING)])


@pytest.mark.parametrize("coding", ["case", "enum"])
@pytest.mark.parametrize("blank_category", [False, True])
def test_one_pass_query_matches_the_staged_query_on_categories(blank_category: bool, coding: str, monkeypatch) -> None:
    """Fuzzed labels (known, unknown, blank, padded) under each unknown policy: same flags and used cells."""
    import duckdb

    from dpsynth.engines import sql as S

    monkeypatch.setattr(S, "CASE_MAX_CATEGORIES", 16 if coding == "case" else 0)

    rng = np.random.default_rng(5)
    cats = ("a", "b c", " ") if blank_category else ("a", "b c", "B")
    pool = np.array(["a", "b c", "B", "", " ", "  a", "a ", "x", "b", "c"], dtype=object)
    values = pool[rng.integers(0, len(pool), 5000)]
    for policy in ("missing", "drop", "error"):
        schema = Schema((CategoricalColumn(name="c", categories=cats, missing=True, on_unknown=policy),
                         NumericColumn(name="n", lower=0, upper=1, bins=3)))
        con = duckdb.connect()
        con.register("src", pd.DataFrame({"c": values, "n": rng.random(len(values))}))
        for stmt in S.enum_ddl(schema):
            con.execute(stmt)
        types = {"c": "VARCHAR", "n": "DOUBLE"}
        staged = S.staged_sql(schema, types, "src", "duckdb", row_numbers=True)
        ref = con.execute(f"SELECT __r, st_0, st_1, code_0, code_1 FROM ({staged}) ORDER BY __r").fetchnumpy()
        fq, _ = S.fast_rows_sql(schema, types, "src", row_numbers=True)
        got = con.execute(f"SELECT __r, cell, f0 FROM ({fq}) ORDER BY __r").fetchnumpy()
        np.testing.assert_array_equal(got["f0"], ref["st_0"] + (ref["st_1"] << S.STATUS_BITS))
        used = np.isin(ref["st_0"], [S.OK, S.MISSING, S.UNKNOWN_MISSING])
        np.testing.assert_array_equal(got["cell"][used], (ref["code_0"] * 3 + ref["code_1"])[used])


def test_parquet_output_has_the_same_rows(tmp_path) -> None:
    from dpsynth import noise
    from dpsynth.writer import write_synthetic_csv

    schema = Schema((
        NumericColumn(name="age", lower=0, upper=100, bins=5, integer=True, missing=True),
        NumericColumn(name="w", lower=-1, upper=1, bins=3),
        CategoricalColumn(name="=colour", categories=("red", "-green"), missing=True),
    ))
    cells = np.random.default_rng(0).integers(0, schema.n_cells, 3000)
    write_synthetic_csv(cells, schema, tmp_path / "o.csv", rng=noise.seeded_rng(1), chunk_rows=1000)
    write_synthetic_csv(cells, schema, tmp_path / "o.parquet", rng=noise.seeded_rng(1), chunk_rows=1000)
    a = pd.read_csv(tmp_path / "o.csv", dtype=str, keep_default_na=False)
    b = pd.read_parquet(tmp_path / "o.parquet")
    assert list(b.columns) == ["age", "w", "=colour"] and list(a.columns) == ["age", "w", "'=colour"]
    np.testing.assert_array_equal(pd.to_numeric(a["w"]), b["w"].to_numpy())
    np.testing.assert_array_equal(pd.to_numeric(a["age"].replace("", np.nan)).to_numpy(dtype=float),
                                  b["age"].to_numpy(dtype=float, na_value=np.nan))
    assert a["'=colour"].str.lstrip("'").tolist() == b["=colour"].fillna("").tolist()


@pytest.mark.parametrize("bins", [1, 3, 30])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_typed_nan_and_infinity_in_parquet_follow_encode(tmp_path, bins: int, bad: float) -> None:
    """A Parquet DOUBLE column holding NaN (pandas' missing value) or ±inf (refused), any bin width.

    Parquet's min/max statistics leave NaN out; DuckDB must not fold the NaN test away.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    values = np.linspace(0, 1, 50)
    values[7] = bad
    path = tmp_path / "typed.parquet"
    pq.write_table(pa.table({"v": pa.array(values)}), path)
    for missing in (True, False):
        schema = Schema((NumericColumn(name="v", lower=0, upper=1, bins=bins, missing=missing),))
        if np.isnan(bad) and missing:
            got = get_engine("duckdb").count(path, schema)
            np.testing.assert_array_equal(got.dense, reference(pd.read_parquet(path), schema).dense)
            assert got.dense[-1] == 1 and got.report.columns[0].missing == 1
        else:
            msg = _error(lambda s=schema: get_engine("duckdb").count(path, s))
            assert ("infinite" if np.isinf(bad) else "empty value") in msg and "'v'" in msg and "8" in msg


@pytest.mark.parametrize("odd", ["1_000", "+-3", " +-3 ", None])
def test_csv_number_forms_duckdb_parses_and_pandas_refuses(tmp_path, odd: str | None) -> None:
    """The per-row test for '1_000' / '+-1' is skipped only when the file's bytes cannot hold them."""
    from dpsynth.engines.duckdb_engine import _plain_number_bytes

    rows = ["v,c"] + [f"{i % 10},a" for i in range(200)]
    if odd is not None:
        rows[50] = f"{odd},a"
    path = tmp_path / "t.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    schema = Schema((NumericColumn(name="v", lower=0, upper=2000, bins=4), CategoricalColumn(name="c", categories=("a",))))
    assert _plain_number_bytes(path) is (odd is None)
    if odd is None:
        got = get_engine("duckdb").count(path, schema)
        np.testing.assert_array_equal(got.dense, reference(pd.read_csv(path), schema).dense)
    else:
        msg = _error(lambda: get_engine("duckdb").count(path, schema))
        assert "not numbers" in msg and "row 50" in msg


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_marginals_method_on_an_engine_equals_the_in_memory_release(files: dict, tmp_path, engine: str) -> None:
    """One scan's occupied cells and counts fit the same model as the rows themselves (same seed)."""
    from dpsynth.release import release, release_from_source

    schema = small_schema_for_release()
    df = pd.read_parquet(files["parquet"])
    # one pipeline: the value model is measured beside the engine's count, so everything matches
    a = release(df, schema, epsilon=1.0, delta=1e-6, method="marginals", seed=11)
    b = release_from_source(files["parquet"], schema, epsilon=1.0, delta=1e-6, engine=engine, method="marginals", seed=11)
    assert a.zip() == b.zip()
    assert b.card["method"]["name"] == "marginals" and b.histogram is None and b.model is not None
    assert [c for c, _ in a.model.measurements] == [c for c, _ in b.model.measurements]
    assert all(np.array_equal(x, y) for (_, x), (_, y) in zip(a.model.measurements, b.model.measurements, strict=True))
    assert len(b.synthetic) == len(a.synthetic)


def test_cli_marginals_on_duckdb_writes_rows_marginals_and_model(files: dict, tmp_path) -> None:
    import json

    from dpsynth.cli import main

    schema_path = tmp_path / "s.json"
    schema_path.write_text(small_schema_for_release().to_json(), encoding="utf-8")
    out, model = tmp_path / "o.csv", tmp_path / "model.json"
    assert main(["ledger", "init", "--ledger", str(tmp_path / "l.sqlite")]) == 0
    assert main(["release", str(files["parquet"]), "--schema", str(schema_path), "--epsilon", "1", "--delta", "1e-6",
                 "--seed", "1", "--ledger", str(tmp_path / "l.sqlite"), "--out", str(out), "--engine", "duckdb",
                 "--method", "marginals", "--histogram-out", str(tmp_path / "m.csv"), "--model-out", str(model),
                 "--card-out", str(tmp_path / "card.json")]) == 0
    syn = pd.read_csv(out, dtype=str, keep_default_na=False)
    card = json.loads((tmp_path / "card.json").read_text(encoding="utf-8"))
    assert card["method"]["name"] == "marginals" and "engine" not in card
    assert len(syn) == card["post_processing"]["synthetic_rows"] > 0
    assert list(syn.columns) == [c.name for c in small_schema_for_release().columns]
    assert len(pd.read_csv(tmp_path / "m.csv")) > 0 and json.loads(model.read_text(encoding="utf-8"))["sizes"]



@pytest.mark.parametrize(("names", "needle"), [
    (["age", ""], "empty header (column 2)"),  # DuckDB alone named it C1
    (["age", "age"], "two columns named 'age'"),  # DuckDB alone named the second age_1
    (["age", "AGE"], "differ only in case"),  # DuckDB alone named the second AGE_1
])
def test_parquet_column_names_are_checked_alike_on_every_engine(tmp_path, names: list[str], needle: str) -> None:
    """A Parquet file's names are read from its footer and checked by one rule, so no engine releases a column under
    a name the file does not hold."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpsynth.io import read_table

    path = tmp_path / "n.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array([1, 2, 3]), pa.array([4, 5, 6])], names=names), path)
    renamed = {"": "C1", "age": "age_1", "AGE": "AGE_1"}[names[1]]
    schema = Schema((NumericColumn(name=renamed, lower=0, upper=10, bins=2),))
    assert needle in _error(lambda: get_engine("duckdb").count(path, schema))
    assert needle in _error(lambda: get_engine("pandas").count(path, schema))
    assert needle in _error(lambda: read_table(path))


@pytest.mark.parametrize("kind", ["bool", "nullable bool", "timestamp", "timestamp with fractions"])
def test_typed_parquet_cells_read_as_one_text_on_every_engine(tmp_path, kind: str) -> None:
    """True/false and timestamps declared categorical: pandas read True and (when all fell at midnight) 2020-01-01,
    DuckDB true and 2020-01-01 00:00:00, so the schema drafted by one was refused by the other."""
    import datetime as dt

    from dpsynth.drafting import draft_schema
    from dpsynth.io import read_table

    n = 60
    values = {
        "bool": pd.Series([i % 3 == 0 for i in range(n)]),
        "nullable bool": pd.Series(pd.array([None if i % 7 == 0 else i % 2 == 0 for i in range(n)], dtype="boolean")),
        "timestamp": pd.Series([dt.datetime(2020, 1, 1 + i % 3) for i in range(n)], dtype="datetime64[us]"),
        "timestamp with fractions": pd.Series([dt.datetime(2020, 1, 1, 0, 0, i % 2, 500_000 * (i % 3 == 0))
                                               for i in range(n)], dtype="datetime64[us]"),
    }[kind]
    path = tmp_path / "t.parquet"
    pd.DataFrame({"k": values, "x": np.arange(n) % 10}).to_parquet(path, index=False)
    schema, _ = draft_schema(read_table(path))
    col = schema.columns[0]
    assert isinstance(col, CategoricalColumn)
    assert all(c in ("true", "false") for c in col.categories) if "bool" in kind else all(
        len(c) >= 19 for c in col.categories)
    want = get_engine("pandas").count(path, schema).to_dense()
    np.testing.assert_array_equal(get_engine("duckdb").count(path, schema).to_dense(), want)
    np.testing.assert_array_equal(get_engine("duckdb").count(pd.read_parquet(path), schema).to_dense(), want)


@pytest.mark.parametrize("kind", ["whole numbers with gaps", "floats with NaN"])
def test_typed_parquet_numbers_as_categories_read_alike(tmp_path, kind: str) -> None:
    """Whole numbers with a missing value were "0.0" in memory and "0" on DuckDB; a float's NaN was missing in
    memory and the category 'nan' on DuckDB."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpsynth.io import read_table

    n = 60
    values = (pa.array([None if i % 9 == 0 else i % 3 for i in range(n)], pa.int64()) if kind.startswith("whole")
              else pa.array([float("nan") if i % 9 == 0 else float(i % 3) for i in range(n)]))
    path = tmp_path / "n.parquet"
    pq.write_table(pa.table({"k": values}), path)
    cats = ("0", "1", "2") if kind.startswith("whole") else ("0.0", "1.0", "2.0")
    schema = Schema((CategoricalColumn(name="k", categories=cats, missing=True),))
    want = get_engine("pandas").count(path, schema).to_dense()
    assert want[-1] == 7 and want.sum() == n  # the missing cell holds the gaps, nothing is refused
    np.testing.assert_array_equal(get_engine("duckdb").count(path, schema).to_dense(), want)
    np.testing.assert_array_equal(get_engine("duckdb").count(read_table(path), schema).to_dense(), want)


@pytest.fixture
def kolkata_clock(monkeypatch: pytest.MonkeyPatch):
    """The process's time zone set to UTC+05:30, as on a machine in India (restored afterwards)."""
    import time

    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_timestamps_with_a_time_zone_read_as_one_text_on_every_engine_and_machine(tmp_path, kolkata_clock,
                                                                                    engine: str) -> None:
    """An instant declared categorical was text in the machine's time zone on DuckDB and Spark ('2020-01-01
    14:30:00+05:30' on a machine in India) and '+01:00'/'+00:00' text in memory: one file, three counts. Now each is
    its UTC time with '+00' everywhere."""
    import datetime as dt

    from dpsynth.drafting import draft_schema
    from dpsynth.io import read_table

    if engine == "spark":
        pytest.importorskip("pyspark")
    n = 40
    paris = pd.Series([dt.datetime(2020, 1 + i % 2, 1, 10, 0, 0, 500_000 * (i % 3 == 0)) for i in range(n)],
                      dtype="datetime64[us]").dt.tz_localize("Europe/Paris")
    df = pd.DataFrame({"t": paris, "u": paris.dt.tz_convert("UTC"), "x": np.arange(n) % 10})
    path = tmp_path / "t.parquet"
    df.to_parquet(path, index=False)
    schema, _ = draft_schema(read_table(path))
    assert set(schema.columns[0].categories) == {"2020-01-01 09:00:00+00", "2020-01-01 09:00:00.5+00",
                                                 "2020-02-01 09:00:00+00", "2020-02-01 09:00:00.5+00"}
    assert schema.columns[1].categories == schema.columns[0].categories
    want = get_engine("pandas").count(path, schema).to_dense()
    eng = get_engine(engine, **({"master": "local[1]"} if engine == "spark" else {}))
    try:
        np.testing.assert_array_equal(eng.count(path, schema).to_dense(), want)
        # an instant not in the list is named as it is compared (Spark's message alone lacked '+00')
        first = schema.columns[0]
        fewer = Schema((CategoricalColumn(name="t", categories=first.categories[:1]), *schema.columns[1:]))
        msg = _error(lambda: eng.count(path, fewer))
        assert "+00'" in msg and msg == _error(lambda: get_engine("pandas").count(path, fewer))
        if engine == "spark":
            assert eng.spark.conf.get("spark.sql.session.timeZone") != "UTC"  # the caller's setting is restored
    finally:
        if engine == "spark":
            eng.spark.stop()


_CSV_TEXT = st.lists(st.sampled_from(["a", ",", '"', "\n", " ", "\r\n", "\r"]), max_size=30).map("".join)


def _verdict(check: Callable[[], None]) -> str | None:
    try:
        check()
    except InputError as exc:
        return str(exc)
    return None


@settings(max_examples=500, deadline=None)
@given(body=_CSV_TEXT, cut=st.integers(min_value=1, max_value=31))
def test_the_streamed_csv_scan_judges_as_the_full_parse_does(body: str, cut: int) -> None:
    """dpsynth.io.CsvScan decides, in one vectorised pass over a file's blocks, whether the strict parse of
    check_quoting must run; where it does not, it judges the line breaks itself. Whatever the cuts between blocks,
    the verdict must be the one of always parsing (else DuckDB released what memory refused, or the reverse)."""
    import contextlib
    import io as pyio

    from dpsynth.io import CsvScan, check_quoting, check_scanned, check_unclosed_quote

    data = body.encode()
    whole = CsvScan.of([data], ",")
    pieces = CsvScan.of([data[i: i + cut] for i in range(0, len(data), cut)], ",")
    assert (whole.quotes, whole.last_quote_opens, whole.endings) == (pieces.quotes, pieces.last_quote_opens,
                                                                      pieces.endings)

    def text() -> contextlib.AbstractContextManager:
        return contextlib.nullcontext(pyio.StringIO(body, newline=""))

    def always_parsed() -> None:
        check_unclosed_quote(whole, "t.csv")
        check_quoting(pyio.StringIO(body, newline=""), ",", "t.csv")

    want = _verdict(always_parsed)
    assert _verdict(lambda: check_scanned(whole, "t.csv", text)) == want
    assert _verdict(lambda: check_scanned(pieces, "t.csv", text)) == want


@settings(max_examples=300, deadline=None)
@given(body=st.lists(st.sampled_from(["a", ",", "\n"]), max_size=30).map("".join),
       cut=st.integers(min_value=1, max_value=31))
def test_the_streamed_csv_scan_finds_a_trailing_delimiter_past_the_header(body: str, cut: int) -> None:
    """A record of one field more than the header whose last is empty (a,b, under x,y) is read as a,b by DuckDB
    alone: the scan must send it to the parse, which refuses it as memory does, wherever the blocks are cut."""
    from dpsynth.io import CsvScan

    data = ("x,y\n" + body).encode()
    records = [line.split(",") for line in data.decode().split("\n")[1:] if line]
    trailing = any(len(r) > 2 and r[-1] == "" for r in records)
    pieces = CsvScan.of([data[i: i + cut] for i in range(0, len(data), cut)], ",", columns=2)
    if trailing:
        assert pieces.needs_parse


def test_a_long_text_cell_in_parquet_is_refused_alike_on_both_engines(tmp_path) -> None:
    """read_table refuses a Parquet text cell over 10,000 characters in any column; DuckDB alone counted it."""
    from dpsynth.io import read_table

    path = tmp_path / "t.parquet"
    pd.DataFrame({"age": [30, 40, 50], "note": ["a", "b" * 10_001, "c"]}).to_parquet(path, index=False)
    schema = Schema((NumericColumn(name="age", lower=0, upper=100, bins=10),))
    msg = _error(lambda: get_engine("duckdb").count(path, schema))
    assert "a cell of column 'note' (row 2) is longer than 10,000 characters" in msg
    assert msg == _error(lambda: read_table(path))


@pytest.mark.parametrize("on_unknown", ["drop", "error"])
def test_true_false_with_gaps_in_parquet_written_by_arrow_release_alike_on_both_engines(tmp_path, on_unknown: str) -> None:
    """A boolean Parquet column with missing values and no pandas metadata (as Arrow, Spark or DuckDB write it) was
    read as Python objects, 'True', in memory and by the value model's reader beside DuckDB, while DuckDB's count
    read 'true': with on_unknown 'error' the two engines named different values, with 'drop' the value model of the
    DuckDB release left the row out and the releases differed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpsynth.release import release_from_source

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": pa.array([3.5, 101.5, 40.0, 7.25] * 5, pa.float32()),
                             "c": pa.array([None, True, False, True] * 5, pa.bool_())}), path)
    cats = ("true", "false") if on_unknown == "drop" else ("yes", "no")
    schema = Schema((NumericColumn(name="x", lower=0, upper=100, bins=5),
                     CategoricalColumn(name="c", categories=cats, missing=True, on_unknown=on_unknown)))
    got = []
    for engine in ("pandas", "duckdb"):
        try:
            got.append(release_from_source(path, schema, epsilon=1.0, engine=engine, seed=5, method="marginals").zip())
        except InputError as exc:
            got.append(str(exc))
    assert got[0] == got[1]
    if on_unknown == "error":
        assert "'true'" in got[0]
