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
    ({"columns": [{"name": "a", "type": "numeric", "lower": -1e308, "upper": 1e308, "bins": 2}]}, "wider than a float64"),
    ({"columns": [{"name": "a", "type": "numeric", "lower": 1e16, "upper": 1e16 + 4, "bins": 10}]}, "narrower than float64"),
    ({"columns": [{"name": "a", "type": "numeric", "lower": -5e-324, "upper": 5e-324, "bins": 3}]}, "narrower than float64"),
    ({"columns": [{"name": "a", "type": "numeric", "lower": 0, "upper": 2.0**60, "bins": 10, "integer": True}]},
     "whole numbers on bounds as large as .* set integer to false"),
    ({"columns": [{"name": "a", "type": "numeric", "lower": 0, "upper": 1e12, "bins": 10, "decimals": 5}]},
     "5 decimals on bounds as large as .* use fewer decimals"),
    ({"columns": [{"name": "a", "type": "categorical", "categories": ["x"], "on_unknown": "missing"}]}, "needs missing"),
    ({"columns": [{"name": "a", "type": "numeric", "lower": 0, "upper": 10**400, "bins": 10}]},
     "upper must be a finite number"),  # a JSON integer no float64 holds
    ({"columns": [{"name": "a", "type": "categorical", "categories": ["x", None]}]}, "category None is not a name"),
    ({"columns": [{"name": "a", "type": "categorical", "categories": ["x", True]}]}, "category True is not a name"),
    ({"columns": [{"name": "a", "type": "categorical", "categories": ["x", ["y"]]}]}, r"category \['y'\] is not a name"),
    ({"columns": [{"name": "a", "type": "categorical", "categories": "xy"}]}, "need a \"categories\" list"),
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


# ---- declared precision: decimals --------------------------------------------------------------


def test_decimals_round_trip_and_default():
    col = NumericColumn(name="income", lower=0, upper=200_000, bins=5, decimals=2)
    s = Schema((col, NumericColumn(name="x", lower=0, upper=1, bins=2)))
    back = Schema.from_json(s.to_json())
    assert back == s
    assert back.column("income").decimals == 2 and back.column("x").decimals is None
    assert Schema.from_dict({"columns": [{"name": "a", "type": "numeric", "lower": 0, "upper": 1, "bins": 2,
                                          "decimals": 3.0}]}).columns[0].decimals == 3


@pytest.mark.parametrize("extra, fragment", [
    ({"decimals": -1}, "decimals must be a whole number from 0 to 9"),
    ({"decimals": 10}, "decimals must be a whole number from 0 to 9"),
    ({"decimals": 1.5}, "decimals must be a whole number from 0 to 9"),
    ({"decimals": True}, "decimals must be a whole number from 0 to 9"),
    ({"decimals": "2"}, "decimals must be a whole number from 0 to 9"),
    ({"decimals": 2, "integer": True}, "either integer"),
    ({"decimals": 0, "bins": 5}, r"no multiple of 1 \(0 decimals\)"),
    ({"decimals": 1, "bins": 20}, r"no multiple of 0.1 \(1 decimals\)"),
    ({"decimals": 9, "upper": 1e8}, "exceed float64 precision"),
])
def test_bad_decimals_are_input_errors(extra, fragment):
    raw = {"name": "a", "type": "numeric", "lower": 0, "upper": 1, "bins": 2, **extra}
    with pytest.raises(InputError, match=fragment):
        Schema.from_dict({"columns": [raw]})


def test_integer_ranges_are_the_zero_decimal_grid():
    col = NumericColumn(name="age", lower=16, upper=96, bins=6, integer=True)
    lo, hi = col.integer_ranges()
    assert lo.tolist() == [16, 30, 43, 56, 70, 83] and hi.tolist() == [29, 42, 55, 69, 82, 96]
    assert [a.tolist() for a in col.grid_ranges()] == [lo.tolist(), hi.tolist()]
    with pytest.raises(ValueError, match="no value grid"):
        NumericColumn(name="x", lower=0, upper=1, bins=2).grid_ranges()


@settings(max_examples=300, deadline=None)
@given(st.floats(-1e4, 1e4, allow_nan=False), st.floats(1e-2, 1e4, allow_nan=False), st.integers(1, 50),
       st.integers(0, 6))
def test_grid_ranges_match_encoding_exactly(lower, width, bins, d):
    """Every grid value k/10^d of bin b encodes to b; the grid points next to a range fall outside it."""
    upper = lower + width
    try:
        col = NumericColumn(name="x", lower=lower, upper=upper, bins=bins, decimals=d)
    except InputError as exc:
        assert "contains no multiple" in str(exc)
        return
    lo, hi = col.grid_ranges()
    assert (hi >= lo).all() and (lo[1:] == hi[:-1] + 1).all()  # contiguous: no grid point lost between bins
    scale = 10.0**d
    ks = np.unique(np.concatenate([lo, hi, lo + 1, hi - 1]))
    ks = ks[(ks >= lo[0]) & (ks <= hi[-1])]
    codes = encode(pd.DataFrame({"x": ks / scale}), Schema((col,))).codes[:, 0]
    np.testing.assert_array_equal(codes, np.searchsorted(lo, ks, side="right") - 1)
    # just outside the grid range: below lower, or above upper
    assert (lo[0] - 1) / scale < lower and (hi[-1] + 1) / scale > upper


def test_decimal_columns_decode_to_grid_values_in_their_bin():
    col = NumericColumn(name="score", lower=-1, upper=1, bins=7, decimals=3, missing=True)
    s = Schema((col,))
    codes = np.repeat(np.arange(8), 500)[:, None]
    out = decode(codes, s, rng=np.random.default_rng(0))["score"].to_numpy()
    assert np.isnan(out[codes[:, 0] == 7]).all()
    v = out[codes[:, 0] < 7]
    np.testing.assert_array_equal(np.round(v * 1000) / 1000, v)  # exactly the float of k / 10^3
    assert (encode(pd.DataFrame({"score": out}), s).codes[:, 0] == codes[:, 0]).all()


@pytest.mark.parametrize("method", ["histogram", "marginals"])
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_ranges_at_the_ends_of_float64_release_or_are_refused_never_crash(method: str, delta: float) -> None:
    """A range narrower than float64's normal numbers (one bin on [0, 5e-324]) releases (its automatic grid is the
    finest, 10^-9, as the rule's limit); before, the grid's logarithm overflowed (OverflowError, a traceback)."""

    from dpsynth.release import release
    from dpsynth.value_model import auto_decimals

    tiny = NumericColumn(name="t", lower=0.0, upper=5e-324, bins=1)
    assert auto_decimals(tiny) == 9
    schema = Schema((tiny, CategoricalColumn(name="c", categories=("a", "b"))))
    df = pd.DataFrame({"t": ["0", "5e-324"] * 50, "c": ["a", "b", "b", "a"] * 25})
    rel = release(df, schema, epsilon=1.0, delta=delta, method=method, rng=np.random.default_rng(1))
    v = pd.to_numeric(rel.synthetic["t"])
    assert len(v) > 0 and v.between(0.0, 5e-324).all()


def test_drafts_of_extreme_numbers_never_crash() -> None:
    """A column float64 cannot split into bins gets one bin; one it cannot bound at all is left out, by name."""

    from dpsynth.drafting import draft_schema

    df = pd.DataFrame({"sub": ["5e-324", "0"] * 10, "const": ["1e300"] * 20, "wide": ["-1e308", "1e308"] * 10,
                       "ok": [str(i) for i in range(20)], "id": [str(10**18 + 7919 * i) for i in range(20)]})
    schema, left_out = draft_schema(df)
    assert schema.column("sub").bins == 1
    assert not schema.column("id").integer  # whole numbers past 2^53 are not a grid float64 can hold
    assert set(left_out) == {"const", "wide"}


def test_categories_must_be_names_from_python_too() -> None:
    """A category list given in code is checked like a JSON one: numbers are names (their text), null is not."""
    assert CategoricalColumn(name="c", categories=(1, 2, 3.5)).categories == ("1", "2", "3.5")
    for bad in ("abc", ("a", None), ("a", float("nan")), ("a", np.bool_(True))):
        with pytest.raises(InputError, match="Column 'c'"):
            CategoricalColumn(name="c", categories=bad)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["a", " a", "a ", " a ", "\ta", "b", "b  ", "", " ", "3", " 3 ", "x y"]),
                min_size=1, max_size=30))
def test_a_drafted_schema_accepts_the_table_it_was_drafted_from(cells: list[str]) -> None:
    """The draft reads values as the release compares them: a category drafted as 'a' from a cell ' a ' made the
    release refuse the very table the schema came from."""
    from dpsynth.binning import encode
    from dpsynth.drafting import draft_schema

    df = pd.DataFrame({"c": cells, "n": [str(i) for i in range(len(cells))]})
    try:
        schema, _ = draft_schema(df)
    except InputError:  # every column empty: nothing to draft
        return
    enc = encode(df, schema)
    assert enc.codes.shape[0] == len(df)
