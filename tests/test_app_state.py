"""The dashboard's logic without Streamlit: state object, editor table ↔ schema, private estimates, plots."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpsynth.accounting import Ledger, PrivacyBudget
from dpsynth.errors import BudgetExceededError, InputError
from dpsynth.estimates import estimate_column
from dpsynth.noise import seeded_rng
from dpsynth.release import release
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema
from dpsynth.ui_state import (
    SOURCE_LABELS,
    STATE_KEY,
    AppState,
    epsilon_guidance,
    get_state,
    mark_edits_public,
    schema_to_table,
    split_categories,
    table_to_schema,
)


def test_get_state_initialises_once() -> None:
    session: dict = {}
    s1 = get_state(session)
    s1.epsilon = 0.3
    assert get_state(session) is s1 and session[STATE_KEY] is s1 and s1.epsilon == 0.3


def test_table_round_trip_keeps_every_field(small_schema: Schema) -> None:
    table = schema_to_table(small_schema, ["age", "colour", "extra"])
    assert list(table["include"]) == [True, True, False]
    back, errors = table_to_schema(table)
    assert errors == [] and back == small_schema


def test_table_errors_name_the_column(small_schema: Schema) -> None:
    table = schema_to_table(small_schema, ["age", "colour"])
    table.loc[0, "lower"] = 200.0
    table.loc[1, "categories"] = " , "
    schema, errors = table_to_schema(table)
    assert schema is None
    assert any("'age'" in e and "lower" in e for e in errors)
    assert any("'colour'" in e and "categories" in e for e in errors)
    table["include"] = False
    assert table_to_schema(table) == (None, ["Include at least one column."])


def test_split_categories() -> None:
    assert split_categories(" a, b ,,c ") == ("a", "b", "c")


def test_typed_values_become_public_untouched_ones_stay_flagged() -> None:
    drafted = Schema((NumericColumn(name="x", lower=1, upper=9, bins=4, provenance="data"),
                      CategoricalColumn(name="y", categories=("a", "b"), provenance="data")))
    before = schema_to_table(drafted, ["x", "y"])
    after = before.copy()
    after.loc[0, "upper"] = 10.0
    after.loc[1, "missing"] = True  # not a value read from the data: the flag stays
    out = mark_edits_public(before, after)
    # only the field typed is relabelled: x's drafted lower bound and bins stay flagged
    assert list(out["source"]) == [f"{SOURCE_LABELS['data']}: lower, bins", SOURCE_LABELS["data"]]
    schema, _ = table_to_schema(out)
    assert schema.data_derived_fields() == [("x", "lower"), ("x", "bins"), ("y", "categories")]
    declared = before.copy()
    declared.loc[0, "source"] = SOURCE_LABELS["public"]  # the curator declares the whole row public knowledge
    assert table_to_schema(mark_edits_public(before, declared))[0].data_derived() == ["y"]
    forged = before.copy()
    forged.loc[1, "source"] = SOURCE_LABELS["private"]  # picked by hand, not estimated
    assert mark_edits_public(before, forged).loc[1, "source"] == SOURCE_LABELS["data"]


def test_load_resets_release_and_set_schema_checks_names(small_df: pd.DataFrame, small_schema: Schema) -> None:
    state = AppState()
    state.load(small_df, "s.csv")
    assert state.dataset_id and set(state.schema_table["source"]) == {SOURCE_LABELS["data"]}
    state.analyses["x"] = 1
    version = state.editor_version
    state.set_schema(small_schema)
    assert state.editor_version == version + 1
    assert state.schema()[0] == small_schema
    with pytest.raises(InputError, match="'nope'"):
        state.set_schema(Schema((NumericColumn(name="nope", lower=0, upper=1, bins=1),)))
    state.load(small_df, "again.csv")
    assert state.analyses == {} and state.release is None


def test_template_column_is_valid_for_any_table_row(small_df: pd.DataFrame) -> None:
    state = AppState()
    state.load(small_df, "s.csv")
    state.schema_table.loc[state.schema_table["column"] == "age", ["lower", "upper"]] = [np.nan, np.nan]
    col = state.template_column("age")
    assert isinstance(col, NumericColumn) and col.name == "age"
    assert isinstance(state.template_column("colour"), CategoricalColumn)


def test_spend_delta_only_for_gaussian() -> None:
    state = AppState(delta=1e-7)
    assert state.spend_delta() == 0.0
    state.mechanism = "gaussian"
    assert state.spend_delta() == 1e-7


def test_epsilon_guidance_states_the_factor() -> None:
    assert "2.72" in epsilon_guidance(1.0) and "Strong" in epsilon_guidance(0.1) and "Weak" in epsilon_guidance(12)
    assert "about 10⁴³⁴ times" in epsilon_guidance(1000.0)  # e^1000 is past the float range


# ---------------------------------------------------------------- private estimates
def test_numeric_estimate_is_charged_before_and_marked_private(tmp_path) -> None:
    ledger = Ledger(tmp_path / "l.sqlite")
    df = pd.DataFrame({"age": np.random.default_rng(4).uniform(0, 100, 20_000)})
    # bounds read off the data, bins chosen by the curator (kept by the estimate)
    col = NumericColumn(name="age", lower=0, upper=5, bins=5, integer=True, provenance="data", sources={"bins": "public"})
    out = estimate_column(df, col, epsilon=2.0, outer=(0, 150), ledger=ledger, dataset_id="d",
                          budget=PrivacyBudget(4.0), rng=seeded_rng(1))
    assert out.provenance == "private" and out.integer and out.bins == 5
    # the 1% and 99% quantiles of U(0, 100) are 1 and 99; at ε/2 = 1 per quantile and n = 20,000 the
    # chosen rank is within a few dozen of the target (probability of more than 40 off < 2e-8), i.e. ±0.2
    assert 0 <= out.lower <= 2 and 98 <= out.upper <= 100
    [spend] = ledger.spends("d")
    assert spend.epsilon == 2.0 and "'age'" in spend.purpose


def test_category_estimate_needs_delta_and_budget(tmp_path, small_df: pd.DataFrame) -> None:
    ledger = Ledger(tmp_path / "l.sqlite")
    col = CategoricalColumn(name="colour", categories=("x",), provenance="data")
    with pytest.raises(InputError, match="δ > 0"):
        estimate_column(small_df, col, epsilon=1.0, ledger=ledger, dataset_id="d", budget=PrivacyBudget(4.0))
    assert ledger.spends() == []
    out = estimate_column(small_df, col, epsilon=1.0, delta=1e-6, ledger=ledger, dataset_id="d",
                          budget=PrivacyBudget(4.0, 1e-5), rng=seeded_rng(2))
    # red/green/blue have 75+ rows each, far above the threshold; empty values are never a category
    assert set(out.categories) == {"red", "green", "blue"} and out.missing and out.on_unknown == "missing"
    with pytest.raises(BudgetExceededError):
        estimate_column(small_df, col, epsilon=3.5, delta=1e-6, ledger=ledger, dataset_id="d",
                        budget=PrivacyBudget(4.0, 1e-5))
    assert len(ledger.spends("d")) == 1


def test_estimate_rejects_bad_outer_range(tmp_path, small_df: pd.DataFrame) -> None:
    ledger = Ledger(tmp_path / "l.sqlite")
    col = NumericColumn(name="age", lower=0, upper=1, bins=2)
    with pytest.raises(InputError, match="outer range"):
        estimate_column(small_df, col, epsilon=1.0, outer=(5, 5), ledger=ledger, dataset_id="d", budget=PrivacyBudget(4))
    assert ledger.spends() == []


# ---------------------------------------------------------------- plots
def test_released_marginal_sums_the_noisy_histogram(small_df: pd.DataFrame, small_schema: Schema) -> None:
    from dpsynth import plots

    rel = release(small_df, small_schema, epsilon=1.0, seed=5)
    full = rel.noisy_counts.reshape(small_schema.sizes)
    np.testing.assert_array_equal(plots.released_marginal(rel, ["age"]), full.sum(axis=1))
    np.testing.assert_array_equal(plots.released_marginal(rel, ["colour", "age"]), full.T)
    real = plots.table_marginal(small_df, small_schema, ["age", "colour"])
    assert real.shape == (5, 4) and real.sum() == len(small_df)
    figs = [plots.marginal_figure(small_schema.column("age").labels(),
                                  {plots.REAL: real.sum(axis=1), plots.NOISY: full.sum(axis=1)}, "age"),
            plots.heatmap_pair_figure(["a"] * 5, ["b"] * 4, {"real": real, "noisy": full}, "age", "colour")]
    assert [len(f.data) for f in figs] == [2, 2]


def test_budget_figure_starts_at_zero() -> None:
    from dpsynth import plots

    spends = pd.DataFrame({"epsilon": [0.5, 1.0], "purpose": ["a", "b"], "time": ["t1", "t2"]})
    fig = plots.budget_figure(spends, 4.0)
    assert list(fig.data[0].y) == [0.0, 0.5, 1.5]


def test_decimals_survive_the_editor_table_and_bad_combinations_name_the_column() -> None:
    schema = Schema((NumericColumn(name="income", lower=0, upper=1000, bins=4, decimals=2),
                     NumericColumn(name="age", lower=0, upper=100, bins=5, integer=True),
                     CategoricalColumn(name="c", categories=("a", "b"))))
    table = schema_to_table(schema, ["income", "age", "c"])
    assert table.loc[0, "decimals"] == 2 and pd.isna(table.loc[1, "decimals"]) and pd.isna(table.loc[2, "decimals"])
    back, errors = table_to_schema(table)
    assert errors == [] and back == schema and back.column("income").decimals == 2
    table.loc[1, "decimals"] = 1  # integer and decimals together
    back, errors = table_to_schema(table)
    assert back is None and len(errors) == 1 and "'age'" in errors[0]
    old = table.drop(columns=["decimals"])  # a table saved before the column existed
    back, errors = table_to_schema(old)
    assert errors == [] and back.column("income").decimals is None


def test_template_and_estimate_keep_decimals(tmp_path, small_df: pd.DataFrame) -> None:
    state = AppState()
    state.load(small_df, "d.csv")
    state.set_schema(Schema((NumericColumn(name="age", lower=0, upper=100, bins=5, decimals=1),)))
    assert state.template_column("age").decimals == 1
    ledger = Ledger(tmp_path / "l.sqlite")
    df = pd.DataFrame({"v": np.random.default_rng(4).uniform(0, 1, 20_000)})
    col = NumericColumn(name="v", lower=0, upper=50, bins=50, decimals=1, provenance="data")
    out = estimate_column(df, col, epsilon=2.0, outer=(0, 150), ledger=ledger, dataset_id="d",
                          budget=PrivacyBudget(4.0), rng=seeded_rng(1))
    # about [0.01, 0.99] holds only the multiples 0.1 … 0.9 of 0.1: the bins shrink so each holds one
    assert out.decimals == 1 and out.provenance == "private" and 1 <= out.bins <= 9
    lo, hi = out.grid_ranges()
    assert (hi >= lo).all()


def test_unknown_value_policy_survives_the_editor_table() -> None:
    """A private category estimate (on_unknown='missing') or a loaded JSON policy is not reset to 'error'."""
    schema = Schema((CategoricalColumn(name="c", categories=("a", "b"), missing=True, on_unknown="missing"),
                     CategoricalColumn(name="d", categories=("x",), on_unknown="drop"),
                     NumericColumn(name="n", lower=0, upper=1, bins=2)))
    table = schema_to_table(schema, ["c", "d", "n"])
    assert list(table["unknown"]) == ["missing", "drop", ""]
    back, errors = table_to_schema(table)
    assert errors == [] and back == schema
    assert table_to_schema(table.drop(columns=["unknown"]))[0].column("c").on_unknown == "error"  # old tables
