"""AppTest of the "Analyse a release" page: from an uploaded zip alone, from the session's release, bad zips."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dpsynth.artifacts import release_zip
from dpsynth.release import release
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema
from dpsynth.ui_state import STATE_KEY

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PAGE = "pages/10_analyse.py"
TIMEOUT = 120


@pytest.fixture
def ledger_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.sqlite"
    monkeypatch.setenv("DPSYNTH_LEDGER", str(path))
    return path


def a_zip(method: str = "histogram") -> bytes:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"age": rng.integers(18, 90, 600), "colour": rng.choice(["red", "green", "blue"], 600),
                       "income": rng.choice(["low", "high"], 600)})
    schema = Schema((NumericColumn(name="age", lower=0, upper=100, bins=5, integer=True),
                     CategoricalColumn(name="colour", categories=("red", "green", "blue")),
                     CategoricalColumn(name="income", categories=("low", "high"))))
    return release_zip(release(df, schema, epsilon=1.0, seed=1, method=method))


def analyse_page(ledger_path: Path) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    return at.switch_page(PAGE).run()


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def test_page_asks_for_a_zip(ledger_path: Path) -> None:
    at = analyse_page(ledger_path)
    no_exception(at)
    assert at.title[0].value == "Analyse a release"
    assert any("Upload a release zip" in i.value for i in at.info)


@pytest.mark.parametrize("method", ["histogram", "marginals"])
def test_uploaded_zip_mean_and_independence(ledger_path: Path, method: str) -> None:
    at = analyse_page(ledger_path)
    at.file_uploader(key="analyse_upload").set_value(("r.zip", a_zip(method), "application/zip")).run()
    no_exception(at)
    assert not at.error
    at.selectbox(key="analyse_statistic").set_value("mean").run()
    at.button(key="analyse_run").click().run()
    no_exception(at)
    labels = [m.label for m in at.metric]
    assert any("Honest estimate" in lb for lb in labels) and any("Naive" in lb for lb in labels)
    assert at.get("plotly_chart")
    at.selectbox(key="analyse_statistic").set_value("independence").run()
    at.button(key="analyse_run").click().run()
    no_exception(at)
    if method == "histogram":
        assert any("Honest p-value" in m.label for m in at.metric)
    else:  # the pair may not have been measured: then one clear message, not a traceback
        assert any("Honest p-value" in m.label for m in at.metric) or any("no noisy measurement" in e.value for e in at.error)


def test_proportion_and_regression_widgets(ledger_path: Path) -> None:
    at = analyse_page(ledger_path)
    at.file_uploader(key="analyse_upload").set_value(("r.zip", a_zip(), "application/zip")).run()
    at.selectbox(key="analyse_statistic").set_value("proportion").run()
    at.selectbox(key="analyse_column").set_value("colour").run()
    at.selectbox(key="analyse_value").set_value("blue").run()
    at.button(key="analyse_run").click().run()
    no_exception(at)
    assert any("Honest estimate" in m.label for m in at.metric)
    at.selectbox(key="analyse_statistic").set_value("regression").run()
    no_exception(at)
    assert any("two numeric columns" in w.value for w in at.warning)


def test_corrupt_zip_is_a_message(ledger_path: Path) -> None:
    at = analyse_page(ledger_path)
    at.file_uploader(key="analyse_upload").set_value(("r.zip", b"not a zip at all", "application/zip")).run()
    no_exception(at)
    assert any("not a readable zip" in e.value for e in at.error)


def test_session_release_is_offered(ledger_path: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.file_uploader(key="data_upload").set_value(("people.csv", b"a,b\n" + b"1,x\n2,y\n" * 200, "text/csv")).run()
    state = at.session_state[STATE_KEY]
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.integers(0, 10, 300).astype(str), "b": rng.choice(["x", "y"], 300)})
    schema = Schema((CategoricalColumn(name="a", categories=tuple(map(str, range(10)))),
                     CategoricalColumn(name="b", categories=("x", "y"))))
    state.release = release(df, schema, epsilon=1.0, seed=0)
    at.switch_page(PAGE).run()
    no_exception(at)
    assert at.radio(key="analyse_source").value == "The release made in this session"
    at.selectbox(key="analyse_statistic").set_value("independence").run()
    at.button(key="analyse_run").click().run()
    no_exception(at)
    assert any("Honest p-value" in m.label for m in at.metric)


def test_mean_hidden_by_noise_is_words_not_nan(ledger_path: Path) -> None:
    # 20 rows at ε = 0.05: this seed's noisy counts of age add up to zero or less, so there is no point estimate
    df = pd.DataFrame({"age": [30] * 20, "colour": ["red"] * 20})
    schema = Schema((NumericColumn(name="age", lower=0, upper=100, bins=5, integer=True),
                     CategoricalColumn(name="colour", categories=("red", "blue"))))
    z = release_zip(release(df, schema, epsilon=0.05, seed=2, method="histogram", rows=50))
    at = analyse_page(ledger_path)
    at.file_uploader(key="analyse_upload").set_value(("r.zip", z, "application/zip")).run()
    at.selectbox(key="analyse_statistic").set_value("mean").run()
    at.button(key="analyse_run").click().run()
    no_exception(at)
    honest = next(m for m in at.metric if "Honest estimate" in m.label)
    assert "nan" not in str(honest.value).lower()
    assert any("No point estimate" in c.value for c in at.caption)
