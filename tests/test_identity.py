"""One identity per table: the ledger key is the same for a table in any form and differs when the table does."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsynth.errors import BudgetExceededError, InputError
from dpsynth.identity import table_identity
from dpsynth.io import read_table

CSV = "age,colour,income\n34,red,1200.5\n51,blue,\n34,red,1200.5\n19, green ,880\n"


@pytest.fixture
def base(tmp_path):
    p = tmp_path / "base.csv"
    p.write_text(CSV, encoding="utf-8", newline="")
    return table_identity(p)


def _write(tmp_path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_bytes(text.encode("utf-8"))
    return table_identity(p)


def test_identity_is_prefixed_hex(base):
    assert base.startswith("table:") and len(base) == len("table:") + 64
    int(base.removeprefix("table:"), 16)


def _reference(names: list[str], rows: list[list[str | None]]) -> str:
    """The identity recomputed in Python from the documented definition and the canonical cells."""
    upper = lower = 0
    for row in rows:
        digest = hashlib.md5("\x1f".join("\x1e" if c is None else c for c in row).encode("utf-8")).digest()
        upper += int.from_bytes(digest[8:], "little")
        lower += int.from_bytes(digest[:8], "little")
    payload = json.dumps([names, len(rows), str(upper), str(lower)], ensure_ascii=False).encode("utf-8")
    return "table:" + hashlib.sha256(b"dpsynth table identity v1\x00" + payload).hexdigest()


def test_golden_value(tmp_path):
    """Pins the canonical form and the hashing: a DuckDB upgrade that changed its number or date
    text would fail here instead of silently opening fresh budgets."""
    text = "b,a,d\n1.50,x,2020-01-31\n-0,\"y, z\",TRUE\n1e20,,3.25e-7\n"
    expected = _reference(["a", "b", "d"], [["x", "1.5", "2020-01-31 00:00:00+00"], ["y, z", "0", "true"],
                                             [None, "1e+20", "3.25e-07"]])
    assert _write(tmp_path, "g.csv", text) == expected
    assert expected == "table:fc47df94b9c82067a91c19c0f3547a7b3d1953814c38b62c42e9e7ede0e4ddc5"


@pytest.mark.parametrize("text", [
    "age,colour,income\n34,red,1200.5\n19, green ,880\n34,red,1200.5\n51,blue,\n",  # rows shuffled
    "income,age,colour\n1200.5,34,red\n,51,blue\n1200.5,34,red\n880,19, green \n",  # columns swapped
    CSV.replace("\n", "\r\n"),  # CRLF
    CSV.rstrip("\n"),  # no trailing newline
    CSV + "\n\n",  # blank lines at the end
    '"age","colour","income"\n"34","red","1200.5"\n"51","blue",""\n34,"red",1200.5\n19,green,880\n',  # quoted
    "\ufeff" + CSV,  # byte-order mark
    "age;colour;income\n34;red;1200.5\n51;blue;\n34;red;1200.5\n19;green;880\n",  # semicolons
    "age,colour,income\n34.0,red,1200.50\n51,blue,\n+34,red,1.2005e3\n19,green,880.0\n",  # numbers spelled differently
    " age , colour,income\n34 ,red,1200.5\n51,blue,  \n34,red,1200.5\n19,green\t,880\n",  # spaces around cells and names
    "age,colour,income\n34,red,1200.5\n51,blue,NaN\n34,red,1200.5\n19,green,880\n",  # NaN is missing
    # decimal commas where commas do not delimit, as read_table reads them (the dashboard's upload)
    "age;colour;income\n34;red;1200,5\n51;blue;\n34;red;1.200,5\n19;green;880\n",
    "age\tcolour\tincome\n34\tred\t1200,5\n51\tblue\t\n34\tred\t1200,50\n19\tgreen\t880\n",
])
def test_same_table_same_identity(tmp_path, base, text):
    assert _write(tmp_path, "t.csv", text) == base
    # the same file uploaded (bytes, read by read_table) and given by its path (read by DuckDB): one budget
    assert table_identity(text.encode("utf-8"), name="t.csv") == base


@pytest.mark.parametrize("text", [
    CSV.replace("1200.5", "1200.6", 1),  # a changed value
    CSV + "19,green,880\n",  # an added (duplicate) row
    "\n".join(CSV.splitlines()[:-1]) + "\n",  # a removed row
    CSV.replace("colour", "color", 1),  # a renamed column
    CSV.replace("red", "Red", 1),  # case in text counts
    "age,colour,income\n34,red,1200.5\n51,blue,\n34,blue,1200.5\n19,red,880\n",  # values moved between rows
    "age,colour,income,x\n34,red,1200.5,\n51,blue,,\n34,red,1200.5,\n19,green,880,\n",  # an added empty column
])
def test_changed_table_new_identity(tmp_path, base, text):
    assert _write(tmp_path, "t.csv", text) != base


def test_multiline_cell_with_crlf(tmp_path):
    lf = _write(tmp_path, "lf.csv", 'a,b\n1,"two\nlines"\n')
    assert _write(tmp_path, "crlf.csv", 'a,b\r\n1,"two\r\nlines"\r\n') == lf
    assert _write(tmp_path, "other.csv", 'a,b\n1,"two lines"\n') != lf


def test_parquet_excel_dataframe_and_bytes_agree(tmp_path, base):
    df = pd.DataFrame({"income": [1200.5, np.nan, 1200.5, 880.0], "age": [34, 51, 34, 19],
                       "colour": ["red", "blue", "red", "green"]})
    df.to_parquet(tmp_path / "t.parquet")
    df.to_excel(tmp_path / "t.xlsx", index=False)
    df.astype({"age": "Int64"}).to_parquet(tmp_path / "nullable.parquet")
    folder = tmp_path / "parts"
    folder.mkdir()
    df.iloc[:2].to_parquet(folder / "a.parquet")
    df.iloc[2:].to_parquet(folder / "b.parquet")
    ids = {
        "parquet": table_identity(tmp_path / "t.parquet"),
        "parquet folder": table_identity(folder),
        "nullable int": table_identity(tmp_path / "nullable.parquet"),
        "excel": table_identity(tmp_path / "t.xlsx"),
        "typed frame": table_identity(df),
        "text frame (read_table)": table_identity(read_table(tmp_path / "base.csv")),
        "uploaded bytes": table_identity((tmp_path / "t.parquet").read_bytes(), name="t.parquet"),
        "object frame of mixed values": table_identity(df.astype(object)),
    }
    assert ids == dict.fromkeys(ids, base)


def test_excel_text_cells(tmp_path, base):
    read_table(tmp_path / "base.csv").to_excel(tmp_path / "text.xlsx", index=False)
    assert table_identity(tmp_path / "text.xlsx") == base


def test_dates_and_booleans_across_storage(tmp_path):
    df = pd.DataFrame({"when": pd.to_datetime(["2020-01-31", "2021-06-01 10:30:00", None], format="ISO8601"),
                       "day": pd.to_datetime(["2020-01-31", "2020-02-01", "2020-02-02"]).date,
                       "ok": [True, False, None]})
    df.to_parquet(tmp_path / "t.parquet")
    df.to_excel(tmp_path / "t.xlsx", index=False)
    text = "when,day,ok\n2020-01-31 00:00:00,2020-01-31,True\n2021-06-01T10:30:00,2020-02-01,FALSE\n,2020-02-02,\n"
    aware = pd.DataFrame({"when": pd.to_datetime(["2020-01-31 01:00:00+01:00", "2021-06-01 10:30:00", None],
                                                 format="ISO8601", utc=True), "day": df["day"], "ok": df["ok"]})
    ids = {table_identity(tmp_path / "t.parquet"), table_identity(tmp_path / "t.xlsx"),
           table_identity(df), _write(tmp_path, "t.csv", text), table_identity(aware)}
    assert len(ids) == 1


def test_one_versus_one_point_zero():
    assert table_identity(pd.DataFrame({"x": ["1", "2"]})) == table_identity(pd.DataFrame({"x": [1.0, 2.0]}))
    assert table_identity(pd.DataFrame({"x": [1, 2]})) == table_identity(pd.DataFrame({"x": ["1.0", "2.00"]}))
    assert table_identity(pd.DataFrame({"x": ["1", "2"]})) != table_identity(pd.DataFrame({"x": ["1", "2.5"]}))


def test_large_integers_are_compared_as_doubles():
    big = 2**53
    as_int = table_identity(pd.DataFrame({"x": np.array([big + 2, 7], dtype=np.int64)}))
    assert as_int == table_identity(pd.DataFrame({"x": [float(big + 2), 7.0]}))
    assert as_int == table_identity(pd.DataFrame({"x": [str(big + 2), "7"]}))


def test_bad_input_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        table_identity(tmp_path / "missing.csv")
    (tmp_path / "ragged.csv").write_text("a,b\n1,2,3\n", encoding="utf-8")
    with pytest.raises(InputError, match="ragged.csv"):
        table_identity(tmp_path / "ragged.csv")
    with pytest.raises(InputError, match="two columns"):
        table_identity(pd.DataFrame([[1, 2]], columns=["a", "a"]))
    with pytest.raises(InputError, match="no columns"):
        table_identity(pd.DataFrame())


def test_empty_table_differs_by_columns():
    assert table_identity(pd.DataFrame({"a": []})) != table_identity(pd.DataFrame({"b": []}))


_cell = st.one_of(st.none(), st.integers(-10**6, 10**6).map(str), st.floats(-1e6, 1e6, allow_nan=False).map(repr),
                  st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6))


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_row_and_column_permutations_keep_the_identity(data):
    ncols = data.draw(st.integers(1, 4))
    nrows = data.draw(st.integers(0, 8))
    names = data.draw(st.lists(st.text(alphabet="abcdefgh", min_size=1, max_size=3), min_size=ncols, max_size=ncols,
                               unique=True))
    rows = [[data.draw(_cell) for _ in range(ncols)] for _ in range(nrows)]
    df = pd.DataFrame(rows, columns=names, dtype=object)
    row_order = data.draw(st.permutations(range(nrows)))
    col_order = data.draw(st.permutations(names))
    shuffled = df.iloc[list(row_order)][list(col_order)]
    assert table_identity(shuffled) == table_identity(df)


@settings(max_examples=30, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, width=64))
def test_a_double_and_its_text_agree(x):
    """The typed shortcut and the text path give one canonical number (DuckDB's double text round-trips)."""
    assert table_identity(pd.DataFrame({"x": [x]})) == table_identity(pd.DataFrame({"x": [repr(x)]}))


def test_one_budget_for_one_table_in_any_form_and_entry_point(tmp_path, small_df, small_schema):
    """The issue's attack: the same table re-saved (shuffled, CRLF, columns swapped, Parquet, Excel)
    through the CLI on either engine, the Python API and the dashboard state draws on one budget."""
    import dpsynth
    from dpsynth.accounting import Ledger, PrivacyBudget
    from dpsynth.cli import main
    from dpsynth.ui_state import AppState

    df = small_df.head(60)
    forms = {
        "a.csv": lambda p: df.to_csv(p, index=False),
        "b.csv": lambda p: p.write_bytes(df.sample(frac=1, random_state=1)[["colour", "age"]]
                                         .to_csv(index=False, lineterminator="\r\n").encode().rstrip(b"\r\n")),
        "c.parquet": lambda p: df.assign(age=df["age"].astype(int)).to_parquet(p),
        "d.xlsx": lambda p: df.to_excel(p, index=False),
    }
    for name, write in forms.items():
        write(tmp_path / name)
    schema = tmp_path / "schema.json"
    schema.write_text(small_schema.to_json())
    led = tmp_path / "ledger.sqlite"
    Ledger(led)  # a ledger named on the command line must exist (ledger init)
    for i, (name, engine) in enumerate([("a.csv", "pandas"), ("b.csv", "duckdb"), ("c.parquet", "duckdb"),
                                        ("d.xlsx", "pandas")]):
        code = main(["release", str(tmp_path / name), "--schema", str(schema), "--epsilon", "0.5", "--engine", engine,
                     "--ledger", str(led), "--budget", "1.5", "--out", str(tmp_path / f"s{i}.csv"), "--seed", "1"])
        assert code == (0 if i < 3 else 2), name  # the fourth release would spend 2.0 of 1.5
    ledger = Ledger(led, create=False)
    [ds] = ledger.datasets()
    assert ds["dataset_id"] == table_identity(df) and ledger.spent(ds["dataset_id"]) == PrivacyBudget(1.5)
    with pytest.raises(BudgetExceededError):
        dpsynth.release(df.iloc[::-1], small_schema, epsilon=0.1, ledger=ledger, seed=1)
    state = AppState()
    state.load(read_table(tmp_path / "d.xlsx"), "d.xlsx", source=(tmp_path / "d.xlsx").read_bytes())
    assert state.dataset_id == ds["dataset_id"]
    state.load(read_table(tmp_path / "c.parquet").head(5), "c.parquet", source=tmp_path / "c.parquet")
    assert state.dataset_id == ds["dataset_id"]


def _both_forms(df: pd.DataFrame) -> tuple[tuple, tuple]:
    import duckdb

    from dpsynth.identity import _frame, identity_sql

    con = duckdb.connect()
    con.register("src", _frame(df))
    columns = [(r[0], str(r[1])) for r in con.execute("DESCRIBE SELECT * FROM src").fetchall()]
    narrow = con.execute(identity_sql(columns, "src", wide=10**6)[0]).fetchone()
    wide = con.execute(identity_sql(columns, "src", wide=1)[0]).fetchone()
    return narrow, wide


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_wide_form_gives_the_same_sums(data):
    """Wide tables take list lambdas over text; typed shortcuts and per-column SQL must agree with them."""
    n = data.draw(st.integers(1, 6))
    frame = pd.DataFrame({
        "i": data.draw(st.lists(st.integers(-2**62, 2**62), min_size=n, max_size=n)),
        "f": data.draw(st.lists(st.floats(width=64), min_size=n, max_size=n)),
        "b": data.draw(st.lists(st.booleans(), min_size=n, max_size=n)),
        "s": data.draw(st.lists(st.one_of(st.none(), _cell.filter(lambda c: c is not None)), min_size=n, max_size=n)),
    })
    narrow, wide = _both_forms(frame)
    assert narrow == wide


def test_wide_table(tmp_path):
    df = pd.DataFrame(np.arange(60 * 5).reshape(5, 60).astype(str), columns=[f"c{i}" for i in range(60)])
    narrow, wide = _both_forms(df)
    assert narrow == wide
    assert table_identity(df) == table_identity(df[df.columns[::-1]].astype(float))
