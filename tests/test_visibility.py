"""Who sees what on the Ledger page (issue 11): one pure rule, and the page following it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from dpsynth.accounting import Ledger, PrivacyBudget
from dpsynth.ui_state import STATE_KEY, AppState
from dpsynth.visibility import is_admin, visible_dataset_ids, visible_rows

PAGE = str(Path(__file__).resolve().parents[1] / "pages" / "9_ledger.py")
ROWS = [{"dataset_id": "mine", "x": 1}, {"dataset_id": "theirs", "x": 2}, {"dataset_id": "mine", "x": 3}]


def test_the_local_user_sees_everything() -> None:
    assert visible_rows(None, [], [], ROWS) == ROWS
    assert is_admin(None, [])


def test_a_signed_in_user_sees_only_what_this_session_loaded() -> None:
    assert visible_rows("ann@example.org", [], ["mine"], ROWS) == [ROWS[0], ROWS[2]]
    assert visible_rows("ann@example.org", [], [], ROWS) == []
    assert visible_rows("", ["ann@example.org"], [None], ROWS) == []  # signed out under login: nothing


def test_an_admin_sees_everything_case_insensitively() -> None:
    assert visible_rows("Boss@Example.org", [" boss@example.org"], [], ROWS) == ROWS
    assert not is_admin("", [""])


EMAILS = st.sampled_from(["ann@example.org", "ANN@example.org", "bob@example.org", "", " boss@example.org "])


@given(user=st.one_of(st.none(), EMAILS), admins=st.lists(EMAILS, max_size=3),
       loaded=st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=4),
       ids=st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=6))
def test_the_rule_never_shows_an_unloaded_dataset_to_a_non_admin(user, admins, loaded, ids) -> None:
    seen = visible_dataset_ids(user, admins, loaded, ids)
    assert seen <= set(ids)
    if is_admin(user, admins):
        assert seen == set(ids)
    else:
        assert seen == set(ids) & set(loaded)


# ---------------------------------------------------------------- the page


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.sqlite"
    led = Ledger(path)
    led.register("mine" * 16, PrivacyBudget(4.0, 1e-6), label="my table")
    led.register("theirs" * 10, PrivacyBudget(4.0, 1e-6), label="hiv_clinic.csv")
    led.charge("mine" * 16, PrivacyBudget(1.0), mechanism="m", purpose="my release")
    led.charge("theirs" * 10, PrivacyBudget(0.1, 1e-6), mechanism="m", purpose="schema estimate for column 'hiv_status'")
    return path


def page(ledger: Path, *, login: bool) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    if login:
        at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x" * 32}
        at.secrets["dpsynth"] = {"admins": ["boss@example.org"]}
    state = AppState(ledger_path=ledger)
    state.dataset_id = "mine" * 16
    state.loaded_datasets = ["mine" * 16]
    at.session_state[STATE_KEY] = state
    return at.run()


ORDER = ["ledger_datasets", "ledger_events", "ledger_spends"]  # the page's tables, top to bottom


def table(at: AppTest, key: str):  # noqa: ANN201 - a DataFrame
    return at.dataframe[ORDER.index(key)].value


def shown(at: AppTest, key: str) -> list[str]:
    return [str(v) for v in table(at, key).to_numpy().ravel()]


def test_without_login_the_page_shows_every_dataset(ledger: Path) -> None:
    at = page(ledger, login=False)
    assert not at.exception
    assert len(table(at, "ledger_datasets")) == 2
    assert any("hiv_status" in v for v in shown(at, "ledger_spends"))


def test_with_login_a_session_sees_only_its_own_datasets(ledger: Path) -> None:
    at = page(ledger, login=True)
    assert not at.exception
    assert len(table(at, "ledger_datasets")) == 1
    for key in ("ledger_datasets", "ledger_spends", "ledger_events"):
        assert not any("hiv" in v or "theirs" in v for v in shown(at, key)), key
    assert any("an administrator sees all" in c.value for c in at.caption)


def test_a_budget_change_needs_a_reason_and_is_listed(ledger: Path) -> None:
    at = page(ledger, login=False)
    at.number_input(key="ledger_new_total").set_value(6.0)
    at.button(key="FormSubmitter:ledger_budget_form-Set the new total").click().run()
    assert any("Say why" in e.value for e in at.error)
    assert Ledger(ledger, create=False).total("mine" * 16) == PrivacyBudget(4.0, 1e-6)
    at.number_input(key="ledger_new_total").set_value(0.5)
    at.text_input(key="ledger_reason").set_value("tighten")
    at.button(key="FormSubmitter:ledger_budget_form-Set the new total").click().run()
    assert any("below the ε already spent" in e.value for e in at.error)
    at.number_input(key="ledger_new_total").set_value(6.0)
    at.text_input(key="ledger_reason").set_value("approved by the data owner")
    at.button(key="FormSubmitter:ledger_budget_form-Set the new total").click().run()
    assert not at.exception
    assert Ledger(ledger, create=False).total("mine" * 16) == PrivacyBudget(6.0, 1e-6)
    assert "approved by the data owner" in shown(at, "ledger_events")


def test_the_same_rule_filters_archive_entries(tmp_path: Path) -> None:
    from dpsynth.archive import Archive

    archive = Archive(tmp_path / "a")
    for ds in ("mine", "theirs"):
        e = archive.begin(dataset_id=ds, label=ds, epsilon=1.0, delta=0.0, method="histogram")
        archive.complete(e.release_id, {"card.json": b"{}"})
    assert [e.dataset_id for e in visible_rows("ann@example.org", [], ["mine"], archive.list())] == ["mine"]
    assert len(visible_rows(None, [], [], archive.list())) == 2
