"""Utility page: how close the release is to the real data (curator's eyes only, not part of the release)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from dpsynth import plots
from dpsynth.humanize import number
from dpsynth.noise import secure_rng
from dpsynth.report import private_report, public_summary, verdict
from dpsynth.schema import NumericColumn
from dpsynth.ui_state import STALE_NOTE, AppState, get_state, show_errors
from dpsynth.utility import (
    comparison_summary,
    correlations,
    formatted_comparisons,
    marginal_counts,
    noise_explanation,
    noise_sentences,
    simulate_means,
    value_table,
)

EYES_ONLY = (":material/lock: **For your eyes only — not part of the release.** These comparisons use the real data. Do not"
             " publish them: they can reveal what the noise hides. (The explanation of the released counts at the"
             " end uses the release only.)")


def counts(state: AppState, columns: list[str]) -> tuple:
    """Real, released and synthetic counts on ``columns``, computed once per release and kept in the session."""
    key = ("counts", tuple(columns))
    if key not in state.analyses:
        rel = state.release
        _, rc, sc = state.comparison_tables()
        idx = [rel.schema.names.index(c) for c in columns]
        shape = [rel.schema.sizes[j] for j in idx]
        state.analyses[key] = (marginal_counts(rc, rel.schema.sizes, idx).reshape(shape).astype(np.float64),
                               plots.released_marginal(rel, columns),
                               marginal_counts(sc, rel.schema.sizes, idx).reshape(shape).astype(np.float64))
    return state.analyses[key]


def figure(state: AppState, key: tuple, build: Callable[[], go.Figure]) -> go.Figure:
    """A figure built once per release and kept with its analyses: building plotly figures dominates reruns."""
    full = ("figure", *key)
    if full not in state.analyses:
        state.analyses[full] = build()
    return state.analyses[full]


def marginals_section(state: AppState) -> None:
    rel = state.release
    st.subheader("One column at a time")
    col = st.selectbox("Column", rel.schema.names, key="util_column")
    c = rel.schema.column(col)
    real, noisy, synth = counts(state, [col])
    series = {plots.REAL: real, plots.NOISY: noisy, plots.SYNTH: synth}
    st.plotly_chart(figure(state, ("marginal", col), lambda: plots.marginal_figure(c.labels(), series, col)),
                    key="util_marginal_fig")


def values_section(state: AppState) -> None:
    """Raw values of numeric columns, real vs synthetic: binned shares can hide distorted numbers."""
    st.subheader("Numbers, not just bins: real vs synthetic values")
    comparisons = state.value_comparisons()
    numeric = list(comparisons)
    if not numeric:
        st.caption("Needs a numeric column (with numbers in your data) in the schema.")
        return
    st.markdown("Bars of binned shares can look right while the numbers inside the bins are not: a synthetic value"
                " is drawn evenly inside its bin, so a column where most people have exactly 0 (or exactly 40)"
                " loses that peak. This table compares the actual values.")
    st.dataframe(formatted_comparisons(comparison_summary(comparisons)), hide_index=True, key="util_values_table")
    worst = max(range(len(numeric)), key=lambda i: comparisons[numeric[i]]["ks"])  # open on the most distorted
    col = st.selectbox("Look closer at", numeric, index=worst, key="util_values_column")
    v = comparisons[col]
    left, right = st.columns([1, 1])
    left.dataframe(value_table(v, formatted=True), hide_index=True, key="util_values_detail")
    left.markdown(f"**Kolmogorov–Smirnov distance: {number(v['ks'], 2)}** — the largest gap between the two curves on"
                  " the right (0 = the same distribution of values, 1 = no overlap).")
    right.plotly_chart(figure(state, ("ecdf", col), lambda: plots.ecdf_figure(v)), key="util_ecdf_fig")


def noise_section(state: AppState) -> None:
    """The released noisy counts in plain words (release side only)."""
    rel = state.release
    st.subheader("What the released noisy counts mean")
    tables = plots.released_tables(rel)
    if not tables:
        st.caption("This release's counts are stored in a sparse form; see its card for the noise.")
        return
    if "noise" not in state.analyses:
        state.analyses["noise"] = noise_explanation(rel.card, tables, plots.released_noise_entries(rel))
    st.markdown("\n".join("- " + line for line in noise_sentences(state.analyses["noise"])))


def pair_section(state: AppState) -> None:
    rel = state.release
    names = rel.schema.names
    if len(names) < 2:
        return
    st.subheader("Two columns together")
    c1, c2 = st.columns(2)
    x = c1.selectbox("First column", names, index=0, key="util_pair_x")
    y = c2.selectbox("Second column", [n for n in names if n != x], index=0, key="util_pair_y")
    real, noisy, synth = counts(state, [x, y])
    tables = {"real (only you)": real, "released noisy counts": noisy, "synthetic": synth}
    st.plotly_chart(figure(state, ("pair", x, y), lambda: plots.heatmap_pair_figure(
                        rel.schema.column(x).labels(), rel.schema.column(y).labels(), tables, x, y)),
                    key="util_pair_fig")


def correlation_section(state: AppState) -> None:
    rel = state.release
    key = "correlations"
    if key not in state.analyses:
        state.analyses[key] = correlations(state.comparison_tables()[0], rel.synthetic, rel.schema)
    corrs = state.analyses[key]
    st.subheader("Correlations between numeric columns")
    if not corrs:
        st.caption("Needs at least two numeric columns in the schema.")
        return
    st.plotly_chart(figure(state, ("corr",), lambda: plots.correlation_figure(corrs)), key="util_corr_fig")


def tvd_section(state: AppState) -> None:
    rel = state.release
    fid = state.fidelity()
    st.subheader("Distance between real and synthetic, per pair of columns")
    st.markdown(f"Total-variation distance (TVD): the share of rows that would have to move to turn one table's"
                f" counts into the other's. 0 = identical, 1 = nothing in common. Average over single columns:"
                f" **{fid['mean_one_way']:.3f}**; over pairs: **{fid['mean_two_way']:.3f}**.")
    if len(fid["two_way"]):
        st.plotly_chart(figure(state, ("tvd",), lambda: plots.tvd_pairs_figure(fid["two_way"], rel.schema.names)),
                        key="util_tvd_fig")


def means_section(state: AppState) -> None:
    rel = state.release
    numeric = [c.name for c in rel.schema.columns if isinstance(c, NumericColumn)]
    st.subheader("Two ways to release a mean privately (a simulation from lecture notes on differential privacy, ch. 6)")
    if not numeric:
        st.caption("Needs a numeric column.")
        return
    st.markdown("The mean from the private histogram (bin midpoints × noisy counts) against the sample mean plus"
                " Laplace noise of scale (upper − lower)/(n·ε), both ε-DP when n is public. Each is simulated many"
                " times on your data at the release's ε; the spread shows how far one release can land from the truth.")
    c1, c2 = st.columns(2)
    col = c1.selectbox("Numeric column", numeric, key="util_mean_column")
    reps = int(c2.select_slider("Simulated releases", [200, 500, 1000, 2000], value=1000, key="util_mean_reps"))
    eps = rel.card["privacy"]["epsilon"]
    key = ("means", col, reps)
    if key not in state.analyses:
        values = state.comparison_tables()[0][col].to_numpy(dtype=float)
        # simulated noise for the curator's view only; kept so reruns show the same picture
        state.analyses[key] = simulate_means(values, rel.schema.column(col), eps, reps, rng=secure_rng())
    sim = state.analyses[key]
    st.plotly_chart(figure(state, ("means", col, reps), lambda: plots.mean_errors_figure(sim.draws, col, eps)),
                    key="util_mean_fig")
    st.dataframe(sim.summary.rename(columns={"sd": "standard deviation", "rmse": "root-mean-square error",
                                             "mae": "mean absolute error"}), hide_index=True, key="util_mean_table")
    st.caption("The histogram mean has a bias from putting every value at its bin's midpoint; the perturbed mean"
               " has none but releases only one number.")


def reports_section(state: AppState) -> None:
    """Two HTML files to download: the private quality report and the publishable summary."""
    rel = state.release
    st.subheader("Download a quality report")
    st.markdown("- **Quality report (private)**: the card, the comparisons above and a plain verdict. It contains"
                " comparisons with the real data: **not for publication**.\n"
                "- **Publishable summary**: the card and figures of the released noisy counts only — no real data.")
    if "reports" not in state.analyses:
        if st.button("Prepare the two reports (a few seconds)", key="util_prepare_reports"):
            with st.spinner("Writing the reports"):
                state.analyses["reports"] = (
                    private_report(rel, state.comparison_tables()[0], fid=state.fidelity(), comparisons=state.value_comparisons(),
                                   codes=state.comparison_tables()[1:]).encode(),
                    public_summary(rel).encode())
            st.rerun()
        return
    private, public = state.analyses["reports"]
    c1, c2 = st.columns(2)
    c1.download_button("Quality report (private, not for publication)", data=private,
                       file_name="dpsynth_quality_report_PRIVATE.html", mime="text/html", key="util_download_private")
    c2.download_button("Publishable summary", data=public, file_name="dpsynth_release_summary.html", mime="text/html",
                       key="util_download_public", type="primary")


def verdict_section(state: AppState) -> None:
    """The plain verdict first: is the synthetic data close to the real data, and what would help."""
    level, reasons = verdict(state.fidelity(), state.value_comparisons())
    show = st.success if level.startswith("close") else st.warning if level == "usable with care" else st.error
    show(f"**Verdict: {level}.**\n" + "\n".join("- " + r for r in reasons))


def main() -> None:
    state = get_state(st.session_state)
    st.title("Utility: how useful is the release?")
    if state.release is None or not state.has_data:
        st.info("Make a release first (Release page); this page compares it with your data.")
        st.page_link("pages/4_release.py", label="Go to Release", icon=":material/rocket_launch:")
        return
    st.warning(EYES_ONLY)
    if state.release_is_stale:
        st.info(STALE_NOTE)
    with show_errors():
        verdict_section(state)
        marginals_section(state)
        values_section(state)
        pair_section(state)
        correlation_section(state)
        tvd_section(state)
        means_section(state)
        noise_section(state)
        reports_section(state)


main()
