"""Plotly figure builders for the dashboard: pure functions from library results to figures.

The ``*_counts`` helpers turn a release and the real table into per-cell counts for plotting;
the noisy side is read from the released histogram or model only (post-processing), the real
side is for the curator's eyes only. No function here draws randomness or spends budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpsynth import humanize
from dpsynth.binning import encode
from dpsynth.release import Release
from dpsynth.schema import Schema

REAL = "real data (only you see this)"
NOISY = "released noisy counts"
SYNTH = "synthetic data (released)"
COLOURS = {REAL: "#636363", NOISY: "#e6550d", SYNTH: "#3182bd"}


# ---------------------------------------------------------------- counts for plots
def released_marginal(rel: Release, columns: Sequence[str]) -> np.ndarray | None:
    """Noisy counts of the marginal on ``columns`` from the released histogram or model (post-processing)."""
    idx = [rel.schema.names.index(c) for c in columns]
    if rel.noisy_counts is not None:
        full = np.asarray(rel.noisy_counts, dtype=np.float64).reshape(rel.schema.sizes)
        other = tuple(j for j in range(len(rel.schema.sizes)) if j not in idx)
        summed = full.sum(axis=other) if other else full
        kept = sorted(idx)
        return np.moveaxis(summed, [kept.index(j) for j in idx], list(range(len(idx)))) if len(idx) > 1 else summed
    if rel.model is not None:
        # the smallest released measurement that covers the columns, summed down to them
        for cols, y in sorted(rel.model.measurements, key=lambda m: len(m[0])):
            if set(idx) <= set(cols):
                t = np.asarray(y, dtype=np.float64).reshape([rel.schema.sizes[j] for j in cols])
                other = tuple(p for p, j in enumerate(cols) if j not in idx)
                t = t.sum(axis=other) if other else t
                kept = [j for j in cols if j in idx]
                return np.transpose(t, [kept.index(j) for j in idx]) if len(idx) > 1 else t
    return None


def table_marginal(df: pd.DataFrame, schema: Schema, columns: Sequence[str]) -> np.ndarray:
    """Counts of the marginal on ``columns`` of a table, in the schema's cells."""
    sub = schema.select(list(columns))
    codes = encode(df, sub).codes
    flat = np.ravel_multi_index(tuple(codes.T), sub.sizes) if len(codes) else np.zeros(0, dtype=np.int64)
    return np.bincount(flat, minlength=int(np.prod(sub.sizes))).reshape(sub.sizes).astype(np.float64)


def released_tables(rel: Release) -> list[np.ndarray]:
    """Every released table of noisy counts (the histogram, or each noisy marginal): release side only."""
    if rel.noisy_counts is not None:
        return [np.asarray(rel.noisy_counts)]
    if rel.model is not None:
        return [np.asarray(y) for _, y in rel.model.measurements]
    return []


def released_noise_entries(rel: Release) -> list[dict[str, Any]] | None:
    """The model's per-table noise entries (marginals method), or None for a histogram (its card has the noise)."""
    return list(rel.model.noise) if rel.model is not None else None


def _share(counts: np.ndarray) -> np.ndarray:
    c = np.clip(np.asarray(counts, dtype=np.float64), 0, None)
    s = c.sum()
    return c / s if s > 0 else c


# ---------------------------------------------------------------- utility figures
def marginal_figure(labels: Sequence[str], series: dict[str, np.ndarray], column: str) -> go.Figure:
    """Grouped bars of the share of rows per cell of one column, one colour per source."""
    fig = go.Figure()
    for name, counts in series.items():
        if counts is None:
            continue
        fig.add_bar(x=list(labels), y=_share(counts), name=name, marker_color=COLOURS.get(name))
    fig.update_layout(barmode="group", title=f"{column}: share of rows in each cell", yaxis_tickformat=".0%",
                      legend={"orientation": "h", "y": -0.25}, margin={"t": 50, "b": 10}, height=380)
    return fig


def ecdf_figure(comparison: dict[str, Any]) -> go.Figure:
    """Share of values at or below each value (empirical CDF), real vs synthetic, from
    :func:`dpsynth.utility.value_comparison`; a vertical step is a value many rows share."""
    column = comparison["column"]
    fig = go.Figure()
    for name, side in ((REAL, "real"), (SYNTH, "synthetic")):
        xs, ps = comparison["ecdf"][side]
        fig.add_scatter(x=xs, y=ps, name=name, mode="lines", line_shape="hv", line_color=COLOURS[name])
    fig.update_layout(title=f"{column}: share of rows at or below each value", xaxis_title=column,
                      yaxis_title="share of rows", yaxis_tickformat=".0%", height=380,
                      legend={"orientation": "h", "y": -0.3}, margin={"t": 50})
    return fig


def noisy_counts_figure(labels: Sequence[str], counts: np.ndarray, column: str) -> go.Figure:
    """Released noisy counts of one column (release side only: no real data); negative counts shown as they are."""
    c = np.asarray(counts, dtype=np.float64)
    fig = go.Figure(go.Bar(x=list(labels), y=c, marker_color=[COLOURS[NOISY] if v >= 0 else "#999999" for v in c]))
    fig.update_layout(title=f"{column}: released noisy counts", yaxis_title="noisy count", height=320,
                      margin={"t": 50, "b": 10})
    return fig


def heatmap_pair_figure(x_labels: Sequence[str], y_labels: Sequence[str], tables: dict[str, np.ndarray],
                        x: str, y: str) -> go.Figure:
    """Side-by-side heatmaps of a two-column marginal (shares), one panel per source."""
    items = [(k, v) for k, v in tables.items() if v is not None]
    fig = make_subplots(rows=1, cols=len(items), subplot_titles=[k for k, _ in items], shared_yaxes=True)
    zmax = max(float(_share(v).max()) for _, v in items) or 1.0
    for i, (_, counts) in enumerate(items):
        fig.add_trace(go.Heatmap(z=_share(counts).T, x=list(x_labels), y=list(y_labels), zmin=0, zmax=zmax,
                                 coloraxis="coloraxis"), row=1, col=i + 1)
    fig.update_layout(title=f"{x} × {y}: share of rows", coloraxis={"colorscale": "Blues"}, height=420,
                      margin={"t": 70})
    return fig


def correlation_figure(corrs: dict[str, pd.DataFrame]) -> go.Figure:
    """Pearson correlations of the numeric columns: real, synthetic, and their difference."""
    names = [("real", "real data (only you)"), ("synthetic", "synthetic data"), ("difference", "synthetic − real")]
    fig = make_subplots(rows=1, cols=3, subplot_titles=[t for _, t in names], horizontal_spacing=0.03)
    for i, (key, _) in enumerate(names):
        m = corrs[key]
        fig.add_trace(go.Heatmap(z=m.to_numpy(), x=list(m.columns), y=list(m.index), zmin=-1, zmax=1,
                                 colorscale="RdBu", reversescale=True, showscale=i == 2,
                                 text=np.round(m.to_numpy(), 2), texttemplate="%{text}"), row=1, col=i + 1)
    fig.update_layout(height=430, margin={"t": 60})
    fig.update_yaxes(autorange="reversed")
    fig.update_yaxes(showticklabels=False, row=1, col=2)
    fig.update_yaxes(showticklabels=False, row=1, col=3)
    return fig


def mean_errors_figure(draws: pd.DataFrame, column: str, epsilon: float) -> go.Figure:
    """The simulation figure of the lecture notes on differential privacy, ch. 6: errors of the histogram mean vs
    the Laplace-perturbed mean over simulated runs.

    One panel per estimator, each on its own scale (their spreads can differ by orders of magnitude);
    the dashed line is the true mean (error 0).
    """
    groups = list(draws.groupby("estimator", sort=False))
    fig = make_subplots(rows=1, cols=len(groups), subplot_titles=[str(name) for name, _ in groups])
    colours = ["#3182bd", "#e6550d"]
    for i, (_, part) in enumerate(groups):
        fig.add_histogram(x=part["error"], nbinsx=50, marker_color=colours[i % 2], showlegend=False, row=1, col=i + 1)
        fig.add_vline(x=0, line_dash="dash", line_color="black", row=1, col=i + 1)
        fig.update_xaxes(title_text="estimate − true mean", row=1, col=i + 1)
    fig.update_yaxes(title_text="simulated releases", row=1, col=1)
    fig.update_layout(title=f"Error of two private means of {column} at ε = {epsilon:g}"
                      f" ({len(draws) // max(1, len(groups)):,} simulated releases each; dashed line = no error)",
                      height=400)
    return fig


def tvd_pairs_figure(two_way: pd.DataFrame, names: Sequence[str]) -> go.Figure:
    """Matrix of total-variation distance between real and synthetic 2-way marginals (0 = identical)."""
    n = len(names)
    m = np.full((n, n), np.nan)
    pos = {c: i for i, c in enumerate(names)}
    for label, value in zip(two_way["columns"], two_way["tvd"], strict=True):
        a, b = label.split(" × ")
        m[pos[a], pos[b]] = m[pos[b], pos[a]] = value
    fig = go.Figure(go.Heatmap(z=m, x=list(names), y=list(names), zmin=0, zmax=max(0.05, float(np.nanmax(m)) if n > 1 else 1),
                               colorscale="Reds", text=[["" if np.isnan(v) else f"{v:.3f}" for v in r] for r in m],
                               texttemplate="%{text}",
                               colorbar={"title": "TVD"}))
    fig.update_layout(title="Total-variation distance of every pair of columns, real vs synthetic (lower is better)",
                      height=max(380, 32 * n + 150), margin={"t": 60})
    fig.update_yaxes(autorange="reversed")
    return fig


def tradeoff_figure(curves: pd.DataFrame, column: str) -> go.Figure:
    """Error versus ε: RMSE of both private means of ``column`` and the mean 1-way TVD."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=[f"error of the mean of {column}", "mean 1-way TVD (all columns)"])
    fig.add_scatter(x=curves["epsilon"], y=curves["rmse_histogram_mean"], name="mean from private histogram",
                    mode="lines+markers", row=1, col=1)
    fig.add_scatter(x=curves["epsilon"], y=curves["rmse_perturbed_mean"], name="Laplace-perturbed mean",
                    mode="lines+markers", row=1, col=1)
    fig.add_scatter(x=curves["epsilon"], y=curves["mean_tvd_1way"], name="noisy histogram marginals (TVD)",
                    mode="lines+markers", row=1, col=2)
    # label only the ε values tried and powers of ten: plotly's default log ticks print 0.5 as "5"
    fig.update_xaxes(type="log", title_text="ε (log scale)", tickvals=list(curves["epsilon"]),
                     ticktext=[f"{e:g}" for e in curves["epsilon"]])
    fig.update_yaxes(type="log", dtick=1, title_text="RMSE (log scale)", row=1, col=1)
    fig.update_yaxes(title_text="TVD", row=1, col=2)
    fig.update_layout(height=420, legend={"orientation": "h", "y": -0.3})
    return fig


def bins_figure(curve: pd.DataFrame, column: str, epsilon: float) -> go.Figure:
    """RMSE of the histogram mean versus the number of bins (too few: bias; too many: noise)."""
    fig = go.Figure()
    fig.add_scatter(x=curve["bins"], y=curve["rmse_histogram_mean"], name="mean from private histogram", mode="lines+markers")
    fig.add_scatter(x=curve["bins"], y=curve["rmse_perturbed_mean"], name="Laplace-perturbed mean (no bins)",
                    mode="lines", line_dash="dash")
    fig.update_layout(title=f"Error of the mean of {column} versus number of bins, ε = {epsilon:g}",
                      xaxis_title="number of bins", yaxis_title="RMSE", height=400, legend={"orientation": "h", "y": -0.3})
    return fig


def risk_figure(report: dict[str, Any]) -> go.Figure:
    """Share of records unique on the quasi-identifiers: real (raw, binned) vs synthetic."""
    labels = ["real data, exact values", "real data, binned as in the schema", "synthetic data",
              "synthetic rows matching a unique real person"]
    values = [report["real_unique_raw"], report["real_unique_binned"], report["synthetic_unique_binned"],
              report["synthetic_matching_real_unique"]]
    fig = go.Figure(go.Bar(x=labels, y=values, marker_color=["#636363", "#969696", "#3182bd", "#e6550d"],
                           text=[f"{v:.1%}" for v in values], textposition="outside"))
    fig.update_layout(title="Records unique on " + ", ".join(report["quasi_identifiers"]), yaxis_tickformat=".0%",
                      yaxis_range=[0, max(0.05, max(values) * 1.2)], height=400)
    return fig


# ---------------------------------------------------------------- learning page
def outputs_figure(samples: dict[str, np.ndarray], title: str, xaxis: str, integer: bool = False) -> go.Figure:
    """Overlaid histograms of a mechanism's outputs on two neighbouring inputs (one bar per whole number if integer)."""
    fig = go.Figure()
    colours = ["#3182bd", "#e6550d"]
    for i, (name, x) in enumerate(samples.items()):
        x = np.asarray(x)
        bins = {"start": float(x.min()) - 0.5, "end": float(x.max()) + 0.5, "size": 1} if integer and len(x) else None
        fig.add_histogram(x=x, name=name, opacity=0.55, histnorm="probability", xbins=bins,
                          marker_color=colours[i % 2])
    fig.update_layout(barmode="overlay", title=title, xaxis_title=xaxis, yaxis_title="share of draws", height=380,
                      legend={"orientation": "h", "y": -0.3})
    return fig


def choice_figure(options: Sequence[str], scores: Sequence[float], shares: Sequence[float]) -> go.Figure:
    """Exponential mechanism: each option's score and how often it was selected."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=["score (utility) of each option", "how often it was chosen"])
    fig.add_bar(x=list(options), y=list(scores), row=1, col=1, marker_color="#969696", showlegend=False)
    fig.add_bar(x=list(options), y=list(shares), row=1, col=2, marker_color="#3182bd", showlegend=False)
    fig.update_yaxes(tickformat=".0%", row=1, col=2)
    fig.update_layout(height=360)
    return fig


def budget_figure(spends: pd.DataFrame, total: float) -> go.Figure:
    """Cumulative ε spent on a dataset, spend by spend, against its total budget."""
    cum = np.concatenate([[0.0], spends["epsilon"].cumsum().to_numpy(dtype=float)]) if len(spends) else np.zeros(1)
    hover = ["nothing spent yet"] + [f"{p} ({t[:19]})" for p, t in zip(spends["purpose"], spends["time"], strict=True)]
    fig = go.Figure(go.Scatter(x=list(range(len(cum))), y=cum, mode="lines+markers", line_shape="hv", name="ε spent",
                               text=hover, hovertemplate="after spend %{x}: ε = %{y:g}<br>%{text}<extra></extra>"))
    fig.add_hline(y=total, line_dash="dash", line_color="red", annotation_text=f"total budget ε = {total:g}")
    fig.update_layout(title="Privacy budget spent on this dataset", xaxis_title="number of spends",
                      yaxis_title="ε spent so far", yaxis_range=[0, max(total, float(cum[-1])) * 1.15],
                      xaxis_dtick=1, height=320, margin={"t": 50})
    return fig


# ---------------------------------------------------------------- reconstruction attack (learning page)
def reconstruction_figure(sweep: Any, chosen: Any = None) -> go.Figure:
    """Share of secrets recovered against the noise bound E (log axis), √n marked, DP noise at ε as a star.

    ``sweep`` is a :class:`dpsynth.reconstruction.Sweep`; ``chosen`` an optional highlighted
    :class:`dpsynth.reconstruction.Point` (the noise size the reader picked).
    """
    pts = sorted(sweep.points, key=lambda p: p.size)
    sizes = [max(p.size, 1e-3) for p in pts]
    fig = go.Figure(go.Scatter(
        x=sizes, y=[p.recovered for p in pts], mode="lines+markers", name="bounded noise in [−E, E]",
        line_color="#3182bd", hovertemplate="E = %{x:.3g}: %{y:.1%} of secrets recovered<extra></extra>",
    ))
    if chosen is not None:
        fig.add_scatter(x=[max(chosen.size, 1e-3)], y=[chosen.recovered], mode="markers", name=f"your E = {chosen.size:g}",
                        marker={"size": 13, "color": "#3182bd", "line": {"width": 2, "color": "black"}},
                        hovertemplate="E = %{x:.3g}: %{y:.1%}<extra></extra>")
    if sweep.dp is not None:
        fig.add_scatter(
            x=[sweep.dp.size], y=[sweep.dp.recovered], mode="markers", name=f"DP noise at ε = {sweep.epsilon:g}",
            marker={"symbol": "star", "size": 18, "color": "#e6550d"},
            hovertemplate=(f"discrete Laplace, standard deviation {sweep.dp.noise_std:,.3g}"
                           " (plotted at the E of bounded noise with the same spread, %{x:,.3g}): %{y:.1%}<extra></extra>"),
        )
    # on a log axis an annotation's x is log10 of the value (shapes take the value itself)
    xs = sizes + ([sweep.dp.size] if sweep.dp is not None else []) + [sweep.sqrt_n]
    fig.add_vline(x=sweep.sqrt_n, line_dash="dash", line_color="#636363")
    fig.add_annotation(x=np.log10(sweep.sqrt_n), y=1.02, yref="y", text=f"√n = {sweep.sqrt_n:.3g}", showarrow=False,
                       xanchor="left")
    fig.add_hline(y=0.5, line_dash="dot", line_color="#969696", annotation_text="guessing (50%)",
                  annotation_position="bottom left")
    fig.update_layout(title=f"Reconstruction from {sweep.m:,} noisy subset counts about {sweep.n:,} people",
                      xaxis_title="noise size E (each answer off by at most E)", xaxis_type="log",
                      xaxis_range=[np.log10(min(xs)) - 0.2, np.log10(max(xs)) + 0.2],
                      yaxis_title="share of secrets recovered", yaxis_tickformat=".0%", yaxis_range=[0.4, 1.03],
                      height=420, legend={"orientation": "h", "y": -0.25})
    return fig


# ---------------------------------------------------------------- inference on a release
HONEST = "honest: noise, sampling and binning"
NAIVE = "naive: synthetic rows as if real"


def inference_figure(result: Any) -> go.Figure:
    """An honest interval (or p-value) beside the naive one, from a :mod:`dpsynth.inference` result."""
    fig = go.Figure()
    colours = {HONEST: "#e6550d", NAIVE: "#3182bd"}
    if hasattr(result, "p_value"):
        fig.add_bar(x=[HONEST, NAIVE], y=[max(result.p_value, 1e-300), max(result.naive_p_value, 1e-300)],
                    marker_color=[colours[HONEST], colours[NAIVE]])
        fig.add_hline(y=0.05, line_dash="dash", annotation_text="α = 0.05")
        fig.update_layout(title="p-value of the independence test", yaxis_type="log", yaxis_title="p-value",
                          height=320, showlegend=False)
        return fig
    if hasattr(result, "terms"):
        rows = [(HONEST, result.estimate, result.low, result.high), (NAIVE, result.naive_estimate, result.naive_low,
                                                                      result.naive_high)]
        for name, est, lo, hi in rows:
            est, lo, hi = (np.asarray(v, dtype=float) for v in (est, lo, hi))
            fig.add_scatter(x=est, y=list(result.terms), mode="markers", name=name, marker_color=colours[name],
                            error_x={"type": "data", "symmetric": False, "array": hi - est, "arrayminus": est - lo})
        fig.update_layout(title=f"Coefficients ({humanize.level(result.level)} intervals)", height=320, scattermode="group")
        return fig
    for name, est, lo, hi in [(HONEST, result.estimate, result.low, result.high),
                              (NAIVE, result.naive_estimate, result.naive_low, result.naive_high)]:
        if np.isfinite(est):
            fig.add_scatter(x=[est], y=[name], mode="markers", name=name, marker_color=colours[name], marker_size=10,
                            error_x={"type": "data", "symmetric": False, "array": [hi - est], "arrayminus": [est - lo]})
        elif np.isfinite(lo) and np.isfinite(hi):
            # no point estimate (the noise hides it) but the interval holds: draw the interval alone, an error bar
            # around nan would leave the row empty
            fig.add_scatter(x=[lo, hi], y=[name, name], mode="lines+markers", name=name, marker_color=colours[name],
                            marker_symbol="line-ns-open", marker_size=14, line_width=3)
            fig.add_annotation(x=(lo + hi) / 2, y=name, text="no point estimate", showarrow=False, yshift=14)
        else:
            fig.add_scatter(x=[None], y=[name], mode="markers", name=name)
            fig.add_annotation(xref="paper", x=0.5, y=name, text="n/a: the noise hides it", showarrow=False)
    what = f"{result.statistic} of {result.column}" + (f" = {result.value}" if result.value is not None else "")
    fig.update_layout(title=f"{what}: {humanize.level(result.level)} intervals", height=260, showlegend=False,
                      margin={"l": 10, "r": 10, "t": 50, "b": 30})
    return fig
