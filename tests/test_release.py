"""release(): exact behaviour with noise off, the card, the ledger-first order, utility on Adult."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dpsynth
from dpsynth import mechanisms
from dpsynth.accounting import Ledger, PrivacyBudget
from dpsynth.artifacts import card_markdown, release_files, release_zip
from dpsynth.binning import encode
from dpsynth.errors import BudgetExceededError, InputError
from dpsynth.histogram import counts_from_frame, histogram_frame
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema
from dpsynth.utility import fidelity


@pytest.fixture
def no_noise(monkeypatch):
    """Scale-0 noise: the mechanism returns the exact counts, so outputs are exactly predictable."""
    monkeypatch.setattr(mechanisms.DiscreteLaplace, "calibrate",
                        classmethod(lambda cls, eps, rel, k=1: cls(epsilon=eps, l1_sensitivity=1, scale=Fraction(0))))


def test_exact_histogram_when_noise_is_off(no_noise, small_df, small_schema):
    rel = dpsynth.release(small_df, small_schema, epsilon=1.0, seed=0)
    exact = np.bincount(
        np.ravel_multi_index(tuple(encode(small_df, small_schema).codes.T), small_schema.sizes),
        minlength=small_schema.n_cells,
    )
    assert rel.histogram["count"].tolist() == exact.tolist()
    assert len(rel.histogram) == small_schema.n_cells  # every cell, empty ones included
    assert len(rel.synthetic) == len(small_df)  # noisy total == n when there is no noise
    assert list(rel.synthetic.columns) == ["age", "colour"]


def test_synthetic_values_stay_in_the_declared_domain(small_df, small_schema):
    rel = dpsynth.release(small_df, small_schema, epsilon=0.5, seed=3)
    s = rel.synthetic
    assert s["age"].between(0, 100).all()
    assert s["age"].dtype == np.int64
    assert set(s["colour"].dropna()) <= {"red", "green", "blue"}


def test_card_states_guarantee_and_has_nothing_from_the_data(small_df, small_schema):
    rel = dpsynth.release(small_df, small_schema, epsilon=0.7, neighbours="replace-one", seed=5)
    card = rel.card
    assert card["privacy"]["epsilon"] == 0.7
    assert card["privacy"]["neighbours"] == "replace-one"
    assert card["mechanism"]["l1_sensitivity"] == 2
    assert card["randomness"]["for_publication"] is False
    assert any("NOT for publication" in w for w in card["warnings"])
    text = json.dumps(card)
    assert str(len(small_df)) not in text.replace(str(card["post_processing"]["synthetic_rows"]), "")
    assert "dpsynth" in card["software"]
    assert "ε = 0.7" in card_markdown(card)


def test_secure_release_is_marked_for_publication(small_df, small_schema):
    rel = dpsynth.release(small_df, small_schema, epsilon=1.0)
    assert rel.card["randomness"]["for_publication"] is True
    other = dpsynth.release(small_df, small_schema, epsilon=1.0)
    assert not np.array_equal(rel.noisy_counts, other.noisy_counts)


def test_seed_makes_release_reproducible(small_df, small_schema):
    a = dpsynth.release(small_df, small_schema, epsilon=1.0, seed=42)
    b = dpsynth.release(small_df, small_schema, epsilon=1.0, seed=42)
    assert a.histogram.equals(b.histogram)
    assert a.synthetic.equals(b.synthetic)


def test_rows_option_and_resampling(small_df, small_schema):
    rel = dpsynth.release(small_df, small_schema, epsilon=1.0, rows=123, seed=1)
    assert len(rel.synthetic) == 123
    more = rel.resample(1000, rng=np.random.default_rng(2))
    assert len(more) == 1000
    counts = counts_from_frame(rel.histogram, small_schema)
    assert counts.tolist() == rel.noisy_counts.tolist()


def test_histogram_frame_round_trip(small_schema):
    counts = np.arange(small_schema.n_cells) - 3
    frame = histogram_frame(counts, small_schema)
    shuffled = frame.sample(frac=1.0, random_state=0)
    assert counts_from_frame(shuffled, small_schema).tolist() == counts.tolist()
    with pytest.raises(InputError, match="exactly once"):
        counts_from_frame(frame.iloc[1:], small_schema)


def test_ledger_is_charged_before_noise_and_refuses_overspend(tmp_path, small_df, small_schema, monkeypatch):
    led = Ledger(tmp_path / "l.sqlite")
    seen = []
    real = mechanisms.DiscreteLaplace.__call__

    def spy(self, counts, *, rng):
        seen.append(led.spent("ds").epsilon)
        return real(self, counts, rng=rng)

    monkeypatch.setattr(mechanisms.DiscreteLaplace, "__call__", spy)
    dpsynth.release(small_df, small_schema, epsilon=0.6, ledger=led, dataset_id="ds", budget=PrivacyBudget(1.0), seed=0)
    assert seen == [pytest.approx(0.6)]
    with pytest.raises(BudgetExceededError):
        dpsynth.release(small_df, small_schema, epsilon=0.6, ledger=led, dataset_id="ds", seed=0)
    assert led.spent("ds").epsilon == pytest.approx(0.6)


def test_bad_input_fails_before_any_charge(tmp_path, small_schema):
    led = Ledger(tmp_path / "l.sqlite")
    bad = pd.DataFrame({"age": ["1", "x"], "colour": ["red", "red"]})
    with pytest.raises(InputError, match="row 2"):
        dpsynth.release(bad, small_schema, epsilon=1.0, ledger=led, dataset_id="ds")
    assert led.spent("ds").epsilon == 0


def test_id_column_bounds_contributions(small_schema):
    df = pd.DataFrame({"pid": ["a"] * 50 + ["b"], "age": ["30"] * 51, "colour": ["red"] * 51})
    rel = dpsynth.release(df, small_schema, epsilon=1.0, id_column="pid", max_contributions=2, seed=0)
    assert rel.card["privacy"]["unit_of_protection"]["max_rows_per_person"] == 2
    assert rel.card["mechanism"]["l1_sensitivity"] == 2
    with pytest.raises(InputError, match="ID column"):
        dpsynth.release(df, small_schema, epsilon=1.0, max_contributions=2)


def test_gaussian_release(small_df, small_schema):
    rel = dpsynth.release(small_df, small_schema, epsilon=1.0, delta=1e-6, seed=0)
    assert rel.card["mechanism"]["mechanism"] == "discrete Gaussian"
    assert rel.card["privacy"]["delta"] == 1e-6


def test_files_and_zip(small_df, small_schema):
    rel = dpsynth.release(small_df, small_schema, epsilon=1.0, seed=0, created="2026-01-01T00:00:00+00:00")
    files = release_files(rel)
    # the schema has a numeric column: the default value model is released too
    assert set(files) == {"synthetic.csv", "histogram.csv", "value_model.json", "schema.json", "card.json", "card.md"}
    assert set(files) == set(rel.card["artifacts"])
    assert release_zip(rel) == release_zip(rel)
    plain = dpsynth.release(small_df, small_schema, epsilon=1.0, seed=0, value_share=0)
    assert set(release_files(plain)) == {"synthetic.csv", "histogram.csv", "schema.json", "card.json", "card.md"}


def test_a_releases_files_are_made_once(small_df, small_schema, monkeypatch):
    """The archive, the zip and the dashboard share one copy of the files: the tables are serialised and
    the synthetic rows drawn once, whatever asks for them, and the zip is the same bytes each time."""
    rel = dpsynth.release(small_df, small_schema, epsilon=1.0, seed=0, method="marginals")
    made = {"tables": 0, "rows": 0}
    real_files, real_sampler = type(rel.result).files, rel.sampler

    def files(result):
        made["tables"] += 1
        return real_files(result)

    def sampler(*args, **kwargs):
        made["rows"] += 1
        return real_sampler(*args, **kwargs)

    monkeypatch.setattr(type(rel.result), "files", files)
    monkeypatch.setattr(rel, "sampler", sampler)
    first = rel.files()
    assert rel.zip() == rel.zip() and rel.files() == first and rel.table_files()["model.json"] == first["model.json"]
    assert made == {"tables": 1, "rows": 1}
    rel.table_files()["model.json"] = b"changed"  # a caller's copy: the release keeps its own
    assert rel.files()["model.json"] == first["model.json"]


def test_marginals_csv_is_the_concatenation_of_the_measured_tables(adult, adult_schema):
    """marginals.csv stacks every measured table (its columns in order of first appearance, a column
    a table lacks left empty) exactly as ``pd.concat`` would, which it replaced for speed: the same bytes."""
    from dpsynth.io import to_safe_csv

    rel = dpsynth.release(adult.head(3000), adult_schema, epsilon=1.0, delta=1e-9, seed=3, method="marginals")
    frames = []
    for i, frame in enumerate(rel.result.marginal_frames()):
        f = frame.copy()
        f.insert(0, "marginal", i + 1)
        frames.append(f)
    assert len({tuple(f.columns) for f in frames}) > 3  # tables over different columns
    assert rel.table_files()["marginals.csv"] == to_safe_csv(pd.concat(frames, ignore_index=True))


def test_data_derived_schema_is_flagged(small_df):
    schema = Schema((CategoricalColumn(name="colour", categories=("red", "green", "blue"), missing=True, provenance="data"),))
    rel = dpsynth.release(small_df, schema, epsilon=1.0, seed=0, accept_data_derived=True)
    assert any("NOT PRIVATE" in w for w in rel.card["warnings"])


def test_python_api_refuses_a_drafted_schema_before_the_charge(small_df, tmp_path):
    """The library refuses values read off the data unless the caller accepts them, as the CLI and dashboard do;
    the refusal comes before anything is charged."""
    schema = Schema((CategoricalColumn(name="colour", categories=("red", "green", "blue"), missing=True, provenance="data"),))
    ledger = Ledger(tmp_path / "l.sqlite")
    with pytest.raises(InputError, match="read off the data.*colour"):
        dpsynth.release(small_df, schema, epsilon=1.0, seed=0, ledger=ledger, dataset_id="d",
                        budget=PrivacyBudget(1.0))
    assert ledger.spent("d").epsilon == 0
    from dpsynth.release import release_from_source

    src = tmp_path / "s.csv"
    small_df.to_csv(src, index=False)
    with pytest.raises(InputError, match="read off the data"):
        release_from_source(str(src), schema, epsilon=1.0, seed=0, engine="pandas")


def test_adult_three_columns_one_way_tvd_below_002(adult, adult_schema):
    schema = adult_schema.select(["age", "education", "income"])
    tvds = []
    for seed in range(3):
        rel = dpsynth.release(adult, schema, epsilon=1.0, seed=seed)
        tvds.append(fidelity(adult, rel.synthetic, schema)["mean_one_way"])
    assert max(tvds) < 0.02


def test_auto_method_uses_histogram_for_small_domains(small_df, small_schema):
    rel = dpsynth.release(small_df, small_schema, epsilon=1.0, method="auto", seed=0)
    assert rel.card["method"]["name"] == "histogram"
    huge = Schema(tuple(NumericColumn(name=f"c{i}", lower=0, upper=1, bins=20) for i in range(6)))
    from dpsynth.release import choose_method

    name, why = choose_method(huge, mechanisms.calibrate(1.0, 0.0, "add-remove"), "auto", None)
    assert name == "marginals" and "cells" in why


def test_release_from_source_writes_the_rows_it_would_return(tmp_path, small_df) -> None:
    """Seeded: the streamed file (CSV or Parquet) holds the rows the in-memory path returns, decimals included."""
    from dpsynth.release import release_from_source

    df = small_df.assign(w=np.random.default_rng(3).uniform(0, 10, len(small_df)).round(2))
    schema = Schema((NumericColumn(name="age", lower=0, upper=100, bins=5, integer=True),
                     CategoricalColumn(name="colour", categories=("red", "green", "blue"), missing=True),
                     NumericColumn(name="w", lower=0, upper=10, bins=4, decimals=2)))
    mem = release_from_source(df, schema, epsilon=1.0, engine="pandas", seed=5, rows=3000)
    for ext in ("csv", "parquet"):
        path = tmp_path / f"syn.{ext}"
        rel = release_from_source(df, schema, epsilon=1.0, engine="pandas", seed=5, rows=3000, synthetic_path=path)
        # one pipeline: the streamed release holds the same rows as the in-memory one
        assert list(rel.synthetic.columns) == ["age", "colour", "w"] and rel.synthetic.equals(mem.synthetic)
        got = pd.read_csv(path, keep_default_na=False, dtype=str) if ext == "csv" else pd.read_parquet(path)
        assert got["age"].astype(int).tolist() == mem.synthetic["age"].tolist()
        assert got["colour"].replace("", None).fillna("").tolist() == mem.synthetic["colour"].fillna("").tolist()
        np.testing.assert_array_equal(got["w"].astype(float).to_numpy(), mem.synthetic["w"].to_numpy())
    text = (tmp_path / "syn.csv").read_bytes().decode()
    assert all(re.fullmatch(r"\d+\.\d\d", v) for v in pd.read_csv(tmp_path / "syn.csv", dtype=str)["w"])
    assert text.count("\r\n") == 3001
    post = mem.card["post_processing"]
    assert "SFC64" in post["randomness"] and "independent of the data" in post["randomness"]
    assert any("value model" in step for step in post["steps"])  # values inside bins from the released fine law


def test_card_markdown_says_what_model_the_budget_bought(small_df, small_schema):
    """A marginals release's summary names the model the budget bought (rounds, or no pair and why)."""
    rel = dpsynth.release(small_df, small_schema, epsilon=0.7, method="marginals", seed=5)
    text = rel.card["mechanism"]["capacity"]["text"]
    assert text and f"- **Model**: {text}" in card_markdown(rel.card)
    hist = dpsynth.release(small_df, small_schema, epsilon=0.7, method="histogram", seed=5)
    assert "**Model**" not in card_markdown(hist.card)


@pytest.mark.parametrize("delta", [0.0, 1e-9])
@pytest.mark.parametrize("neighbours", ["add-remove", "replace-one"])
@pytest.mark.parametrize("method", ["marginals", "histogram"])
def test_a_very_large_epsilon_releases_the_data_almost_exactly(method, neighbours, delta, small_df, small_schema):
    """e^ε overflows a float above ε ≈ 709 and the discrete Laplace's variance underflows to 0: neither may end
    a release (these raised OverflowError and ZeroDivisionError after the charge) nor may the noise vanish
    into a division by zero in the fit."""
    exact = encode(small_df, small_schema).codes
    for eps in (1000.0, 1e6, 1e300):
        rel = dpsynth.release(small_df, small_schema, epsilon=eps, delta=delta, method=method, neighbours=neighbours,
                              rng=np.random.default_rng(3))
        assert rel.rows == len(small_df)
        got = encode(rel.synthetic, small_schema).codes
        for j in range(exact.shape[1]):  # one-ways as good as exact: within sampling of the rows
            p = np.bincount(exact[:, j], minlength=small_schema.sizes[j]) / len(exact)
            q = np.bincount(got[:, j], minlength=small_schema.sizes[j]) / len(got)
            assert 0.5 * np.abs(p - q).sum() <= 0.1


@pytest.mark.parametrize("kwargs, fragment", [
    ({"epsilon": 1e-5}, r"ε = 1e-05 is below 0.0001"),
    ({"epsilon": 1e-300}, r"ε = 1e-300 is below 0.0001"),
    ({"epsilon": 5e-324}, r"is below 0.0001"),
    ({"epsilon": 1.0, "delta": 5e-324}, r"δ = 4.94066e-324 is below 1e-300: .* Use δ = 0"),
    ({"epsilon": 1.0, "id_column": "pid", "max_contributions": 1001}, r"rows per person .* from 1 to 1,000"),
])
@pytest.mark.parametrize("method", ["marginals", "histogram"])
def test_a_budget_too_small_to_sample_is_refused_before_any_charge(tmp_path, small_df, small_schema, kwargs, fragment,
                                                                    method):
    """The other end of the scale: below ε = 10⁻⁴ a release either raised after the charge (a noise scale past the
    exact sampler's range on the marginals method: the spend recorded, no release), hung for minutes in the
    budget's conversions (ε = 10⁻¹² with δ > 0), or ended in a ZeroDivisionError (ε = 10⁻³⁰⁰)."""
    led = Ledger(tmp_path / "l.sqlite")
    df = small_df.assign(pid=[str(i) for i in range(len(small_df))])
    with pytest.raises(InputError, match=fragment):
        dpsynth.release(df, small_schema, method=method, ledger=led, dataset_id="ds", seed=0, **kwargs)
    assert led.spent("ds").epsilon == 0 and led.spent("ds").delta == 0


@pytest.mark.parametrize("delta", [0.0, 1e-6, 1e-300])
@pytest.mark.parametrize("method", ["marginals", "histogram"])
def test_the_smallest_budget_releases_in_bounded_time(small_df, small_schema, method, delta):
    """ε = 10⁻⁴ (δ down to 10⁻³⁰⁰, a thousand rows per person) releases, charged once, within seconds: the noise
    stays inside the exact samplers' range, and the discrete Gaussian's tails and moments no longer sum 80σ terms
    (σ ≈ 10⁸ here: gigabytes)."""
    import time

    df = small_df.assign(pid=[str(i % 250) for i in range(len(small_df))])
    t = time.perf_counter()
    # rows given: the noisy row count at this ε is off by millions (up to the 50,000,000 a release may write)
    rel = dpsynth.release(df, small_schema, epsilon=1e-4, delta=delta, method=method, id_column="pid",
                          max_contributions=1000, rows=1000, rng=np.random.default_rng(3))
    assert time.perf_counter() - t < 60
    assert rel.card["privacy"]["epsilon"] == 1e-4
    syn = rel.synthetic
    assert len(syn) == 1000 and set(syn["colour"].dropna()) <= {"red", "green", "blue"}
    assert pd.to_numeric(syn["age"]).between(0, 100).all()


def test_discrete_gaussian_moments_meet_at_the_switch_to_the_normal_law() -> None:
    """Just below and above :data:`mechanisms.PMF_SUM_MAX_SIGMA` the pmf sums and the normal law's formulas agree."""
    s = mechanisms.PMF_SUM_MAX_SIGMA
    below = mechanisms.DiscreteGaussian(epsilon=1.0, delta=1e-6, l2_sensitivity=1, sigma2=Fraction(int(s * s) - 1),
                                        neighbours="add-remove")
    above = mechanisms.DiscreteGaussian(epsilon=1.0, delta=1e-6, l2_sensitivity=1, sigma2=Fraction(int(s * s) + 1),
                                        neighbours="add-remove")
    assert below.noise_std() == pytest.approx(above.noise_std(), rel=1e-6)
    for a in (1, 3_000, 25_000, 60_000):
        assert below.tail(a) == pytest.approx(above.tail(a), rel=1e-4, abs=1e-15)
        assert below.upper_tail_mean(a) == pytest.approx(above.upper_tail_mean(a), rel=1e-4, abs=1e-12)
