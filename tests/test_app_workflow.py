"""AppTest of the curator's workflow states: stale releases, an exhausted budget, failed uploads, ε defaults,
the Utility page's raw-value comparison and the quality reports."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dpsynth import plots
from dpsynth.accounting import Ledger, PrivacyBudget
from dpsynth.report import PRIVATE_MARKER
from dpsynth.risk import risk_sentences
from dpsynth.ui_state import DEFAULT_EPSILON, EPSILON_RANGE, AppState, epsilon_problem
from tests.test_app_pages import no_exception, released, small_csv, state_of, uploaded


@pytest.fixture
def ledger_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.sqlite"
    monkeypatch.setenv("DPSYNTH_LEDGER", str(path))
    return path


def release_button(at: AppTest):  # noqa: ANN201 - the AppTest button element
    buttons = [b for b in at.button if b.key and b.key.startswith("release_button")]
    assert len(buttons) == 1
    return buttons[0]


# ---------------------------------------------------------------- stale releases
def test_release_marked_when_settings_change(ledger_path: Path) -> None:
    at = released(ledger_path)
    no_exception(at)
    assert not any("different settings" in w.value for w in at.warning)
    assert state_of(at).release_settings == state_of(at).settings_key()
    at.switch_page("pages/3_privacy.py").run()
    at.number_input(key="privacy_epsilon").set_value(2.0).run()
    at.switch_page("pages/4_release.py").run()
    no_exception(at)
    assert any("different settings" in w.value for w in at.warning)
    assert state_of(at).release_is_stale
    for page in ("pages/5_utility.py", "pages/7_risk.py"):
        at.switch_page(page).run()
        assert any("different settings" in i.value for i in at.info)
    at.switch_page("pages/4_release.py").run()
    # back to the settings it was made with: the mark goes
    at.switch_page("pages/3_privacy.py").run()
    at.number_input(key="privacy_epsilon").set_value(1.0).run()
    at.switch_page("pages/4_release.py").run()
    assert not any("different settings" in w.value for w in at.warning)


def test_schema_change_makes_the_release_stale() -> None:
    state = AppState()
    import pandas as pd

    from dpsynth.schema import CategoricalColumn, Schema

    state.load(pd.DataFrame({"a": ["x", "y"]}), "t.csv")
    state.set_schema(Schema((CategoricalColumn(name="a", categories=("x", "y")),)))
    before = state.settings_key()
    state.set_schema(Schema((CategoricalColumn(name="a", categories=("x", "y", "z")),)))
    assert state.settings_key() != before
    state.method = "marginals"
    again = state.settings_key()
    state.method = "histogram"
    assert state.settings_key() != again


# ---------------------------------------------------------------- dead ends
def test_exhausted_budget_disables_the_button_and_says_why(ledger_path: Path) -> None:
    at = released(ledger_path, epsilon=4.0)  # the default total budget is 4
    no_exception(at)
    assert state_of(at).release is not None
    at.button(key="new_release").click().run()
    no_exception(at)
    assert release_button(at).disabled
    assert any("used up" in e.value and "different dataset" in e.value for e in at.error), [e.value for e in at.error]
    assert len(Ledger(ledger_path).spends()) == 1


def test_asking_more_than_is_left_disables_the_button(ledger_path: Path) -> None:
    at = released(ledger_path, epsilon=3.0)
    at.button(key="new_release").click().run()
    at.switch_page("pages/3_privacy.py").run()
    at.number_input(key="privacy_epsilon").set_value(2.0).run()
    at.switch_page("pages/4_release.py").run()
    no_exception(at)
    assert release_button(at).disabled
    assert any("only ε = 1 is left" in e.value and "Lower ε to at most 1" in e.value for e in at.error), \
        [e.value for e in at.error]
    at.switch_page("pages/3_privacy.py").run()
    at.number_input(key="privacy_epsilon").set_value(1.0).run()
    at.switch_page("pages/4_release.py").run()
    assert not release_button(at).disabled


def test_failed_upload_clears_the_previous_dataset(ledger_path: Path) -> None:
    at = uploaded(ledger_path)
    assert state_of(at).has_data
    at.file_uploader(key="data_upload").set_value(("broken.csv", b"a,b\n1,2\n3,4,5\n", "text/csv")).run()
    no_exception(at)
    assert not state_of(at).has_data and state_of(at).schema_table is None
    assert not any("Loaded" in s.value for s in at.success)
    assert any("broken.csv" in e.value for e in at.error)


def test_new_upload_resets_epsilon_to_the_datasets_default(ledger_path: Path) -> None:
    at = uploaded(ledger_path)
    at.switch_page("pages/3_privacy.py").run()
    at.number_input(key="privacy_epsilon").set_value(3.5).run()
    assert state_of(at).epsilon == 3.5
    at.switch_page("pages/1_data.py").run()
    at.file_uploader(key="data_upload").set_value(("other.csv", small_csv(300, seed=9), "text/csv")).run()
    no_exception(at)
    assert state_of(at).epsilon == DEFAULT_EPSILON
    at.switch_page("pages/3_privacy.py").run()
    assert at.number_input(key="privacy_epsilon").value == DEFAULT_EPSILON


def test_default_epsilon_fits_what_the_dataset_has_left(tmp_path: Path) -> None:
    import pandas as pd

    state = AppState(ledger_path=tmp_path / "l.sqlite")
    df = pd.DataFrame({"a": ["x", "y", "x"]})
    state.load(df, "t.csv")
    ledger = Ledger(state.ledger_path)
    ledger.register(state.dataset_id, PrivacyBudget(4.0, 1e-5))
    ledger.charge(state.dataset_id, PrivacyBudget(3.7), mechanism="test", purpose="earlier release")
    state.load(df, "t.csv")
    assert state.epsilon == pytest.approx(0.3)
    state.accept_data_derived = True  # the drafted category list is accepted: only the budget is at stake here
    assert state.release_blocker() is None


def test_epsilon_range_is_stated() -> None:
    lo, hi = EPSILON_RANGE
    for bad in (0, -1, float("nan"), hi * 2):
        msg = epsilon_problem(bad)
        assert msg is not None and msg.startswith(f"ε must be between {lo:g} and {hi:g}"), msg
    assert epsilon_problem(1.0) is None
    state = AppState()
    state.epsilon = 0
    assert "between" in (state.release_blocker() or "")


# ---------------------------------------------------------------- Utility page
def test_utility_page_compares_raw_values_and_explains_the_counts(ledger_path: Path) -> None:
    at = released(ledger_path)
    at.switch_page("pages/5_utility.py").run()
    no_exception(at)
    assert any("For your eyes only" in w.value for w in at.warning)
    frames = [d.value for d in at.dataframe]
    summary = next(f for f in frames if "KS distance" in f.columns)
    assert summary["column"].tolist() == ["age"]
    detail = next(f for f in frames if "statistic" in f.columns)
    assert "median" in detail["statistic"].tolist()
    assert any("Kolmogorov–Smirnov distance" in m.value for m in at.markdown)
    text = " ".join(m.value for m in at.markdown)
    assert "came out negative" in text and "exactly 0" in text and "noise added, typically about ±" in text
    assert "seed 0" not in text and "Theorem" not in text


def test_quality_reports_to_download(ledger_path: Path) -> None:
    at = released(ledger_path)
    at.switch_page("pages/5_utility.py").run()
    at.button(key="util_prepare_reports").click().run()
    no_exception(at)
    keys = {b.key for b in at.get("download_button")}
    assert {"util_download_private", "util_download_public"} <= keys
    private, public = state_of(at).analyses["reports"]
    assert PRIVATE_MARKER.upper().encode() in private
    assert PRIVATE_MARKER.upper().encode() not in public
    assert plots.REAL.encode() in private and plots.REAL.encode() not in public


# ---------------------------------------------------------------- plain language
def test_risk_wording_depends_on_epsilon(ledger_path: Path) -> None:
    at = released(ledger_path, epsilon=4.0)
    at.switch_page("pages/7_risk.py").run()
    no_exception(at)
    assert any("no longer makes these matches harmless" in w.value and "55 times" in w.value for w in at.warning)
    assert not any("reveal little" in i.value for i in at.info)


def test_risk_sentences_at_small_and_large_epsilon() -> None:
    rep = {"real_unique_raw": 0.2, "real_unique_binned": 0.1, "synthetic_unique_binned": 0.05,
           "synthetic_matching_real_unique": 0.075}
    _, low, tone = risk_sentences(rep, 0.5)
    assert tone == "info" and "reveal little" in low
    bullets, high, tone = risk_sentences(rep, 10.0)
    assert tone == "warning" and "22,000 times" in high and "reveal little" not in high
    assert "7.5%" in bullets[-1]
    _, huge, tone = risk_sentences(rep, 1000.0)  # e^1000 overflows a float; a release at that ε is possible
    assert tone == "warning" and "about 10⁴³⁴ times" in huge


def test_pages_use_plain_words(ledger_path: Path) -> None:
    at = released(ledger_path)
    texts = []
    for page in ["pages/4_release.py", "pages/5_utility.py", "pages/7_risk.py", "pages/8_mechanisms.py"]:
        at.switch_page(page).run()
        no_exception(at)
        texts += [e.value for kind in ("markdown", "caption", "success", "info", "warning", "error")
                  for e in at.get(kind) if isinstance(getattr(e, "value", None), str)]
    text = " ".join(texts)
    for jargon in ("seed 0", "Theorem", "e^ε =", "e+0", "e-0", " 1 rows"):
        assert jargon not in text, jargon


def test_prepared_checks_are_what_the_utility_page_shows(ledger_path: Path) -> None:
    at = released(ledger_path)
    state = state_of(at)
    state.prepare_checks()
    fid, values = state.analyses["fidelity"], state.analyses["values"]
    at.switch_page("pages/5_utility.py").run()
    no_exception(at)
    assert state_of(at).analyses["fidelity"] is fid and state_of(at).analyses["values"] is values
    assert any(f"{fid['mean_one_way']:.3f}" in m.value for m in at.markdown)
