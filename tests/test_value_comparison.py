"""Raw-value comparison (real vs synthetic numbers) and the plain explanation of released noisy counts."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpsynth.mechanisms import DiscreteLaplace
from dpsynth.utility import (
    comparison_summary,
    ks_distance,
    noise_explanation,
    noise_sentences,
    value_comparison,
    value_comparisons,
    value_table,
)


def test_ks_distance_matches_scipy() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=500), rng.normal(0.3, 1, size=700).round(1)
    assert ks_distance(a, b) == pytest.approx(stats.ks_2samp(a, b).statistic, abs=1e-12)
    assert ks_distance(a, a) == 0.0


def test_a_lost_peak_of_zeros_is_shown() -> None:
    # most real values are 0; the synthetic values are spread evenly inside the first bin
    real = pd.DataFrame({"gain": [0] * 917 + list(range(1000, 84000, 1000))})
    synthetic = pd.DataFrame({"gain": np.linspace(1, 10_000, 1000).round()})
    v = value_comparison(real, synthetic, "gain")
    assert v["mode"] == 0.0
    assert v["real"]["mode_share"] == pytest.approx(0.917)
    assert v["synthetic"]["mode_share"] == 0.0
    assert v["real"]["median"] == 0.0 and v["synthetic"]["median"] > 4000
    assert v["ks"] > 0.9
    table = value_table(v, formatted=True)
    assert table.iloc[-1]["real (only you)"] == "91.7%"


def test_summary_of_numeric_columns_only() -> None:
    from dpsynth.schema import CategoricalColumn, NumericColumn, Schema

    schema = Schema((NumericColumn(name="x", lower=0, upper=10, bins=5),
                     CategoricalColumn(name="c", categories=("a", "b"))))
    df = pd.DataFrame({"x": [1, 2, 2, "", "n/a"], "c": ["a", "b", "a", "a", "b"]})
    summary = comparison_summary(value_comparisons(df, df, schema))
    assert summary["column"].tolist() == ["x"]
    assert summary.loc[0, "mean (real)"] == pytest.approx(5 / 3)  # blanks and text are left out
    assert summary.loc[0, "KS distance"] == 0.0


def test_noise_explanation_reads_the_release_only() -> None:
    mech = DiscreteLaplace.calibrate(1.0, "add-remove")
    card = {"mechanism": mech.describe()}
    counts = np.array([-3, 0, 0, 5, 120, 4000])
    info = noise_explanation(card, [counts])
    assert info["n_counts"] == 6 and info["negative"] == 1 and info["zero"] == 2
    assert info["noise_std_min"] == pytest.approx(mech.noise_std())
    text = " ".join(noise_sentences(info))
    assert "1 count (16.7%) came out negative" in text
    assert "2 counts (33.3%) are exactly 0" in text
    assert "e+" not in text


def test_noise_explanation_of_marginals_uses_each_tables_noise() -> None:
    entries = [{"noise": "discrete Laplace", "scale": "300"}, {"noise": "discrete Gaussian", "sigma2": "100"}]
    info = noise_explanation({"mechanism": {}}, [np.zeros(3), np.ones(4)], entries)
    assert info["noise_std_max"] == pytest.approx(DiscreteLaplace(1 / 300, 1, Fraction(300)).noise_std())
    assert info["noise_std_min"] == pytest.approx(10.0)
    assert "between ±10 and ±420" in " ".join(noise_sentences(info))


def test_quantiles_and_ecdf_match_numpy() -> None:
    rng = np.random.default_rng(8)
    real = pd.DataFrame({"x": rng.integers(0, 50, 999)})
    synthetic = pd.DataFrame({"x": rng.normal(25, 10, 1234)})
    v = value_comparison(real, synthetic, "x")
    for side, df in (("real", real), ("synthetic", synthetic)):
        x = df["x"].to_numpy(dtype=float)
        assert v[side]["median"] == pytest.approx(np.median(x))
        for q in (5, 25, 75, 95):
            assert v[side][f"q{q}"] == pytest.approx(np.quantile(x, q / 100))
        xs, ps = v["ecdf"][side]
        np.testing.assert_allclose(xs, np.quantile(x, ps, method="inverted_cdf"))
    values, counts = np.unique(real["x"], return_counts=True)
    assert v["mode"] == values[np.argmax(counts)]
    assert v["real"]["mode_share"] == pytest.approx(counts.max() / 999)


def test_a_column_without_numbers_is_left_out() -> None:
    from dpsynth.schema import NumericColumn, Schema

    schema = Schema((NumericColumn(name="x", lower=0, upper=10, bins=5), NumericColumn(name="y", lower=0, upper=1, bins=1)))
    df = pd.DataFrame({"x": [1, 2], "y": ["", "n/a"]})
    assert list(value_comparisons(df, df, schema)) == ["x"]


def test_risk_codes_cache_gives_the_same_report() -> None:
    from dpsynth.risk import uniqueness_report
    from dpsynth.schema import CategoricalColumn, NumericColumn, Schema

    rng = np.random.default_rng(2)
    schema = Schema((NumericColumn(name="age", lower=0, upper=100, bins=10),
                     CategoricalColumn(name="sex", categories=("F", "M")),
                     CategoricalColumn(name="ward", categories=("a", "b"), on_unknown="drop")))
    real = pd.DataFrame({"age": rng.integers(0, 100, 300), "sex": rng.choice(["F", "M"], 300),
                         "ward": rng.choice(["a", "b", "zzz"], 300)})
    synthetic = real.sample(frac=1.0, random_state=1).assign(ward=lambda d: d["ward"].replace("zzz", "a"))
    cache: dict = {}
    for qi in (["age", "sex"], ["sex"], ["age", "sex", "ward"], ["ward", "age"]):
        assert uniqueness_report(real, synthetic, schema, qi, cache=cache) == uniqueness_report(real, synthetic, schema, qi)
