"""The schema: the single public description of a table's domain.

A schema lists the columns a release covers. Numeric columns have public bounds ``[lower,
upper]`` cut into ``bins`` equal-width bins; categorical columns have a public list of
categories. Either may allow a *missing* cell. Everything in a schema is public: it must come
from the curator's knowledge, documentation, or a DP estimate charged to the budget. A draft
proposed from the data (:func:`dpsynth.drafting.draft_schema`) marks such values with
``provenance="data"`` so that the UI and the release card can warn that they are not private
(lecture notes on differential privacy: "M = max|x_i| is not allowed!!!").

Provenance is kept per field (``lower``, ``upper``, ``bins``; ``categories``) in ``sources``;
``provenance`` is the column's summary (``data`` if any field is).
The JSON form writes ``"sources"`` only when the fields differ; a file with the older
per-column ``"provenance"`` alone loads with that provenance on every field.

JSON form (round-trips with :meth:`Schema.to_json` / :meth:`Schema.from_json`)::

    {"columns": [
      {"name": "age", "type": "numeric", "lower": 16, "upper": 96, "bins": 10, "integer": true},
      {"name": "workclass", "type": "categorical",
       "categories": ["Private", "State-gov"], "missing": true, "on_unknown": "missing"}
    ]}
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from dpsynth.errors import InputError

Provenance = Literal["public", "data", "private"]
#: The fields of a column that carry their own provenance (where the value came from).
NUMERIC_FIELDS: tuple[str, ...] = ("lower", "upper", "bins")
CATEGORICAL_FIELDS: tuple[str, ...] = ("categories",)
UnknownPolicy = Literal["error", "missing", "drop"]
PROVENANCES: tuple[str, ...] = ("public", "data", "private")
UNKNOWN_POLICIES: tuple[str, ...] = ("error", "missing", "drop")
MISSING_LABEL = "(missing)"
MAX_CATEGORIES = 10_000
MAX_BINS = 10_000
#: Most decimals a numeric column may declare (its grid units must fit int64 and float64 exactly).
MAX_DECIMALS = 9


@dataclass(frozen=True, kw_only=True)
class NumericColumn:
    """A numeric column binned into ``bins`` equal-width bins on public bounds ``[lower, upper]``.

    Bin ``j`` is ``[lower + j·h, lower + (j+1)·h)`` with ``h = (upper - lower) / bins``; the
    value ``upper`` falls in the last bin. Values outside the bounds are clamped (the DP lecture notes' (ch. 6)
    ``[L, U]`` assumption). With ``integer`` the synthetic values are whole numbers, and every bin
    must contain one. With ``decimals`` = d (0 to 9) they lie on the grid of multiples of 10^-d
    (written with d decimals), and every bin must contain a grid point; ``integer`` is the grid
    of whole numbers, so the two are not set together. With ``missing`` an extra last cell holds
    empty values (NaN).
    """

    name: str
    lower: float
    upper: float
    bins: int
    integer: bool = False
    missing: bool = False
    provenance: Provenance = "public"
    decimals: int | None = None
    sources: Any = None
    type: Literal["numeric"] = field(default="numeric", init=False)

    def __post_init__(self) -> None:
        _check_name(self.name)
        for attr in ("lower", "upper"):
            value = getattr(self, attr)
            if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value):
                shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:24] + "…"
                raise InputError(f"Column {self.name!r}: {attr} must be a finite number, got {shown}.")
        if not self.lower < self.upper:
            raise InputError(
                f"Column {self.name!r}: lower ({self.lower}) must be less than upper ({self.upper})."
            )
        if isinstance(self.bins, bool) or not isinstance(self.bins, int) or not 1 <= self.bins <= MAX_BINS:
            raise InputError(f"Column {self.name!r}: bins must be a whole number from 1 to {MAX_BINS}, got {self.bins!r}.")
        if not math.isfinite(float(self.upper) - float(self.lower)):
            raise InputError(f"Column {self.name!r}: the range [{self.lower}, {self.upper}] is wider than a float64"
                             " can hold; use narrower bounds.")
        if not np.all(np.diff(self.edges()) > 0):  # a bin of width 0 would hold no value
            raise InputError(f"Column {self.name!r}: {self.bins} bins on [{self.lower}, {self.upper}] are narrower than"
                             " float64 precision can tell apart; use fewer bins or a wider range.")
        _normalise_sources(self, NUMERIC_FIELDS)
        d = self.decimals
        if d is not None:
            if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d <= MAX_DECIMALS:
                raise InputError(f"Column {self.name!r}: decimals must be a whole number from 0 to {MAX_DECIMALS}, got {d!r}.")
            if self.integer:
                raise InputError(
                    f"Column {self.name!r}: set either integer (whole numbers) or decimals, not both;"
                    " integer: true is the same as decimals: 0."
                )
        grid = self.grid_decimals
        # grid units k are held in int64 and k·10^-d must be an exact float64 comparison target
        if grid is not None and max(abs(self.lower), abs(self.upper)) * 10.0**grid > 2.0**53:
            what = "whole numbers" if self.integer else f"{grid} decimals"
            fix = "set integer to false" if self.integer else "use fewer decimals"
            raise InputError(
                f"Column {self.name!r}: {what} on bounds as large as [{self.lower}, {self.upper}]"
                f" exceed float64 precision (2^53 grid steps); {fix}."
            )
        if self.integer or d is not None:
            lo, hi = self.grid_ranges()
            if np.any(hi < lo):
                what = "whole number" if self.integer else f"multiple of {10.0**-d:g} ({d} decimals)"
                fix = "set integer to false" if self.integer else "use more decimals"
                raise InputError(
                    f"Column {self.name!r}: with {self.bins} bins on [{self.lower}, {self.upper}] some bin"
                    f" contains no {what}; use fewer bins or {fix}."
                )

    @property
    def n_cells(self) -> int:
        """Number of cells: the bins, plus one for missing values if allowed."""
        return self.bins + int(self.missing)

    def edges(self) -> np.ndarray:
        """The ``bins + 1`` bin edges, ``lower`` to ``upper``."""
        j = np.arange(self.bins + 1, dtype=np.float64)
        edges = self.lower + j * ((self.upper - self.lower) / self.bins)
        edges[-1] = self.upper
        return edges

    @property
    def grid_decimals(self) -> int | None:
        """The decimals of the value grid: 0 for ``integer``, ``decimals``, or None (continuous values)."""
        return 0 if self.integer else self.decimals

    def integer_ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """Per bin, the smallest and largest whole number it contains (largest < smallest: none)."""
        return grid_ranges(self.edges(), 0)

    def grid_ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """Per bin, the smallest and largest k (int64) whose grid value k·10^-d lies in it, d = :attr:`grid_decimals`.

        "Lies in" is encoding's rule on the float64 value ``k / 10**d`` (what a CSV reader parses
        from the written text): lower edge inclusive, upper exclusive, the last bin closed at
        ``upper``. Largest < smallest means the bin holds no grid point. Continuous columns
        (no grid) raise ValueError.
        """
        d = self.grid_decimals
        if d is None:
            raise ValueError(f"column {self.name!r} has no value grid")
        return grid_ranges(self.edges(), d)

    def labels(self) -> list[str]:
        """Readable labels of the cells, e.g. ``[16, 24)``; the last bin is closed."""
        edges = self.edges()
        # six significant digits read well; more where they would make two bins' labels equal
        # (e.g. hourly bins over epoch seconds), up to the 17 that tell any two float64 apart
        for digits in (6, 8, 10, 12, 14, 17):
            out = []
            for j in range(self.bins):
                close = "]" if j == self.bins - 1 else ")"
                out.append(f"[{_fmt(edges[j], digits)}, {_fmt(edges[j + 1], digits)}{close}")
            if len(set(out)) == len(out):
                break
        if self.missing:
            out.append(MISSING_LABEL)
        return out

    def midpoints(self) -> np.ndarray:
        """Bin midpoints ``l_j + h/2`` (the DP lecture notes' (ch. 6) histogram mean)."""
        e = self.edges()
        return (e[:-1] + e[1:]) / 2.0


@dataclass(frozen=True, kw_only=True)
class CategoricalColumn:
    """A categorical column over a public list of categories (compared as strings).

    ``on_unknown`` says what happens to a value not in the list: ``error`` (default; the message
    names the column and the value), ``missing`` (counted in the missing cell; needs
    ``missing``) or ``drop`` (the row is removed). The release card records the policy.
    """

    name: str
    categories: tuple[str, ...]
    missing: bool = False
    on_unknown: UnknownPolicy = "error"
    provenance: Provenance = "public"
    sources: Any = None
    type: Literal["categorical"] = field(default="categorical", init=False)

    def __post_init__(self) -> None:
        _check_name(self.name)
        if isinstance(self.categories, str | bytes) or not hasattr(self.categories, "__iter__"):
            raise InputError(f"Column {self.name!r}: categories must be a list of names, got {self.categories!r}.")
        for c in self.categories:
            # names are compared as text: a number is written as its text, but null, true/false or a list is no name
            number = isinstance(c, int | float | np.integer | np.floating) and not isinstance(c, bool | np.bool_)
            if not (isinstance(c, str) or (number and math.isfinite(c))):
                raise InputError(f"Column {self.name!r}: category {c!r} is not a name; list each category as text"
                                 " (e.g. \"yes\", \"3\").")
        cats = tuple(str(c) for c in self.categories)
        object.__setattr__(self, "categories", cats)
        if not cats:
            raise InputError(f"Column {self.name!r}: the list of categories is empty.")
        if len(cats) > MAX_CATEGORIES:
            raise InputError(
                f"Column {self.name!r}: {len(cats):,} categories is more than the {MAX_CATEGORIES:,}"
                " a histogram can use; group them or leave the column out."
            )
        seen: set[str] = set()
        for c in cats:
            if c in seen:
                raise InputError(f"Column {self.name!r}: category {c!r} is listed twice.")
            if c == "":
                raise InputError(f"Column {self.name!r}: an empty category name; use missing: true instead.")
            seen.add(c)
        if self.on_unknown not in UNKNOWN_POLICIES:
            raise InputError(
                f"Column {self.name!r}: on_unknown must be one of {', '.join(UNKNOWN_POLICIES)}, got {self.on_unknown!r}."
            )
        if self.on_unknown == "missing" and not self.missing:
            raise InputError(f"Column {self.name!r}: on_unknown 'missing' needs missing: true.")
        _normalise_sources(self, CATEGORICAL_FIELDS)

    @property
    def n_cells(self) -> int:
        """Number of cells: the categories, plus one for missing values if allowed."""
        return len(self.categories) + int(self.missing)

    def labels(self) -> list[str]:
        """Cell labels: the categories, then the missing cell if allowed."""
        return list(self.categories) + ([MISSING_LABEL] if self.missing else [])


Column = NumericColumn | CategoricalColumn


@dataclass(frozen=True)
class Schema:
    """An ordered tuple of column specs; the histogram's cells are the product of their cells."""

    columns: tuple[Column, ...]

    def __post_init__(self) -> None:
        cols = tuple(self.columns)
        object.__setattr__(self, "columns", cols)
        if not cols:
            raise InputError("The schema has no columns; include at least one.")
        names = [c.name for c in cols]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise InputError(f"The schema names column(s) {', '.join(map(repr, dupes))} more than once.")

    @property
    def names(self) -> list[str]:
        """Column names in order."""
        return [c.name for c in self.columns]

    @property
    def sizes(self) -> tuple[int, ...]:
        """Cells per column."""
        return tuple(c.n_cells for c in self.columns)

    @property
    def n_cells(self) -> int:
        """Cells of the full multivariate histogram (a Python int: it can be astronomically large)."""
        return math.prod(self.sizes)

    def column(self, name: str) -> Column:
        """The spec of the column called ``name``."""
        for c in self.columns:
            if c.name == name:
                return c
        raise InputError(f"The schema has no column {name!r}.")

    def select(self, names: list[str]) -> Schema:
        """The sub-schema of the given columns, in the given order."""
        return Schema(tuple(self.column(n) for n in names))

    def replace(self, column: Column) -> Schema:
        """A copy with the column of the same name replaced."""
        self.column(column.name)
        return Schema(tuple(column if c.name == column.name else c for c in self.columns))

    def data_derived(self) -> list[str]:
        """Columns with at least one field (bound, bins, categories) taken from the data (not private)."""
        return [c.name for c in self.columns if c.provenance == "data"]

    def data_derived_fields(self) -> list[tuple[str, str]]:
        """(column, field) of every value taken from the data without a DP mechanism, in schema order."""
        return [(c.name, f) for c in self.columns for f, p in c.sources if p == "data"]

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form; defaults are written out so the file documents itself."""
        cols = []
        for c in self.columns:
            d = asdict(c)
            if isinstance(c, CategoricalColumn):
                d["categories"] = list(c.categories)
            # per-field sources are written only when they differ; the summary alone reads as before
            sources = field_sources(c)
            if len(set(sources.values())) > 1:
                d["sources"] = sources
            else:
                del d["sources"]
            d = {"name": d.pop("name"), "type": d.pop("type"), **d}
            cols.append(d)
        return {"columns": cols}

    def to_json(self, indent: int | None = 2) -> str:
        """JSON text of :meth:`to_dict`."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Any) -> Schema:
        """Build from the JSON form; every problem is an :class:`InputError` naming the column."""
        if not isinstance(data, dict) or not isinstance(data.get("columns"), list):
            raise InputError('A schema must be a JSON object with a "columns" list.')
        cols: list[Column] = []
        for i, raw in enumerate(data["columns"]):
            cols.append(_column_from_dict(raw, i))
        return cls(tuple(cols))

    @classmethod
    def from_json(cls, text: str) -> Schema:
        """Parse JSON text (see :meth:`from_dict`)."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"The schema is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).") from None
        return cls.from_dict(data)


def load_schema(path: str | Path) -> Schema:
    """Read a schema from a JSON file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"Schema file {str(p)!r} does not exist.") from None
    except (UnicodeDecodeError, OSError) as exc:
        raise InputError(f"Cannot read schema file {str(p)!r}: {exc}.") from None
    return Schema.from_json(text)


_NUMERIC_KEYS = {"name", "type", "lower", "upper", "bins", "integer", "missing", "provenance", "decimals", "sources"}
_CATEGORICAL_KEYS = {"name", "type", "categories", "missing", "on_unknown", "provenance", "sources"}


def _column_from_dict(raw: Any, i: int) -> Column:
    if not isinstance(raw, dict):
        raise InputError(f"Schema column #{i + 1} must be a JSON object.")
    name = raw.get("name")
    if not isinstance(name, str):
        raise InputError(f"Schema column #{i + 1} needs a string \"name\".")
    kind = raw.get("type")
    if kind == "numeric":
        extra = set(raw) - _NUMERIC_KEYS
        missing = {"lower", "upper", "bins"} - set(raw)
        if missing:
            raise InputError(f"Column {name!r}: numeric columns need {', '.join(sorted(missing))}.")
        if extra:
            raise InputError(f"Column {name!r}: unknown field(s) {', '.join(sorted(extra))}.")
        bins = raw["bins"]
        if isinstance(bins, float) and bins.is_integer():
            bins = int(bins)
        return NumericColumn(
            name=name, lower=raw["lower"], upper=raw["upper"], bins=bins,
            integer=_bool(raw.get("integer", False), name, "integer"),
            missing=_bool(raw.get("missing", False), name, "missing"),
            provenance=raw.get("provenance", "public"),
            decimals=_decimals(raw.get("decimals"), name),
            sources=_sources(raw.get("sources"), name),
        )
    if kind == "categorical":
        extra = set(raw) - _CATEGORICAL_KEYS
        if extra:
            raise InputError(f"Column {name!r}: unknown field(s) {', '.join(sorted(extra))}.")
        cats = raw.get("categories")
        if not isinstance(cats, list):
            raise InputError(f"Column {name!r}: categorical columns need a \"categories\" list.")
        return CategoricalColumn(
            name=name, categories=tuple(cats),
            missing=_bool(raw.get("missing", False), name, "missing"),
            on_unknown=raw.get("on_unknown", "error"),
            provenance=raw.get("provenance", "public"),
            sources=_sources(raw.get("sources"), name),
        )
    raise InputError(f"Column {name!r}: type must be \"numeric\" or \"categorical\", got {kind!r}.")


def _sources(value: Any, name: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InputError(f'Column {name!r}: "sources" must be an object mapping fields to a provenance.')
    return value


def _decimals(value: Any, name: str) -> int | None:
    # JSON has one number type: accept 2.0 as 2, as for bins; anything else is checked by the column
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _bool(value: Any, name: str, key: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"Column {name!r}: {key} must be true or false, got {value!r}.")
    return value


def _finite(value: float) -> bool:
    """Whether ``value`` is a finite float64 (a whole number too large for one is not)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"Every column needs a non-empty name, got {name!r}.")


def _check_provenance(name: str, provenance: Any, what: str = "provenance") -> None:
    if provenance not in PROVENANCES:
        raise InputError(f"Column {name!r}: {what} must be one of {', '.join(PROVENANCES)}, got {provenance!r}.")


def _normalise_sources(col: Any, fields: tuple[str, ...]) -> None:
    """Give every field of ``col`` its provenance and set ``provenance`` to the column's summary.

    ``provenance`` as passed is the default for the fields ``sources`` does not name (so the old
    per-column form means "every field"). Afterwards ``sources`` is a tuple of (field, provenance)
    pairs in field order, and ``provenance`` reads ``data`` if any field came from the data, else
    ``private`` if any was estimated privately, else ``public``.
    """
    _check_provenance(col.name, col.provenance)
    given = col.sources
    if given is None:
        given = {}
    elif not isinstance(given, dict):
        try:
            given = dict(given)
        except (TypeError, ValueError):
            raise InputError(f"Column {col.name!r}: sources must map field names to a provenance.") from None
    extra = set(given) - set(fields)
    if extra:
        raise InputError(
            f"Column {col.name!r}: sources names unknown field(s) {', '.join(sorted(map(str, extra)))};"
            f" use {', '.join(fields)}."
        )
    for f, p in given.items():
        _check_provenance(col.name, p, f"the source of {f}")
    pairs = tuple((f, str(given.get(f, col.provenance))) for f in fields)
    values = {p for _, p in pairs}
    summary = "data" if "data" in values else "private" if "private" in values else "public"
    object.__setattr__(col, "sources", pairs)
    object.__setattr__(col, "provenance", summary)


def field_sources(col: Column) -> dict[str, str]:
    """Each field's provenance (``lower``/``upper``/``bins``, or ``categories``)."""
    return dict(col.sources)


def with_sources(col: Column, **updates: str) -> Column:
    """A copy of ``col`` with the named fields' provenance replaced (the others kept)."""
    from dataclasses import replace

    return replace(col, sources={**field_sources(col), **updates})


def grid_ranges(edges: np.ndarray, decimals: int) -> tuple[np.ndarray, np.ndarray]:
    """Per bin of ``edges``, the first and last k with ``edges[b] <= k / 10**decimals`` below the next edge.

    The last bin is closed (``<= edges[-1]``). Exact for grid values below 2^53 units: the float
    estimate ``ceil(e·10^d)`` is corrected by comparing the correctly rounded ``k / 10**d`` itself
    with the edge, the same float64 comparison encoding makes.
    """
    scale = 10.0**decimals
    edges = np.asarray(edges, dtype=np.float64)
    first = np.ceil(edges * scale)  # estimate of the first k with k/scale >= e; off by at most one
    first = np.where(first / scale < edges, first + 1, first)
    first = np.where((first - 1) / scale >= edges, first - 1, first)
    last = np.floor(edges[-1] * scale)  # last k with k/scale <= upper
    last = last - 1 if last / scale > edges[-1] else last
    last = last + 1 if (last + 1) / scale <= edges[-1] else last
    lo = first[:-1]
    hi = first[1:] - 1
    hi[-1] = last
    return lo.astype(np.int64), hi.astype(np.int64)


def _fmt(x: float, digits: int = 6) -> str:
    return f"{x:.{digits}g}"
