"""AppTest of the curator's workflow on the Schema, Privacy and Trade-off pages (issue 12)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dpsynth.accounting import Ledger
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema
from dpsynth.ui_state import SOURCE_LABELS, editor_view, schema_to_table
from tests.test_app_pages import APP, TIMEOUT, no_exception, small_csv, state_of  # noqa: E402


@pytest.fixture
def ledger_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.sqlite"
    monkeypatch.setenv("DPSYNTH_LEDGER", str(path))
    return path


def uploaded(data: bytes | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.file_uploader(key="data_upload").set_value(("people.csv", small_csv() if data is None else data, "text/csv"))
    return at.run()


def test_schema_page_counts_flagged_fields_and_relabels_only_the_edited_one(ledger_path: Path) -> None:
    at = uploaded()
    at.switch_page("pages/2_schema.py").run()
    no_exception(at)
    state = state_of(at)
    assert any("field(s) of 3 column(s)" in w.value for w in at.warning)
    age = int(state.schema_table.index[state.schema_table["column"] == "age"][0])
    at.session_state[state.editor_key] = {"edited_rows": {age: {"upper": "95"}}, "added_rows": [], "deleted_rows": []}
    at.run()
    no_exception(at)
    row = state_of(at).schema_table.iloc[age]
    assert row["src_upper"] == "public" and row["src_lower"] == "data"
    assert row["source"].startswith(SOURCE_LABELS["data"]) and "upper" not in row["source"]
    schema, _ = state_of(at).schema()
    assert ("age", "lower") in schema.data_derived_fields() and ("age", "upper") not in schema.data_derived_fields()
    assert not state_of(at).accept_data_derived
    at.checkbox(key="schema_accept_data").check().run()
    assert state_of(at).accept_data_derived


def test_estimate_all_flagged_columns_one_entry_each(ledger_path: Path) -> None:
    at = uploaded()
    at.switch_page("pages/2_schema.py").run()
    state = state_of(at)
    at.number_input(key="est_all_epsilon").set_value(0.6)
    at.session_state["est_all_outers"] = {"edited_rows": {0: {"lowest possible": 0.0, "highest possible": 150.0}},
                                          "added_rows": [], "deleted_rows": []}
    at.run()
    at.button(key="est_all_run").click().run()
    no_exception(at)
    spends = Ledger(ledger_path).spends(state.dataset_id)
    assert len(spends) == 3 and sum(s.epsilon for s in spends) == pytest.approx(0.6)
    schema, errors = state_of(at).schema()
    assert not errors and schema.data_derived() == []
    assert any("Every value of the schema" in s.value for s in at.success)


def test_estimate_all_without_outer_range_spends_nothing(ledger_path: Path) -> None:
    at = uploaded()
    at.switch_page("pages/2_schema.py").run()
    at.button(key="est_all_run").click().run()
    no_exception(at)
    assert any("outer range" in e.value for e in at.error)
    assert Ledger(ledger_path).spends(state_of(at).dataset_id) == []


def test_privacy_page_predicts_the_method_that_runs_and_warns_when_poor(ledger_path: Path) -> None:
    at = uploaded()
    at.switch_page("pages/3_privacy.py").run()
    no_exception(at)
    labels = [m.label for m in at.metric]
    assert "each column's shares off by about" in labels
    assert not any("noise per cell" in lab for lab in labels)
    at.number_input(key="privacy_rows_hint").set_value(400)
    at.number_input(key="privacy_epsilon").set_value(0.01).run()
    no_exception(at)
    assert any("Expect a poor release" in e.value for e in at.error)
    assert any("more ε" in m.value for m in at.markdown)


def test_tradeoff_page_shows_expected_error_without_simulating(ledger_path: Path) -> None:
    at = uploaded()
    at.switch_page("pages/6_tradeoff.py").run()
    no_exception(at)
    assert any("At your ε" in m.value for m in at.markdown)
    assert "tradeoff" not in state_of(at).analyses


def test_editor_view_shows_empty_cells_blank() -> None:
    schema = Schema((NumericColumn(name="x", lower=0, upper=1_500_000, bins=10),
                     CategoricalColumn(name="y", categories=("a", "b"))))
    view = editor_view(schema_to_table(schema, ["x", "y"]))
    assert list(view["lower"]) == ["0", ""] and list(view["upper"]) == ["1500000", ""]
    assert list(view["bins"]) == ["10", ""] and "None" not in view.to_string()
    assert not any(isinstance(v, float) and math.isnan(v) for v in view["decimals"])
