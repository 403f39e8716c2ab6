"""Quality reports to download: a private one for the curator and a publishable summary.

- :func:`private_report` compares the release with the real data (shares per column, raw values,
  pairs of columns) and ends in a plain verdict. It is marked at the top :data:`PRIVATE_MARKER`:
  the comparisons are computed from the real data without noise and must not be published.
- :func:`public_summary` holds the release card and figures drawn from the release alone (the
  released noisy counts and what they mean): post-processing of the release, safe to publish.

Both are one self-contained HTML file: plotly.js is included once, inline, so the file opens
offline. No function here draws randomness or spends budget.
"""

from __future__ import annotations

import html
import math
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from dpsynth import plots
from dpsynth.binning import encode
from dpsynth.humanize import cells, number, percent
from dpsynth.release import Release
from dpsynth.schema import NumericColumn
from dpsynth.utility import (
    comparison_summary,
    fidelity,
    formatted_comparisons,
    marginal_counts,
    noise_explanation,
    noise_sentences,
    value_comparisons,
)

PRIVATE_MARKER = "Contains comparisons with the real data: not for publication"

#: Mean one-column TVD at or below which the synthetic data is called close / usable with care.
GOOD_TVD, FAIR_TVD = 0.05, 0.15
#: A column whose one-column TVD or KS distance exceeds this is named in the verdict.
BAD_COLUMN = 0.2

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#222;line-height:1.45}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}
th{background:#f4f4f4}.banner{padding:.8em 1em;border-radius:6px;font-weight:600;margin:1em 0}
.private{background:#fde2e1;border:2px solid #c0392b;color:#7b1d14}.public{background:#e4f2e7;border:1px solid #3c8d50}
.warn{background:#fff4d6;border:1px solid #e0b000;padding:.5em 1em;border-radius:6px;margin:.4em 0}
.verdict{font-size:1.1em;padding:.8em 1em;border-radius:6px;background:#eef3fb;border:1px solid #7aa0d6}
"""


def _e(x: Any) -> str:
    return html.escape(str(x))


def _page(title: str, banner: str, banner_class: str, body: list[str]) -> str:
    # the banner also opens the file and its title, so it is seen before anything else (even in a text editor)
    return ("<!DOCTYPE html>\n<!-- " + _e(banner) + " -->\n<html lang='en'><head><meta charset='utf-8'><title>"
            + _e(f"{title} — {banner}") + "</title><style>"
            + _STYLE + "</style><script type='text/javascript'>" + get_plotlyjs() + "</script></head><body>"
            + f"<div class='banner {banner_class}'>{_e(banner)}</div><h1>{_e(title)}</h1>" + "".join(body)
            + "</body></html>")


def _figure(fig: go.Figure) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False})


def _exact(x: float) -> str:
    """A public bound exactly as declared (thousands separators, no rounding, no scientific notation)."""
    x = float(x)
    return f"{int(x):,}" if x.is_integer() else f"{x:,.10f}".rstrip("0").rstrip(".")


def card_html(card: dict[str, Any]) -> str:
    """The release card as HTML: guarantee, protection, method, warnings and the public schema."""
    p = card["privacy"]
    unit = p.get("unit_of_protection", {})
    mech = card.get("mechanism", {})
    method = card.get("method", {})
    post = card.get("post_processing", {})
    guarantee = f"{p.get('definition', '')} with ε = {number(p['epsilon'])}"
    if p.get("delta"):
        guarantee += f", δ = {number(p['delta'])}"
    facts = [
        ("Dataset", card.get("dataset") or "(not named)"), ("Created", card.get("created", "")),
        ("Guarantee", guarantee),
        ("Neighbouring datasets", f"{p.get('neighbours', '')}: {p.get('neighbours_meaning', '')}"),
        ("Unit of protection", unit.get("description", "")),
        ("Method", f"{method.get('name', '')} ({method.get('why', '')})"),
        ("Mechanism", f"{mech.get('mechanism', mech.get('method', ''))}; {mech.get('guarantee', '')}"),
        ("Randomness", card.get("randomness", {}).get("source", "")),
        ("Synthetic rows", number(post["synthetic_rows"]) if "synthetic_rows" in post else ""),
    ]
    out = ["<h2>Release card</h2><table>"]
    out += [f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts]
    out.append("</table>")
    out += [f"<div class='warn'>⚠ {_e(w)}</div>" for w in card.get("warnings", [])]
    cols = card.get("schema", {}).get("columns", [])
    if cols:
        out.append("<h3>Columns (public schema)</h3><table><tr><th>column</th><th>type</th><th>values</th></tr>")
        for c in cols:
            if c["type"] == "numeric":
                dom = f"{_exact(c['lower'])} to {_exact(c['upper'])} in {c['bins']} bins"
            else:
                cats = list(c["categories"])
                dom = ", ".join(cats[:10]) + (f", … ({len(cats)} categories)" if len(cats) > 10 else "")
            if c.get("provenance") == "data":
                dom += " (⚠ taken from the data, not private)"
            out.append(f"<tr><td>{_e(c['name'])}</td><td>{_e(c['type'])}</td><td>{_e(dom)}</td></tr>")
        out.append("</table>")
    return "".join(out)


def _noise_html(rel: Release) -> str:
    tables = plots.released_tables(rel)
    if not tables:
        return ""
    info = noise_explanation(rel.card, tables, plots.released_noise_entries(rel))
    return "<h2>What the released noisy counts mean</h2><ul>" + "".join(
        f"<li>{_e(s)}</li>" for s in noise_sentences(info)) + "</ul>"


def verdict(fid: dict[str, Any], comparisons: dict[str, dict[str, Any]]) -> tuple[str, list[str]]:
    """A plain verdict on the synthetic data's fidelity ('close', 'usable with care', 'poor') and its reasons.

    From the mean one-column total-variation distance, the columns far from the real ones and the
    numeric columns whose values are distorted (curator's eyes only: computed from the real data).
    """
    one = float(fid["mean_one_way"])
    distorted = [v for v in comparisons.values() if v["ks"] > BAD_COLUMN]
    level = "close to the real data" if one <= GOOD_TVD and not distorted else \
        "usable with care" if one <= FAIR_TVD else "poor"
    reasons = [f"On average {percent(one)} of rows would have to move to make one column of the synthetic data match"
               " the real one (total-variation distance; 0% = identical)."]
    two = fid.get("mean_two_way", math.nan)
    if two == two:  # not NaN: at least two columns
        reasons.append(f"For pairs of columns it is {percent(float(two))}.")
    far = fid["one_way"].loc[fid["one_way"]["tvd"] > BAD_COLUMN, "columns"].tolist()
    if far:
        reasons.append("Columns far from the real ones: " + ", ".join(far) + ".")
    for v in distorted:
        reasons.append(
            f"The values of {v['column']} are distorted: the real data's most common value {number(v['mode'])}"
            f" has {percent(v['real']['mode_share'])} of real rows but {percent(v['synthetic']['mode_share'])}"
            f" of synthetic rows; mean {number(v['real']['mean'])} real vs {number(v['synthetic']['mean'])}"
            " synthetic.")
    if distorted:
        reasons.append("Why: a synthetic value is drawn evenly inside its bin, so a value many rows share is spread"
                       " over the whole bin. Narrower bins where the values crowd (so the common value has a small bin"
                       " to itself) keep such peaks.")
    if one > GOOD_TVD:
        reasons.append("What would help overall: fewer columns, coarser bins, or a larger ε.")
    return level, reasons


def private_report(rel: Release, real: pd.DataFrame, *, fid: dict[str, Any] | None = None,
                   comparisons: dict[str, dict[str, Any]] | None = None,
                   codes: tuple[np.ndarray, np.ndarray] | None = None) -> str:
    """The curator's quality report (HTML): card, comparisons with the real data, plain verdict. Not for publication.

    ``fid``, ``comparisons`` and ``codes`` (the real and synthetic tables' cell codes) may be passed when already
    computed for the same release."""
    schema = rel.schema
    fid = fid if fid is not None else fidelity(real, rel.synthetic, schema)
    comparisons = comparisons if comparisons is not None else value_comparisons(real, rel.synthetic, schema)
    level, reasons = verdict(fid, comparisons)
    body = [
        "<p>This report compares the synthetic data with the real data it was made from. The comparisons are"
        " computed from the real data <b>without noise</b>: they are for the data curator only. Publish the"
        " synthetic data, its card and the publishable summary instead.</p>",
        f"<div class='verdict'><b>Verdict: {_e(level)}.</b><ul>"
        + "".join(f"<li>{_e(r)}</li>" for r in reasons) + "</ul></div>",
        card_html(rel.card),
    ]
    if comparisons:
        table = formatted_comparisons(comparison_summary(comparisons))
        body += ["<h2>Numbers, real vs synthetic</h2>", table.to_html(index=False, escape=True, border=0)]
        body += [_figure(plots.ecdf_figure(v)) for v in comparisons.values()]
    body.append("<h2>Each column: share of rows per value or range</h2>")
    real_codes, synth_codes = codes if codes is not None else (encode(real, schema).codes,
                                                                encode(rel.synthetic, schema).codes)
    for j, c in enumerate(schema.columns):
        real_counts, noisy, synth = (marginal_counts(real_codes, schema.sizes, [j]), plots.released_marginal(rel, [c.name]),
                                     marginal_counts(synth_codes, schema.sizes, [j]))
        body.append(_figure(plots.marginal_figure(c.labels(), {plots.REAL: real_counts, plots.NOISY: noisy,
                                                               plots.SYNTH: synth}, c.name)))
    if len(fid["two_way"]):
        body += ["<h2>Pairs of columns</h2>", _figure(plots.tvd_pairs_figure(fid["two_way"], schema.names))]
    body.append(_noise_html(rel))
    return _page("Quality report (private)", PRIVATE_MARKER.upper(), "private", body)


def public_summary(rel: Release) -> str:
    """A publishable summary (HTML): the card and figures of the released noisy counts only (no real data)."""
    schema = rel.schema
    body = [
        f"<p>A differentially private release of {len(schema.columns)} columns (a full table of"
        f" {_e(cells(schema.n_cells))}). Everything below is computed from the release alone.</p>",
        card_html(rel.card), _noise_html(rel), "<h2>Released noisy counts per column</h2>",
    ]
    for c in schema.columns:
        noisy = plots.released_marginal(rel, [c.name])
        if noisy is not None:
            body.append(_figure(plots.noisy_counts_figure(c.labels(), noisy, c.name)))
    numeric = [c.name for c in schema.columns if isinstance(c, NumericColumn)]
    if numeric:
        body.append("<p>Numeric columns are released as counts per range; the synthetic values are drawn evenly"
                    " inside each range.</p>")
    return _page("Differentially private release: summary", "Publishable summary: made from the release only",
                 "public", body)
