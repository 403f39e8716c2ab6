"""dpsynth dashboard: point-and-click differentially private synthetic data.

Run with ``streamlit run app.py`` (or ``./run``). This file only sets up navigation and the
sidebar; each page in ``pages/`` gathers input, calls :mod:`dpsynth` and draws the result.
All session state lives in one :class:`dpsynth.ui_state.AppState`.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dpsynth.errors import DPSynthError
from dpsynth.humanize import budget, cells
from dpsynth.ui_state import get_state

HERE = Path(__file__).parent


def sidebar_status() -> None:
    """Where the curator is: dataset, schema, budget spent, release."""
    state = get_state(st.session_state)
    with st.sidebar:
        st.markdown("### Your session")
        if not state.has_data:
            st.caption("No data loaded yet. Start on **1 · Data**.")
            return
        st.caption(f"**Data**: {state.data_label}")
        schema, errors = state.schema()
        st.caption(f"**Schema**: {len(schema.columns)} columns, {cells(schema.n_cells)}" if schema
                   else "**Schema**: needs attention")
        try:
            ledger = state.ledger()
            spent = ledger.spent(state.dataset_id)
            total = ledger.total(state.dataset_id)
        except DPSynthError as exc:
            st.error(str(exc))
            return
        total_eps = total.epsilon if total else state.total_epsilon
        st.caption(f"**Budget**: ε spent {budget(spent.epsilon)} of {budget(total_eps)}")
        st.progress(min(1.0, spent.epsilon / total_eps) if total_eps else 1.0)
        release = "not made yet" if state.release is None else (
            "made with earlier settings" if state.release_is_stale else "ready to download")
        st.caption("**Release**: " + release)


def login_required() -> bool:
    """Login is required when the deployment configures OIDC (an ``[auth]`` section in secrets.toml)."""
    try:
        return "auth" in st.secrets
    except Exception:  # noqa: BLE001 - no secrets file at all: a single-user (local) deployment
        return False


def login_gate() -> bool:
    """True if the dashboard may be shown; otherwise draw only the login page (README: "Login")."""
    if not login_required() or getattr(st.user, "is_logged_in", False):
        return True
    st.title("dpsynth — sign in")
    st.markdown("This dashboard works on private data. Sign in with your organisation's account to continue.")
    st.button("Log in", key="login_button", type="primary", on_click=st.login)
    return False


def run() -> None:
    """Build the navigation and run the selected page (a function so tests can drive it)."""
    st.set_page_config(page_title="dpsynth — private synthetic data", page_icon=":material/shield:", layout="wide")
    if not login_gate():
        return
    pages = {
        "Make a release": [
            st.Page(HERE / "pages" / "1_data.py", title="1 · Data", icon=":material/upload_file:", url_path="data", default=True),
            st.Page(HERE / "pages" / "2_schema.py", title="2 · Schema", icon=":material/table_chart:", url_path="schema"),
            st.Page(HERE / "pages" / "3_privacy.py", title="3 · Privacy", icon=":material/lock:", url_path="privacy"),
            st.Page(HERE / "pages" / "4_release.py", title="4 · Release", icon=":material/rocket_launch:", url_path="release"),
            st.Page(HERE / "pages" / "11_releases.py", title="Releases", icon=":material/inventory_2:", url_path="releases"),
        ],
        "Check it (only you see these)": [
            st.Page(HERE / "pages" / "5_utility.py", title="Utility", icon=":material/bar_chart:", url_path="utility"),
            st.Page(HERE / "pages" / "6_tradeoff.py", title="Trade-off explorer", icon=":material/balance:", url_path="tradeoff"),
            st.Page(HERE / "pages" / "7_risk.py", title="Re-identification risk", icon=":material/person_search:", url_path="risk"),
        ],
        "Learn and audit": [
            st.Page(HERE / "pages" / "8_mechanisms.py", title="How the noise works", icon=":material/casino:", url_path="mechanisms"),
            st.Page(HERE / "pages" / "9_ledger.py", title="Privacy ledger", icon=":material/menu_book:", url_path="ledger"),
            st.Page(HERE / "pages" / "10_analyse.py", title="Analyse a release", icon=":material/query_stats:",
                    url_path="analyse"),
        ],
    }
    page = st.navigation(pages)
    page.run()
    sidebar_status()  # after the page, so it shows what the page just did


run()
