"""Utility metrics, the seeds' mean comparison, previews, risk, discovery and drafting."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpsynth.discovery import category_threshold, private_bounds, private_categories, private_quantile
from dpsynth.drafting import draft_schema, infer_kind
from dpsynth.errors import InputError
from dpsynth.risk import fraction_unique, uniqueness_report
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema
from dpsynth.utility import (
    HIST_LABEL,
    PERT_LABEL,
    accuracy_preview,
    bins_curve,
    fidelity,
    histogram_mean,
    marginal_tvds,
    perturbed_mean,
    simulate_means,
    tradeoff_curves,
    tvd,
)


def test_tvd_exact_values():
    assert tvd(np.array([1, 0]), np.array([0, 1])) == 1.0
    assert tvd(np.array([2, 2]), np.array([1, 1])) == 0.0
    assert tvd(np.array([3, 1]), np.array([1, 1])) == pytest.approx(0.25)


def test_marginal_tvds_identical_tables_are_zero(small_df, small_schema):
    from dpsynth.binning import encode

    codes = encode(small_df, small_schema).codes
    t = marginal_tvds(codes, codes, small_schema.sizes, 2, small_schema.names)
    assert len(t) == 1 and t["tvd"].iloc[0] == 0.0
    f = fidelity(small_df, small_df, small_schema)
    assert f["mean_one_way"] == 0.0


def test_histogram_mean_is_the_seeds_formula():
    col = NumericColumn(name="x", lower=0, upper=10, bins=2)
    # Σ c_j (l_j + h/2) / n = (3·2.5 + 1·7.5) / 4
    assert histogram_mean(np.array([3, 1]), col, 4) == pytest.approx(3.75)


def test_perturbed_mean_error_scale():
    col = NumericColumn(name="x", lower=0, upper=1, bins=4)
    rng = np.random.default_rng(0)
    x = rng.random(1000)
    errs = np.array([perturbed_mean(x, col, 1.0, rng=rng) - x.mean() for _ in range(3000)])
    # Laplace((U-L)/(nε)) has sd sqrt(2)·b; the grid adds at most a step
    assert np.std(errs) == pytest.approx(math.sqrt(2) * 1 / 1000, rel=0.1)
    assert abs(errs.mean()) < 4 * math.sqrt(2) / 1000 / math.sqrt(3000)


def test_simulation_matches_theory():
    col = NumericColumn(name="x", lower=-4, upper=4, bins=8)
    rng = np.random.default_rng(1)
    x = np.clip(rng.normal(size=500), -4, 4)
    sim = simulate_means(x, col, 1.0, reps=4000, rng=rng)
    s = sim.summary.set_index("estimator")
    # Z̄₂: sd = sqrt(2)·(U−L)/(nε)
    assert s.loc[PERT_LABEL, "sd"] == pytest.approx(math.sqrt(2) * 8 / 500, rel=0.08)
    # Z̄₁: sd = sqrt(Σ m_j²)·sd(Z)/n with discrete Laplace scale 2
    p = math.exp(-0.5)
    sd_z = math.sqrt(2 * p) / (1 - p)
    expected = math.sqrt((col.midpoints() ** 2).sum()) * sd_z / 500
    assert s.loc[HIST_LABEL, "sd"] == pytest.approx(expected, rel=0.08)
    # Z̄₁'s bias is the binning bias of the noiseless histogram mean
    assert s.loc[HIST_LABEL, "bias"] == pytest.approx(sim.histogram_mean_noiseless - sim.true_mean, abs=4 * expected / math.sqrt(4000))


def test_accuracy_preview_is_public_only(small_schema):
    p = accuracy_preview(small_schema, 1.0, expected_rows=10)
    assert p["n_cells"] == 20
    assert p["cell_bound"] >= p["interval_95"]
    assert p["warnings"]
    assert not accuracy_preview(small_schema, 1.0, expected_rows=100_000)["warnings"]


@pytest.mark.parametrize("cells", ["few", "many"])
@pytest.mark.parametrize("delta", [0.0, 1e-6])
@pytest.mark.parametrize("rows", [None, 300])
def test_previews_state_the_noise_the_release_adds(small_df, small_schema, cells, delta, rows):
    """The command line's preview and the Privacy page's prediction give each cell the noise the release then
    adds: the value model's share of ε comes off first, and, on a domain large enough that the histogram buys
    its own row count (no --rows given), that count's share too (before, the preview took the whole ε)."""
    from dpsynth.prediction import predict_utility
    from dpsynth.release import release

    schema, df = small_schema, small_df
    if cells == "many":  # 25 × 4 × 120 = 12,000 cells: the unclamped sum's spread passes the count's
        schema = Schema((*small_schema.columns,
                         CategoricalColumn(name="code", categories=tuple(f"c{i}" for i in range(120)))))
        df = small_df.assign(code=[f"c{i % 120}" for i in range(len(small_df))])
        schema = Schema((NumericColumn(name="age", lower=0, upper=100, bins=25, integer=True), *schema.columns[1:]))
    rel = release(df, schema, epsilon=1.0, delta=delta, method="histogram", rows=rows, rng=np.random.default_rng(3))
    ran = rel.card["mechanism"]["noise_std"]
    bought = (rel.plan.row_total == "count")
    assert bought == (cells == "many" and rows is None)
    assert accuracy_preview(schema, 1.0, delta, rows=rows)["noise_std"] == pytest.approx(ran, rel=1e-12)
    pred = predict_utility(schema, 1.0, delta, method="histogram", rows=rows)
    assert pred.noise["noise_std_per_cell"] == pytest.approx(ran, rel=1e-12)


def test_tradeoff_curves_error_falls_with_epsilon(small_df, small_schema):
    out = tradeoff_curves(small_df, small_schema, "age", [0.1, 1.0, 10.0], reps=100, rng=np.random.default_rng(0))
    assert list(out["epsilon"]) == [0.1, 1.0, 10.0]
    assert out["rmse_perturbed_mean"].is_monotonic_decreasing
    assert out["mean_tvd_1way"].iloc[0] > out["mean_tvd_1way"].iloc[-1]
    b = bins_curve(small_df, small_schema.column("age"), [2, 5, 20], 1.0, reps=50, rng=np.random.default_rng(0))
    assert len(b) == 3
    with pytest.raises(InputError, match="not numeric"):
        tradeoff_curves(small_df, small_schema, "colour", [1.0], rng=np.random.default_rng(0))


def test_fraction_unique():
    df = pd.DataFrame({"a": [1, 1, 2, 3], "b": ["x", "x", "y", "y"]})
    assert fraction_unique(df, ["a", "b"]) == 0.5
    assert fraction_unique(df, ["b"]) == 0.0


def test_uniqueness_report(small_df, small_schema):
    r = uniqueness_report(small_df, small_df, small_schema, ["age", "colour"])
    assert r["real_unique_binned"] == r["synthetic_unique_binned"]
    assert 0 <= r["synthetic_matching_real_unique"] <= 1


def test_private_quantile_is_near_the_truth():
    rng = np.random.default_rng(2)
    x = rng.normal(50, 10, 10_000)
    q = [private_quantile(x, 0.5, 0, 150, 1.0, rng=rng) for _ in range(20)]
    assert np.median(q) == pytest.approx(50, abs=1.0)
    lo, hi = private_bounds(x, 0, 150, 1.0, rng=rng, integer=True)
    assert lo < 40 < 60 < hi and float(lo).is_integer()


def test_private_categories_threshold_hides_rare_values():
    rng = np.random.default_rng(3)
    values = pd.Series(["common"] * 500 + ["rare"])
    scale, tau = category_threshold(1.0, 1e-6)
    p = math.exp(-1 / float(scale))
    assert p ** (tau - 1) / (1 + p) <= 1e-6  # a count of 1 passes with probability ≤ δ
    seen_rare = 0
    for _ in range(200):
        d = private_categories(values, 1.0, 1e-6, rng=rng)
        assert "common" in d.categories
        seen_rare += "rare" in d.categories
    assert seen_rare == 0
    with pytest.raises(InputError, match="δ > 0"):
        private_categories(values, 1.0, 0.0, rng=rng)


def test_draft_schema_marks_everything_as_data(small_df):
    schema, left_out = draft_schema(small_df)
    assert left_out == []
    assert schema.data_derived() == ["age", "colour"]
    age = schema.column("age")
    assert isinstance(age, NumericColumn) and age.integer
    colour = schema.column("colour")
    assert isinstance(colour, CategoricalColumn) and colour.missing
    assert infer_kind(pd.Series(["1", "2.5", ""])) == "numeric"
    assert infer_kind(pd.Series(["1", "x"])) == "categorical"
    ids = pd.DataFrame({"id": [str(i) + "x" for i in range(1000)], "v": ["1"] * 1000})
    s, out = draft_schema(ids)
    assert out == ["id"] and s.names == ["v"]


def test_draft_small_integer_range_gets_one_bin_per_value():
    s, _ = draft_schema(pd.DataFrame({"k": ["0", "1", "2", "1"]}))
    col = s.column("k")
    assert (col.lower, col.upper, col.bins) == (-0.5, 2.5, 3)


def test_schema_fixture_sanity(small_schema):
    assert isinstance(small_schema, Schema)


def test_previews_refuse_the_rows_per_person_a_release_refuses(small_schema):
    """One check for the release and its previews (plan.check_release_budget): 1,001 rows per person is refused by
    both, instead of a forecast for a release that would not run."""
    from dpsynth.prediction import predict_utility

    with pytest.raises(InputError, match="rows per person"):
        predict_utility(small_schema, 1.0, max_contributions=1001)
    with pytest.raises(InputError, match="rows per person"):
        accuracy_preview(small_schema, 1.0, max_contributions=1001)
    assert predict_utility(small_schema, 1.0, max_contributions=1000).one_way_tvd > 0
