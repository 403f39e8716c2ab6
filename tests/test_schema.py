"""Schema: validation messages, JSON round-trip, bin edges (exact and property-based)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsynth.binning import decode, encode
from dpsynth.errors import InputError
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema, load_schema


def test_issue_example_parses_and_round_trips(tmp_path):
    text = json.dumps({"columns": [
        {"name": "age", "type": "numeric", "lower": 16, "upper": 96, "bins": 10},
        {"name": "workclass", "type": "categorical", "categories": ["Private", "State-gov"], "missing": True},
    ]})
    p = tmp_path / "s.json"
    p.write_text(text)
    s = load_schema(p)
    assert s.sizes == (10, 3)
    assert s.n_cells == 30
    assert Schema.from_json(s.to_json()) == s


@pytest.mark.parametrize("raw, fragment", [
    ({"columns": [{"name": "a", "type": "numeric", "lower": 5, "upper": 5, "bins": 2}]}, r"lower \(5\) must be less"),
    ({"columns": [{"name": "a", "type": "numeric", "lower": 0, "upper": 5, "bins": 0}]}, "bins must be"),
    ({"columns": [{"name": "a", "type": "numeric", "lower": 0, "upper": 5}]}, "need bins"),
    ({"columns": [{"name": "a", "type": "categorical", "categories": []}]}, "empty"),
    ({"columns": [{"name": "a", "type": "categorical", "categories": ["x", "x"]}]}, "listed twice"),
    ({"columns": [{"name": "a", "type": "text"}]}, "type must be"),
    ({"columns": [{"name": "a", "type": "numeric", "lower": 0, "upper": 1, "bins": 5, "integer": True}]}, "no whole number"),
    ({"columns": [{"name": "a", "type": "categorical", "categories": ["x"], "on_unknown": "missing"}]}, "needs missing"),
    ({"columns": []}, "no columns"),
    ({"cols": []}, '"columns" list'),
    ({"columns": [{"name": "a", "type": "numeric", "lower": 0, "upper": 1, "bins": 1},
                  {"name": "a", "type": "numeric", "lower": 0, "upper": 1, "bins": 1}]}, "more than once"),
])
def test_bad_schema_messages_name_the_problem(raw, fragment):
    with pytest.raises(InputError, match=fragment):
        Schema.from_dict(raw)


def test_invalid_json_is_an_input_error():
    with pytest.raises(InputError, match="not valid JSON"):
        Schema.from_json("{nope")


def test_upper_bound_falls_in_last_bin_and_lower_in_first():
    col = NumericColumn(name="x", lower=4, upper=8, bins=12)
    s = Schema((col,))
    codes = encode(pd.DataFrame({"x": [4, 8, 7.9999, 100, -3]}), s).codes[:, 0]
    assert codes.tolist() == [0, 11, 11, 11, 0]
    assert codes.max() < col.n_cells


def test_clamping_is_reported_not_released():
    s = Schema((NumericColumn(name="x", lower=0, upper=10, bins=2),))
    enc = encode(pd.DataFrame({"x": ["-1", "5", "11", "12"]}), s)
    assert enc.codes[:, 0].tolist() == [0, 1, 1, 1]
    rep = enc.report.columns[0]
    assert (rep.clamped_low, rep.clamped_high) == (1, 2)
    assert any("above the upper bound" in m for m in enc.report.messages())


def test_unknown_category_error_names_column_and_value():
    s = Schema((CategoricalColumn(name="c", categories=("a", "b")),))
    with pytest.raises(InputError, match=r"Column 'c'.*'zzz'"):
        encode(pd.DataFrame({"c": ["a", "zzz"]}), s)


def test_unknown_policies_missing_and_drop():
    miss = Schema((CategoricalColumn(name="c", categories=("a", "b"), missing=True, on_unknown="missing"),))
    enc = encode(pd.DataFrame({"c": ["a", "zzz", None]}), miss)
    assert enc.codes[:, 0].tolist() == [0, 2, 2]
    drop = Schema((CategoricalColumn(name="c", categories=("a", "b"), on_unknown="drop"),))
    enc = encode(pd.DataFrame({"c": ["a", "zzz", "b"]}), drop)
    assert enc.codes[:, 0].tolist() == [0, 1]
    assert enc.report.rows_dropped == 1


def test_numeric_errors_name_column_and_row():
    s = Schema((NumericColumn(name="x", lower=0, upper=10, bins=2),))
    with pytest.raises(InputError, match=r"Column 'x'.*row 2: 'abc'"):
        encode(pd.DataFrame({"x": ["1", "abc"]}), s)
    with pytest.raises(InputError, match=r"empty value.*row 2"):
        encode(pd.DataFrame({"x": ["1", ""]}), s)
    with pytest.raises(InputError, match="infinite"):
        encode(pd.DataFrame({"x": [1.0, float("inf")]}), s)
    with pytest.raises(InputError, match="no column"):
        encode(pd.DataFrame({"y": [1]}), s)


def test_missing_numeric_cell():
    s = Schema((NumericColumn(name="x", lower=0, upper=10, bins=2, missing=True),))
    enc = encode(pd.DataFrame({"x": [1.0, np.nan, 9.0]}), s)
    assert enc.codes[:, 0].tolist() == [0, 2, 1]


def test_integer_columns_decode_to_whole_numbers_in_their_bin():
    col = NumericColumn(name="age", lower=16, upper=96, bins=10, integer=True)
    s = Schema((col,))
    codes = np.repeat(np.arange(10), 100)[:, None]
    out = decode(codes, s, rng=np.random.default_rng(0))
    assert out["age"].dtype == np.int64
    assert (encode(out, s).codes[:, 0] == codes[:, 0]).all()


bounds = st.tuples(
    st.floats(-1e6, 1e6, allow_nan=False), st.floats(1e-3, 1e6, allow_nan=False), st.integers(1, 200)
)


@settings(max_examples=200, deadline=None)
@given(bounds, st.lists(st.floats(-2e6, 2e6, allow_nan=False), min_size=1, max_size=50))
def test_binning_invariants(b, values):
    lower, width, bins = b
    col = NumericColumn(name="x", lower=lower, upper=lower + width, bins=bins)
    s = Schema((col,))
    codes = encode(pd.DataFrame({"x": values}), s).codes[:, 0]
    # every value lands in a declared bin, whatever the data (the domain never comes from the data)
    assert ((codes >= 0) & (codes < bins)).all()
    # binning is monotone in the value
    order = np.argsort(values, kind="stable")
    assert (np.diff(codes[order]) >= 0).all()
    # decoding a cell and encoding it again gives the same cell
    back = decode(codes[:, None], s, rng=np.random.default_rng(1))
    assert (encode(back, s).codes[:, 0] == codes).all()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=5).filter(lambda t: t.strip() == t and t != ""), min_size=1, max_size=8, unique=True),
       st.booleans())
def test_schema_json_round_trip(categories, missing):
    s = Schema((
        CategoricalColumn(name="c", categories=tuple(categories), missing=missing),
        NumericColumn(name="n", lower=-1.5, upper=2.25, bins=3, missing=not missing),
    ))
    assert Schema.from_json(s.to_json()) == s
    assert s.sizes == (len(categories) + missing, 3 + (not missing))
