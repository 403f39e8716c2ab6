"""The value model (dpsynth.value_model): noise law, grid and bins, point masses, JSON, sensitivity,
ε accounting on the card, and a small neighbouring-dataset audit of the ε it spends."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from scipy import stats

import dpsynth
from dpsynth import noise
from dpsynth import value_model as vm_module
from dpsynth.accounting import Ledger
from dpsynth.binning import decode, encode
from dpsynth.errors import InputError
from dpsynth.neighbours import hierarchical_histogram_l1_sensitivity
from dpsynth.plan import split_value_budget
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema
from dpsynth.utility import value_model_ks
from dpsynth.value_model import ColumnGrid, Precision, ValueModel, fit_value_model, value_columns
from tests.audit_tools import epsilon_lower_bound


def _one(col: NumericColumn) -> Schema:
    return Schema((col,))


# ------------------------------------------------------------------------------ the noise law


def _one_level_noise(seed: int, **budget: float) -> tuple[ValueModel, np.ndarray]:
    """200 value models of one level (64 leaves, branching 64): the last model and every leaf's noise."""
    schema = _one(NumericColumn(name="x", lower=0, upper=63, bins=4, integer=True))
    values = np.repeat(np.arange(64), np.arange(64) % 7)
    df = pd.DataFrame({"x": values})
    true = np.bincount(values, minlength=64)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(200):
        vm = fit_value_model(df, schema, rng=rng, max_branching=64, **budget)
        tree = vm.trees["x"]
        assert tree.grid.levels == 1 and len(tree.counts[0]) == 64
        draws.append(tree.counts[0] - true)
    return vm, np.concatenate(draws)


def test_node_noise_is_discrete_laplace_at_the_stated_scale() -> None:
    """One level (64 leaves, branching 64): every leaf's noise is discrete Laplace(levels·Δ/ε)."""
    vm, z = _one_level_noise(11, epsilon=0.5)
    assert vm.scale == Fraction(2)  # Δ₁ = 1 per level, one level, ε = 1/2
    edges = np.arange(-8, 10)  # bins {≤-8}, -7 … 8, {≥9}
    obs = np.array([np.sum(z <= -8)] + [np.sum(z == k) for k in range(-7, 9)] + [np.sum(z >= 9)])
    pmf = noise.discrete_laplace_pmf(np.arange(-7, 9), Fraction(2))
    tail_lo = noise.discrete_laplace_pmf(np.arange(-400, -7), Fraction(2)).sum()
    tail_hi = noise.discrete_laplace_pmf(np.arange(9, 400), Fraction(2)).sum()
    expected = np.concatenate([[tail_lo], pmf, [tail_hi]]) * len(z)
    assert len(edges) == len(obs)
    assert stats.chisquare(obs, expected * obs.sum() / expected.sum()).pvalue > 1e-4


def test_scale_splits_epsilon_over_every_column_and_level() -> None:
    schema = Schema((
        NumericColumn(name="a", lower=0, upper=99_999, bins=10, integer=True),  # 100,000 leaves
        NumericColumn(name="b", lower=0, upper=100, bins=10, integer=True),  # 101 leaves
        CategoricalColumn(name="c", categories=("u", "v")),
    ))
    df = pd.DataFrame({"a": [0, 5, 70_000], "b": [40, 40, 3], "c": ["u", "v", "u"]})
    vm = fit_value_model(df, schema, epsilon=0.3, rng=np.random.default_rng(0))
    levels = {n: t.grid.levels for n, t in vm.trees.items()}
    assert set(levels) == {"a", "b"}
    total = sum(levels.values())
    assert vm.scale == Fraction(total) / Fraction(3, 10)
    card = vm.describe()
    assert sum(c["epsilon"] for c in card["columns"].values()) == pytest.approx(0.3)
    assert card["epsilon_per_level"] * total == pytest.approx(0.3)
    assert "Hay" in card["sources"] and "Qardaji" in card["sources"]


def test_sensitivity_under_replace_one_and_k_rows() -> None:
    assert hierarchical_histogram_l1_sensitivity("add-remove", 1, 3) == 3
    assert hierarchical_histogram_l1_sensitivity("replace-one", 1, 3) == 6
    assert hierarchical_histogram_l1_sensitivity("add-remove", 4, 2) == 8
    assert hierarchical_histogram_l1_sensitivity("replace-one", 4, 2) == 16
    with pytest.raises(InputError):
        hierarchical_histogram_l1_sensitivity("add-remove", 1, 0)
    schema = _one(NumericColumn(name="x", lower=0, upper=10, bins=2, integer=True))
    df = pd.DataFrame({"x": [1, 2, 3]})
    scales = {
        (rel, k): fit_value_model(df, schema, epsilon=1.0, neighbours=rel, max_contributions=k,
                                  rng=np.random.default_rng(0)).scale
        for rel in ("add-remove", "replace-one") for k in (1, 3)
    }
    base = scales[("add-remove", 1)]
    assert scales[("replace-one", 1)] == 2 * base
    assert scales[("add-remove", 3)] == 3 * base
    assert scales[("replace-one", 3)] == 6 * base


# ------------------------------------------------------------------- values in bin, on grid


@st.composite
def _columns(draw: st.DrawFn) -> NumericColumn:
    kind = draw(st.sampled_from(["integer", "decimals", "none"]))
    lower = draw(st.integers(-1000, 1000)) / draw(st.sampled_from([1, 10, 100]))
    span = draw(st.sampled_from([0.5, 3, 17, 100, 2500, 1e5, 2e6]))
    bins = draw(st.integers(1, 25))
    kw: dict = {"integer": True} if kind == "integer" else {"decimals": draw(st.integers(0, 3))} if kind == "decimals" else {}
    try:
        return NumericColumn(name="x", lower=lower, upper=lower + span, bins=bins, missing=draw(st.booleans()), **kw)
    except InputError:
        assume(False)
        raise


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(col=_columns(), seed=st.integers(0, 2**32 - 1), eps=st.sampled_from([0.05, 0.5, 5.0, 50.0]),
       mass=st.floats(0.0, 1.0), whole=st.booleans())
@example(col=NumericColumn(name="x", lower=1.0, upper=2_000_001.0, bins=1), seed=0, eps=0.05, mass=0.0, whole=False)
def test_values_stay_in_their_bin_and_on_the_grid(col: NumericColumn, seed: int, eps: float, mass: float,
                                                  whole: bool) -> None:
    rng = np.random.default_rng(seed)
    n = 400
    raw = col.lower + rng.random(n) * (col.upper - col.lower)
    raw[rng.random(n) < mass] = col.lower + (col.upper - col.lower) * 0.37  # a point mass
    if whole:  # whole numbers that the schema may not declare: the release may choose that grid
        raw = np.clip(np.rint(raw), col.lower, col.upper)
    if col.missing:
        raw[rng.random(n) < 0.1] = np.nan
    schema = _one(col)
    vm = fit_value_model(pd.DataFrame({"x": raw}), schema, epsilon=eps, rng=rng)
    codes = rng.integers(0, col.n_cells, size=(300, 1))
    out = decode(codes, schema, rng=rng, values=vm)
    again = encode(out, schema).codes
    np.testing.assert_array_equal(again, codes)  # every value lies in its bin (missing stays missing)
    v = out["x"].to_numpy(dtype=np.float64, na_value=np.nan)
    v = v[~np.isnan(v)]
    assert np.all((v >= col.lower) & (v <= col.upper))
    if "x" not in vm.trees:  # a declared grid with one point per bin: the bin is the value, no model
        lo, hi = col.grid_ranges()
        assert col.grid_decimals is not None and np.array_equal(lo, hi)
        d = col.grid_decimals
        np.testing.assert_array_equal(np.rint(v * 10.0**d) / 10.0**d, v)
    else:
        g = vm.trees["x"].grid
        k = np.rint(v * 10.0**g.decimals) if g.decimals >= 0 else np.rint(v / 10.0 ** (-g.decimals))
        # On the grid: whole numbers, declared or automatic decimals; on an estimated grid a bound with more
        # digits than the grid is written as itself at the grid point beside it (binning._bounds_as_written):
        # 2,000,001 on steps of 1,000.
        written = (v == col.lower) | (v == col.upper) if col.grid_decimals is None else np.zeros(len(v), bool)
        np.testing.assert_array_equal(g.values(k)[~written], v[~written])
        assert np.all(np.abs(g.values(k)[written] - v[written]) <= 1e-6 * np.maximum(1.0, np.abs(v[written])))
        if col.grid_decimals is not None:
            assert g.decimals == col.grid_decimals
    if col.integer:
        assert str(out["x"].dtype) in {"int64", "Int64"}


def test_no_budget_for_a_column_whose_bins_are_its_values() -> None:
    """A declared grid with one point per bin (education_num: 16 bins over 1…16) needs no value
    model; with no other numeric column the whole ε stays with the main method."""
    one = NumericColumn(name="x", lower=1, upper=16, bins=16, integer=True)
    wide = NumericColumn(name="y", lower=0, upper=99, bins=2, integer=True)
    assert value_columns(_one(one)) == []
    assert split_value_budget(1.0, _one(one), None) == (1.0, 0.0)
    both = Schema(columns=(one, wide))
    assert [c.name for c in value_columns(both)] == ["y"]


def test_a_bin_without_released_mass_is_uniform_on_its_grid() -> None:
    col = NumericColumn(name="x", lower=0, upper=99, bins=2, integer=True)
    fitted = fit_value_model(pd.DataFrame({"x": [3] * 5000}), _one(col), epsilon=1.0, rng=np.random.default_rng(1))
    d = fitted.to_dict()
    tree = d["columns"]["x"]
    # a released tree whose other level-1 nodes came out below zero: no mass outside node 0
    tree["counts"][0] = [c if n == 0 else -5 for n, c in zip(tree["nodes"][0], tree["counts"][0], strict=True)]
    vm = ValueModel.from_dict(d)
    dist = vm.bin_distribution("x", col)
    k_hi, p_hi = dist[1]  # bin [49.5, 99]: the released tree gives it no mass
    assert np.allclose(p_hi, 1 / len(k_hi))
    k = vm.sample_in_bins("x", np.ones(20_000, dtype=np.int64), rng=np.random.default_rng(2), col=col)
    assert k.min() == k_hi[0] and k.max() == k_hi[-1]
    assert stats.chisquare(np.bincount(k - k_hi[0])).pvalue > 1e-4
    low = vm.sample_in_bins("x", np.zeros(1000, dtype=np.int64), rng=np.random.default_rng(3), col=col)
    assert np.mean(low == 3) > 0.99


def test_values_inside_a_bin_are_rounded_to_the_model_within_one_row() -> None:
    """Systematic draws inside each bin: every grid point of a bin holds its expected count
    k·P(value | bin) within one row (i.i.d. draws: off by √(k·P), tens of rows here), missing rows
    take no share of a bin's points, and one row's value still has the model's law (χ² over seeds)."""
    rng = np.random.default_rng(11)
    col = NumericColumn(name="x", lower=0, upper=29, bins=3, integer=True)
    df = pd.DataFrame({"x": np.minimum(rng.geometric(0.15, 20_000) - 1, 29)})
    vm = fit_value_model(df, _one(col), epsilon=2.0, rng=np.random.default_rng(1), max_branching=30)
    dist = vm.bin_distribution("x", col)
    codes = np.repeat([0, 1, 2, 3], [7_000, 2_500, 501, 900])  # 3: missing, masked by the caller
    order = np.random.default_rng(3).permutation(codes)
    k = vm.sample_in_bins("x", order, rng=np.random.default_rng(2), col=col)
    for b, (grid, p) in enumerate(dist):
        got = np.bincount(k[order == b] - grid[0], minlength=len(grid))
        assert np.abs(got - (order == b).sum() * p).max() < 1.0 + 1e-6, b
    one = np.array([vm.sample_in_bins("x", np.array([0, 0, 3]), rng=np.random.default_rng(s), col=col)[0]
                    for s in range(4_000)])
    grid, p = dist[0]
    expected = 4_000 * p
    observed = np.bincount(one - grid[0], minlength=len(grid))
    keep = expected > 5
    assert stats.chisquare(observed[keep], expected[keep] * observed[keep].sum() / expected[keep].sum()).pvalue > 1e-4


# ------------------------------------------------------------------------- point masses


def test_point_mass_survives_a_release_at_epsilon_one() -> None:
    """90% zeros among 50,000 people: the synthetic share of 0 is within 0.02 (uniform draws: ~0.09)."""
    rng = np.random.default_rng(5)
    n = 50_000
    gain = np.where(rng.random(n) < 0.9, 0, np.minimum(np.rint(rng.lognormal(8, 1, n)), 99_999)).astype(int)
    hours = np.where(rng.random(n) < 0.45, 40, rng.integers(1, 99, n))
    df = pd.DataFrame({"gain": gain, "hours": hours, "sex": rng.choice(["f", "m"], n)})
    schema = Schema((
        NumericColumn(name="gain", lower=0, upper=99_999, bins=10, integer=True),
        NumericColumn(name="hours", lower=0, upper=100, bins=10, integer=True),
        CategoricalColumn(name="sex", categories=("f", "m")),
    ))
    rel = dpsynth.release(df, schema, epsilon=1.0, seed=3)
    syn = rel.synthetic
    assert abs(np.mean(syn["gain"] == 0) - np.mean(gain == 0)) < 0.02
    assert abs(np.mean(syn["hours"] == 40) - np.mean(hours == 40)) < 0.02
    assert stats.ks_2samp(gain, syn["gain"]).statistic < 0.03
    plain = dpsynth.release(df, schema, epsilon=1.0, seed=3, value_share=0)
    assert np.mean(plain.synthetic["gain"] == 0) < 0.2  # what the value model fixes


def test_a_declared_grid_finer_than_a_million_points_keeps_its_point_masses() -> None:
    """Whole dollars declared on [0, 10,000,000] (ten million grid points): 60% zeros and 10% at 40,000
    come out at their points (leaves of ten points, as before, put a tenth of the zeros at 0); so do
    the zeros of a column declared to nine decimals on [0, 10] (ten billion points)."""
    rng = np.random.default_rng(8)
    n = 20_000
    u = rng.random(n)
    income = np.where(u < 0.6, 0, np.where(u < 0.7, 40_000, np.rint(rng.lognormal(10, 1, n)))).astype(np.int64)
    col = NumericColumn(name="income", lower=0, upper=10_000_000, bins=10, integer=True)
    assert ColumnGrid.of(col).width == 1 and ColumnGrid.of(col).leaves == 10_000_001
    tiny = NumericColumn(name="x", lower=0, upper=10, bins=5, decimals=9)
    assert ColumnGrid.of(tiny).width == 1 and ColumnGrid.of(tiny).leaves == 10**10 + 1
    x = np.where(rng.random(n) < 0.4, 0.0, np.round(rng.uniform(0, 10, n), 9))
    schema = Schema((col, tiny, CategoricalColumn(name="g", categories=("a", "b"))))
    df = pd.DataFrame({"income": income, "x": x, "g": rng.choice(["a", "b"], n)})
    syn = dpsynth.release(df, schema, epsilon=1.0, delta=1e-9, method="marginals", seed=4).synthetic
    assert abs(np.mean(syn["income"] == 0) - 0.6) < 0.03
    assert abs(np.mean(syn["income"] == 40_000) - np.mean(income == 40_000)) < 0.03
    assert stats.ks_2samp(income, syn["income"]).statistic < 0.05
    assert stats.ks_2samp(x, syn["x"]).statistic < 0.05
    # the share of zeros at nine decimals has a noise sd of about 0.01 per release (and the shrinkage of the
    # tree's eight levels a bias of about -0.02): judged on the mean of three releases
    more = [dpsynth.release(df, schema, epsilon=1.0, delta=1e-9, method="marginals", seed=s).synthetic for s in (5, 6)]
    assert abs(np.mean([np.mean(s["x"] == 0) for s in (syn, *more)]) - 0.4) < 0.03


def test_continuous_column_gets_an_automatic_grid_that_keeps_point_masses() -> None:
    rng = np.random.default_rng(8)
    n = 20_000
    x = np.where(rng.random(n) < 0.8, 0.0, rng.uniform(0, 100_000, n))
    col = NumericColumn(name="x", lower=0, upper=100_000, bins=10)
    grid = ColumnGrid.of(col)
    assert not grid.declared and grid.decimals == -2  # steps of 100: at most 4,096 points
    vm = fit_value_model(pd.DataFrame({"x": x}), _one(col), epsilon=0.5, rng=rng)
    out = decode(encode(pd.DataFrame({"x": x}), _one(col)).codes, _one(col), rng=rng, values=vm)
    assert out["x"].dtype == np.float64
    assert abs(np.mean(out["x"] == 0.0) - 0.8) < 0.02


# ------------------------------------------------------------- the precision of undeclared columns


@pytest.mark.parametrize(("lower", "upper", "bins", "expected", "fallback", "exact"), [
    (0, 10, 5, (0, 1, 2, 3, 4), 2, 8),      # counts of relatives: whole numbers … 10^-4; values off all: the automatic 0.01
    (16, 96, 10, (0, 1, 2, 3), 1, 7),       # age: whole numbers, tenths (automatic), or finer when the values lie on it
    (0, 600, 12, (0, 1, 2), None, 6),       # a fare: whole pounds (the automatic grid), or finer up to pence
    (0, 50, 10, (0, 1, 2, 3), 1, 7),        # a lab value: up to thousandths (50,001 points), else tenths
    (0, 99_999, 10, (-2, -1, 0), None, 4),  # capital gains: the automatic steps of 100, of 10, or whole dollars
    (0, 5_000, 10, (-1, 0, 1), 0, 5),       # money: steps of 10, whole, or tenths when the values lie on them
    (0, 1_500_000, 10, (-3, -2, -1), -3, 2),  # too many whole numbers for a regular grid: they are exact ones
    (0, 1, 4, (1, 2, 3, 4, 5), 3, 9),       # a bin without a whole number: from tenths
    (0, 0.001, 2, (3, 4, 5, 6, 7, 8), 6, 9),  # a narrow range: from thousandths, 10^-9 the only exact grid
])
def test_precision_candidates_come_from_the_schema_alone(lower: float, upper: float, bins: int,
                                                          expected: tuple[int, ...] | None, fallback: int | None,
                                                          exact: int | None) -> None:
    from dpsynth.value_model import EXACT_GRID_POINTS, FINE_GRID_POINTS, Precision, _grid_ranges

    col = NumericColumn(name="x", lower=lower, upper=upper, bins=bins)
    prec = Precision.of(col)
    assert prec.candidates[:prec.n_regular] == expected
    assert prec.fallback == fallback
    assert (prec.candidates[-1] if prec.regular is not None else None) == exact
    # no regular candidate has more than FINE_GRID_POINTS points, no exact one more than EXACT_GRID_POINTS,
    # and every candidate has a point in every bin
    assert (upper - lower) * 10.0 ** prec.candidates[prec.n_regular - 1] < FINE_GRID_POINTS
    assert (upper - lower) * 10.0 ** prec.candidates[-1] < EXACT_GRID_POINTS
    for d in prec.candidates:
        lo, hi = _grid_ranges(col.edges(), d)
        assert np.all(hi >= lo)
    assert Precision.of(NumericColumn(name="x", lower=lower, upper=upper, bins=bins, decimals=3)) is None


def test_precision_classes_and_rule() -> None:
    from dpsynth.value_model import Precision

    p = Precision((0, 1, 2))
    values = np.array([3.0, 7.1, 7.11, 7.111, 0.0, -2.5, 1e-12, 5.55])
    np.testing.assert_array_equal(p.classes(values), [0, 1, 2, 3, 0, 1, 0, 2])
    assert p.choose((10_000, 50, 50, 50), sd=40) == 0     # 1.5% off whole numbers: within the tolerance
    assert p.choose((10_000, 150, 50, 40), sd=40) == 0    # 2.4% off: within two standard deviations of it
    assert p.choose((10_000, 400, 10, 0), sd=40) == 1     # 4% off whole numbers, 0.1% off tenths: tenths
    assert p.choose((5_000, 5_000, 400, 10), sd=40) == 2  # 4% off tenths
    assert p.choose((0, 0, 9_000, 1_000), sd=40) == 2     # finer than every candidate: the finest
    assert p.choose((150, -20, 3, 0), sd=40) == 2         # too few rows to tell
    assert p.choose((0, 0, 0, 0), sd=0.0) == 2
    # with a fallback coarser than the finest candidate: the finest only for values on it
    q = Precision((0, 1, 2, 3), fallback=1)
    assert q.choose((0, 0, 40, 9_960, 0), sd=40) == 3      # every value on thousandths
    assert q.choose((0, 0, 40, 960, 9_000), sd=40) == 1    # continuous values: the fallback, not the finest
    assert q.choose((10_000, 50, 50, 0, 50), sd=40) == 0
    assert q.choose((150, -20, 3, 0, 0), sd=40) == 1       # too few rows to tell: the fallback


@pytest.mark.parametrize("delta", [0.0, 1e-9])
def test_undeclared_whole_numbers_come_out_whole_and_other_values_keep_their_decimals(delta: float) -> None:
    """Age in whole years and a fare in pence, neither declared: the release finds the grids privately."""
    rng = np.random.default_rng(11)
    n = 5000
    age = rng.integers(18, 90, n).astype(float)
    age[:20] = 0.5  # a few infants' ages in months: 0.4% off the whole numbers
    fare = np.round(np.where(rng.random(n) < 0.3, 7.11 + rng.integers(0, 5, n) * 0.01, rng.uniform(0, 500, n)), 2)
    df = pd.DataFrame({"age": age, "fare": fare, "sex": rng.choice(["f", "m"], n)})
    schema = Schema((NumericColumn(name="age", lower=0, upper=100, bins=10),
                     NumericColumn(name="fare", lower=0, upper=600, bins=12),
                     CategoricalColumn(name="sex", categories=("f", "m"))))
    rel = dpsynth.release(df, schema, epsilon=1.0, delta=delta, seed=4)
    trees = rel.values.trees
    assert trees["age"].grid.decimals == 0 and trees["fare"].grid.decimals == 2
    syn = rel.synthetic
    assert np.all(syn["age"] == np.round(syn["age"]))
    assert np.mean(syn["fare"] != np.round(syn["fare"])) > 0.5  # pence survive (whole pounds: 0)
    # uniform inside bins would give ~0.3 (the 30% at 7.11–7.15 lost); at pure ε_v = 0.1 the smoothing
    # (_smooth) blurs that cluster into neighbouring pence a little: 0.076 on average over 10 seeds, at most 0.175
    assert stats.ks_2samp(fare, syn["fare"]).statistic < 0.15
    col = rel.card["value_model"]["stage"]["columns"]["age"]
    noisy = col["precision"]["noisy_rows_by_coarsest_grid"]
    assert "estimated" in col["grid"] and list(noisy) == [f"multiples of 10^-{d}" if d else "multiples of 10^0"
                                                          for d in range(4)] + ["none of these"]
    # 0.4% of the ages and none of the fares lie off the grid each chose: rounding cannot move either far,
    # so neither is measured for the finer (exact) grids, and their part of the budget goes to the levels
    for name in ("age", "fare"):
        p = rel.card["value_model"]["stage"]["columns"][name]["precision"]
        assert "of_none_of_these_by_coarsest_exact_grid" not in p and p["exact_grids"].startswith("not measured: the noisy")
    assert rel.values.exact_precision_noise is None and rel.values.rounding_gap_noise is None
    assert noisy["multiples of 10^0"] > 4000
    from dpsynth.card import card_markdown

    assert "| age | numeric | [0, 100] in 10 bins; values on multiples of 10^0 (estimated" in card_markdown(rel.card)


def test_values_finer_than_the_automatic_grid_keep_their_decimals_and_continuous_ones_get_one_step_finer() -> None:
    """A lab value with three decimals on [0, 50] (automatic grid: tenths) is released on thousandths, so its
    real values do not stand between the synthetic ones; a continuous column, which lies on no grid, gets
    the grid that makes its released rounding gap small: tenths moved its distribution by about 1.6% of
    the rows (KS 0.020 at ε = 3 over 6 seeds), hundredths 10× less (KS 0.008), and a finer grid would only
    add levels; the choice survives the JSON round trip."""
    rng = np.random.default_rng(12)
    n = 20_000
    lab = np.round(rng.lognormal(1, 0.5, n), 3)
    cont = rng.lognormal(1, 0.5, n)
    df = pd.DataFrame({"lab": lab, "cont": cont})
    schema = Schema((NumericColumn(name="lab", lower=0, upper=50, bins=10),
                     NumericColumn(name="cont", lower=0, upper=50, bins=10)))
    rel = dpsynth.release(df, schema, epsilon=3.0, delta=1e-9, method="marginals", seed=5)
    trees = rel.values.trees
    assert trees["lab"].grid.decimals == 3 and trees["cont"].grid.decimals == 2
    assert trees["lab"].precision[0].fallback == 1 and trees["cont"].precision[0].fallback == 1
    assert stats.ks_2samp(cont, rel.synthetic["cont"]).statistic < 0.015
    syn = rel.synthetic
    assert np.mean(np.round(syn["lab"] * 100) != syn["lab"] * 100) > 0.5  # thousandths survive
    # on tenths the KS distance alone would be about 0.02 (real values between the synthetic ones)
    assert stats.ks_2samp(lab, syn["lab"]).statistic < 0.02
    back = ValueModel.from_dict(json.loads(rel.values.to_json()))
    assert back.to_json() == rel.values.to_json() and back.trees["lab"].precision[0].fallback == 1
    assert "else multiples of 10^-1" in rel.card["value_model"]["stage"]["columns"]["lab"]["precision"]["rule"]


def test_values_with_many_digits_that_repeat_keep_them_and_continuous_wide_ones_keep_their_grid() -> None:
    """Logarithms of a survey's five coinsurance rates stored with six decimals (as in the RAND Health Insurance
    Experiment extract, where hundredths gave a KS distance of 0.20): the rounding gap of hundredths is
    large, so the release puts them on millionths and the synthetic values are the real ones. Whole
    numbers spread over [0, 1,500,000] (Adult's fnlwgt) lose little on steps of 1,000 and keep them."""
    rng = np.random.default_rng(21)
    n = 20_000
    rates = np.round(np.log1p(np.array([0.0, 25.0, 50.0, 95.0, 100.0])), 6)
    coins = rng.choice(rates, n, p=[0.55, 0.2, 0.07, 0.13, 0.05])
    weight = np.round(rng.lognormal(12, 0.5, n)).clip(0, 1_500_000)
    df = pd.DataFrame({"coins": coins, "weight": weight})
    schema = Schema((NumericColumn(name="coins", lower=0, upper=4.7, bins=5),
                     NumericColumn(name="weight", lower=0, upper=1_500_000, bins=10)))
    rel = dpsynth.release(df, schema, epsilon=1.0, delta=1e-9, method="marginals", seed=3)
    trees = rel.values.trees
    assert trees["coins"].grid.decimals == 6 and trees["weight"].grid.decimals == -3
    syn = rel.synthetic
    assert np.isin(syn["coins"], rates).mean() > 0.9  # on hundredths: only the zeros (0.55)
    assert stats.ks_2samp(coins, syn["coins"]).statistic < 0.05  # hundredths: 0.2 whatever ε
    stage = rel.card["value_model"]["stage"]
    gap = stage["columns"]["coins"]["precision"]["noisy_rounding_gap_rows"]
    assert gap > 0.15 * n  # the largest rate's 20% of the rows stands between 3.258097 and 3.26
    assert "rounding gap" in stage["columns"]["coins"]["precision"]["rule"] and "rounding gaps" in stage["split"]
    back = ValueModel.from_dict(json.loads(rel.values.to_json()))
    assert back.to_json() == rel.values.to_json()


def test_a_bound_with_more_digits_than_the_grid_is_drawn_as_itself() -> None:
    """A schema drafted from the data has the data's extremes for bounds: here 1/√2 written with 15 significant
    digits, the value of a third of the rows (the rest are 0). No grid of the value model holds it, so it was
    drawn as 0.707106781 and no synthetic value equalled a real one there (KS 1/3 whatever ε). The grid point
    beside a bound within a millionth of it is now written as the bound; a yes/no column's bounds of −0.5 and
    1.5, half a step off its whole numbers, are left alone."""
    rng = np.random.default_rng(5)
    n = 6000
    top = 0.707106781186547
    df = pd.DataFrame({"x": np.where(rng.random(n) < 1 / 3, top, 0.0), "flag": rng.integers(0, 2, n).astype(float)})
    schema = Schema((NumericColumn(name="x", lower=0.0, upper=top, bins=10),
                     NumericColumn(name="flag", lower=-0.5, upper=1.5, bins=2)))
    rel = dpsynth.release(df, schema, epsilon=1.0, delta=1e-9, method="marginals", seed=3)
    x = rel.synthetic["x"].to_numpy(np.float64)
    assert rel.values.trees["x"].grid.decimals <= 9  # no grid holds the bound itself
    assert 0.25 < np.mean(x == top) < 0.4 and x.min() >= 0.0 and x.max() == top
    assert stats.ks_2samp(df["x"], x).statistic < 0.2  # 1/3 when the bound came out as 0.707106781
    assert set(np.unique(rel.synthetic["flag"])) <= {0.0, 1.0}


@pytest.mark.parametrize(("bound", "moved"), [(10.6000003814697, True), (10.6, False), (10.55, False), (10.6 + 1e-4, False)])
def test_only_a_bound_within_a_millionth_of_its_grid_point_replaces_it(bound: float, moved: bool) -> None:
    from dpsynth.binning import _bounds_as_written

    col = NumericColumn(name="x", lower=0.0, upper=bound, bins=4)
    k = np.array([0, 50, 105, 106])
    values = k / 10.0
    grid = ColumnGrid.of(col, decimals=1)
    assert (grid.first, grid.last) == (0, int(np.floor(bound * 10)))
    out = _bounds_as_written(values, k, grid, col)
    last = int(np.floor(bound * 10))
    expect = np.where(k == last, bound, values) if moved else values
    np.testing.assert_array_equal(out, expect)


def test_only_columns_with_rows_off_their_grid_are_measured_for_exact_grids_and_get_their_budget() -> None:
    """Whole dollars with 30% zeros on [0, 10,000,000] (off every grid of at most 262,144 points: 70% of the
    rows) beside four columns of whole numbers: only the dollars are measured for the exact grids, so
    their second histogram and rounding gap get the whole exact budget (noise as for one column), and
    the four others' part goes to the levels. With the budget split over all five, the gap's noise was
    √5 times larger and rounding to steps of 10,000 (a KS distance of 0.07 at 10,000 rows) went unseen."""
    rng = np.random.default_rng(5)
    n = 10_000
    income = np.where(rng.random(n) < 0.3, 0, np.rint(rng.lognormal(10.5, 0.8, n)))
    cols = {"income": (income, 10_000_000)} | {f"k{i}": (rng.integers(0, 30, n).astype(float), 60) for i in range(4)}
    schema = Schema(tuple(NumericColumn(name=k, lower=0, upper=hi, bins=6) for k, (_, hi) in cols.items()))
    df = pd.DataFrame({k: v for k, (v, _) in cols.items()})
    rho = 0.001
    vm = fit_value_model(df, schema, rho=rho, rng=np.random.default_rng(2))
    stage = vm.describe()["columns"]
    assert "noisy_rounding_gap_rows" in stage["income"]["precision"]
    for k in ("k0", "k1", "k2", "k3"):
        assert stage[k]["precision"]["exact_grids"].startswith("not measured: the noisy counts")
        assert vm.trees[k].grid.decimals == 0
    # one column shares the exact budget: σ² = Δ²/(2·share·ρ) with Δ² = 1 (add-remove)
    assert float(vm.rounding_gap_noise) == pytest.approx(1 / (2 * float(vm_module.ROUNDING_GAP_SHARE_OF_BUDGET) * rho), rel=1e-6)
    assert vm.trees["income"].grid.decimals == 0  # its gap on steps of 10,000 is significant
    assert value_model_ks(income, schema.columns[0], vm) < 0.03
    assert Precision((0, 1, 2), 1, None).may_need_exact((9_950, 0, 0, 50), sd=10.0) is False
    assert Precision((0, 1, 2), 1, None).may_need_exact((9_500, 0, 0, 500), sd=10.0) is True


def test_a_column_too_small_for_its_rounding_gap_to_show_is_not_measured_for_exact_grids() -> None:
    """Pure DP with ε_v = 0.1 on 2,000 rows: three noise standard deviations of a rounding gap exceed half the
    rows, so no second histogram or gap is measured, their part of ε_v goes to the levels (it still adds
    up to ε_v), and the card says why."""
    rng = np.random.default_rng(5)
    col = NumericColumn(name="x", lower=0, upper=80, bins=8)
    vm = fit_value_model(pd.DataFrame({"x": rng.integers(0, 80, 2000).astype(float)}), _one(col), epsilon=0.1, rng=rng)
    prec, noisy = vm.trees["x"].precision
    assert prec.regular is not None and len(noisy) == prec.n_counts[0]
    spent = len(vm.trees["x"].nodes) * vm.unit_cost(vm.scale) + vm.unit_cost(vm.precision_noise)
    assert 0.99 * 0.1 < spent <= 0.1 * (1 + 1e-12)
    assert "not measured" in vm.describe()["columns"]["x"]["precision"]["exact_grids"]
    assert ValueModel.from_dict(json.loads(vm.to_json())).to_json() == vm.to_json()


def _brute_rounding_gap(values: np.ndarray, decimals: int) -> int:
    r = np.round(values * 10.0**decimals) / 10.0**decimals
    at = np.unique(np.concatenate([values, r]))
    return int(np.max(np.abs(np.searchsorted(np.sort(values), at, side="right")
                              - np.searchsorted(np.sort(r), at, side="right")), initial=0))


def test_values_far_below_the_automatic_grid_get_a_grid_that_holds_them() -> None:
    """Whole numbers log-normal around 160,000 under bounds of [0, 10^12] (more whole numbers than any
    grid of 2^30 points holds): rounding to the automatic grid (steps of 10^9) moves nearly every row,
    so the gap says nothing of a finer grid's and the finest candidate (steps of 1,000) is chosen; with
    steps of 10^6 (the extrapolated choice) most values had become 0 and the KS distance was 0.70.
    And amounts with cents (60% zeros) under [0, 10^6], whose rounding gap on steps of 1,000 is 1.5 to 3
    noise sds: a finer regular grid (steps of 10 at most), never steps of 1,000."""
    rng = np.random.default_rng(6)
    n = 20_000
    big = np.round(rng.lognormal(12, 2, n))
    col = NumericColumn(name="v", lower=0, upper=1e12, bins=3)
    vm = fit_value_model(pd.DataFrame({"v": big}), _one(col), rho=0.01, rng=np.random.default_rng(1))
    assert vm.trees["v"].grid.decimals == -3
    assert value_model_ks(big, col, vm) < 0.03

    amount = NumericColumn(name="a", lower=0, upper=1e6, bins=3)
    p = Precision.of(amount)
    assert p is not None and p.fine == -3 and p.candidates[p.n_regular - 1] == -1
    n1, n2 = p.n_counts
    first = [4_800, 0, 0, 3_200]        # zeros on steps of 1,000; the rest off every regular grid
    second = [40, 260, 2_900, 0, 0]     # … on cents
    assert len(first) == n1 and len(second) == n2
    assert p.choose(first + second + [380], sd=130, sd_exact=290, sd_gap=236) == -1   # 1.6 sds: tens
    assert p.choose(first + second + [300], sd=130, sd_exact=290, sd_gap=236) == -3   # 1.3 sds: unchanged
    assert p.choose(first + second + [800], sd=130, sd_exact=290, sd_gap=236) == 2    # 3.4 sds: cents


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 2000), min_size=1, max_size=60), st.integers(0, 2000), st.sampled_from([0, 1, 2]))
def test_rounding_gap_is_the_ks_distance_in_rows_and_one_row_moves_it_by_at_most_one(
        units: list[int], extra: int, decimals: int) -> None:
    """:func:`rounding_gap` from leaf counts on thousandths equals the brute-force KS distance in rows between the
    values and their values rounded to ``decimals``; adding a row changes it by at most 1 (its sensitivity)."""
    from dpsynth.neighbours import rounding_gap_sensitivity
    from dpsynth.value_model import leaf_index, rounding_gap

    col = NumericColumn(name="x", lower=0, upper=2, bins=2)
    grid = ColumnGrid.of(col, decimals=3)

    def gap(v: np.ndarray) -> int:
        occ, cnt = np.unique(leaf_index(v, col, grid), return_counts=True)
        return rounding_gap(occ, cnt, grid, decimals)

    values = np.array(units, dtype=np.float64) / 1000
    # half-way values round to even in both (np.round and the grid's rint)
    assert gap(values) == _brute_rounding_gap(values, decimals)
    more = np.append(values, extra / 1000)
    assert abs(gap(more) - gap(values)) <= rounding_gap_sensitivity("add-remove")


def test_precision_choose_goes_exact_only_for_a_large_significant_gap() -> None:
    """The rule of :meth:`Precision.choose` on hand-made noisy counts (first histogram, second, gap): exact
    grids for a gap of 3 noise sds and 1% of the rows, finer regular grids only for 1.5 to 3 sds."""
    from dpsynth.value_model import Precision

    p = Precision.of(NumericColumn(name="x", lower=0, upper=4.7, bins=5))
    assert p is not None and p.candidates[:p.n_regular] == (0, 1, 2, 3, 4) and p.candidates[-1] == 8
    n1, n2 = p.n_counts
    first = [11_000, 0, 0, 0, 0, 9_000]  # 45% of the rows off every regular grid
    on_six = [0, 9_000, 0, 0, 0]          # … all on millionths (candidates 5, 6, 7, 8, none)
    assert len(first) == n1 and len(on_six) == n2
    assert p.regular_choice(first, sd=100) == 2  # nothing fits: the automatic hundredths
    assert p.choose(first + on_six + [4_000], sd=100, sd_exact=300, sd_gap=300) == 6
    assert p.choose(first + on_six + [150], sd=100, sd_exact=300, sd_gap=300) == 2    # gap < 1% of the rows
    assert p.choose(first + on_six + [400], sd=100, sd_exact=300, sd_gap=300) == 2    # gap < 1.5 noise sds
    # 1.5 to 3 noise sds: finer by the decades of the gap over a quarter of 1% (800 / 50), but regular only
    assert p.choose(first + on_six + [800], sd=100, sd_exact=300, sd_gap=300) == 4
    assert p.choose(first + on_six + [500], sd=100, sd_exact=300, sd_gap=300) == 3
    assert p.choose(first + on_six + [4_000], sd=100) == 2                             # no second histogram
    mostly = [0, 8_000, 0, 0, 1_000]      # 11% off millionths, beyond the tolerance: still the finest
    assert p.choose(first + mostly + [4_000], sd=100, sd_exact=300, sd_gap=300) == 8
    halves = [19_000, 600, 0, 0, 0, 0]    # 3% on tenths: whole numbers pass the noise allowance …
    assert p.regular_choice(halves, sd=300) == 0
    assert p.choose(halves + [0] * 5 + [600], sd=300, sd_exact=100, sd_gap=100) == 1  # … and the gap moves them
    continuous = [0, 0, 0, 0, 9_000]      # on no exact grid: one step finer per decade of the gap
    assert p.choose(first + continuous + [2_000], sd=100, sd_exact=300, sd_gap=300) == 2 + 2
    assert p.choose(first + continuous + [10_000_000], sd=100, sd_exact=300, sd_gap=300) == 8  # at most the finest
    # rounding moves half the rows or more: the values lie below the grid's scale, the finest candidate
    assert p.choose(first + continuous + [9_000], sd=100, sd_exact=300, sd_gap=300) == 2 + 3
    assert p.choose(first + continuous + [10_000], sd=100, sd_exact=300, sd_gap=300) == 8


@pytest.mark.parametrize("planted_bug", [False, True])
def test_audit_rounding_gap_spends_only_its_share(planted_bug: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Neighbours under add-remove: 1,970 rows at 1 and 30 at 2.00001 (1.5% off the whole numbers: the regular
    choice stays whole numbers, and rows enough off it to have their rounding gap measured; the precision
    counts are exact enough at ε_v = 30), and the same with one row at 2.4 added, which moves the rounding gap
    of whole numbers from 30 to 31. The gap is ROUNDING_GAP_SHARE_OF_BUDGET·ε_v = 0.9-DP, and the event
    "noisy gap ≥ 31" shows all of it; a planted bug that gives it twice its share must exceed it."""
    if planted_bug:
        monkeypatch.setattr(vm_module, "ROUNDING_GAP_SHARE_OF_BUDGET", 2 * vm_module.ROUNDING_GAP_SHARE_OF_BUDGET)
    schema = _one(NumericColumn(name="x", lower=0, upper=15, bins=2))
    small = pd.DataFrame({"x": [1.0] * 1970 + [2.00001] * 30})
    large = pd.DataFrame({"x": list(small["x"]) + [2.4]})

    def hits(df: pd.DataFrame, runs: int, rng: np.random.Generator) -> int:
        out = 0
        for _ in range(runs):
            prec, noisy = fit_value_model(df, schema, epsilon=30.0, rng=rng).trees["x"].precision
            assert prec.regular_choice(noisy, sd=1.0) == 0 and len(noisy) == sum(prec.n_counts) + 1
            out += noisy[-1] >= 31
        return out

    _assert_audit(hits, large, small, 2000, (500, 600), float(vm_module.ROUNDING_GAP_SHARE_OF_BUDGET) * 30.0, planted_bug)


def _one_row_added(n: int, extra: float) -> tuple[Schema, pd.DataFrame, pd.DataFrame]:
    """A column on [0, 15] in two bins: ``n`` rows at 1.0, and the same with one row at ``extra`` added
    (neighbours under add-remove)."""
    schema = _one(NumericColumn(name="x", lower=0, upper=15, bins=2))
    return schema, pd.DataFrame({"x": [1.0] * n}), pd.DataFrame({"x": [1.0] * n + [extra]})


def _assert_audit(hits: Callable[[pd.DataFrame, int, np.random.Generator], int], large: pd.DataFrame,
                  small: pd.DataFrame, runs: int, seeds: tuple[int, int], claimed: float, planted_bug: bool) -> None:
    """The ε lower bound from the event counts on each dataset: within (ε/2, ε] of the claimed ε, or above
    it when a planted bug doubled the share (the claim is then half the true ε)."""
    k_large = hits(large, runs, np.random.default_rng(seeds[0]))
    k_small = hits(small, runs, np.random.default_rng(seeds[1]))
    lb = float(epsilon_lower_bound(k_large, runs, k_small, runs, alpha=1e-3))
    share = claimed / (2 if planted_bug else 1)
    if planted_bug:
        assert lb > share
    else:
        assert 0.5 * share < lb <= share


@pytest.mark.parametrize("planted_bug", [False, True])
def test_audit_precision_count_spends_only_its_share(planted_bug: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Neighbours under add-remove: one row off the whole numbers (3.5) added. At ε_v = 10 the
    precision count is PRECISION_SHARE·ε_v = 1-DP, and the event "noisy count off the whole
    numbers ≥ 1" shows all of it (e^ε exactly for the discrete Laplace); a planted bug that gives
    the precision count twice its share must exceed it."""
    if planted_bug:
        monkeypatch.setattr(vm_module, "PRECISION_SHARE", 2 * vm_module.PRECISION_SHARE)
    schema, small, large = _one_row_added(30, 3.5)

    def hits(df: pd.DataFrame, runs: int, rng: np.random.Generator) -> int:
        # the count of rows on tenths but off whole numbers (Precision.classes: class 1)
        return sum(fit_value_model(df, schema, epsilon=10.0, rng=rng).trees["x"].precision[1][1] >= 1 for _ in range(runs))

    _assert_audit(hits, large, small, 1500, (300, 400), float(vm_module.PRECISION_SHARE) * 10.0, planted_bug)


# ----------------------------------------------------------------------- serialisation


def test_json_round_trip_is_byte_identical_and_samples_the_same() -> None:
    col = NumericColumn(name="x", lower=0, upper=4500, bins=10, integer=True)
    rng = np.random.default_rng(4)
    x = np.where(rng.random(5000) < 0.9, 0, rng.integers(0, 4500, 5000))
    vm = fit_value_model(pd.DataFrame({"x": x}), _one(col), epsilon=1.0, rng=rng)
    text = vm.to_json()
    back = ValueModel.from_dict(json.loads(text))
    assert back.to_json() == text
    codes = rng.integers(0, 10, 1000)
    a = vm.sample_in_bins("x", codes, rng=np.random.default_rng(9), col=col)
    b = back.sample_in_bins("x", codes, rng=np.random.default_rng(9), col=col)
    np.testing.assert_array_equal(a, b)
    with pytest.raises(InputError):
        ValueModel.from_dict({"format": "something else"})
    bad = json.loads(text)
    bad["columns"]["x"]["counts"][0] = bad["columns"]["x"]["counts"][0][:-1]
    with pytest.raises(InputError):
        ValueModel.from_dict(bad)


def test_a_value_model_released_before_exact_grids_still_reads_describes_and_samples() -> None:
    """value_model.json written before the exact grids: one precision histogram over every candidate (its
    last cell "none of them"), no ``regular`` count, no second histogram or rounding gap."""
    col = NumericColumn(name="age", lower=0, upper=80, bins=8)
    rng = np.random.default_rng(8)
    vm = fit_value_model(pd.DataFrame({"age": rng.integers(0, 80, 3000).astype(float)}), _one(col), rho=0.05, rng=rng)
    d = json.loads(vm.to_json())
    for key in ("exact_precision_noise", "rounding_gap_noise"):
        d.pop(key, None)  # whole numbers: not measured for exact grids now either
    p = d["columns"]["age"]["precision"]
    assert p.pop("regular") == 4
    p["candidates"], p["counts"] = [0, 1, 2, 3], p["counts"][:4] + [0]
    old = ValueModel.from_dict(d)
    assert old.trees["age"].precision[0].regular is None and old.exact_precision_noise is None
    stage = old.describe()
    assert list(stage["columns"]["age"]["precision"]["noisy_rows_by_coarsest_grid"])[-1] == "none of them"
    assert "rounding gap" not in stage["split"]
    codes = rng.integers(0, 8, 500)
    np.testing.assert_array_equal(old.sample_in_bins("age", codes, rng=np.random.default_rng(1), col=col),
                                  vm.sample_in_bins("age", codes, rng=np.random.default_rng(1), col=col))


def test_a_value_model_released_with_leaves_of_several_points_still_reads_and_samples() -> None:
    """value_model.json written when declared grids of more than 2^20 points grouped their points into
    leaves: a one-level tree of 5 leaves of 2 points each on 0..9 still samples, each leaf's mass over its points."""
    col = NumericColumn(name="x", lower=0, upper=9, bins=5, integer=True)
    rng = np.random.default_rng(3)
    d = json.loads(fit_value_model(pd.DataFrame({"x": rng.integers(0, 10, 500)}), _one(col), rho=1.0, rng=rng).to_json())
    d["columns"]["x"].update(grid={"decimals": 0, "declared": True, "first": 0, "last": 9, "width": 2, "leaves": 5,
                                   "branching": 5, "levels": 1},
                             nodes=[[0, 1, 2, 3, 4]], counts=[[400, 0, 0, 0, 100]])
    old = ValueModel.from_dict(d)
    k = old.sample_in_bins("x", np.r_[np.zeros(1000, np.int64), np.full(1000, 4)], rng=np.random.default_rng(1), col=col)
    assert set(k[:1000]) == {0, 1} and set(k[1000:]) == {8, 9}
    assert abs(np.mean(k[:1000] == 0) - 0.5) < 0.01


def test_estimated_grids_round_trip_and_a_one_point_per_bin_grid_needs_no_tree() -> None:
    """An undeclared column of whole numbers with one whole number per bin (education_num: 16 bins
    over [0.5, 16.5]) gets the whole numbers and no tree; the released model, with its precision
    counts, reads back byte-identical and samples the same values."""
    rng = np.random.default_rng(6)
    edu = NumericColumn(name="edu", lower=0.5, upper=16.5, bins=16)
    fare = NumericColumn(name="fare", lower=0, upper=600, bins=12)
    schema = Schema((edu, fare))
    df = pd.DataFrame({"edu": rng.integers(1, 17, 20_000), "fare": np.round(rng.uniform(0, 600, 20_000), 2)})
    vm = fit_value_model(df, schema, rho=0.05, rng=rng)
    assert vm.trees["edu"].grid.decimals == 0 and vm.trees["edu"].nodes == ()
    assert vm.trees["fare"].grid.decimals == 2 and len(vm.trees["fare"].nodes) == 4  # 60,001 pence: 16⁴ ≥ 60,001
    assert vm.describe()["columns"]["edu"]["levels"] == 0
    text = vm.to_json()
    back = ValueModel.from_dict(json.loads(text))
    assert back.to_json() == text and back.trees["edu"].precision == vm.trees["edu"].precision
    codes = rng.integers(0, 16, 2000)
    a = vm.sample_in_bins("edu", codes, rng=np.random.default_rng(1), col=edu)
    np.testing.assert_array_equal(a, back.sample_in_bins("edu", codes, rng=np.random.default_rng(1), col=edu))
    np.testing.assert_array_equal(a, codes + 1)  # bin k holds the whole number k + 1: the bin is the value


def test_children_at_the_noise_level_share_their_parents_mass_nearly_evenly(monkeypatch: pytest.MonkeyPatch) -> None:
    """The split's pseudo-count (SPLIT_PRIOR noise standard deviations): a parent that reached θ and
    whose children all stayed below it gives them nearly even shares when their counts are at the
    noise level, and shares in proportion to the counts when the noise is small beside them (the
    smoothing of each level, tested below, is switched off here to see the split alone)."""
    from dpsynth import value_model
    from dpsynth.value_model import ColumnTree, _frontier

    monkeypatch.setattr(value_model, "SMOOTH_Z", -1.0)
    default = value_model.SPLIT_PRIOR
    assert 0.0 < default <= 1.0

    grid = ColumnGrid(name="x", decimals=0, declared=True, first=0, last=15, width=1, leaves=16, branching=4, levels=2)
    tree = ColumnTree(grid, (np.arange(4), np.arange(4)), (np.array([1000, 0, 0, 0]), np.array([400, 0, 0, 200])))
    # consistent counts 500, 100, 100, 300 (the parent's residual of 400 spread evenly)

    def largest_share(sd: float, prior: float) -> float:
        monkeypatch.setattr(value_model, "SPLIT_PRIOR", prior)
        starts, mass = _frontier(tree, 500.0, sd)
        children = mass[starts < 4]
        assert children.sum() == pytest.approx(mass.sum()) and len(children) == 4
        share = children / children.sum()
        assert share.argmax() == 0 and share[1] == pytest.approx(share[2])
        return float(share.max())

    for sd, most in [(300.0, (0.33, 0.40)), (1.0, (0.49, 0.53))]:
        assert most[0] < largest_share(sd, 1.0) < most[1]
    # the default pseudo-count pulls less than one sd, more than none
    assert largest_share(300.0, 1.0) < largest_share(300.0, default) < largest_share(300.0, 0.0)


def test_smoothing_shrinks_noise_on_a_smooth_shape_and_keeps_point_masses_and_edges() -> None:
    """:func:`_smooth` on one level: on a smooth ramp at the noise level it lowers the squared error of
    the counts (fixed seed, 200 repetitions, a margin of many standard errors); a point mass, the
    nodes beside it, the nodes at either end and nodes whose neighbours were not visited keep their
    counts; with no noise nothing moves."""
    from dpsynth.value_model import _smooth

    rng = np.random.default_rng(3)
    truth = np.linspace(100.0, 300.0, 40)
    nodes = np.arange(40)
    size = np.ones(40)
    sd = 80.0
    raw, smoothed = [], []
    for _ in range(200):
        x = truth + rng.normal(0, sd, 40)
        raw.append(np.mean((x - truth) ** 2))
        smoothed.append(np.mean((_smooth(x, nodes, size, sd) - truth) ** 2))
    raw_mse, smooth_mse = np.mean(raw), np.mean(smoothed)
    assert raw_mse == pytest.approx(sd * sd, rel=0.05)
    assert smooth_mse < 0.6 * raw_mse  # the standard error of either mean is under 2% of it

    x = truth + rng.normal(0, sd, 40)
    x[20] += 5000.0  # a point mass
    out = _smooth(x, nodes, size, sd)
    assert out[20] == x[20] and out[19] == x[19] and out[21] == x[21]
    assert out[0] == x[0] and out[-1] == x[-1]
    gaps = np.array([0, 1, 2, 10, 11, 20])  # visited nodes with unvisited ones between them
    y = np.array([100.0, 400.0, 100.0, 300.0, 50.0, 70.0])
    out = _smooth(y, gaps, np.ones(6), 300.0)
    assert out[1] != y[1]  # both neighbours visited: smoothed
    assert np.array_equal(out[[0, 2, 3, 4, 5]], y[[0, 2, 3, 4, 5]])
    np.testing.assert_array_equal(_smooth(truth, nodes, size, 0.0), truth)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), sd=st.sampled_from([0.0, 1.0, 30.0, 300.0]))
def test_smoothing_moves_a_count_only_towards_its_neighbours_mean(data: st.DataObject, sd: float) -> None:
    """Property of :func:`_smooth` on any level (negative noisy counts, gaps between visited nodes,
    short last nodes): the output is finite; a node without both neighbours visited, or further than
    SMOOTH_Z standard deviations from its neighbours' mean, keeps its count; any other node moves
    onto the segment between its count and that mean."""
    from dpsynth.value_model import SMOOTH_Z, _smooth

    nodes = np.array(sorted(data.draw(st.sets(st.integers(0, 60), min_size=1, max_size=40))), dtype=np.int64)
    n = len(nodes)
    x = np.array(data.draw(st.lists(st.floats(-500, 5000), min_size=n, max_size=n)))
    size = np.array(data.draw(st.lists(st.integers(1, 8), min_size=n, max_size=n)), dtype=np.int64)
    out = _smooth(x, nodes, size, sd)
    assert out.shape == x.shape and np.all(np.isfinite(out))
    for i in range(n):
        both = 0 < i < n - 1 and nodes[i - 1] == nodes[i] - 1 and nodes[i + 1] == nodes[i] + 1
        if not both or n < 3:
            assert out[i] == x[i]
            continue
        prior = 0.5 * (x[i - 1] / size[i - 1] + x[i + 1] / size[i + 1]) * size[i]
        if abs(x[i] - prior) > SMOOTH_Z * sd * np.sqrt(1.5):
            assert out[i] == x[i]
        else:
            assert min(prior, x[i]) - 1e-9 <= out[i] <= max(prior, x[i]) + 1e-9


def test_smoothing_lowers_the_ks_of_smooth_columns_at_a_few_thousand_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole value models at 3,000 rows and the ρ_v of an ε = 1 release (δ = 1e-9), 8 seeds: with each
    level smoothed the mean within-bin KS of a bell-shaped and a bimodal column is lower by about a
    third than with the smoothing switched off (SMOOTH_Z < 0): measured 0.057 → 0.036, each ± 0.003."""
    rng = np.random.default_rng(5)
    n = 3000
    df = pd.DataFrame({"age": np.clip(np.rint(rng.normal(45, 15, n)), 0, 100),
                       "bimodal": np.round(np.clip(np.where(rng.random(n) < 0.6, rng.normal(30, 5, n),
                                                            rng.normal(70, 8, n)), 0, 100), 1)})
    schema = Schema((NumericColumn(name="age", lower=0, upper=100, bins=10),
                     NumericColumn(name="bimodal", lower=0, upper=100, bins=10)))

    def mean_ks() -> float:
        out = []
        for seed in range(8):
            model = fit_value_model(df, schema, rho=0.00071, rng=np.random.default_rng(100 + seed))
            out += [value_model_ks(df[col.name].to_numpy(np.float64), col, model) for col in schema.columns]
        return float(np.mean(out))

    smoothed = mean_ks()
    monkeypatch.setattr(vm_module, "SMOOTH_Z", -1.0)
    raw = mean_ks()
    assert smoothed < 0.75 * raw


# -------------------------------------------------------------------------- accounting


def _age_colour() -> tuple[pd.DataFrame, Schema]:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"age": rng.integers(18, 90, 2000), "colour": rng.choice(["r", "g"], 2000),
                       "hours": rng.integers(0, 60, 2000)})
    schema = Schema((NumericColumn(name="age", lower=0, upper=100, bins=5, integer=True),
                     CategoricalColumn(name="colour", categories=("r", "g")),
                     NumericColumn(name="hours", lower=0, upper=100, bins=4)))  # whole numbers, not declared
    return df, schema


@pytest.mark.parametrize(("method", "delta", "mechanism"),
                         [("histogram", 0.0, "auto"), ("marginals", 0.0, "auto"), ("histogram", 1e-6, "laplace")])
def test_epsilon_adds_up_on_the_card_and_in_the_ledger(method: str, delta: float, mechanism: str, tmp_path) -> None:  # noqa: ANN001
    """Pure DP (or a Laplace main method): basic composition of ε − ε_v and a pure ε_v."""
    df, schema = _age_colour()
    ledger = Ledger(tmp_path / "ledger.json")
    rel = dpsynth.release(df, schema, epsilon=0.7, delta=delta, seed=1, mechanism=mechanism,
                          method=method, value_share=0.2, ledger=ledger, dataset_id="d")
    card = rel.card
    ev, em = card["value_model"]["epsilon"], card["privacy"]["epsilon_main_method"]
    assert Fraction(repr(ev)) + Fraction(repr(em)) <= Fraction(7, 10)
    assert ev + em == pytest.approx(0.7)
    assert ev == pytest.approx(0.14)
    assert em == pytest.approx(0.56)
    main = card["mechanism"]["epsilon"] if method == "histogram" else rel.model.params["epsilon"]
    assert main == em
    assert card["value_model"]["stage"]["epsilon"] == ev
    assert "basic composition" in card["privacy"]["composition"]
    # what the noise costs: every measured level, and the precision count of the undeclared column
    vm = rel.values
    assert vm.trees["hours"].precision is not None and vm.trees["age"].precision is None
    levels = sum(len(t.nodes) for t in vm.trees.values())
    spent = levels * vm.unit_cost(vm.scale) + vm.unit_cost(vm.precision_noise)
    # … its second precision histogram (rows off every regular grid, by the exact grids), its rounding gap
    # (sensitivity 1 under add-remove, the release's relation), if it was measured for them
    prec, noisy = vm.trees["hours"].precision
    assert prec.regular is not None
    if len(noisy) > prec.n_counts[0]:
        assert vm.exact_precision_noise is not None and vm.rounding_gap_noise is not None
        spent += vm.unit_cost(vm.exact_precision_noise) + 1 / float(vm.rounding_gap_noise)
    assert spent <= ev * (1 + 1e-12) and spent > 0.99 * ev
    assert ledger.spent("d").epsilon == pytest.approx(0.7)
    assert set(rel.card["artifacts"]) >= {"value_model.json"}
    again = rel.resample(100, rng=np.random.default_rng(1))
    assert (again["age"] >= 0).all() and len(again) == 100


@pytest.mark.parametrize("method", ["histogram", "marginals"])
@pytest.mark.parametrize("neighbours", ["add-remove", "replace-one"])
def test_rho_adds_up_under_zcdp_composition(method: str, neighbours: str, tmp_path) -> None:  # noqa: ANN001
    """δ > 0 with a Gaussian main method: the value model's ρ_v and the main method's ρ (what each
    mechanism's noise actually costs, recomputed from its σ²) add up to at most ρ(ε, δ), and the
    card, the stage entries and the ledger say so."""
    from dpsynth import zcdp
    from dpsynth.neighbours import histogram_l2_sensitivity_squared, rounding_gap_sensitivity

    df, schema = _age_colour()
    ledger = Ledger(tmp_path / "ledger.json")
    eps, dlt = 0.7, 1e-6
    rel = dpsynth.release(df, schema, epsilon=eps, delta=dlt, seed=1, method=method, neighbours=neighbours,
                          value_share=0.2, ledger=ledger, dataset_id="d")
    card, priv = rel.card, rel.card["privacy"]
    rho = zcdp.rho_from_epsilon(eps, dlt)
    assert priv["rho_total"] == pytest.approx(rho) and priv["rho_total"] <= rho
    assert card["value_model"]["rho"] == pytest.approx(0.2 * rho)
    assert card["value_model"]["share_of_rho"] == pytest.approx(0.2)
    assert priv["rho_main_method"] + priv["rho_value_model"] <= priv["rho_total"] * (1 + 1e-12)
    # what the noise costs: the value model's σ² on every (column, level), the main method's mechanisms
    vm = rel.values
    d2 = histogram_l2_sensitivity_squared(neighbours, 1)
    levels = sum(len(t.nodes) for t in vm.trees.values())
    n_prec = sum(t.precision is not None for t in vm.trees.values())
    assert n_prec == 1
    n_exact = sum(t.precision is not None and len(t.precision[1]) > t.precision[0].n_counts[0] for t in vm.trees.values())
    assert n_exact <= 1
    gap2 = rounding_gap_sensitivity(neighbours, 1) ** 2  # 1, or 4 under replace-one
    rho_values = levels * d2 / (2 * float(vm.sigma2)) + n_prec * d2 / (2 * float(vm.precision_noise))
    if n_exact:
        rho_values += n_exact * d2 / (2 * float(vm.exact_precision_noise)) + n_exact * gap2 / (2 * float(vm.rounding_gap_noise))
    assert card["value_model"]["rho"] * 0.99 < rho_values <= card["value_model"]["rho"] * (1 + 1e-12)
    if method == "histogram":
        rho_main = d2 / (2 * float(Fraction(card["mechanism"]["sigma2"])))
    else:
        rho_main = rel.model.params["rho_spent"]
    assert rho_main <= priv["rho_main_method"] * (1 + 1e-12)
    assert rho_main > 0.95 * priv["rho_main_method"]  # the main method gets its share, not much less
    assert zcdp.epsilon_from_rho(rho_main + rho_values, dlt) <= eps * (1 + 1e-9)
    assert "zCDP composition" in priv["composition"] and "Corollary 13" in priv["composition"]
    assert "basic composition" not in priv["composition"]  # nothing on this card adds up in (ε, δ)
    stage = [s for s in priv["stages"] if s["stage"].startswith("value model")][0]
    assert stage["rho"] == card["value_model"]["rho"] and "zCDP" in stage["guarantee"]
    assert "discrete Gaussian" in card["value_model"]["stage"]["mechanism"]
    assert ledger.spent("d").epsilon == pytest.approx(eps) and ledger.spent("d").delta == pytest.approx(dlt)
    back = ValueModel.from_dict(json.loads(vm.to_json()))
    assert back.to_json() == vm.to_json() and back.gaussian


@pytest.mark.parametrize("eps", [0.05, 0.3, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-5])
@pytest.mark.parametrize("share", [None, 0.01, 0.3, 0.9])
def test_zcdp_split_never_exceeds_rho(eps: float, delta: float, share: float | None) -> None:
    """The main method re-derives its ρ from ε_main (marginals.budget.Plan): that ρ plus ρ_v stays within ρ(ε, δ)."""
    from dpsynth import zcdp
    from dpsynth.plan import split_budget
    from dpsynth.value_model import DEFAULT_VALUE_RHO_SHARE

    schema = _one(NumericColumn(name="x", lower=0, upper=1, bins=2))
    sp = split_budget(eps, delta, schema, share)
    total = zcdp.rho_from_epsilon(eps, delta)
    assert sp.rho_values == pytest.approx((DEFAULT_VALUE_RHO_SHARE if share is None else share) * total)
    assert zcdp.rho_from_epsilon(sp.epsilon_main, delta) + sp.rho_values <= total
    assert zcdp.rho_from_epsilon(sp.epsilon_main, delta) > 0.999 * sp.rho_main
    assert sp.epsilon_values == 0.0 and 0 < sp.epsilon_main < eps
    # δ = 0, a Laplace main method, share 0 or no numeric column: basic composition as before
    assert split_budget(eps, 0.0, schema, share).rho_values == 0.0
    assert split_budget(eps, delta, schema, share, "laplace").rho_values == 0.0
    assert split_budget(eps, delta, schema, 0).epsilon_main == eps
    cat = Schema((CategoricalColumn(name="c", categories=("a", "b")),))
    assert split_budget(eps, delta, cat, share).epsilon_main == eps


@pytest.mark.parametrize("eps", [0.05, 1.0, 10.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-5])
@pytest.mark.parametrize("noisy_rows", [-50, 0, 800, 2_207, 5_000, 6_500, 48_842, 10**9])
def test_adaptive_split_stays_within_rho(eps: float, delta: float, noisy_rows: int) -> None:
    """The marginals method's default split: a noisy row count (ρ_n) first, then the value model's share of the
    rest from it; ρ_n + the main method's re-derived ρ + ρ_v stays within ρ(ε, δ) whatever the count."""
    from dpsynth import zcdp
    from dpsynth.plan import split_budget
    from dpsynth.value_model import DEFAULT_VALUE_RHO_SHARE, ROW_COUNT_RHO_SHARE, VALUE_RHO_SHARE_MAX, value_rho_share

    schema = _one(NumericColumn(name="x", lower=0, upper=1, bins=2))
    total = zcdp.rho_from_epsilon(eps, delta)
    sp = split_budget(eps, delta, schema, None, adaptive=True)
    assert sp.adaptive and sp.rho_rows == pytest.approx(ROW_COUNT_RHO_SHARE * total) and sp.noisy_rows is None
    done = sp.resolve(noisy_rows, eps, delta)
    assert done.noisy_rows == noisy_rows and done.rho_rows == sp.rho_rows and done.rho_total == total
    share = value_rho_share(noisy_rows, total)
    assert DEFAULT_VALUE_RHO_SHARE <= share <= VALUE_RHO_SHARE_MAX
    assert done.rho_values == pytest.approx(share * (total - sp.rho_rows))
    assert done.rho_rows + zcdp.rho_from_epsilon(done.epsilon_main, delta) + done.rho_values <= total
    assert zcdp.rho_from_epsilon(done.epsilon_main, delta) > 0.999 * done.rho_main
    with pytest.raises(InputError):  # a fixed share has nothing to resolve
        split_budget(eps, delta, schema, 0.1).resolve(noisy_rows, eps, delta)
    # a share the caller sets, δ = 0 or a Laplace main method: no count, a fixed split as before
    assert not split_budget(eps, delta, schema, 0.1, adaptive=True).adaptive
    assert not split_budget(eps, 0.0, schema, None, adaptive=True).adaptive
    assert not split_budget(eps, delta, schema, None, "laplace", adaptive=True).adaptive


@given(n=st.floats(-1e3, 1e9), m=st.floats(-1e3, 1e9), rho=st.floats(1e-6, 50.0))
def test_value_share_grows_as_the_table_shrinks(n: float, m: float, rho: float) -> None:
    """The share is between the default and the cap, never larger for more rows, and the default for a large table."""
    from dpsynth.value_model import DEFAULT_VALUE_RHO_SHARE, VALUE_RHO_SHARE_MAX, VALUE_SHARE_FULL_SIZE, value_rho_share

    a, b = value_rho_share(n, rho), value_rho_share(m, rho)
    assert DEFAULT_VALUE_RHO_SHARE <= a <= VALUE_RHO_SHARE_MAX
    assert (a >= b) if n <= m else (a <= b)
    assert value_rho_share(VALUE_SHARE_FULL_SIZE / rho**0.5, rho) == pytest.approx(DEFAULT_VALUE_RHO_SHARE)
    assert value_rho_share(0.5 * VALUE_SHARE_FULL_SIZE / rho**0.5, rho) == VALUE_RHO_SHARE_MAX


def test_release_measures_the_row_count_first_and_states_the_split() -> None:
    """A marginals release with the default share: the card's first stage is the noisy row count (its ρ and σ,
    the released count, the rule); the value model got the share the rule gives for that count, and the
    three parts add up within ρ. With a share set by the caller there is no count."""
    from dpsynth import zcdp
    from dpsynth.value_model import value_rho_share

    g = np.random.default_rng(4)
    df = pd.DataFrame({"c": g.choice(["a", "b"], 1500), "x": g.integers(0, 100, 1500).astype(str)})
    schema = Schema((CategoricalColumn(name="c", categories=("a", "b")), NumericColumn(name="x", lower=0, upper=100,
                                                                                        bins=5)))
    rel = dpsynth.release(df, schema, epsilon=1.0, delta=1e-9, method="marginals", seed=2)
    priv = rel.card["privacy"]
    first = priv["stages"][0]
    assert first["stage"].startswith("noisy row count") and first["mechanism"] == "discrete Gaussian"
    n_hat = first["released"]["noisy_rows"]
    assert abs(n_hat - 1500) < 6 * first["sigma"]
    total = zcdp.rho_from_epsilon(1.0, 1e-9)
    assert first["rho"] == pytest.approx(vm_module.ROW_COUNT_RHO_SHARE * total)
    assert first["sigma"] == pytest.approx((1 / (2 * first["rho"])) ** 0.5, rel=1e-6)
    assert rel.values.rho == pytest.approx(value_rho_share(n_hat, total) * (total - first["rho"]))
    assert priv["rho_value_model"] == rel.values.rho and "three parts" in priv["composition"]
    assert first["rho"] + priv["rho_main_method"] + priv["rho_value_model"] <= total
    assert "share_rule" in rel.card["value_model"] and f"n̂ = {n_hat:,}" in first["rule"]
    fixed = dpsynth.release(df, schema, epsilon=1.0, delta=1e-9, method="marginals", seed=2, value_share=0.06)
    assert not fixed.card["privacy"]["stages"][0]["stage"].startswith("noisy row count")
    assert "share_rule" not in fixed.card["value_model"]


def test_node_noise_is_discrete_gaussian_at_the_stated_variance() -> None:
    """One level (64 leaves): with a ρ budget every leaf's noise is discrete Gaussian with σ² = levels·Δ₂²/(2ρ)."""
    vm, z = _one_level_noise(12, rho=0.125)
    assert vm.sigma2 == Fraction(4) and vm.scale is None  # Δ₂² = 1, one level, ρ = 1/8
    assert vm.describe()["guarantee"] == "0.125-zCDP"
    ks = np.arange(-7, 8)
    obs = np.array([np.sum(z <= -8)] + [np.sum(z == k) for k in ks] + [np.sum(z >= 8)])
    pmf = noise.discrete_gaussian_pmf(np.arange(-60, 61), Fraction(4))
    expected = np.concatenate([[pmf[:53].sum()], pmf[53:68], [pmf[68:].sum()]]) * len(z)
    assert stats.chisquare(obs, expected * obs.sum() / expected.sum()).pvalue > 1e-4
    df, schema = pd.DataFrame({"x": [1, 2]}), _one(NumericColumn(name="x", lower=0, upper=63, bins=4))
    with pytest.raises(InputError):
        fit_value_model(df, schema, epsilon=1.0, rho=0.1, rng=np.random.default_rng(0))
    with pytest.raises(InputError):
        fit_value_model(df, schema, rng=np.random.default_rng(0))


@pytest.mark.parametrize("eps", [0.3, 1.0, 0.1, 2.7, 1e-3])
@pytest.mark.parametrize("share", [0.1, 0.05, 0.3, 0.999])
def test_budget_split_never_exceeds_epsilon(eps: float, share: float) -> None:
    schema = _one(NumericColumn(name="x", lower=0, upper=1, bins=2))
    main, ev = split_value_budget(eps, schema, share)
    assert main > 0 and ev > 0
    assert Fraction(repr(main)) + Fraction(repr(ev)) <= Fraction(repr(eps))
    assert main + ev == pytest.approx(eps)


def test_budget_split_defaults_and_refusals() -> None:
    num = _one(NumericColumn(name="x", lower=0, upper=1, bins=2))
    cat = Schema((CategoricalColumn(name="c", categories=("a", "b")),))
    assert split_value_budget(1.0, num, None) == pytest.approx((0.9, 0.1))
    assert split_value_budget(1.0, cat, None) == (1.0, 0.0)
    assert split_value_budget(1.0, num, 0) == (1.0, 0.0)
    for bad in (-0.1, 1.0, "x"):
        with pytest.raises(InputError):
            split_value_budget(1.0, num, bad)


# ------------------------------------------------------------------------------- audit


def _joint_event(schema: Schema, df: pd.DataFrame, runs: int, *, rng: np.random.Generator) -> np.ndarray:
    """Per run: the level-1 node and the leaf holding value 5 both at least their count in the larger dataset."""
    hits = np.zeros(runs, dtype=bool)
    for i in range(runs):
        t = fit_value_model(df, schema, epsilon=1.0, rng=rng, max_branching=4).trees["x"]
        n1 = t.counts[0][t.nodes[0] == 1]
        leaf = t.counts[1][t.nodes[1] == 5]
        hits[i] = len(n1) == 1 and len(leaf) == 1 and n1[0] >= 21 and leaf[0] >= 21
    return hits


@pytest.mark.parametrize("planted_bug", [False, True])
def test_audit_value_model_spends_only_its_epsilon(planted_bug: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Neighbours under add-remove (one row at 5 added); a two-level tree (16 leaves, branching 4).

    The event (both of the row's nodes high) sees both levels, so the correct code shows most
    of ε_v = 1 (power) and never more; a planted bug that does not split ε over the levels
    (each level ε-DP, 2ε in total) must exceed it.
    """
    if planted_bug:
        real = vm_module.exact_epsilon
        monkeypatch.setattr(vm_module, "exact_epsilon", lambda e: 2 * real(e))
    schema = _one(NumericColumn(name="x", lower=0, upper=15, bins=2, integer=True))
    small = pd.DataFrame({"x": [0] * 20 + [5] * 20})
    large = pd.DataFrame({"x": [0] * 20 + [5] * 21})
    runs = 1000 if planted_bug else 2000  # the bug shows ln 7.3 ≈ 2: fewer runs suffice
    k_large = int(_joint_event(schema, large, runs, rng=np.random.default_rng(100)).sum())
    k_small = int(_joint_event(schema, small, runs, rng=np.random.default_rng(200)).sum())
    lb = float(epsilon_lower_bound(k_large, runs, k_small, runs, alpha=1e-3))
    if planted_bug:
        assert lb > 1.0
    else:
        assert 0.5 < lb <= 1.0


def test_from_counts_is_the_same_release_as_from_rows() -> None:
    """An engine that returns the counts (in batches, added up) gets the same model (same draws) as the rows."""
    from dpsynth.value_model import count_column, fit_value_model_from_counts

    schema = Schema((NumericColumn(name="a", lower=0, upper=99_999, bins=10, integer=True),
                     NumericColumn(name="b", lower=0, upper=1, bins=4, missing=True),
                     NumericColumn(name="c", lower=0, upper=100, bins=5, missing=True)))
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"a": np.where(rng.random(3000) < 0.9, 0, rng.integers(0, 99_999, 3000)),
                       "b": np.where(rng.random(3000) < 0.1, np.nan, rng.random(3000)),
                       "c": np.where(rng.random(3000) < 0.1, np.nan, rng.integers(0, 100, 3000))})
    direct = fit_value_model(df, schema, epsilon=0.5, rng=np.random.default_rng(7))
    assert direct.trees["c"].precision is not None  # whole numbers not declared: a grid to choose
    counts = {c.name: count_column(df[c.name].to_numpy()[:1000], c) + count_column(df[c.name].to_numpy()[1000:], c)
              for c in schema.columns}
    via = fit_value_model_from_counts(counts, schema, epsilon=0.5, rng=np.random.default_rng(7))
    assert via.to_json() == direct.to_json()
    with pytest.raises(InputError):
        fit_value_model_from_counts({"a": counts["a"]}, schema, epsilon=0.5, rng=rng)


def test_a_model_refuses_a_column_with_other_bounds_and_narrow_columns_stay_uniform() -> None:
    from dpsynth.value_model import value_columns

    col = NumericColumn(name="x", lower=0, upper=100, bins=4, integer=True)
    vm = fit_value_model(pd.DataFrame({"x": [1, 2, 3]}), _one(col), epsilon=1.0, rng=np.random.default_rng(0))
    other = NumericColumn(name="x", lower=0, upper=200, bins=4, integer=True)
    with pytest.raises(InputError, match="does not match"):
        vm.sample_in_bins("x", np.zeros(3, dtype=np.int64), rng=np.random.default_rng(0), col=other)
    narrow = NumericColumn(name="n", lower=0, upper=1e-8, bins=10)
    assert value_columns(Schema((narrow, col))) == [col]


def test_value_model_ks_agrees_with_the_point_by_point_cdf_and_handles_an_exact_grid_of_a_billion_points() -> None:
    """:func:`value_model_ks` works piece by piece (:meth:`ValueModel.cdf`): on a grid small enough to
    list, it equals the KS distance computed from every grid point's probability
    (:meth:`ValueModel.bin_distribution`, real bins at their exact shares); on a column whose values
    keep seven decimals over [0, 100] (an exact grid of 10^9 points, which a point-by-point CDF would
    hold as 8 GB) it runs in a moment, and a large budget brings the value model close to the values."""
    rng = np.random.default_rng(5)
    col = NumericColumn(name="x", lower=0, upper=99, bins=3, integer=True)
    x = np.minimum(rng.geometric(0.08, 3000) - 1, 99).astype(float)
    x[:40] = 98.0  # a bin mostly empty: released masses of every kind
    vm = fit_value_model(pd.DataFrame({"x": x}), _one(col), epsilon=0.5, rng=np.random.default_rng(2))
    g = vm.trees["x"].grid
    lo, _ = g.bin_ranges(col)
    share = np.bincount(np.searchsorted(lo, g.units(x), side="right") - 1, minlength=len(lo)) / len(x)
    dist = vm.bin_distribution("x", col)
    points = g.values(np.concatenate([k for k, _ in dist]))
    cdf = np.cumsum(np.concatenate([share[b] * p for b, (_, p) in enumerate(dist)]))
    real = np.sort(x)
    brute = np.max(np.abs(cdf - np.searchsorted(real, points, side="right") / len(real)))
    assert value_model_ks(x, col, vm) == pytest.approx(brute, abs=1e-12)

    wide = NumericColumn(name="y", lower=0, upper=100, bins=4)
    y = np.round(rng.lognormal(1.0, 0.8, 20_000), 7).clip(0, 100)
    model = fit_value_model(pd.DataFrame({"y": y}), _one(wide), rho=5.0, rng=np.random.default_rng(3))
    assert model.trees["y"].grid.last - model.trees["y"].grid.first >= 10**9 - 1
    assert value_model_ks(y, wide, model) < 0.02


def test_children_at_the_noise_level_are_shrunk_towards_a_local_line_and_spikes_are_kept() -> None:
    """:func:`dpsynth.value_model._smooth_along_parents` on 60 parents of 16 children whose true counts
    follow a smooth curve at about 0.8 noise sds per child (what a smooth column's deep level looks like
    at ε = 1): its squared error is a fraction of the noisy counts' and below the neighbour-mean
    smoothing's (:func:`dpsynth.value_model._smooth`) and, on this curve, below that of a line through
    the children within half a parent's width rather than three quarters; a child 12 sds above its
    line (a point mass) is kept as measured, and each parent's children add up to about its count."""
    rng = np.random.default_rng(3)
    sd, parents, kids = 50.0, 60, 16
    t = np.arange(parents * kids) + 0.5
    true = 0.8 * sd * (1.0 + 0.7 * np.sin(2 * np.pi * t / 300.0))
    true[5 * kids + 3] += 12 * sd
    parent_of = np.repeat(np.arange(parents), kids)
    nodes = np.arange(true.size)
    size = np.ones(true.size)
    err = lambda est: float(np.mean((est - true) ** 2))  # noqa: E731
    errs = {"along": [], "narrow": [], "near": [], "noisy": []}
    for _ in range(10):
        noisy = true + rng.normal(0, sd, true.size)
        parent_x = np.bincount(parent_of, weights=true) + rng.normal(0, sd / 4, parents)
        along = vm_module._smooth_along_parents(noisy, t, size, parent_of, parent_x, sd, 0.75 * kids)
        errs["along"].append(err(along))
        errs["narrow"].append(err(vm_module._smooth_along_parents(noisy, t, size, parent_of, parent_x, sd, kids / 2)))
        errs["near"].append(err(vm_module._smooth(noisy, nodes, size, sd)))
        errs["noisy"].append(err(noisy))
        assert along[5 * kids + 3] == noisy[5 * kids + 3]
        gap = np.abs(np.bincount(parent_of, weights=along) - parent_x)
        assert np.mean(gap) < sd and np.max(gap) < 6 * sd
    mean = {k: float(np.mean(v)) for k, v in errs.items()}
    assert mean["along"] < 0.25 * mean["noisy"]
    assert mean["along"] < 0.6 * mean["near"]
    assert mean["along"] < 0.95 * mean["narrow"]


def test_a_local_line_is_the_weighted_least_squares_line_of_its_window() -> None:
    """:func:`dpsynth.value_model._local_line` against a direct weighted fit at each point: exact on a
    line, the weighted least-squares line of the points within reach elsewhere, the weighted mean
    where the window cannot fix a slope."""
    rng = np.random.default_rng(8)
    centre = np.sort(rng.choice(400, 60, replace=False)).astype(np.float64) + 0.5
    w = rng.uniform(0.5, 2.0, centre.size)
    w[7] = 0.0
    line = 3.0 - 0.01 * centre
    assert np.allclose(vm_module._local_line(centre, w, line, 30.0), line)
    y = rng.normal(0, 1, centre.size)
    got = vm_module._local_line(centre, w, y, 30.0)
    for i, c in enumerate(centre):
        inside = np.abs(centre - c) <= 30.0
        if np.count_nonzero(inside & (w > 0)) < 2:
            continue
        slope, intercept = np.polyfit(centre[inside] - c, y[inside], 1, w=np.sqrt(w[inside]))
        assert got[i] == pytest.approx(intercept, abs=1e-9)
    lone = vm_module._local_line(np.array([0.5, 100.5]), np.array([2.0, 1.0]), np.array([4.0, 7.0]), 10.0)
    assert np.allclose(lone, [4.0, 7.0])


def test_parent_lines_are_off_when_the_release_is_mostly_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below :data:`dpsynth.value_model.PARENT_LINE_MIN_SNR` noise sds of level-1 rows (here 2,000 rows and
    a noise sd of 141) the children are smoothed towards their neighbours alone: the released
    distribution is the same as with the lines switched off."""
    rng = np.random.default_rng(4)
    col = NumericColumn(name="x", lower=0, upper=100, bins=4, integer=True)
    df = pd.DataFrame({"x": np.clip(np.rint(rng.normal(40, 12, 2000)), 0, 100)})
    model = fit_value_model(df, _one(col), epsilon=0.02, rng=np.random.default_rng(5))  # 2,000 rows, sd 141
    assert model.trees["x"].grid.levels == 2
    u = np.arange(0, 101, dtype=np.float64)
    with_lines = model.cdf("x", col, u)
    monkeypatch.setattr(vm_module, "PARENT_LINE_SDS", 0.0)
    fresh = ValueModel.from_dict(model.to_dict())
    assert np.array_equal(fresh.cdf("x", col, u), with_lines)
    # and at a budget where they are on, they change it
    rich = fit_value_model(df, _one(col), rho=0.002, rng=np.random.default_rng(5))
    off = ValueModel.from_dict(rich.to_dict()).cdf("x", col, u)
    monkeypatch.setattr(vm_module, "PARENT_LINE_SDS", 2.0)
    on = ValueModel.from_dict(rich.to_dict()).cdf("x", col, u)
    assert not np.array_equal(on, off)


@given(n=st.floats(1.0, 1e7), rho=st.floats(1e-6, 50.0), k=st.integers(0, 80))
def test_value_share_grows_with_the_numeric_columns_to_describe(n: float, rho: float, k: int) -> None:
    """With k value columns the share's growing part and its cap are f = max(1, k/5) times those of five
    columns (each column's part of ρ_v stays as large), never below the default, never above the ceiling,
    and up to five columns it is the share of five."""
    from dpsynth.value_model import (
        DEFAULT_VALUE_RHO_SHARE,
        VALUE_COLUMNS_REFERENCE,
        VALUE_RHO_SHARE_CEILING,
        VALUE_RHO_SHARE_MAX,
        value_rho_share,
    )

    five, share = value_rho_share(n, rho), value_rho_share(n, rho, k)
    f = max(1.0, k / VALUE_COLUMNS_REFERENCE)
    assert DEFAULT_VALUE_RHO_SHARE <= share <= min(VALUE_RHO_SHARE_CEILING, f * VALUE_RHO_SHARE_MAX) + 1e-15
    assert share >= five
    if k <= VALUE_COLUMNS_REFERENCE:
        assert share == five
    if DEFAULT_VALUE_RHO_SHARE < five < VALUE_RHO_SHARE_MAX:  # the growing part, not clipped
        assert share == pytest.approx(min(VALUE_RHO_SHARE_CEILING, f * five))


def test_a_release_with_many_numeric_columns_gives_its_value_model_their_share() -> None:
    """Eleven value columns: the released split is the rule's for the noisy count and 11 columns, the card
    says so, and the three parts still add up within ρ."""
    from dpsynth import zcdp
    from dpsynth.value_model import value_rho_share

    g = np.random.default_rng(6)
    cols = {f"x{i}": np.round(g.normal(50, 10, 3000), 1) for i in range(11)}
    df = pd.DataFrame(cols)
    schema = Schema(tuple(NumericColumn(name=c, lower=0, upper=100, bins=5) for c in cols))
    assert len(value_columns(schema)) == 11
    rel = dpsynth.release(df, schema, epsilon=1.0, delta=1e-9, method="marginals", seed=3)
    priv = rel.card["privacy"]
    first = priv["stages"][0]
    n_hat, total = first["released"]["noisy_rows"], zcdp.rho_from_epsilon(1.0, 1e-9)
    assert rel.values.rho == pytest.approx(value_rho_share(n_hat, total, 11) * (total - first["rho"]))
    assert value_rho_share(n_hat, total, 11) > value_rho_share(n_hat, total)
    assert "11 numeric columns (×2.2)" in first["rule"]
    assert first["rho"] + priv["rho_main_method"] + priv["rho_value_model"] <= total


def test_on_the_wide_path_the_value_share_does_not_grow_with_the_numeric_columns() -> None:
    """A schema of more than :data:`dpsynth.marginals.budget.WIDE_COLUMNS` columns, 12 of them numeric: the
    marginals method's share under zCDP stays within the five-column rule (at most
    :data:`VALUE_RHO_SHARE_MAX`) and the card says why; under pure DP it is :data:`WIDE_VALUE_SHARE` of ε.
    The same numeric columns in a schema of 24 columns, a share the caller sets, and the histogram method's
    split are as before."""
    from dpsynth import zcdp
    from dpsynth.marginals.budget import WIDE_COLUMNS
    from dpsynth.plan import split_budget
    from dpsynth.value_model import DEFAULT_VALUE_SHARE, VALUE_RHO_SHARE_MAX, WIDE_VALUE_SHARE, value_rho_share

    def schema(d: int) -> Schema:
        return Schema(tuple(NumericColumn(name=f"x{j}", lower=0, upper=100, bins=5) if j < 12
                            else CategoricalColumn(name=f"c{j}", categories=("a", "b")) for j in range(d)))

    wide, narrow = schema(WIDE_COLUMNS + 6), schema(WIDE_COLUMNS)
    total = zcdp.rho_from_epsilon(1.0, 1e-9)
    w = split_budget(1.0, 1e-9, wide, None, adaptive=True)
    n = split_budget(1.0, 1e-9, narrow, None, adaptive=True)
    assert w.wide and not n.wide and w.value_columns == n.value_columns == 12
    small = 500  # noisy rows: the share is at its cap
    rw, rn = w.resolve(small, 1.0, 1e-9), n.resolve(small, 1.0, 1e-9)
    left = total - w.rho_rows
    assert rw.wide and rw.rho_values == pytest.approx(VALUE_RHO_SHARE_MAX * left)
    assert rw.rho_values == pytest.approx(value_rho_share(small, total) * left)
    assert rn.rho_values == pytest.approx(value_rho_share(small, total, 12) * left) and rn.rho_values > rw.rho_values
    assert split_budget(1.0, 0.0, wide, None, adaptive=True).epsilon_values == pytest.approx(WIDE_VALUE_SHARE)
    assert split_budget(1.0, 0.0, narrow, None, adaptive=True).epsilon_values == pytest.approx(DEFAULT_VALUE_SHARE)
    assert split_budget(1.0, 0.0, wide, None).epsilon_values == pytest.approx(DEFAULT_VALUE_SHARE)  # histogram
    assert split_budget(1.0, 0.0, wide, 0.2, adaptive=True).epsilon_values == pytest.approx(0.2)
    assert split_budget(1.0, 1e-9, wide, 0.2, adaptive=True).rho_values == pytest.approx(0.2 * total)
    # the card's rule for a wide release states the cap and why
    g = np.random.default_rng(8)
    df = pd.DataFrame({c.name: (g.integers(0, 100, 600).astype(str) if isinstance(c, NumericColumn)
                                else g.choice(["a", "b"], 600)) for c in wide.columns})
    rel = dpsynth.release(df, wide, epsilon=1.0, delta=1e-9, method="marginals", seed=4)
    first = rel.card["privacy"]["stages"][0]
    assert f"at most {VALUE_RHO_SHARE_MAX:.0%} whatever the number of numeric columns" in first["rule"]
    assert f"more than {WIDE_COLUMNS} columns" in first["rule"]
    n_hat = first["released"]["noisy_rows"]
    assert rel.values.rho == pytest.approx(value_rho_share(n_hat, total) * (total - first["rho"]))


def test_bin_counts_estimate_each_bin_within_their_stated_variance() -> None:
    """The released bin counts the marginals method fits as one-ways (:func:`bin_count_observations`): over
    40 releases they are unbiased in every bin (mean error within 1 stated standard deviation: about 4
    standard errors of that mean) and their squared errors average their stated variance (the mean over
    the bins, so one bin may have more and another less), and they add up to the rows."""
    from dpsynth.binning import encode as encode_rows
    from dpsynth.value_model import bin_count_observations

    g = np.random.default_rng(0)
    n = 20_000
    df = pd.DataFrame({"kind": g.choice(list("ab"), n),
                       "x": np.where(g.random(n) < 0.3, 0, np.round(g.gamma(3, 8, n))),
                       "y": np.round(g.beta(2, 5, n), 3)})
    schema = Schema((CategoricalColumn(name="kind", categories=("a", "b")),
                     NumericColumn(name="x", lower=0, upper=200, bins=8, integer=True),
                     NumericColumn(name="y", lower=0, upper=1, bins=5)))
    codes = encode_rows(df.astype(str), schema).codes
    z: dict[int, list[np.ndarray]] = {1: [], 2: []}
    for seed in range(40):
        obs = bin_count_observations(fit_value_model(df, schema, rho=0.0005, rng=np.random.default_rng(seed)), schema)
        assert sorted(obs) == [1, 2]
        for j, (y, var) in obs.items():
            true = np.bincount(codes[:, j], minlength=schema.sizes[j])
            assert y.sum() == pytest.approx(n, abs=6 * math.sqrt(var * len(y)))
            z[j].append((y - true) / math.sqrt(var))
    for j, errs in z.items():
        e = np.array(errs)
        assert 0.7 < float(np.mean(e**2)) < 1.3, j
        assert np.all(np.abs(e.mean(axis=0)) < 1.0), j


def test_bin_count_observations_leave_out_columns_with_a_missing_cell_or_no_tree() -> None:
    g = np.random.default_rng(1)
    n = 3_000
    df = pd.DataFrame({"a": g.integers(1, 17, n), "b": g.integers(0, 100, n).astype(float),
                       "c": g.integers(0, 100, n)})
    df.loc[:10, "b"] = np.nan
    schema = Schema((NumericColumn(name="a", lower=1, upper=16, bins=16, integer=True),  # one point per bin
                     NumericColumn(name="b", lower=0, upper=99, bins=4, integer=True, missing=True),
                     NumericColumn(name="c", lower=0, upper=99, bins=4, integer=True)))
    from dpsynth.value_model import bin_count_observations

    vm = fit_value_model(df, schema, epsilon=1.0, rng=np.random.default_rng(2))
    assert "b" in vm.trees and "a" not in vm.trees
    obs = bin_count_observations(vm, schema)
    assert list(obs) == [2]
    y, var = obs[2]
    assert y.shape == (4,) and var > 0
