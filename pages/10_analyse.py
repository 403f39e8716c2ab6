"""Analyse a release: honest intervals and tests from the released files alone, beside the naive answers.

Works from an uploaded release zip (an analyst who never saw the data) or from this session's release.
Everything is post-processing of released files (:mod:`dpsynth.inference`): no budget is spent.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import streamlit as st

from dpsynth import humanize, plots
from dpsynth.errors import DPSynthError
from dpsynth.inference import IndependenceResult, IntervalResult, LoadedRelease, analyse, from_release, load_release
from dpsynth.schema import NumericColumn
from dpsynth.ui_state import AppState, get_state, show_errors

UPLOAD = "A release zip (upload)"
SESSION = "The release made in this session"
STATISTICS = {
    "mean": "Mean of a numeric column",
    "total": "Total of a numeric column",
    "proportion": "Share of rows with a value",
    "independence": "Are two columns independent?",
    "regression": "Linear regression",
}


def pick_release(state: AppState) -> tuple[LoadedRelease | None, dict[str, Any]]:
    """The release to analyse and the dictionary where its results are kept."""
    sources = [UPLOAD] + ([SESSION] if state.release is not None else [])
    source = st.radio("Release to analyse", sources, key="analyse_source", horizontal=True,
                      index=len(sources) - 1)
    if source == SESSION:
        if "inference_release" not in state.analyses:
            state.analyses["inference_release"] = from_release(state.release)
            state.analyses["inference_results"] = {}
        return state.analyses["inference_release"], state.analyses["inference_results"]
    up = st.file_uploader("Release zip (as downloaded from the Release page or written by the command line)",
                          type=["zip"], key="analyse_upload", max_upload_size=50)
    if up is None:
        st.info("Upload a release zip to analyse it. Only its released files are read.")
        return None, {}
    if state.uploaded_release.get("id") != up.file_id:
        state.uploaded_release = {"id": up.file_id, "release": load_release(up.getvalue()), "results": {}}
    return state.uploaded_release["release"], state.uploaded_release["results"]


def ask(rel: LoadedRelease) -> tuple[str, list[str], float]:
    """The statistic, its columns and the confidence level, from widgets."""
    stat = st.selectbox("What to estimate", list(STATISTICS), format_func=STATISTICS.get, key="analyse_statistic")
    names = rel.schema.names
    numeric = [c.name for c in rel.schema.columns if isinstance(c, NumericColumn)]
    c1, c2 = st.columns(2)
    if stat in ("mean", "total"):
        if not numeric:
            st.warning("This release has no numeric column.")
            return stat, [], 0.95
        args = [c1.selectbox("Column", numeric, key="analyse_numeric")]
    elif stat == "proportion":
        col = c1.selectbox("Column", names, key="analyse_column")
        args = [col, c2.selectbox("Value", rel.schema.column(col).labels(), key="analyse_value")]
    elif stat == "independence":
        if len(names) < 2:
            st.warning("This release has one column only.")
            return stat, [], 0.95
        a = c1.selectbox("First column", names, key="analyse_a")
        args = [a, c2.selectbox("Second column", [n for n in names if n != a], key="analyse_b")]
    else:
        if len(numeric) < 2:
            st.warning("A regression needs two numeric columns.")
            return stat, [], 0.95
        y = c1.selectbox("Response", numeric, key="analyse_response")
        xs = c2.multiselect("Predictors", [n for n in numeric if n != y], key="analyse_predictors",
                            default=[n for n in numeric if n != y][:1])
        args = [y, *xs]
    level = 0.95 if stat == "independence" else st.select_slider(
        "Confidence level", options=[0.8, 0.9, 0.95, 0.99], value=0.95, key="analyse_level")
    return stat, args, float(level)


def show(result: Any) -> None:
    if isinstance(result, IntervalResult):
        c1, c2 = st.columns(2)
        c1.metric(f"Honest estimate ({humanize.level(result.level)} interval)", _num(result.estimate),
                  help="Accounts for the DP noise (its exact law), sampling and binning.")
        c1.caption(f"{_num(result.low)} to {_num(result.high)}")
        if not np.isfinite(result.estimate):
            c1.caption("No point estimate: this column's noisy counts add up to zero or less, so the noise hides "
                       "it; the interval above still holds.")
        c2.metric("Naive, from synthetic rows as if real", _num(result.naive_estimate),
                  help="A textbook interval on the synthetic rows: blind to the noise.")
        c2.caption(f"{_num(result.naive_low)} to {_num(result.naive_high)}")
        st.plotly_chart(plots.inference_figure(result), key="analyse_figure")
        st.caption(f"Noise: {result.noise}. Binning: {result.binning}.")
    elif isinstance(result, IndependenceResult):
        c1, c2 = st.columns(2)
        c1.metric("Honest p-value", f"{result.p_value:.3g}", help=f"{result.n_sim} simulated releases under independence")
        c2.metric("Naive p-value (chi-squared on synthetic rows)", f"{result.naive_p_value:.3g}")
        st.plotly_chart(plots.inference_figure(result), key="analyse_figure")
        st.caption(f"Statistic {result.statistic:.4g}. Noise on each cell of the two-way table: {result.noise}.")
    else:
        st.dataframe(result.frame(), hide_index=True, key="analyse_table")
        st.plotly_chart(plots.inference_figure(result), key="analyse_figure")
        st.caption(f"Binning: {result.binning}.")


def _num(x: float | None) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.6g}"


def main() -> None:
    state = get_state(st.session_state)
    st.title("Analyse a release")
    st.markdown(
        "Statistics **from the released files alone** — no data, no new privacy budget. Each answer accounts for"
        " the noise the release added (its distribution and scale are public, on the release card), for sampling,"
        " and for binning; beside it, the naive answer computed from the synthetic rows as if they were real data,"
        " which is too confident. Why this matters: Kifer, *Basic DP algorithms and statistics*, \"Chi-Squared"
        " Testing\" and \"Takeaway Messages\"."
    )
    with show_errors():
        rel, results = pick_release(state)
        if rel is None:
            return
        p = rel.card.get("privacy", {})
        st.caption(f"{rel.method} release, ε = {p.get('epsilon', '?')}, δ = {p.get('delta', 0)};"
                   f" {len(rel.schema.names)} columns; {len(rel.synthetic):,} synthetic rows.")
        stat, args, level = ask(rel)
        if not args or (stat == "regression" and len(args) < 2):
            return
        key = (stat, tuple(args), level)
        if st.button("Compute", key="analyse_run", type="primary"):
            try:
                results[key] = analyse(rel, stat, args, level=level)
            except DPSynthError as exc:
                results[key] = exc
        if key not in results:
            st.info("Press **Compute** (a few seconds of simulation).")
            return
        if isinstance(results[key], DPSynthError):
            st.error(str(results[key]))
            return
        show(results[key])


main()
