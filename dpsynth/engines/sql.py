"""SQL that bins and counts a table exactly as :func:`dpsynth.binning.encode` does (DuckDB and Spark).

Numeric columns: text is trimmed and must be a number in the syntax pandas accepts (Spark: the
regular expression below; DuckDB: its own cast minus the two extensions pandas refuses; ``nan``
and infinities are errors as in ``encode``); values are clamped to ``[lower, upper]``; the bin is the number of
*inner* edges ``≤ value`` — ``numpy.searchsorted(inner, value, side='right')`` — computed as a
floor-division estimate corrected by exact comparisons with the same float64 edges
(:meth:`NumericColumn.edges`, written as round-trip decimal strings cast to DOUBLE). The estimate
is off by at most one bin for any schema (|error| ≪ 1 bin since bins ≤ 10⁴), so one correction
step in each direction is exact.

Categorical columns: values are compared as strings, untrimmed (as ``encode``); an empty or
blank cell is missing; an unknown value follows the column's ``on_unknown`` policy.

Each row also gets a 3-bit status per column (ok, clamped low/high or unknown→missing/drop,
missing, or one of the error kinds); statuses are packed into 64-bit flags and grouped with the
cell, so one pass yields the counts, the curator's report and any errors.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from dpsynth.binning import ColumnReport, EncodingReport
from dpsynth.engines import strides
from dpsynth.errors import InputError
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema

# ---- status codes of the SQL engines: one 3-bit code per column and row ----------------
OK, LOW, HIGH, MISSING, EMPTY_ERROR, BAD, INF, UNKNOWN_ERROR = range(8)
UNKNOWN_MISSING, UNKNOWN_DROP = LOW, HIGH  # categorical columns reuse the clamping codes
STATUS_BITS = 3
COLUMNS_PER_FLAG = 20  # 20 × 3 bits fit a signed 64-bit integer


def report_from_statuses(schema: Schema, flag_values: list[np.ndarray], counts: np.ndarray) -> tuple[EncodingReport, np.ndarray]:
    """Per-column report from packed status flags of each group; also the mask of dropped groups."""
    report = EncodingReport(rows_in=int(counts.sum()))
    dropped = np.zeros(len(counts), dtype=bool)
    for j, col in enumerate(schema.columns):
        flags = flag_values[j // COLUMNS_PER_FLAG]
        status = (flags >> (STATUS_BITS * (j % COLUMNS_PER_FLAG))) & 7
        rep = ColumnReport(col.name)
        tally = np.bincount(status, weights=counts, minlength=8).astype(np.int64)
        rep.missing = int(tally[MISSING])
        if isinstance(col, NumericColumn):
            rep.clamped_low, rep.clamped_high = int(tally[LOW]), int(tally[HIGH])
        else:
            rep.unknown_to_missing, rep.unknown_dropped = int(tally[UNKNOWN_MISSING]), int(tally[UNKNOWN_DROP])
            dropped |= status == UNKNOWN_DROP
        report.columns.append(rep)
    report.rows_dropped = int(counts[dropped].sum())
    return report, dropped


def column_errors(schema: Schema, flag_values: list[np.ndarray], counts: np.ndarray) -> dict[int, dict[int, int]]:
    """For each column with rows in an error status: {status: number of rows}."""
    out: dict[int, dict[int, int]] = {}
    for j, _ in enumerate(schema.columns):
        flags = flag_values[j // COLUMNS_PER_FLAG]
        status = (flags >> (STATUS_BITS * (j % COLUMNS_PER_FLAG))) & 7
        tally = np.bincount(status, weights=counts, minlength=8).astype(np.int64)
        errs = {s: int(tally[s]) for s in (EMPTY_ERROR, BAD, INF, UNKNOWN_ERROR) if tally[s]}
        if errs:
            out[j] = errs
    return out



Dialect = Literal["duckdb", "spark"]

#: Number syntax accepted by ``pandas.to_numeric`` (ASCII digits; inf/infinity/nan in any case).
NUMBER_RE = (
    "^[+-]?(([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?"
    "|[iI][nN][fF]([iI][nN][iI][tT][yY])?|[nN][aA][nN])$"
)
_WS = "[ \\t\\n\\r\\x0B\\x0C]"  # what str.strip() removes in ASCII (regex class; RE2 and Java agree)
PADDED_NUMBER_RE = f"{_WS}*[+-]?(([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?|[iI][nN][fF]([iI][nN][iI][tT][yY])?|[nN][aA][nN]){_WS}*"
BLANK_RE = f"{_WS}*"
_WS_CODES = (32, 9, 10, 11, 12, 13)
_NUMBER_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                 "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "REAL", "INT", "LONG", "SHORT", "BYTE")
_BOOL_TYPES = ("BOOLEAN", "BOOL")


def type_class(sql_type: str, dialect: Dialect = "duckdb") -> str:
    """'number', 'bool', 'instant' (a timestamp with a time zone: an instant) or 'text' for a DuckDB or Spark
    column type name (Spark's ``timestamp`` is an instant, DuckDB's a naive timestamp)."""
    t = sql_type.strip().upper()
    if t in ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ") or (dialect == "spark" and t == "TIMESTAMP"):
        return "instant"
    if t in _BOOL_TYPES:
        return "bool"
    if t in _NUMBER_TYPES or t in ("DOUBLE PRECISION", "FLOAT4", "FLOAT8", "INT4", "INT8"):
        return "number"
    return "text"  # DECIMAL, strings, dates...: parsed from their text form, as pandas does


def quote_ident(name: str, dialect: Dialect) -> str:
    """A column name as a quoted SQL identifier."""
    if dialect == "spark":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


def quote_str(value: str, dialect: Dialect) -> str:
    """A string literal."""
    if dialect == "spark":
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return "'" + value.replace("'", "''") + "'"


def double(x: float, dialect: Dialect) -> str:
    """An exact float64 literal: the shortest round-trip decimal, cast from a string."""
    return f"CAST({quote_str(repr(float(x)), dialect)} AS DOUBLE)"


@dataclass(frozen=True)
class _Ctx:
    dialect: Dialect

    @property
    def ws(self) -> str:
        return " || ".join(f"chr({c})" for c in _WS_CODES)

    def trim(self, expr: str) -> str:
        if self.dialect == "spark":
            return f"trim(BOTH ({self.ws}) FROM {expr})"
        return f"trim({expr}, {self.ws})"

    def matches(self, expr: str) -> str:
        if self.dialect == "spark":
            return f"({expr} RLIKE {quote_str(NUMBER_RE, 'spark')})"
        return f"regexp_full_match({expr}, {quote_str(NUMBER_RE, 'duckdb')})"

    def full_match(self, expr: str, pattern: str) -> str:
        if self.dialect == "spark":
            return f"({expr} RLIKE {quote_str('^(' + pattern + ')$', 'spark')})"
        return f"regexp_full_match({expr}, {quote_str(pattern, 'duckdb')})"

    def try_double(self, expr: str) -> str:
        return f"TRY_CAST({expr} AS DOUBLE)" if self.dialect == "duckdb" else f"try_cast({expr} AS DOUBLE)"

    def array(self, items: list[str]) -> str:
        return f"[{', '.join(items)}]" if self.dialect == "duckdb" else f"array({', '.join(items)})"

    def at(self, arr: str, one_based: str) -> str:
        return f"({arr})[{one_based}]" if self.dialect == "duckdb" else f"element_at({arr}, CAST({one_based} AS INT))"

    def text(self, expr: str) -> str:
        return f"CAST({expr} AS VARCHAR)" if self.dialect == "duckdb" else f"CAST({expr} AS STRING)"

    def category_text(self, expr: str, kind: str) -> str:
        """A cell's text as a category (:func:`dpsynth.binning.cell_text`): a typed number's NaN is a missing cell,
        as pandas reads it, not the category 'nan'; an instant is its UTC time with ``+00``, whatever the machine's
        time zone (each engine sets its session's time zone to UTC)."""
        if kind == "instant":
            return self.text(expr) if self.dialect == "duckdb" else f"concat({self.text(expr)}, '+00')"
        if kind != "number":
            return self.text(expr)
        return f"CASE WHEN isnan(CAST({expr} AS DOUBLE)) THEN NULL ELSE {self.text(expr)} END"


def enum_type_name(col: CategoricalColumn) -> str:
    """Name of the DuckDB ENUM type holding the column's categories (a digest of the list)."""
    digest = hashlib.sha256("\x00".join(col.categories).encode("utf-8")).hexdigest()[:16]
    return f"__dpsynth_enum_{digest}"


def enum_ddl(schema: Schema) -> list[str]:
    """DuckDB ``CREATE TYPE`` statements for the categorical columns (hash lookup of categories)."""
    out = []
    for col in schema.columns:
        if isinstance(col, CategoricalColumn):
            cats = ", ".join(quote_str(c, "duckdb") for c in col.categories)
            out.append(f"CREATE OR REPLACE TYPE {enum_type_name(col)} AS ENUM ({cats})")
    return out


def staged_sql(schema: Schema, types: dict[str, str], source: str, dialect: Dialect, *, row_numbers: bool = False,
               measured: Sequence[str] = ()) -> str:
    """A query with, per column j, ``st_j`` (status), ``code_j`` (cell code) and ``raw_j`` (text); with ``measured``,
    also ``__len``, the longest of those text columns' cells in the row (:func:`cell_size_sql`)."""
    cx = _Ctx(dialect)
    l1, l2, l3, l4, l5, l6 = ([] for _ in range(6))
    for j, col in enumerate(schema.columns):
        x = quote_ident(col.name, dialect)
        kind = type_class(types[col.name], dialect)
        if row_numbers:  # raw text only for error messages (formatting doubles as text is not free)
            raw = cx.category_text(x, kind) if isinstance(col, CategoricalColumn) else cx.text(x)
            l1.append(f"{raw} AS raw_{j}")  # a category as it is compared (Spark's instants: '+00')
        if isinstance(col, NumericColumn):
            lo, hi, bins = col.lower, col.upper, col.bins
            if kind == "number":
                l1.append(f"CAST({x} AS DOUBLE) AS t_{j}")
                l2.append(f"(t_{j} IS NULL OR isnan(t_{j})) AS e_{j}")
                l2.append(f"t_{j} AS v_{j}")
            elif dialect == "duckdb":
                # DuckDB's cast parses what pandas parses (padding included), plus '_' digit separators
                # and a doubled sign ('+-1'), refused here; tests fuzz this against pandas.
                l1.append(f"{cx.text(x)} AS t_{j}")
                l1.append(f"TRY_CAST({cx.text(x)} AS DOUBLE) AS p_{j}")
                odd = " OR ".join(f"contains({cx.text(x)}, '{c}')" for c in ("_", "+-", "-+"))
                l1.append(f"({odd}) AS q_{j}")
                blank = f"(t_{j} IS NULL OR {cx.full_match(f't_{j}', BLANK_RE)})"
                l2.append(f"CASE WHEN p_{j} IS NOT NULL THEN false ELSE {blank} END AS e_{j}")
                l2.append(f"CASE WHEN q_{j} THEN NULL ELSE p_{j} END AS v_{j}")
            else:
                # one regex decides "a number (maybe padded)"; only the other rows pay for the blank test
                l1.append(f"{cx.text(x)} AS t_{j}")
                l1.append(f"{cx.full_match(cx.text(x), PADDED_NUMBER_RE)} AS m_{j}")
                l2.append(f"CASE WHEN m_{j} THEN false ELSE (t_{j} IS NULL OR {cx.full_match(f't_{j}', BLANK_RE)}) END AS e_{j}")
                padded = f"t_{j}" if dialect == "duckdb" else cx.trim(f"t_{j}")  # DuckDB's cast skips the padding itself
                l2.append(f"CASE WHEN m_{j} THEN {cx.try_double(padded)} END AS v_{j}")
            empty = MISSING if col.missing else EMPTY_ERROR
            inf_test = f"isinf(v_{j})" if dialect == "duckdb" else f"abs(v_{j}) > {double(1.7976931348623157e308, dialect)}"
            l3.append(
                f"CASE WHEN e_{j} THEN {empty} WHEN v_{j} IS NULL OR isnan(v_{j}) THEN {BAD}"
                f" WHEN {inf_test} THEN {INF} WHEN v_{j} < {double(lo, dialect)} THEN {LOW}"
                f" WHEN v_{j} > {double(hi, dialect)} THEN {HIGH} ELSE {OK} END AS st_{j}"
            )
            # NULL stays NULL; NaN and ±inf clamp to a bound (both engines order NaN above all numbers):
            # those rows are errors and their code is never used, but the cast below must not fail
            l3.append(f"least(greatest(v_{j}, {double(lo, dialect)}), {double(hi, dialect)}) AS c_{j}")
            h = (hi - lo) / bins
            l5.append(
                f"least(greatest(CAST(floor((c_{j} - {double(lo, dialect)}) / {double(h, dialect)}) AS BIGINT), 0),"
                f" {bins - 1}) AS j0_{j}"
            )
            # edge k < bins is lower + k·h with the same two IEEE operations as NumericColumn.edges()
            # (numpy: separate multiply and add, no fused multiply-add; DuckDB's vector operators and
            # Java's strict floating point do the same); the last edge (upper) is never compared.
            lo_d, h_d = double(lo, dialect), double(h, dialect)
            down = f"CASE WHEN c_{j} < {lo_d} + CAST(j0_{j} AS DOUBLE) * {h_d} THEN 1 ELSE 0 END"
            up = (f"CASE WHEN j0_{j} < {bins - 1} AND c_{j} >= {lo_d} + CAST(j0_{j} + 1 AS DOUBLE) * {h_d}"
                  " THEN 1 ELSE 0 END")
            l6.append(
                f"CASE WHEN st_{j} = {MISSING} THEN {bins} WHEN st_{j} <= {HIGH} THEN j0_{j} - {down} + {up}"
                f" ELSE 0 END AS code_{j}"
            )
        else:
            ncat = len(col.categories)
            tx = cx.category_text(x, kind)
            l1.append(f"{tx} AS t_{j}")
            if dialect == "duckdb":
                l1.append(f"enum_code(TRY_CAST({tx} AS {enum_type_name(col)})) AS k_{j}")
            else:
                cats = cx.array([quote_str(c, dialect) for c in col.categories])
                l1.append(f"(nullif(array_position({cats}, {tx}), 0) - 1) AS k_{j}")
            blank = f"(t_{j} IS NULL OR {cx.full_match(f't_{j}', BLANK_RE)})"
            if any(not c.strip() for c in col.categories):  # a blank category: encode calls it empty first
                l2.append(f"{blank} AS e_{j}")
            else:  # a known category is never blank, so only unknown rows pay for the blank test
                l2.append(f"CASE WHEN k_{j} IS NOT NULL THEN false ELSE {blank} END AS e_{j}")
            empty = MISSING if col.missing else EMPTY_ERROR
            unknown = {"missing": UNKNOWN_MISSING, "drop": UNKNOWN_DROP, "error": UNKNOWN_ERROR}[col.on_unknown]
            l3.append(f"CASE WHEN e_{j} THEN {empty} WHEN k_{j} IS NULL THEN {unknown} ELSE {OK} END AS st_{j}")
            l6.append(
                f"CASE WHEN st_{j} = {MISSING} OR st_{j} = {UNKNOWN_MISSING} THEN {ncat}"
                f" WHEN st_{j} = {OK} THEN CAST(k_{j} AS BIGINT) ELSE 0 END AS code_{j}"
            )
    if measured:
        l1.append(cell_size_sql(measured, dialect))
    rn = "row_number() OVER () AS __r, " if row_numbers and dialect == "duckdb" else ""
    if row_numbers and dialect == "spark":
        rn = "row_number() OVER (ORDER BY monotonically_increasing_id()) AS __r, "
    q = f"SELECT {rn}{', '.join(l1)} FROM {source}"
    for level in (l2, l3, l4, l5, l6):
        if level:
            q = f"SELECT *, {', '.join(level)} FROM ({q}) AS s"
    return q


def count_sql(schema: Schema, types: dict[str, str], source: str, dialect: Dialect, *,
              odd_numbers: bool = True, measured: Sequence[str] = ()) -> tuple[str, int]:
    """GROUP BY query returning (cell, f0, f1, …, n); also the number of flag columns. With ``measured`` (text
    columns of the source, any of them outside the schema), also ``longest``: the longest of their cells in each
    group (:func:`cell_size_sql`)."""
    if dialect == "duckdb":
        return fast_count_sql(schema, types, source, odd_numbers=odd_numbers, measured=measured)
    st = strides(schema)
    cell = " + ".join(f"code_{j} * CAST({s} AS BIGINT)" for j, s in enumerate(st))
    n_cols = len(schema.columns)
    n_flags = (n_cols + COLUMNS_PER_FLAG - 1) // COLUMNS_PER_FLAG
    flags = []
    for k in range(n_flags):
        parts = [
            f"CAST(st_{j} AS BIGINT) * CAST({1 << (STATUS_BITS * (j - k * COLUMNS_PER_FLAG))} AS BIGINT)"
            for j in range(k * COLUMNS_PER_FLAG, min(n_cols, (k + 1) * COLUMNS_PER_FLAG))
        ]
        flags.append(" + ".join(parts) + f" AS f{k}")
    inner = staged_sql(schema, types, source, dialect, measured=measured)
    keys = ["cell"] + [f"f{k}" for k in range(n_flags)]
    size, longest = (", __len", ", max(__len) AS longest") if measured else ("", "")
    q = (
        f"SELECT {', '.join(keys)}, count(*) AS n{longest} FROM (SELECT {cell} AS cell, {', '.join(flags)}{size}"
        f" FROM ({inner}) AS b) AS c GROUP BY {', '.join(keys)}"
    )
    return q, n_flags


#: Categorical columns with at most this many categories are coded by a CASE of string comparisons
#: (exact, untrimmed equality, as the enum cast), wider ones by the enum type's hash lookup.
CASE_MAX_CATEGORIES = 16

#: Numeric columns with at most this many bins find their bin by comparing with every inner edge
#: (exact, branch-free); wider ones use the floor estimate with one exact correction each way.
EDGE_COMPARE_MAX_BINS = 24


def fast_count_sql(schema: Schema, types: dict[str, str], source: str, *, odd_numbers: bool = True,
                   measured: Sequence[str] = ()) -> tuple[str, int]:
    """DuckDB: the GROUP BY of :func:`fast_rows_sql` (same result as the staged query, one cheap pass); with
    ``measured`` (text columns of the source, any of them outside the schema), also ``longest``: the most bytes of
    a cell among them in each group (a cheap bound on the characters, :data:`dpsynth.io.MAX_CELL_CHARS`)."""
    inner, n_flags = fast_rows_sql(schema, types, source, odd_numbers=odd_numbers, measured=measured)
    keys = ["cell"] + [f"f{k}" for k in range(n_flags)]
    longest = ", max(__len) AS longest" if measured else ""
    return f"SELECT {', '.join(keys)}, count(*) AS n{longest} FROM ({inner}) AS c GROUP BY {', '.join(keys)}", n_flags


def fast_rows_sql(schema: Schema, types: dict[str, str], source: str, *, row_numbers: bool = False,
                  odd_numbers: bool = True, measured: Sequence[str] = ()) -> tuple[str, int]:
    """DuckDB: per row, ``cell`` and the packed status flags ``f0, f1, …`` — the staged query's values.

    ``odd_numbers=False`` is a promise that no text cell holds ``_`` or ``+`` (the caller scanned the
    file's bytes), so DuckDB's two extra number forms cannot occur and their per-row test is skipped.

    Most rows are in range and known, so a row whose every column passes a cheap test (a number
    within ``[lower, upper]`` that is not one of DuckDB's extra number forms; a known category) gets
    flag 0 at once, and only the other rows evaluate the full status chain (the ``CASE`` branch is
    evaluated on those rows alone). Cell codes need no status: a numeric bin is the number of
    inner edges ``≤ value`` (comparisons with the exact float64 edges, or floor + correction for wide
    columns), which also clamps out-of-range values into the end bins; NULL (empty, blank, missing)
    becomes the missing code, as does an unknown category. Rows in an error status get some code,
    but any error stops the release before a count is used; dropped rows are removed by their flag.
    """
    cx = _Ctx("duckdb")
    l1: list[str] = []
    l2: list[str] = []
    ok: list[str] = []
    status: list[str] = []
    codes: list[str] = []
    for j, col in enumerate(schema.columns):
        x = quote_ident(col.name, "duckdb")
        kind = type_class(types[col.name])
        blank = f"(t_{j} IS NULL OR {cx.full_match(f't_{j}', BLANK_RE)})"
        if isinstance(col, NumericColumn):
            lo, hi, bins = double(col.lower, "duckdb"), double(col.upper, "duckdb"), col.bins
            empty = MISSING if col.missing else EMPTY_ERROR
            tail = (f" WHEN isinf(v_{j}) THEN {INF} WHEN v_{j} < {lo} THEN {LOW} WHEN v_{j} > {hi} THEN {HIGH}"
                    f" ELSE {OK} END")
            if kind == "number":
                # NaN in a typed column is pandas' missing value: NULL here (DuckDB compares NaN equal to NaN)
                l1.append(f"nullif(CAST({x} AS DOUBLE), CAST('NaN' AS DOUBLE)) AS v_{j}")
                ok.append(f"v_{j} >= {lo} AND v_{j} <= {hi}")  # false for NULL and ±inf
                status.append(f"CASE WHEN v_{j} IS NULL THEN {empty}{tail}")
            else:
                # DuckDB's cast parses what pandas parses (padding included), plus '_' digit separators
                # and a leading doubled sign ('+-1'), refused here ('-+' it refuses itself); tests fuzz this.
                l1.append(f"{cx.text(x)} AS t_{j}")
                l1.append(f"TRY_CAST({cx.text(x)} AS DOUBLE) AS v_{j}")
                odd = f"(contains({cx.text(x)}, '_') OR contains({cx.text(x)}, '+-'))" if odd_numbers else "false"
                l1.append(f"{odd} AS q_{j}")
                ok.append(f"v_{j} >= {lo} AND v_{j} <= {hi} AND NOT q_{j}")
                status.append(f"CASE WHEN v_{j} IS NULL AND {blank} THEN {empty}"
                              f" WHEN q_{j} OR v_{j} IS NULL OR isnan(v_{j}) THEN {BAD}{tail}")
            if bins <= EDGE_COMPARE_MAX_BINS:
                inner = [f"CAST(v_{j} >= {double(e, 'duckdb')} AS INTEGER)" for e in col.edges()[1:-1]]
                codes.append(f"coalesce({' + '.join(inner)}, {bins})" if inner else f"CASE WHEN v_{j} IS NULL THEN 1 ELSE 0 END")
            else:
                h = (col.upper - col.lower) / bins
                h_d = double(h, "duckdb")
                l2.append(f"least(greatest(v_{j}, {lo}), {hi}) AS c_{j}")
                l2.append(f"least(greatest(CAST(floor((least(greatest(v_{j}, {lo}), {hi}) - {lo}) / {h_d}) AS BIGINT), 0),"
                          f" {bins - 1}) AS j0_{j}")
                # edge k < bins is lower + k·h with the same two IEEE operations as NumericColumn.edges()
                down = f"CAST(c_{j} < {lo} + CAST(j0_{j} AS DOUBLE) * {h_d} AS INTEGER)"
                up = f"CAST(j0_{j} < {bins - 1} AND c_{j} >= {lo} + CAST(j0_{j} + 1 AS DOUBLE) * {h_d} AS INTEGER)"
                # least/greatest skip NULL in DuckDB, so c_j is never NULL: test v_j itself
                codes.append(f"CASE WHEN v_{j} IS NULL THEN {bins} ELSE j0_{j} - {down} + {up} END")
        else:
            ncat = len(col.categories)
            tx = cx.category_text(x, kind)
            l1.append(f"{tx} AS t_{j}")
            if ncat <= CASE_MAX_CATEGORIES:  # a few string comparisons beat the enum's hash lookup (~0.25 s per 10M CSV rows)
                whens = " ".join(f"WHEN {quote_str(c, 'duckdb')} THEN {i}" for i, c in enumerate(col.categories))
                l1.append(f"(CASE {tx} {whens} END) AS k_{j}")
            else:
                l1.append(f"enum_code(TRY_CAST({tx} AS {enum_type_name(col)})) AS k_{j}")
            empty = MISSING if col.missing else EMPTY_ERROR
            unknown = {"missing": UNKNOWN_MISSING, "drop": UNKNOWN_DROP, "error": UNKNOWN_ERROR}[col.on_unknown]
            if any(not c.strip() for c in col.categories):  # a blank category: encode calls it empty first
                ok.append("false")
                status.append(f"CASE WHEN {blank} THEN {empty} WHEN k_{j} IS NULL THEN {unknown} ELSE {OK} END")
                codes.append(f"CASE WHEN {blank} THEN {ncat} ELSE coalesce(CAST(k_{j} AS INTEGER), {ncat}) END")
            else:  # a known category is never blank
                ok.append(f"k_{j} IS NOT NULL")
                status.append(f"CASE WHEN k_{j} IS NOT NULL THEN {OK} WHEN {blank} THEN {empty} ELSE {unknown} END")
                codes.append(f"coalesce(CAST(k_{j} AS INTEGER), {ncat})")
    st = strides(schema)
    cell = " + ".join(f"CAST({c} AS BIGINT) * CAST({s} AS BIGINT)" for c, s in zip(codes, st, strict=True))
    n_cols = len(schema.columns)
    n_flags = (n_cols + COLUMNS_PER_FLAG - 1) // COLUMNS_PER_FLAG
    flags = []
    for k in range(n_flags):
        js = range(k * COLUMNS_PER_FLAG, min(n_cols, (k + 1) * COLUMNS_PER_FLAG))
        packed = " + ".join(
            f"CAST({status[j]} AS BIGINT) * CAST({1 << (STATUS_BITS * (j - k * COLUMNS_PER_FLAG))} AS BIGINT)" for j in js
        )
        all_ok = " AND ".join(f"({ok[j]})" for j in js)
        flags.append(f"CASE WHEN {all_ok} THEN CAST(0 AS BIGINT) ELSE {packed} END AS f{k}")
    rn = "row_number() OVER () AS __r, " if row_numbers else ""
    if measured:
        l1.append(cell_size_sql(measured, "duckdb"))
    q = f"SELECT {rn}{', '.join(l1)} FROM {source}"
    if l2:
        q = f"SELECT *, {', '.join(l2)} FROM ({q}) AS s"
    size = ", __len" if measured else ""
    return f"SELECT {'__r, ' if row_numbers else ''}{cell} AS cell, {', '.join(flags)}{size} FROM ({q}) AS b", n_flags


def cell_size_sql(columns: Sequence[str], dialect: Dialect) -> str:
    """``__len``: the longest cell of ``columns`` in a row, in bytes on DuckDB (strlen: cheap, and never fewer than
    the characters) and in characters on Spark (0 for a row of missing cells)."""
    size = "strlen" if dialect == "duckdb" else "length"
    return f"greatest({', '.join(f'coalesce({size}({quote_ident(c, dialect)}), 0)' for c in columns)}, 0) AS __len"


def longest_cell_sql(source: str, column: str, dialect: Dialect = "duckdb") -> str:
    """The characters of ``column``'s longest cell and its row (1-based, the first of equals)."""
    c = quote_ident(column, dialect)
    order = "" if dialect == "duckdb" else "ORDER BY monotonically_increasing_id()"
    return (f"SELECT n, r FROM (SELECT length({c}) AS n, row_number() OVER ({order}) AS r FROM {source}) AS s"
            " ORDER BY n DESC NULLS LAST, r LIMIT 1")


def refuse_long_cells(run: Callable[[str], tuple[Any, ...] | None], source: str, dialect: Dialect, label: str,
                      columns: Sequence[str], limit: int) -> None:
    """:func:`dpsynth.io.read_table`'s refusal of a cell longer than ``limit`` characters: the first such column in
    the file's order, at the row of its longest cell (``run`` executes a query and returns its first row)."""
    for c in columns:
        found = run(longest_cell_sql(source, c, dialect))
        if found is not None and found[0] is not None and found[0] > limit:
            raise InputError(f"{label}: a cell of column {c!r} (row {found[1]}) is longer than {limit:,} characters.")


def error_rows_sql(schema: Schema, types: dict[str, str], source: str, dialect: Dialect, j: int, status: int,
                   limit: int = 5) -> str:
    """First rows (1-based row number, raw text) of column j in the given status."""
    inner = staged_sql(schema.select([schema.columns[j].name]), {schema.columns[j].name: types[schema.columns[j].name]},
                       source, dialect, row_numbers=True)
    return f"SELECT __r, raw_0 FROM ({inner}) AS s WHERE st_0 = {status} ORDER BY __r LIMIT {limit}"


def error_values_sql(schema: Schema, types: dict[str, str], source: str, dialect: Dialect, j: int, status: int,
                     limit: int = 5) -> str:
    """First distinct raw values (in order of first appearance) of column j in the given status."""
    inner = staged_sql(schema.select([schema.columns[j].name]), {schema.columns[j].name: types[schema.columns[j].name]},
                       source, dialect, row_numbers=True)
    return (f"SELECT raw_0, min(__r) AS m FROM ({inner}) AS s WHERE st_0 = {status} GROUP BY raw_0"
            f" ORDER BY m LIMIT {limit}")


def error_message(col: NumericColumn | CategoricalColumn, status: int, n: int, rows: list[tuple[int, str]],
                  values: list[str]) -> str:
    """The same sentence :func:`dpsynth.binning.encode` raises for this kind of error."""
    row_list = ", ".join(str(int(r)) for r, _ in rows)
    name = col.name
    if status == BAD:
        shown = ", ".join(f"row {int(r)}: {str(v)[:40]!r}" for r, v in rows)
        return f"Column {name!r} is numeric in the schema, but {n:,} value(s) are not numbers ({shown})."
    if status == INF:
        return f"Column {name!r} has infinite value(s) at row(s) {row_list}; use finite numbers."
    if status == EMPTY_ERROR:
        fix = "set missing: true or fill them." if isinstance(col, NumericColumn) else "set missing: true."
        return (f"Column {name!r} has {n:,} empty value(s) (first at row {row_list}),"
                f" but the schema does not allow missing values; {fix}")
    shown = ", ".join(repr(str(v)[:40]) for v in values)
    return (
        f"Column {name!r} has {n:,} value(s) not in its category list"
        f" (first at row {row_list}: {shown}). Add them to the schema, or choose to map"
        " unknown values to missing or to drop those rows."
    )


def first_error(col: NumericColumn | CategoricalColumn, errors: dict[int, int]) -> int:
    """Which error ``encode`` would raise first for this column."""
    order = (BAD, INF, EMPTY_ERROR) if isinstance(col, NumericColumn) else (EMPTY_ERROR, UNKNOWN_ERROR)
    for s in order:
        if s in errors:
            return s
    raise AssertionError("no error status")  # pragma: no cover


def bool_error(name: str) -> str:
    """``encode``'s message for a true/false column declared numeric."""
    return f"Column {name!r} holds true/false values; declare it categorical."


def decimal_comma_columns(names: list[str], dialect: Dialect) -> list[str]:
    """SELECT expressions that read every column of a file not delimited by commas as
    :func:`dpsynth.io.read_table` does: a cell with a decimal comma, or dots grouping thousands, becomes its
    number ("30,5" → "30.5", "1.030,5" → "1030.5"), cell by cell; every other cell is kept as it is."""
    from dpsynth.io import DECIMAL_COMMA, GROUPED_DECIMAL_COMMA

    plain = quote_str(f"^(?:{DECIMAL_COMMA})$", dialect)
    grouped = quote_str(f"^(?:{GROUPED_DECIMAL_COMMA})$", dialect)
    match = "regexp_matches" if dialect == "duckdb" else "rlike"
    out = []
    for name in names:
        c = quote_ident(name, dialect)
        out.append(f"CASE WHEN {match}({c}, {plain}) THEN replace({c}, ',', '.')"
                   f" WHEN {match}({c}, {grouped}) THEN replace(replace({c}, '.', ''), ',', '.')"
                   f" ELSE {c} END AS {c}")
    return out

