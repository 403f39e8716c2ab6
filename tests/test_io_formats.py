"""Reading the formats curators bring (CSV, Parquet, Excel) into the same text-cell table."""

from __future__ import annotations

import csv
import io

import pandas as pd

import dpsynth
from dpsynth.io import read_table, to_safe_csv


def test_csv_parquet_excel_give_the_same_release_input(tmp_path, small_df, small_schema):
    small_df = small_df.head(50)
    csv_path = tmp_path / "t.csv"
    small_df.to_csv(csv_path, index=False)
    pq = tmp_path / "t.parquet"
    small_df.assign(age=small_df["age"].astype(int)).to_parquet(pq)
    xl = tmp_path / "t.xlsx"
    small_df.to_excel(xl, index=False)
    from dpsynth.binning import encode

    codes = [encode(read_table(p), small_schema).codes for p in (csv_path, pq, xl)]
    assert (codes[0] == codes[1]).all() and (codes[0] == codes[2]).all()
    # uploads arrive as bytes with a name
    assert read_table(csv_path.read_bytes(), "t.csv").shape == (50, 2)
    rel = dpsynth.release(read_table(pq), small_schema, epsilon=1.0, seed=0)
    assert len(rel.histogram) == small_schema.n_cells


def test_utf8_bom_and_semicolons(tmp_path):
    data = "\ufeffa;b\n1;x\n2;y\n".encode()
    df = read_table(data, "semi.csv")
    assert list(df.columns) == ["a", "b"] and df["b"].tolist() == ["x", "y"]


def test_safe_csv_escapes_formulas_and_keeps_numbers():
    df = pd.DataFrame({"t": ["=1+2", "-1+2", "@SUM(1)", "\t=1", "\r=1", "ok", None], "n": [-1.5, 2, 3, 4, 5, 6, 7]})
    rows = list(csv.reader(io.StringIO(to_safe_csv(df).decode("utf-8"), newline="")))
    assert rows[0] == ["t", "n"]
    cells = [r[0] for r in rows[1:]]
    assert all(v.startswith("'") for v in cells[:5])
    assert cells[5:] == ["ok", ""]
    assert [float(r[1]) for r in rows[1:]][0] == -1.5
