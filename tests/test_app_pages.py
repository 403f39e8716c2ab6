"""Streamlit AppTest of every dashboard page: happy paths, bad input, and release-once semantics."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dpsynth.accounting import Ledger
from dpsynth.ui_state import SOURCE_LABELS, STATE_KEY, AppState

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TIMEOUT = 120


def small_csv(n: int = 400, seed: int = 3) -> bytes:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "age": rng.integers(18, 90, n),
        "colour": rng.choice(["red", "green", "blue"], n, p=[0.5, 0.3, 0.2]),
        "income": rng.choice(["low", "high"], n),
    })
    return df.to_csv(index=False).encode()


@pytest.fixture
def ledger_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.sqlite"
    monkeypatch.setenv("DPSYNTH_LEDGER", str(path))
    return path


def state_of(at: AppTest) -> AppState:
    return at.session_state[STATE_KEY]


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def uploaded(ledger_path: Path, data: bytes | None = None, name: str = "people.csv") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.file_uploader(key="data_upload").set_value((name, small_csv() if data is None else data, "text/csv"))
    return at.run()


def with_public_bounds(at: AppTest) -> AppTest:
    """Type public values into the schema editor (what a curator does), via the editor's edit state."""
    at.switch_page("pages/2_schema.py").run()
    state = state_of(at)
    table = state.schema_table
    rows = {int(i): {} for i in table.index}
    age = int(table.index[table["column"] == "age"][0])
    rows[age] = {"lower": 0.0, "upper": 100.0, "bins": 5}
    # typed bounds become public; identical category lists are confirmed public in the source column
    for name, cats in [("colour", "red, green, blue"), ("income", "low, high")]:
        rows[int(table.index[table["column"] == name][0])] = {"categories": cats, "source": SOURCE_LABELS["public"]}
    at.session_state[state.editor_key] = {"edited_rows": {k: v for k, v in rows.items() if v},
                                          "added_rows": [], "deleted_rows": []}
    return at.run()


# ---------------------------------------------------------------- Data
def test_start_page_without_data(ledger_path: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    no_exception(at)
    assert at.title[0].value == "1 · Your data"
    assert any("No table loaded" in i.value for i in at.info)


def test_upload_csv_drafts_a_flagged_schema(ledger_path: Path) -> None:
    at = uploaded(ledger_path)
    no_exception(at)
    assert not at.error
    assert any("Loaded" in s.value for s in at.success)
    state = state_of(at)
    assert list(state.data.columns) == ["age", "colour", "income"]
    assert set(state.schema_table["source"]) == {SOURCE_LABELS["data"]}
    at.switch_page("pages/2_schema.py").run()
    no_exception(at)
    assert any("not private" in w.value for w in at.warning)


@pytest.mark.parametrize("data, pattern", [
    (b"a,b\n1,2\n3,4,5\n", r"(row|line) \d"),  # ragged row: the message says where
    (b"", "empty"),
    (b"name\n\xff\xfe\xfa\n", "UTF-8"),
    (b"a,b\n", "no data rows"),
])
def test_malformed_upload_is_a_message(ledger_path: Path, data: bytes, pattern: str) -> None:
    at = uploaded(ledger_path, data, "bad.csv")
    no_exception(at)
    assert any(re.search(pattern, e.value, re.IGNORECASE) and "bad.csv" in e.value for e in at.error), \
        [e.value for e in at.error]
    assert not state_of(at).has_data


def test_sample_loads_with_public_schema_and_provenance(ledger_path: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.button(key="load_sample").click().run()
    no_exception(at)
    state = state_of(at)
    assert state.sample == "adult" and len(state.data) == 48_842
    assert set(state.schema_table["source"]) == {"public"}
    assert any("CC BY 4.0" in c.value for c in at.caption)
    schema, errors = state.schema()
    assert schema is not None and not errors and not schema.data_derived()


# ---------------------------------------------------------------- Schema
def test_typing_public_values_clears_the_flag(ledger_path: Path) -> None:
    at = with_public_bounds(uploaded(ledger_path))
    no_exception(at)
    schema, errors = state_of(at).schema()
    assert not errors
    assert schema.column("age").lower == 0 and schema.column("age").bins == 5
    assert schema.data_derived() == []
    assert not any("not private" in w.value for w in at.warning)
    assert any(m.label.startswith("cells") for m in at.metric)


def test_bad_schema_values_are_named(ledger_path: Path) -> None:
    at = uploaded(ledger_path)
    at.switch_page("pages/2_schema.py").run()
    state = state_of(at)
    age = int(state.schema_table.index[state.schema_table["column"] == "age"][0])
    at.session_state[state.editor_key] = {"edited_rows": {age: {"lower": 50.0, "upper": 10.0}},
                                          "added_rows": [], "deleted_rows": []}
    at.run()
    no_exception(at)
    assert any("'age'" in e.value and "lower" in e.value for e in at.error)


def test_schema_json_load_and_bad_json(ledger_path: Path) -> None:
    at = uploaded(ledger_path)
    at.switch_page("pages/2_schema.py").run()
    good = {"columns": [{"name": "age", "type": "numeric", "lower": 0, "upper": 120, "bins": 6, "integer": True}]}
    at.file_uploader(key="schema_upload").set_value(("s.json", json.dumps(good).encode(), "application/json"))
    at.run()
    no_exception(at)
    schema, _ = state_of(at).schema()
    assert schema.names == ["age"] and schema.column("age").upper == 120
    at.file_uploader(key="schema_upload").set_value(("bad.json", b"{not json", "application/json"))
    at.run()
    no_exception(at)
    assert any("not valid JSON" in e.value for e in at.error)


def test_private_estimate_is_charged_first(ledger_path: Path) -> None:
    at = uploaded(ledger_path)
    at.switch_page("pages/2_schema.py").run()
    at.selectbox(key="est_column").set_value("age").run()
    at.number_input(key="est_outer_lo").set_value(0.0)
    at.number_input(key="est_outer_hi").set_value(150.0)
    at.button(key="est_run").click().run()
    no_exception(at)
    state = state_of(at)
    spends = Ledger(ledger_path).spends(state.dataset_id)
    assert len(spends) == 1 and "age" in spends[0].purpose and spends[0].epsilon == pytest.approx(0.1)
    row = state.schema_table[state.schema_table["column"] == "age"].iloc[0]
    assert row["source"] == SOURCE_LABELS["private"]
    assert 0 <= row["lower"] < row["upper"] <= 150


# ---------------------------------------------------------------- Privacy
def test_privacy_page_guidance_budget_and_preview(ledger_path: Path) -> None:
    at = with_public_bounds(uploaded(ledger_path))
    at.switch_page("pages/3_privacy.py").run()
    no_exception(at)
    assert any("17.14" in m.value for m in at.markdown)
    at.number_input(key="privacy_epsilon").set_value(0.5).run()
    assert state_of(at).epsilon == 0.5
    assert any("Strong protection" in i.value for i in at.info)
    at.radio(key="privacy_mechanism").set_value("gaussian").run()
    no_exception(at)
    assert at.number_input(key="privacy_delta").value == pytest.approx(1e-6)
    labels = {m.label for m in at.metric}
    assert {"total ε", "spent so far", "ε left", "δ left"} <= labels
    assert any("shares off by about" in m.label for m in at.metric)  # the expected error of the method that runs
    assert not ledger_path.exists() or Ledger(ledger_path).spends() == []  # previews spend nothing
    at.number_input(key="privacy_epsilon").set_value(10.0).run()  # more than the default total of 4
    no_exception(at)
    assert any("would be refused" in e.value for e in at.error)
    at.number_input(key="privacy_epsilon").set_value(1.0)
    at.number_input(key="privacy_total_delta").set_value(0.0).run()  # a total δ of 0: Gaussian noise is refused
    no_exception(at)
    assert state_of(at).total_delta == 0.0
    assert any("more than the δ left" in e.value and "Laplace" in e.value for e in at.error)


# ---------------------------------------------------------------- Release
def released(ledger_path: Path, epsilon: float = 1.0) -> AppTest:
    at = with_public_bounds(uploaded(ledger_path))
    at.switch_page("pages/3_privacy.py").run()
    at.number_input(key="privacy_epsilon").set_value(epsilon).run()
    at.switch_page("pages/4_release.py").run()
    at.button(key="release_button_0").click().run()
    return at


def test_release_once_then_reruns_never_spend_or_redraw(ledger_path: Path) -> None:
    at = released(ledger_path)
    no_exception(at)
    state = state_of(at)
    rel = state.release
    assert rel is not None and any("Released" in s.value for s in at.success)
    first = rel.synthetic.copy()
    assert len(Ledger(ledger_path).spends(state.dataset_id)) == 1
    # the button is gone: a second click of it (double click) has nothing to act on
    assert not [b for b in at.button if b.key and b.key.startswith("release_button")]
    keys = {b.key for b in at.get("download_button")}
    assert {"download_synthetic.csv", "download_histogram.csv", "download_card.json", "download_card.md",
            "download_zip"} <= keys
    for page in ["pages/3_privacy.py", "pages/5_utility.py", "pages/4_release.py"]:
        at.switch_page(page).run()
        no_exception(at)
    at.run().run()
    assert state_of(at).release is rel
    pd.testing.assert_frame_equal(state_of(at).release.synthetic, first)
    assert len(Ledger(ledger_path).spends()) == 1
    # the synthetic CSV respects the schema
    syn = pd.read_csv(io.BytesIO(state.release_files["synthetic.csv"]))
    assert list(syn.columns) == ["age", "colour", "income"]
    assert syn["age"].between(0, 100).all() and set(syn["colour"]) <= {"red", "green", "blue"}


def test_new_release_needs_the_button_again(ledger_path: Path) -> None:
    at = released(ledger_path)
    at.button(key="new_release").click().run()
    no_exception(at)
    assert state_of(at).release is None
    assert len(Ledger(ledger_path).spends()) == 1
    at.button(key="release_button_1").click().run()
    assert state_of(at).release is not None
    assert len(Ledger(ledger_path).spends()) == 2


def test_release_over_budget_is_refused_with_a_message(ledger_path: Path) -> None:
    at = with_public_bounds(uploaded(ledger_path))
    at.switch_page("pages/3_privacy.py").run()
    at.number_input(key="privacy_epsilon").set_value(10.0).run()  # default total is 4
    at.switch_page("pages/4_release.py").run()
    no_exception(at)
    assert at.button(key="release_button_0").disabled  # refused before anything is spent
    assert any("only ε = 4 is left" in e.value for e in at.error), [e.value for e in at.error]
    assert state_of(at).release is None
    assert Ledger(ledger_path).spends() == []


def test_demo_seed_release_says_not_for_publication(ledger_path: Path) -> None:
    at = with_public_bounds(uploaded(ledger_path))
    at.switch_page("pages/4_release.py").run()
    at.checkbox(key="release_demo").check().run()
    at.button(key="release_button_0").click().run()
    no_exception(at)
    assert any("NOT for publication" in w.value for w in at.warning)


def test_release_without_data_or_schema(ledger_path: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.switch_page("pages/4_release.py").run()
    no_exception(at)
    assert any("Load a dataset" in i.value for i in at.info)
    at = uploaded(ledger_path)  # drafted categories are fine, but make one column unusable
    at.switch_page("pages/2_schema.py").run()
    state = state_of(at)
    col = int(state.schema_table.index[state.schema_table["column"] == "colour"][0])
    at.session_state[state.editor_key] = {"edited_rows": {col: {"categories": ""}}, "added_rows": [], "deleted_rows": []}
    at.run()
    at.switch_page("pages/4_release.py").run()
    no_exception(at)
    assert any("categories" in e.value for e in at.error)
    assert not [b for b in at.button if b.key and b.key.startswith("release_button")]


# ---------------------------------------------------------------- after the release
def test_utility_risk_tradeoff_and_ledger_pages(ledger_path: Path) -> None:
    at = released(ledger_path)
    at.switch_page("pages/5_utility.py").run()
    no_exception(at)
    assert any("For your eyes only" in w.value for w in at.warning)
    assert len(at.get("plotly_chart")) >= 4
    at.selectbox(key="util_column").set_value("colour").run()
    no_exception(at)

    at.switch_page("pages/7_risk.py").run()
    no_exception(at)
    assert len(at.get("plotly_chart")) == 1
    at.multiselect(key="risk_qi").set_value([]).run()
    assert any("at least one" in i.value for i in at.info)

    at.switch_page("pages/6_tradeoff.py").run()
    at.multiselect(key="trade_eps").set_value([0.5, 2.0])
    at.select_slider(key="trade_reps").set_value(50)
    at.button(key="trade_run_eps").click().run()
    no_exception(at)
    curves = state_of(at).analyses["tradeoff"][1]
    assert list(curves["epsilon"]) == [0.5, 2.0]
    at.multiselect(key="trade_bins").set_value([2, 10])
    at.button(key="trade_run_bins").click().run()
    no_exception(at)
    assert list(state_of(at).analyses["bins"][2]["bins"]) == [2, 10]

    at.switch_page("pages/9_ledger.py").run()
    no_exception(at)
    assert at.get("download_button")[0].key == "ledger_export"
    assert Ledger(ledger_path).spends()[0].epsilon == 1.0


def test_pages_needing_a_release_say_so(ledger_path: Path) -> None:
    at = uploaded(ledger_path)
    for page in ["pages/5_utility.py", "pages/7_risk.py"]:
        at.switch_page(page).run()
        no_exception(at)
        assert any("Make a release first" in i.value for i in at.info)
    at.switch_page("pages/9_ledger.py").run()
    no_exception(at)
    assert any("Nothing has been spent" in i.value for i in at.info)


def test_mechanisms_page(ledger_path: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.switch_page("pages/8_mechanisms.py").run()
    no_exception(at)
    assert len(at.get("plotly_chart")) == 4
    assert len(at.success) == 4
    before = [s.value for s in at.success]
    at.run()
    assert [s.value for s in at.success] == before  # reruns show the same draws
    at.slider(key="mech_lap_eps").set_value(0.2).run()
    no_exception(at)
    at.button(key="mech_redraw").click().run()
    no_exception(at)


def test_tradeoff_needs_a_numeric_column(ledger_path: Path) -> None:
    at = uploaded(ledger_path)
    at.switch_page("pages/2_schema.py").run()
    state = state_of(at)
    age = int(state.schema_table.index[state.schema_table["column"] == "age"][0])
    at.session_state[state.editor_key] = {"edited_rows": {age: {"include": False}}, "added_rows": [], "deleted_rows": []}
    at.run()
    at.switch_page("pages/6_tradeoff.py").run()
    no_exception(at)
    assert any("numeric column" in i.value for i in at.info)
    assert not at.button


def test_exponential_mechanism_demo_without_options(ledger_path: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.switch_page("pages/8_mechanisms.py").run()
    at.session_state["mech_em_table"] = {"edited_rows": {}, "added_rows": [], "deleted_rows": [0, 1, 2, 3]}
    at.run()
    no_exception(at)
    assert any("at least one option" in i.value for i in at.info)


def test_person_level_protection_with_an_id_column(ledger_path: Path) -> None:
    rng = np.random.default_rng(8)
    df = pd.DataFrame({"pid": rng.integers(0, 150, 400), "ward": rng.choice(["a", "b"], 400)})
    at = uploaded(ledger_path, df.to_csv(index=False).encode(), "visits.csv")
    at.switch_page("pages/3_privacy.py").run()
    at.selectbox(key="privacy_id_column").set_value("pid").run()
    at.number_input(key="privacy_max_rows").set_value(3).run()
    no_exception(at)
    assert any("untick it" in w.value for w in at.warning)
    at.switch_page("pages/2_schema.py").run()
    state = state_of(at)
    pid = int(state.schema_table.index[state.schema_table["column"] == "pid"][0])
    at.session_state[state.editor_key] = {"edited_rows": {pid: {"include": False}}, "added_rows": [], "deleted_rows": []}
    at.run()
    state_of(at).accept_data_derived = True  # the drafted ward list is accepted (this test is about the unit)
    at.switch_page("pages/4_release.py").run()
    at.button(key="release_button_0").click().run()
    no_exception(at)
    unit = state_of(at).release.card["privacy"]["unit_of_protection"]
    assert unit["unit"] == "person" and unit["id_column"] == "pid" and unit["max_rows_per_person"] == 3


def test_decimals_typed_in_the_schema_editor_reach_the_release(ledger_path: Path) -> None:
    """Declared decimals: kept in the schema, and the synthetic values have at most that many; a clash is a message."""
    at = with_public_bounds(uploaded(ledger_path))
    state = state_of(at)
    age = int(state.schema_table.index[state.schema_table["column"] == "age"][0])
    at.session_state[state.editor_key] = {"edited_rows": {age: {"lower": 0.0, "upper": 100.0, "bins": 5, "integer": False,
                                                                "decimals": 1}},
                                          "added_rows": [], "deleted_rows": []}
    at.run()
    no_exception(at)
    schema, errors = state_of(at).schema()
    assert errors == [] and schema.column("age").decimals == 1
    from dpsynth.release import release

    rel = release(state_of(at).data, schema, epsilon=1.0, seed=2)
    ages = rel.synthetic["age"].dropna().to_numpy(dtype=float)
    assert len(ages) and np.allclose(np.round(ages * 10), ages * 10)
    at.session_state[state_of(at).editor_key] = {"edited_rows": {age: {"integer": True, "decimals": 1}},
                                                 "added_rows": [], "deleted_rows": []}
    at.run()
    no_exception(at)
    assert any("'age'" in e.value and "decimals" in e.value for e in at.error)


def test_large_server_file_is_released_on_duckdb(ledger_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DPSYNTH_DATA_DIR: pick a file (no typed paths), preview its first rows, release every row on DuckDB."""
    from dpsynth.identity import table_identity

    folder = tmp_path / "data"
    folder.mkdir()
    big = folder / "people.csv"
    big.write_bytes(small_csv(n=12_000))
    (folder / "notes.md").write_text("not offered", encoding="utf-8")
    monkeypatch.setenv("DPSYNTH_DATA_DIR", str(folder))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert at.selectbox(key="server_file").options == ["people.csv"]
    at.button(key="load_server_file").click().run()
    no_exception(at)
    state = state_of(at)
    assert state.source_path == big and len(state.data) == 10_000 and state.dataset_id == table_identity(big)
    at = with_public_bounds(at)
    at.switch_page("pages/4_release.py").run()
    at.button(key="release_button_0").click().run()
    no_exception(at)
    rel = state_of(at).release
    assert rel is not None and "engine" not in rel.card
    assert rel.report.rows_in == 12_000  # every row of the file was counted, not the preview
    [spend] = Ledger(ledger_path, create=False).spends(table_identity(big))
    assert spend.epsilon == state_of(at).epsilon


def test_server_files_refuse_names_outside_the_folder(tmp_path: Path) -> None:
    from dpsynth.errors import InputError
    from dpsynth.server_files import list_files, resolve

    (tmp_path / "a.csv").write_text("x\n1\n", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.csv").write_text("x\n1\n", encoding="utf-8")
    (tmp_path / "link.csv").symlink_to(Path("/etc/hostname"))
    assert list_files(tmp_path.resolve()) == ["a.csv"]
    for bad in ("../a.csv", "sub/b.csv", "link.csv", "/etc/passwd"):
        with pytest.raises(InputError, match="not one of the files"):
            resolve(tmp_path.resolve(), bad)
