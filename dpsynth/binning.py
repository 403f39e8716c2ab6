"""Values ↔ cells: map a table onto the schema's cells, and cells back to values.

Encoding is the only step besides counting that reads raw values. It is a per-record map
(each row's cells depend on that row alone), so it is 1-stable and composes with any mechanism
applied afterwards. What it observes about the data (how many values were clamped, empty or
unknown) goes into an :class:`EncodingReport` for the curator's eyes only; it is never part of
a release.

Decoding is post-processing: it draws a value uniformly inside each sampled numeric bin (a
uniform point of the bin's grid when the column declares one: whole numbers for ``integer``,
multiples of 10^-d for ``decimals`` d), or, given a released :class:`dpsynth.value_model.ValueModel`,
from that model's fine distribution restricted to the bin; and maps categorical cells back to labels. Its randomness
comes from a fast generator seeded by the release's generator (:mod:`dpsynth.synthesis`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dpsynth.errors import InputError
from dpsynth.io import BLANKS
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema

if TYPE_CHECKING:
    from dpsynth.value_model import ColumnGrid, ValueModel

_SHOW = 5


@dataclass
class ColumnReport:
    """What encoding saw in one column (curator's eyes only, never released)."""

    name: str
    clamped_low: int = 0
    clamped_high: int = 0
    missing: int = 0
    unknown_to_missing: int = 0
    unknown_dropped: int = 0


@dataclass
class EncodingReport:
    """Per-column observations and the number of rows dropped by an ``on_unknown: drop`` policy."""

    columns: list[ColumnReport] = field(default_factory=list)
    rows_in: int = 0
    rows_dropped: int = 0

    def messages(self) -> list[str]:
        """Plain sentences for the curator, e.g. '12 values of age were above 96 and were clamped'."""
        out = []
        for c in self.columns:
            if c.clamped_low:
                out.append(f"{c.clamped_low:,} value(s) of {c.name!r} were below the lower bound and were clamped to it.")
            if c.clamped_high:
                out.append(f"{c.clamped_high:,} value(s) of {c.name!r} were above the upper bound and were clamped to it.")
            if c.unknown_to_missing:
                out.append(f"{c.unknown_to_missing:,} value(s) of {c.name!r} were not in the category list and were counted as missing.")
            if c.unknown_dropped:
                out.append(f"{c.unknown_dropped:,} row(s) had a value of {c.name!r} not in the category list and were dropped.")
        return out


@dataclass
class Encoded:
    """Integer cell codes (rows × columns) and the curator-only report.

    ``raw`` holds, per numeric column, the parsed values of the kept rows (float64, NaN when
    empty; not clamped): the input of :func:`dpsynth.value_model.fit_value_model`. Never released.
    """

    codes: np.ndarray
    report: EncodingReport
    raw: dict[str, np.ndarray] = field(default_factory=dict)


def missing_columns_error(missing: Sequence[str], present: Iterable[Any] = ()) -> str:
    """The message for schema columns absent from the data (every engine's), naming any data column that
    differs from one of them only in case or surrounding spaces."""
    msg = f"The data has no column(s) {', '.join(map(repr, missing))} named in the schema."
    folded: dict[str, str] = {}
    for name in present:
        folded.setdefault(str(name).strip().casefold(), str(name))
    near = [f"{folded[m.strip().casefold()]!r} for {m!r}" for m in missing if m.strip().casefold() in folded]
    if near:
        msg += f" The data has {', '.join(near)}: names must match exactly, including case and spaces."
    return msg


def encode(df: pd.DataFrame, schema: Schema) -> Encoded:
    """Map every row to its cell in each schema column (vectorised).

    Raises :class:`InputError` naming the column, the first offending rows and values when a
    column is absent, a numeric value does not parse, a value is empty where missing values are
    not allowed, or a category is unknown and the column's policy is ``error``.
    """
    missing_cols = [c.name for c in schema.columns if c.name not in df.columns]
    if missing_cols:
        raise InputError(missing_columns_error(missing_cols, df.columns))
    n = len(df)
    codes = np.empty((n, len(schema.columns)), dtype=np.int64)
    keep = np.ones(n, dtype=bool)
    report = EncodingReport(rows_in=n)
    raw: dict[str, np.ndarray] = {}
    for j, col in enumerate(schema.columns):
        series = df[col.name]
        if isinstance(series, pd.DataFrame):
            raise InputError(f"The data has more than one column called {col.name!r}.")
        rep = ColumnReport(col.name)
        if isinstance(col, NumericColumn):
            codes[:, j], raw[col.name] = _encode_numeric(series, col, rep)
        else:
            cj, drop = _encode_categorical(series, col, rep)
            codes[:, j] = cj
            keep &= ~drop
        report.columns.append(rep)
    if not keep.all():
        codes = codes[keep]
        raw = {name: v[keep] for name, v in raw.items()}
        report.rows_dropped = int((~keep).sum())
    return Encoded(codes=codes, report=report, raw=raw)


def decode(codes: np.ndarray, schema: Schema, *, rng: np.random.Generator,
           values: ValueModel | None = None) -> pd.DataFrame:
    """Turn cell codes into a table: a value inside each numeric bin, labels for categories.

    Values are uniform inside the bin, or drawn from the released ``values`` model restricted to
    the bin for the columns it describes. Post-processing of released objects: it adds no privacy
    loss. O(rows × columns), vectorised. Draws 256 bits from ``rng`` and takes the values from the
    fast generator they seed (the law is the same whatever the generator; see :mod:`dpsynth.synthesis`).
    """
    from dpsynth.randomness import CHUNK_KEY, fast_rng, post_processing_seed

    return decode_with(codes, schema, fast_rng(post_processing_seed(rng), CHUNK_KEY, 0), values)


def decode_with(codes: np.ndarray, schema: Schema, gen: np.random.Generator,
                values: ValueModel | None = None) -> pd.DataFrame:
    """:func:`decode` drawing from ``gen`` itself: column by column, the draws of :func:`draw_numeric`.

    The streaming writer (:mod:`dpsynth.writer`) makes the same draws in the same order,
    so for the same generator state both give the same values.
    """
    data: dict[str, pd.Series | np.ndarray] = {}
    for j, col in enumerate(schema.columns):
        c = np.asarray(codes[:, j], dtype=np.int64)
        if isinstance(col, NumericColumn):
            data[col.name] = _decode_numeric(c, col, gen, values)
        else:
            labels = np.array(list(col.categories) + [None], dtype=object)
            data[col.name] = pd.Series(labels[np.minimum(c, len(col.categories))], dtype="object")
    return pd.DataFrame(data)


def draw_numeric(c: np.ndarray, col: NumericColumn, gen: np.random.Generator,
                 values: ValueModel | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Values for the cell codes ``c`` of a numeric column, and the mask of missing cells (None if none allowed).

    A column with a value grid (:attr:`NumericColumn.grid_decimals` d: ``integer`` is d = 0)
    gets int64 grid units k, uniform over the grid points of the bin (:meth:`NumericColumn.grid_ranges`;
    the value is k·10^-d); other columns get float64 values uniform on the bin, clipped into the
    bounds. One draw per row, missing rows included (their value is then discarded). With a
    ``values`` model describing the column, the draws come from it instead
    (:meth:`dpsynth.value_model.ValueModel.sample_in_bins`): grid units k as above, or, for a
    column without a grid, the float64 values of the model's automatic grid.
    """
    b = np.minimum(c, col.bins - 1)
    mask = (c >= col.bins) if col.missing else None
    if values is not None and col.name in values.trees:
        k = values.sample_in_bins(col.name, b, rng=gen, col=col)
        if col.grid_decimals is not None:
            return k, mask
        g = values.trees[col.name].grid
        return _bounds_as_written(np.clip(g.values(k), col.lower, col.upper), k, g, col), mask
    if col.grid_decimals is not None:
        lo, hi = col.grid_ranges()
        return gen.integers(lo[b], (hi + 1)[b]), mask
    edges = col.edges()
    vals = edges[:-1][b] + gen.random(len(c)) * (edges[1:] - edges[:-1])[b]
    # keep draws inside [lower, upper] even after rounding
    np.clip(vals, col.lower, col.upper, out=vals)
    return vals, mask


#: How far (a share of its magnitude, at least 1) a bound may lie off the grid the release estimated for its
#: column and still be drawn as itself wherever its nearest grid point inside the range is drawn
#: (:func:`_bounds_as_written`).
BOUND_DIGITS = 1e-6


def _bounds_as_written(v: np.ndarray, k: np.ndarray, g: ColumnGrid, col: NumericColumn) -> np.ndarray:
    """``v`` (values of grid units ``k`` on the estimated grid ``g``), with the grid's end points
    written as the bounds themselves when a bound holds more digits than the grid, within :data:`BOUND_DIGITS`
    of its magnitude: 0.707106781186547 on steps of 10^-9, a float artefact such as 10.6000003814697 on tenths.

    A schema drafted from the data has the data's extremes for bounds, and a repeated extreme (a top code, a
    value at the limit of a scale) was drawn at the grid point beside it: a column of 0s and 1/√2s came out with
    a KS distance of 1/3 from its real values however many of them the release placed there. A value moves by
    at most a millionth of the bound's magnitude (or of 1); the bounds are public and the grid units are the
    released draws: post-processing. A bound further off (−0.5 and 1.5 around a yes/no column on whole numbers,
    half a step) is left alone; so is a bound on the grid, or any bound of a column whose grid the schema declares."""
    for bound, kb in ((float(col.lower), g.first), (float(col.upper), g.last)):
        gap = abs(float(g.values(np.array([kb]))[0]) - bound)
        if 0.0 < gap <= BOUND_DIGITS * max(1.0, abs(bound)):
            v = np.where(k == kb, bound, v)
    return v


def unravel(cells: np.ndarray, sizes: tuple[int, ...]) -> list[np.ndarray]:
    """``np.unravel_index`` (row-major); in 32-bit arithmetic, twice as fast, when the domain allows."""
    if int(np.prod(sizes, dtype=object)) > np.iinfo(np.int32).max:
        return [np.asarray(c, dtype=np.int64) for c in np.unravel_index(cells, sizes)]
    q = np.asarray(cells).astype(np.int32)
    out: list[np.ndarray] = [q] * len(sizes)
    for j in range(len(sizes) - 1, 0, -1):
        q, out[j] = np.divmod(q, np.int32(sizes[j]))
    out[0] = q
    return out


def _encode_numeric(series: pd.Series, col: NumericColumn, rep: ColumnReport) -> tuple[np.ndarray, np.ndarray]:
    values, empty = _to_float(series, col.name)
    if empty.any():
        if not col.missing:
            rows = _rows(empty)
            raise InputError(
                f"Column {col.name!r} has {int(empty.sum()):,} empty value(s) (first at row {rows}),"
                " but the schema does not allow missing values; set missing: true or fill them."
            )
        rep.missing = int(empty.sum())
    low = values < col.lower
    high = values > col.upper
    rep.clamped_low, rep.clamped_high = int(low.sum()), int(high.sum())
    clamped = np.clip(np.where(empty, col.lower, values), col.lower, col.upper)
    inner = col.edges()[1:-1]
    out = np.searchsorted(inner, clamped, side="right").astype(np.int64)
    out[empty] = col.bins
    return out, np.where(empty, np.nan, values)


def _to_float(series: pd.Series, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Parse a column to float64; returns (values, empty mask). Text that is not a number is an error."""
    if pd.api.types.is_bool_dtype(series.dtype):
        raise InputError(f"Column {name!r} holds true/false values; declare it categorical.")
    if pd.api.types.is_numeric_dtype(series.dtype):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        empty = np.isnan(values)
    else:
        text = series.astype("string").str.strip(BLANKS)
        empty = (text.isna() | (text == "")).to_numpy(dtype=bool)
        values = pd.to_numeric(text.mask(empty), errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        bad = np.isnan(values) & ~empty
        if bad.any():
            idx = np.flatnonzero(bad)[:_SHOW]
            shown = ", ".join(f"row {i + 1}: {str(series.iloc[i])[:40]!r}" for i in idx)
            raise InputError(
                f"Column {name!r} is numeric in the schema, but {int(bad.sum()):,} value(s) are not numbers ({shown})."
            )
    inf = np.isinf(values)
    if inf.any():
        idx = np.flatnonzero(inf)[:_SHOW]
        raise InputError(
            f"Column {name!r} has infinite value(s) at row(s) {', '.join(str(i + 1) for i in idx)}; use finite numbers."
        )
    return values, empty


def cell_text(series: pd.Series) -> pd.Series:
    """The text a categorical column's cells are compared as, the same on every engine: text as it is; true/false
    as ``true``/``false`` and a timestamp as ``2020-01-01 12:00:00.5`` (seconds always, a fraction without trailing
    zeros; one with a time zone in UTC, ``2020-01-01 11:00:00+00``), as SQL engines cast them (pandas' own text was
    ``True`` and, for timestamps, depended on the other rows:
    ``2020-01-01`` when all fell at midnight); everything else as pandas writes it. Missing stays missing."""
    if pd.api.types.is_bool_dtype(series.dtype):
        out = series.astype("string").str.lower()
    elif pd.api.types.is_datetime64_any_dtype(series.dtype):
        t = pd.Series(pd.to_datetime(series), index=series.index)
        zone = getattr(t.dt, "tz", None) is not None
        if zone:  # an instant: its UTC time, as the engines cast it in a UTC session (not the machine's zone)
            t = t.dt.tz_convert("UTC").dt.tz_localize(None)
        frac = (t.dt.microsecond * 1000 + t.dt.nanosecond).astype("Int64")
        tail = frac.astype("string").str.zfill(9).str.rstrip("0")
        out = t.dt.strftime("%Y-%m-%d %H:%M:%S").astype("string") + ("." + tail).where(frac > 0, "")
        if zone:
            out = out + "+00"
    else:
        return series.astype("string")
    return out.where(series.notna(), pd.NA)


def _encode_categorical(series: pd.Series, col: CategoricalColumn, rep: ColumnReport) -> tuple[np.ndarray, np.ndarray]:
    text = cell_text(series)
    empty = (text.isna() | (text.str.strip(BLANKS) == "")).to_numpy(dtype=bool)
    values = text.mask(empty).to_numpy(dtype=object, na_value=None)
    out = pd.Index(list(col.categories), dtype=object).get_indexer(values).astype(np.int64)
    unknown = (out < 0) & ~empty
    drop = np.zeros(len(out), dtype=bool)
    if empty.any():
        if not col.missing:
            raise InputError(
                f"Column {col.name!r} has {int(empty.sum()):,} empty value(s) (first at row {_rows(empty)}),"
                " but the schema does not allow missing values; set missing: true."
            )
        rep.missing = int(empty.sum())
    if unknown.any():
        if col.on_unknown == "error":
            vals = pd.unique(text[unknown].to_numpy())[:_SHOW]
            shown = ", ".join(repr(str(v)[:40]) for v in vals)
            raise InputError(
                f"Column {col.name!r} has {int(unknown.sum()):,} value(s) not in its category list"
                f" (first at row {_rows(unknown)}: {shown}). Add them to the schema, or choose to map"
                " unknown values to missing or to drop those rows."
            )
        if col.on_unknown == "missing":
            rep.unknown_to_missing = int(unknown.sum())
            empty = empty | unknown
        else:
            rep.unknown_dropped = int(unknown.sum())
            drop = unknown
    out[empty] = len(col.categories)
    out[drop] = 0
    return out, drop


def _decode_numeric(c: np.ndarray, col: NumericColumn, gen: np.random.Generator,
                    values: ValueModel | None = None) -> pd.Series:
    vals, is_missing = draw_numeric(c, col, gen, values)
    d = col.grid_decimals
    if d is not None and d > 0:
        # k / 10^d correctly rounded: the float64 a reader parses from the text written with d decimals
        vals = vals / 10.0**d
    elif d == 0:
        if is_missing is not None:
            return pd.Series(pd.array(np.where(is_missing, 0, vals), dtype="Int64")).mask(is_missing)
        return pd.Series(vals.astype(np.int64))
    if is_missing is not None:
        vals = np.where(is_missing, np.nan, vals)
    return pd.Series(vals)


def _rows(mask: np.ndarray) -> str:
    return ", ".join(str(i + 1) for i in np.flatnonzero(mask)[:_SHOW])
