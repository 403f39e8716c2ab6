"""A draft schema proposed from the data, for the curator to edit. NOT private.

Every bound and category list read off the data is marked ``provenance="data"``; the UI and the
release card warn about it until the curator replaces it with public values or a DP estimate
(:mod:`dpsynth.discovery`). Seed 000: "M = max|x_i| is not allowed!!!".
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpsynth.binning import cell_text
from dpsynth.errors import InputError
from dpsynth.io import BLANKS
from dpsynth.schema import CategoricalColumn, Column, NumericColumn, Schema

#: A text column with more distinct values than this is proposed as excluded, not as categories.
MAX_DRAFT_CATEGORIES = 100
DEFAULT_BINS = 10


def infer_kind(series: pd.Series) -> str:
    """'numeric' if every non-empty value parses as a number, 'categorical' otherwise."""
    if pd.api.types.is_bool_dtype(series.dtype):
        return "categorical"
    if pd.api.types.is_numeric_dtype(series.dtype):
        return "numeric"
    text = series.astype("string").str.strip(BLANKS)
    text = text[text.notna() & (text != "")]
    if len(text) == 0:
        return "categorical"
    parsed = pd.to_numeric(text, errors="coerce")
    return "numeric" if parsed.notna().all() and np.isfinite(parsed.to_numpy(dtype=float)).all() else "categorical"


def draft_column(series: pd.Series, name: str, kind: str | None = None, bins: int = DEFAULT_BINS) -> Column | None:
    """Draft one column from its values (provenance 'data'); None if it cannot be a histogram column."""
    kind = kind or infer_kind(series)
    text = series.astype("string").str.strip(BLANKS)
    has_missing = bool((text.isna() | (text == "")).any())
    if kind == "numeric":
        x = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)
        x = x[np.isfinite(x)]
        if len(x) == 0:
            return None
        lo, hi = float(np.min(x)), float(np.max(x))  # data-derived: flagged below, never silent
        integer = bool(np.all(np.mod(x, 1) == 0))
        if integer:
            lo, hi = math.floor(lo), math.ceil(hi)
        if hi <= lo:
            hi = lo + 1
        b = bins
        if integer and hi - lo + 1 <= bins:
            # one bin per whole number, centred on it
            lo, hi, b = lo - 0.5, hi + 0.5, int(hi - lo + 1)
        integer = integer and _fits(lo, hi, b)
        # a range float64 cannot split into b bins (values of 1e300, or 5e-324) gets one bin, or is left out
        for bins_tried in dict.fromkeys((b, 1)):
            try:
                return NumericColumn(name=name, lower=lo, upper=hi, bins=bins_tried, integer=integer and bins_tried == b,
                                     missing=has_missing, provenance="data")
            except InputError:
                continue
        return None
    # the categories as the release compares them (binning's encoder): spaces kept, blank cells missing
    raw = cell_text(series)
    cats = raw[text.notna() & (text != "")].value_counts()
    if len(cats) == 0 or len(cats) > MAX_DRAFT_CATEGORIES:
        return None
    return CategoricalColumn(name=name, categories=tuple(cats.index.astype(str)), missing=has_missing, provenance="data")


def _fits(lo: float, hi: float, b: int) -> bool:
    try:
        NumericColumn(name="_", lower=lo, upper=hi, bins=b, integer=True)
        return True
    except InputError:
        return False


def draft_schema(df: pd.DataFrame, bins: int = DEFAULT_BINS) -> tuple[Schema, list[str]]:
    """A schema proposed from the data, and the names of columns left out (too many categories, empty)."""
    cols: list[Column] = []
    left_out: list[str] = []
    for name in df.columns:
        col = draft_column(df[name], str(name), bins=bins)
        if col is None:
            left_out.append(str(name))
        else:
            cols.append(col)
    if not cols:
        raise InputError("No column of this table can be used: each is empty or has too many distinct values.")
    return Schema(tuple(cols)), left_out
