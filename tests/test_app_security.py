"""Dashboard hardening: server config, no shared caches of private data, isolation between sessions."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dpsynth.accounting import Ledger
from dpsynth.ui_state import STATE_KEY

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
UI_FILES = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")), ROOT / "dpsynth" / "ui_state.py",
            ROOT / "dpsynth" / "plots.py", ROOT / "dpsynth" / "estimates.py"]


def test_server_config() -> None:
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert cfg["client"]["showErrorDetails"] == "none"
    assert cfg["client"]["toolbarMode"] == "viewer"
    assert cfg["server"]["maxUploadSize"] <= 50
    assert cfg["server"]["enableXsrfProtection"] is True
    assert cfg["server"].get("enableCORS", True) is True


@pytest.mark.parametrize("path", UI_FILES, ids=lambda p: p.name)
def test_no_shared_cache_and_no_raw_html(path: Path) -> None:
    """st.cache_data/cache_resource are shared by every user: nothing in the UI uses them; no raw HTML either."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            assert node.attr not in {"cache_data", "cache_resource", "experimental_memo"}, f"{path.name}:{node.lineno}"
        if isinstance(node, ast.keyword):
            assert node.arg != "unsafe_allow_html", f"{path.name}:{node.value.lineno}"


def page_text(at: AppTest) -> str:
    """Everything a page shows as text, tables included."""
    parts = [str(e.value) for kind in ("markdown", "caption", "success", "error", "info", "warning", "title", "header",
                                       "subheader") for e in getattr(at, kind)]
    parts += [e.value.to_csv() for e in at.dataframe]
    return " ".join(parts)


def test_a_new_session_sees_nothing_of_another(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = tmp_path / "ledger.sqlite"
    monkeypatch.setenv("DPSYNTH_LEDGER", str(ledger))
    rows = "\n".join(f"{20 + i % 50},{'CANARY_9f3a' if i == 7 else 'plain'}" for i in range(200))
    a = AppTest.from_file(APP, default_timeout=60).run()
    a.file_uploader(key="data_upload").set_value(("canary.csv", f"age,tag\n{rows}\n".encode(), "text/csv"))
    a.run()
    assert "canary.csv" in page_text(a) and "CANARY_9f3a" in page_text(a)  # session A does show it (preview)
    a.switch_page("pages/4_release.py").run()
    a.session_state[STATE_KEY].accept_data_derived = True  # the drafted schema, accepted: this test is about sessions
    a.run()
    a.button(key="release_button_0").click().run()
    assert a.session_state[STATE_KEY].release is not None
    spent = Ledger(ledger).spends()

    b = AppTest.from_file(APP, default_timeout=60).run()
    assert STATE_KEY in b.session_state and not b.session_state[STATE_KEY].has_data
    for page in ["pages/1_data.py", "pages/2_schema.py", "pages/4_release.py", "pages/5_utility.py"]:
        b.switch_page(page).run()
        assert not b.exception
        text = page_text(b)
        assert "CANARY_9f3a" not in text and "canary.csv" not in text
        assert b.session_state[STATE_KEY].release is None
    assert Ledger(ledger).spends() == spent


def test_a_reload_keeps_the_budget_spent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reload is a new session: the release is gone from memory, but the ledger still counts its spend."""
    monkeypatch.setenv("DPSYNTH_LEDGER", str(tmp_path / "ledger.sqlite"))
    data = ("age,ward\n" + "\n".join(f"{20 + i % 60},{'ab'[i % 2]}" for i in range(300)) + "\n").encode()
    for expected_spent in ["0", "1"]:
        at = AppTest.from_file(APP, default_timeout=60).run()
        at.file_uploader(key="data_upload").set_value(("same.csv", data, "text/csv"))
        at.run()
        at.switch_page("pages/3_privacy.py").run()
        spent = {m.label: m.value for m in at.metric}["spent so far"]
        assert spent == expected_spent
        at.switch_page("pages/4_release.py").run()
        at.session_state[STATE_KEY].accept_data_derived = True  # the drafted schema, accepted: this test is about sessions
        at.run()
        at.button(key="release_button_0").click().run()
        assert not at.exception
