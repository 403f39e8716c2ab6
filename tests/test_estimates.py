"""Private schema estimates: the release's unit of protection, the batch step, and their notes.

The person-level audit: two neighbouring tables differ in one person who holds 30 rows of a
category nobody else has. Under the person-level guarantee ((ε, δ)-DP, at most k rows kept per
person) the category may appear only with probability ≤ δ on the table holding it (it never
appears on the other, so e^ε · 0 + δ bounds it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from dpsynth.accounting import Ledger, PrivacyBudget
from dpsynth.discovery import noisy_count, private_categories
from dpsynth.errors import InputError
from dpsynth.estimates import estimate, estimate_flagged
from dpsynth.neighbours import bound_contributions
from dpsynth.noise import seeded_rng
from dpsynth.provenance import data_derived_warning, refuse_data_derived
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema, field_sources, with_sources

CANARY = "canary"


def _people(with_canary: bool, seed: int = 0) -> pd.DataFrame:
    """300 people with 1–4 rows each of common colours; the canary person adds 30 rows of their own."""
    rng = np.random.default_rng(seed)
    per = rng.integers(1, 5, 300)
    ids = np.repeat(np.arange(300), per)
    colour = rng.choice(["red", "green", "blue"], len(ids), p=[0.5, 0.3, 0.2])
    df = pd.DataFrame({"pid": ids.astype(str), "colour": colour, "x": rng.uniform(10, 60, len(ids))})
    if with_canary:
        extra = pd.DataFrame({"pid": ["P"] * 30, "colour": [CANARY] * 30, "x": [59.0] * 30})
        df = pd.concat([df, extra], ignore_index=True)
    return df


def _publication_rate(df: pd.DataFrame, *, k: int, epsilon: float, delta: float, runs: int, bound: bool) -> int:
    rng = seeded_rng(11)
    hits = 0
    for _ in range(runs):
        data = bound_contributions(df, "pid", k, rng=rng)[0] if bound else df.drop(columns=["pid"])
        found = private_categories(data["colour"], epsilon, delta, rng=rng, max_contributions=k)
        hits += CANARY in found.categories
    return hits


def test_person_level_category_audit_respects_delta() -> None:
    """The rare category of one person with 30 rows appears at most at rate δ (binomial upper bound)."""
    runs, delta = 1000, 0.05
    df = _people(True)
    hits = _publication_rate(df, k=3, epsilon=1.0, delta=delta, runs=runs, bound=True)
    # one-sided binomial test at level 1e-4 against the claimed δ: a correct mechanism fails 1 in 10⁴ times
    assert stats.binom.sf(hits - 1, runs, delta) > 1e-4, f"{hits}/{runs} publications at δ = {delta}"
    assert _publication_rate(_people(False), k=3, epsilon=1.0, delta=delta, runs=200, bound=True) == 0


def test_audit_has_teeth_without_bounding() -> None:
    """The same mechanism on rows not bounded per person (the old estimate) publishes the canary almost always."""
    hits = _publication_rate(_people(True), k=3, epsilon=1.0, delta=0.02, runs=200, bound=False)
    assert hits > 150


def test_estimate_at_person_level_hides_the_canary(tmp_path) -> None:
    """End to end at δ = 1e-6 (the case that published in 253 of 300 runs): never published in 40 runs."""
    ledger = Ledger(tmp_path / "l.sqlite")
    df = _people(True)
    col = CategoricalColumn(name="colour", categories=("red",), provenance="data")
    rng = seeded_rng(3)
    seen = 0
    for _ in range(40):
        est = estimate(df, col, epsilon=1.0, delta=1e-6, ledger=ledger, dataset_id="d", budget=PrivacyBudget(1e9, 1),
                       rng=rng, id_column="pid", max_contributions=3)
        seen += CANARY in est.column.categories
    assert seen == 0
    assert len(ledger.spends("d")) == 40


def test_estimate_notes_left_out_categories_from_noisy_output(tmp_path) -> None:
    """A category below the threshold but held by many rows in total is reported as left out."""
    rng = np.random.default_rng(1)
    # 400 categories of 5 rows each (2,000 rows, each far below the threshold) beside 3,000 common rows
    rare = np.repeat([f"r{i}" for i in range(400)], 5)
    df = pd.DataFrame({"c": np.concatenate([rng.choice(["a", "b"], 3000), rare])})
    col = CategoricalColumn(name="c", categories=("a",), provenance="data")
    est = estimate(df, col, epsilon=1.0, delta=1e-6, ledger=Ledger(tmp_path / "l.sqlite"), dataset_id="d",
                   budget=PrivacyBudget(10, 1e-3), rng=seeded_rng(2))
    assert set(est.column.categories) == {"a", "b"}
    assert any("left out" in n for n in est.notes)
    assert field_sources(est.column) == {"categories": "private"}


def test_estimate_notes_a_too_narrow_outer_range(tmp_path) -> None:
    """Values far beyond the outer range (credit amounts 250–18,424 with outer range 0–1,000) are reported."""
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"amount": rng.uniform(250, 18_424, 1000)})
    col = NumericColumn(name="amount", lower=0, upper=1, bins=10, provenance="data")
    est = estimate(df, col, epsilon=1.0, outer=(0, 1000), ledger=Ledger(tmp_path / "l.sqlite"), dataset_id="d",
                   budget=PrivacyBudget(10), rng=seeded_rng(4))
    assert any("beyond the outer range" in n for n in est.notes)
    ok = estimate(df, col, epsilon=1.0, outer=(0, 100_000), ledger=Ledger(tmp_path / "m.sqlite"), dataset_id="d",
                  budget=PrivacyBudget(10), rng=seeded_rng(4))
    assert not ok.notes
    # bins read off the data are replaced by the public default
    assert ok.column.bins == 10 and ok.column.provenance == "private"


def test_estimate_flagged_splits_one_budget_one_entry_per_column(tmp_path) -> None:
    ledger = Ledger(tmp_path / "l.sqlite")
    df = _people(False)
    schema = Schema((
        CategoricalColumn(name="colour", categories=("red",), provenance="data"),
        NumericColumn(name="x", lower=10, upper=60, bins=5, provenance="data"),
        NumericColumn(name="y", lower=0, upper=1, bins=2),
    ))
    df["y"] = 0.5
    out = estimate_flagged(df, schema, epsilon=2.0, delta=1e-6, outers={"x": (0, 100)}, ledger=ledger,
                           dataset_id="d", budget=PrivacyBudget(4, 1e-5), rng=seeded_rng(1), id_column="pid",
                           max_contributions=4)
    assert not out.failed and out.schema.data_derived() == []
    spends = ledger.spends("d")
    assert len(spends) == 2
    assert sum(s.epsilon for s in spends) == pytest.approx(2.0)
    assert sum(s.delta for s in spends) == pytest.approx(1e-6)
    assert out.schema.column("y") == schema.column("y")


def test_estimate_flagged_refuses_before_any_charge(tmp_path) -> None:
    ledger = Ledger(tmp_path / "l.sqlite")
    df = _people(False)
    schema = Schema((CategoricalColumn(name="colour", categories=("red",), provenance="data"),
                     NumericColumn(name="x", lower=10, upper=60, bins=5, provenance="data")))
    with pytest.raises(InputError, match="outer range"):
        estimate_flagged(df, schema, epsilon=1.0, delta=1e-6, ledger=ledger, dataset_id="d", budget=PrivacyBudget(4, 1e-5))
    with pytest.raises(InputError, match="Nothing was spent"):
        estimate_flagged(df, schema, epsilon=5.0, delta=1e-6, outers={"x": (0, 100)}, ledger=ledger, dataset_id="d",
                         budget=PrivacyBudget(4, 1e-5))
    assert ledger.spends("d") == []


def test_noisy_count_margin_is_a_95_percent_bound() -> None:
    rng = seeded_rng(9)
    rate = np.mean([noisy_count(0, 0.5, rng=rng, max_contributions=2).clearly_positive for _ in range(2000)])
    assert rate <= 0.05 + 4 * np.sqrt(0.05 * 0.95 / 2000)


# ---------------------------------------------------------------- provenance per field
def test_sources_per_field_and_old_json_loads() -> None:
    old = Schema.from_dict({"columns": [{"name": "a", "type": "numeric", "lower": 0, "upper": 5, "bins": 5,
                                         "provenance": "data"}]})
    assert field_sources(old.columns[0]) == {"lower": "data", "upper": "data", "bins": "data"}
    edited = old.replace(with_sources(old.columns[0], upper="public"))
    assert edited.data_derived_fields() == [("a", "lower"), ("a", "bins")]
    again = Schema.from_json(edited.to_json())
    assert again == edited
    with pytest.raises(InputError, match="unknown field"):
        NumericColumn(name="a", lower=0, upper=5, bins=5, sources={"categories": "data"})
    with pytest.raises(InputError, match="source of lower"):
        NumericColumn(name="a", lower=0, upper=5, bins=5, sources={"lower": "made up"})


def test_refusal_names_columns_and_fields_and_acceptance_warns() -> None:
    schema = Schema((NumericColumn(name="age", lower=29, upper=53, bins=4, sources={"lower": "data"}),
                     CategoricalColumn(name="name", categories=("Ann", "Zed"), provenance="data")))
    with pytest.raises(InputError) as err:
        refuse_data_derived(schema)
    msg = str(err.value)
    assert "age (lower bound)" in msg and "name (categories" in msg and "\n" not in msg
    refuse_data_derived(schema, accept=True)
    warning = data_derived_warning(schema)
    assert warning is not None and warning.startswith("NOT PRIVATE") and "age (lower bound)" in warning
    assert data_derived_warning(Schema((NumericColumn(name="b", lower=0, upper=1, bins=1),))) is None


@given(st.lists(st.sampled_from(["public", "data", "private"]), min_size=4, max_size=4))
def test_sources_round_trip_and_summary(provs: list[str]) -> None:
    """Any per-field sources survive JSON, and the summary is 'data' exactly when a field is."""
    num = NumericColumn(name="n", lower=0, upper=1, bins=2, sources=dict(zip(("lower", "upper", "bins"), provs[:3],
                                                                             strict=True)))
    cat = CategoricalColumn(name="c", categories=("a",), sources={"categories": provs[3]})
    schema = Schema((num, cat))
    assert Schema.from_json(schema.to_json()) == schema
    assert (num.provenance == "data") == ("data" in provs[:3])
    assert [f for _, f in schema.data_derived_fields()] == [f for f, p in zip(("lower", "upper", "bins", "categories"),
                                                                               provs, strict=True) if p == "data"]
