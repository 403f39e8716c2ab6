"""Plain-language verdicts on a release's usefulness: before spending, and after it ran.

- :func:`utility_verdict` (before any ε is spent, from a :class:`~dpsynth.prediction.Prediction`,
  public inputs only): whether the release is expected to be useful, what will happen if not, and
  what would help (fewer columns, coarser bins, more ε).
- :func:`synthetic_column_problems` (after the release, from the released synthetic rows only,
  so post-processing): the columns that collapsed to a single value or came out nearly empty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from dpsynth.prediction import POOR_ONE_WAY_TVD, POOR_TWO_WAY_TVD, Prediction
from dpsynth.schema import Schema

#: A synthetic column whose most common value holds at least this share of the rows has collapsed.
COLLAPSED_SHARE = 0.95
#: A synthetic column with at most this share of non-empty values is nearly empty.
NEARLY_EMPTY_SHARE = 0.05


@dataclass(frozen=True)
class Verdict:
    """``ok`` False means the release is expected to be poor; ``message`` says so and ``advice`` what would help."""

    ok: bool
    message: str
    advice: tuple[str, ...]


def utility_verdict(prediction: Prediction, schema: Schema) -> Verdict:
    """Whether the predicted error is acceptable, in words a curator reads, with what would help."""
    p = prediction
    one, two = p.one_way_tvd, p.two_way_tvd
    poor_one, poor_two = one > POOR_ONE_WAY_TVD, two > POOR_TWO_WAY_TVD
    if not (poor_one or poor_two):
        return Verdict(True, p.summary(), ())
    worst = sorted(p.per_column.items(), key=lambda kv: -kv[1])[:3]
    if poor_one:
        what = (f"Expect a poor release: each synthetic column's shares are expected to be off by about {one:.0%} of"
                " the rows. Many columns may come out as a single value or as noise, and the spend cannot be undone.")
    else:
        what = (f"Expect the columns to look right on their own but their relations to be mostly lost: each pair of"
                f" columns is expected to be off by about {two:.0%} of the rows.")
    advice = []
    d = len(schema.columns)
    if d > 2:
        advice.append(f"Release fewer columns: {d} columns share this ε. The hardest to get right are "
                      + ", ".join(f"{name} ({t:.0%})" for name, t in worst) + ".")
    big = sorted(((c.name, n) for c, n in zip(schema.columns, schema.sizes, strict=True) if n > 10),
                 key=lambda kv: -kv[1])[:3]
    if big:
        advice.append("Use coarser bins or group categories: " + ", ".join(f"{name} has {n} cells" for name, n in big)
                      + ".")
    advice.append("Spend more ε on this release (the error falls roughly like 1/ε until the model's own limits).")
    if p.rows_assumed:
        advice.append(f"Give a rough public number of rows: {p.rows:,} was assumed, and the error depends on it.")
    return Verdict(False, what, tuple(advice))


@dataclass(frozen=True)
class ColumnProblem:
    """One synthetic column that came out unusable."""

    column: str
    kind: str  # "collapsed" or "nearly empty"
    message: str


def released_top_shares(rel: Any) -> dict[str, float]:
    """Per column, the largest share one cell holds in the release's own noisy one-way table (negative counts
    clamped): what the release says the column looks like. Post-processing of released tables only."""
    import numpy as np

    schema, out = rel.schema, {}
    tables: dict[int, np.ndarray] = {}
    if getattr(rel, "noisy_counts", None) is not None:
        full = np.clip(np.asarray(rel.noisy_counts, dtype=float), 0, None).reshape(schema.sizes)
        for j in range(len(schema.sizes)):
            tables[j] = full.sum(axis=tuple(k for k in range(len(schema.sizes)) if k != j))
    elif getattr(rel, "model", None) is not None:
        for cols, counts in rel.model.measurements:
            if len(cols) == 1:
                tables[cols[0]] = np.clip(np.asarray(counts, dtype=float).ravel(), 0, None)
    for j, t in tables.items():
        if t.sum() > 0:
            out[schema.columns[j].name] = float(t.max() / t.sum())
    return out


def synthetic_column_problems(synthetic: pd.DataFrame, released: dict[str, float] | None = None) -> list[ColumnProblem]:
    """Columns of the released synthetic rows that are (almost) a single value or (almost) all empty.

    A function of the released rows only (post-processing: no privacy cost, nothing about the real data).
    ``released``: :func:`released_top_shares`; a column whose own released table already puts that much in
    one cell (e.g. a capital loss of 0 for 95% of people) has that shape, it has not collapsed.
    """
    n = len(synthetic)
    if n == 0:
        return [ColumnProblem(str(c), "nearly empty", f"{c}: the release has no rows.") for c in synthetic.columns]
    out = []
    for name in synthetic.columns:
        text = synthetic[name].astype("string").str.strip()
        filled = text.notna() & (text != "")
        share_filled = float(filled.mean())
        if share_filled <= NEARLY_EMPTY_SHARE:
            out.append(ColumnProblem(str(name), "nearly empty",
                                     f"{name}: {1 - share_filled:.0%} of the synthetic values are empty."))
            continue
        top = text[filled].value_counts()
        share_top = float(top.iloc[0]) / n
        if share_top >= COLLAPSED_SHARE and (released or {}).get(str(name), 0.0) < COLLAPSED_SHARE - 0.05:
            out.append(ColumnProblem(str(name), "collapsed",
                                     f"{name}: {share_top:.0%} of the synthetic rows hold the same value"
                                     f" ({top.index[0]!s}); the column has collapsed to a single value."))
    return out


def release_verdict(synthetic: pd.DataFrame, released: dict[str, float] | None = None) -> Verdict:
    """After a release: ok, or which columns collapsed or came out empty and what would help
    (``released``: :func:`released_top_shares` of the same release)."""
    problems = synthetic_column_problems(synthetic, released)
    if not problems:
        return Verdict(True, "No synthetic column collapsed to a single value or came out empty.", ())
    cols = ", ".join(p.column for p in problems)
    return Verdict(False, f"{len(problems)} of {len(synthetic.columns)} synthetic columns are unusable ({cols}): "
                   + " ".join(p.message for p in problems),
                   ("Release fewer columns or coarser bins, or spend more ε; the spend of this release stands.",))
