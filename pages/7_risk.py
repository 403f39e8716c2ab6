"""Risk page: share of records unique on chosen quasi-identifiers, real versus synthetic, read at the release's ε."""

from __future__ import annotations

import streamlit as st

from dpsynth import plots
from dpsynth.risk import risk_sentences, uniqueness_report
from dpsynth.ui_state import STALE_NOTE, get_state, show_errors

DEFAULT_QI = ["age", "sex", "race", "education", "marital_status", "native_country", "zip", "birth_date", "gender"]


def main() -> None:
    state = get_state(st.session_state)
    st.title("Re-identification risk")
    st.markdown(
        "A person whose combination of, say, age, sex and ZIP code is unique in a table can be picked out by"
        " anyone who knows those three facts — Latanya Sweeney estimated that about 87% of Americans are"
        " likely unique on ZIP code, birth date and sex. Choose the columns an outsider could know (*quasi-identifiers*) and"
        " compare how many records are unique on them in your data and in the synthetic data."
    )
    if state.release is None or not state.has_data:
        st.info("Make a release first (Release page).")
        st.page_link("pages/4_release.py", label="Go to Release", icon=":material/rocket_launch:")
        return
    if state.release_is_stale:
        st.info(STALE_NOTE)
    names = state.release.schema.names
    default = [c for c in DEFAULT_QI if c in names][:5] or names[:2]
    qi = st.multiselect("Quasi-identifiers", names, default=default, key="risk_qi")
    if not qi:
        st.info("Choose at least one column.")
        return
    st.warning(":material/lock: **For your eyes only.** The 'real data' bars describe your data; do not publish them.")
    with show_errors():
        key = ("risk", tuple(qi))
        if key not in state.analyses:
            state.analyses[key] = uniqueness_report(state.data, state.release.synthetic, state.release.schema, qi,
                                                    cache=state.analyses.setdefault("risk_codes", {}))
        rep = state.analyses[key]
        st.plotly_chart(plots.risk_figure(rep), key="risk_fig")
        bullets, closing, tone = risk_sentences(rep, state.release.card["privacy"]["epsilon"])
        st.markdown("\n".join("- " + b for b in bullets))
        (st.warning if tone == "warning" else st.info)(closing)


main()
