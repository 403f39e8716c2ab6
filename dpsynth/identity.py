"""The identity of a table: the key of its privacy budget in the ledger, the same for one table in any form.

:func:`table_identity` gives ``"table:"`` + 64 hex digits. It is a function of the table's content
only, so the same table keeps one budget whichever entry point (Python, command line, dashboard
upload or server file), engine (pandas, DuckDB, Spark) or storage (CSV, Parquet, Excel) it comes
through. It does not change when:

* rows are re-ordered, or columns are re-ordered;
* line endings change (CRLF, LF, CR), the file gains or loses a trailing newline or blank lines,
  a cell is quoted or not, a UTF-8 byte-order mark is added;
* a cell gains or loses surrounding whitespace; an empty cell, a missing value and ``NaN`` (a
  float NaN or the text ``nan`` in any case) are alike;
* a number is written differently with the same value: ``1``, ``1.0``, ``+1``, ``1e0`` and a
  Parquet int64 ``1`` or double ``1.0`` are one value (numbers are compared as IEEE doubles, so
  integers beyond 2^53 that differ only past double precision count as equal — the two tables
  then share a budget, the safe direction);
* a date is stored as text (``2020-01-31``, ``2020-01-31 00:00:00``, ``2020-01-31T00:00:00``)
  or as a Parquet/Excel date or timestamp (an instant with a UTC offset is compared in UTC,
  one without reads as UTC); ``TRUE``/``True``/``true`` are one value.

It changes when a value changes, a row is added or removed (duplicates count), or a column is
added, removed or renamed. Text is compared exactly otherwise (case, inner spaces, a different
date format such as ``31/01/2020``).

How: every cell is cast to text and canonicalised (:func:`_canon_sql`; natively typed integer,
double and boolean columns take a shortcut with the same result); a row is the MD5 of its
canonical cells in column-name order, joined by U+001F with U+001E for a missing cell; the
table is SHA-256 of a version tag, the sorted column names, the row count and the two exact
integer sums of the rows' 128-bit hashes (upper and lower 64-bit halves). A sum does not depend
on row order and counts duplicate rows.

Collisions: two different tables share an identity with probability about 2^-128 for data
nobody chose to collide, and also when their text differs only by where the control characters
U+001E/U+001F sit. Additive multiset hashes can be collided on purpose (Wagner's generalised
birthday attack); that is acceptable here: the identity identifies a table for book-keeping and
is not a security boundary (anyone who wants a fresh budget can edit one cell). Two tables
sharing an identity share one budget, which only ever over-counts their privacy loss; the
opposite fault, one table under two identities, is what the canonical form rules out.

The whole computation is one streaming DuckDB query, run on the file itself (CSV, Parquet, a
directory of Parquet files: out of core) or on a DataFrame, so every path gives the same answer
(:func:`dpsynth.io.read_table` is used for Excel and UTF-16 text, which DuckDB does not read).
A golden test pins the identity of a fixed table: a DuckDB upgrade that changed its number or
date text would fail it rather than silently open fresh budgets.

Ledgers written before this identity existed keyed files by ``sha256:`` + the file's bytes and
DataFrames by a content fingerprint; those entries stay as they are (they are not migrated and
are not matched by the new ids).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from dpsynth.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

PREFIX = "table:"
_VERSION = b"dpsynth table identity v1\x00"
_WHITESPACE = " \t\n\x0b\x0c"  # CR is turned into LF first
_EXCEL = {".xlsx", ".xlsm"}


def _lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def canonical_name(name: object) -> str:
    """A column name as the identity reads it: text, byte-order mark and surrounding whitespace removed."""
    return str(name).replace("\ufeff", "").strip()


def _text_sql(x: str) -> str:
    """Cell ``x`` as text with CR and CRLF turned into LF and surrounding whitespace removed.

    The guard (a CR inside, or a first or last character at or below space) skips the costly
    trim for the common cell; it never changes the result.
    """
    v = f"CAST({x} AS VARCHAR)"
    return (f"CASE WHEN contains({v}, chr(13)) OR ascii({v}) <= 32 OR ascii(right({v}, 1)) <= 32"
            f" THEN trim(replace(replace({v}, chr(13) || chr(10), chr(10)), chr(13), chr(10)), {_lit(_WHITESPACE)})"
            f" ELSE {v} END")


def _number_sql(t: str) -> str:
    """The double that text ``t`` spells, if it starts with a digit, sign or point (else NULL).

    The guard is part of the definition (``inf`` is text, ``-inf`` a number that is not finite,
    so text again) and skips the failing parse of ordinary words.
    """
    return f"CASE WHEN ascii({t}) BETWEEN 43 AND 57 THEN TRY_CAST({t} AS DOUBLE) END"


def _canon_sql(t: str, n: str) -> str:
    """The canonical cell from its text ``t`` and number ``n`` (NULL: a missing value).

    Missing: NULL, empty, or NaN (``nan`` in any case, signed or not). A finite number: integral
    values below 10^15 as integer text (``-0`` as ``0``), others as DuckDB's shortest round-trip
    text of the double. Text starting as an ISO date (``YYYY-MM-DD``, a time and an offset may
    follow) that DuckDB reads as a timestamp: that instant in UTC (``2020-01-31 00:00:00+00``; no
    offset reads as UTC). ``true``/``false`` in any case: lower case. Any other text: as it is.
    """
    ts = f"TRY_CAST({t} AS TIMESTAMPTZ)"  # an offset is honoured; no offset reads as UTC
    return (
        f"CASE WHEN {t} IS NULL OR {t} = '' THEN NULL"
        f" WHEN isfinite({n}) THEN {_number_text_sql(n)}"
        f" WHEN {t} LIKE '____-__-__%' THEN coalesce(CAST({ts} AS VARCHAR), {t})"
        f" WHEN (strlen({t}) = 4 OR strlen({t}) = 5) AND (lower({t}) = 'true' OR lower({t}) = 'false') THEN lower({t})"
        f" WHEN (strlen({t}) = 3 OR strlen({t}) = 4) AND lower(ltrim({t}, '+-')) = 'nan' THEN NULL"
        f" ELSE {t} END"
    )


_INTEGER_TYPES = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"}


def _number_text_sql(n: str) -> str:
    """The canonical text of a finite double ``n``: integral values below 10^15 as integer text
    (``-0`` as ``0``), others as DuckDB's shortest round-trip text of the double."""
    return f"CASE WHEN {n} = trunc({n}) AND abs({n}) < 1e15 THEN CAST(CAST({n} AS BIGINT) AS VARCHAR) ELSE CAST({n} AS VARCHAR) END"


def _typed_canon_sql(x: str, kind: str) -> str | None:
    """A shortcut for a natively typed column giving exactly what the text path gives for the
    column's text (integers and doubles round-trip through DuckDB's text; NaN is missing there
    too; infinities and booleans are text the text path keeps); ``None`` for other types (they take the text path)."""
    if kind in _INTEGER_TYPES:
        return f"CASE WHEN {x} IS NULL THEN NULL ELSE {_number_text_sql(f'CAST({x} AS DOUBLE)')} END"
    if kind in ("DOUBLE", "FLOAT8"):
        return (f"CASE WHEN {x} IS NULL OR isnan({x}) THEN NULL WHEN isfinite({x}) THEN {_number_text_sql(x)}"
                f" ELSE CAST({x} AS VARCHAR) END")
    if kind == "BOOLEAN":
        return f"CASE WHEN {x} IS NULL THEN NULL WHEN {x} THEN 'true' ELSE 'false' END"
    return None


WIDE = 48  # from this many columns, one list lambda instead of per-column SQL (DuckDB plans that slowly)


def identity_sql(columns: list[tuple[str, str]], source: str, *, wide: int = WIDE) -> tuple[str, list[str]]:
    """The one streaming query behind :func:`table_identity`: ``count, upper sum, lower sum`` over ``source``.

    ``columns`` are the source's ``(name, type)`` pairs as DuckDB describes them. Returns the
    query and the canonical column names in the order the row hash reads the cells. Each stage
    is a projection, so DuckDB computes a cell's text and number once. With ``wide`` columns or
    more, the same canonical form is applied by list lambdas over the row's cells as text (the
    typed shortcuts give what the text path gives, so the identity is the same either way):
    planning time then no longer grows with the width, at about twice the work per cell.
    """
    names = [canonical_name(c) for c, _ in columns]
    order = sorted(range(len(columns)), key=lambda i: (names[i], columns[i][0]))
    if len(order) >= wide:
        return _wide_identity_sql([columns[i][0] for i in order], source), [names[i] for i in order]
    texts, parsed, canon = [], [], []
    for k, i in enumerate(order):
        x = _ident(columns[i][0])
        typed = _typed_canon_sql(f"t{k}", columns[i][1].strip().upper())
        if typed is None:
            texts.append(f"{_text_sql(x)} AS t{k}")
            parsed.append(f"t{k}, {_number_sql(f't{k}')} AS n{k}")
            canon.append(f"{_canon_sql(f't{k}', f'n{k}')} AS c{k}")
        else:
            texts.append(f"{x} AS t{k}")
            parsed.append(f"t{k}")
            canon.append(f"{typed} AS c{k}")
    # cells joined by U+001F, a missing cell written as U+001E (see the module docstring)
    row = f"concat_ws(chr(31), {', '.join(f'coalesce(c{k}, chr(30))' for k in range(len(order)))})"
    query = (
        f"WITH q1 AS (SELECT {', '.join(texts)} FROM {source}),"
        f" q2 AS (SELECT {', '.join(parsed)} FROM q1),"
        f" q3 AS (SELECT {', '.join(canon)} FROM q2),"
        f" q4 AS (SELECT md5_number({row}) AS h FROM q3)"
        " SELECT count(*), coalesce(sum(CAST(h >> 64 AS UBIGINT)), 0),"
        " coalesce(sum(CAST(h & 18446744073709551615 AS UBIGINT)), 0) FROM q4"
    )
    return query, [names[i] for i in order]


def _wide_identity_sql(columns: list[str], source: str) -> str:
    cells = ", ".join(f"CAST({_ident(c)} AS VARCHAR)" for c in columns)
    return (
        f"WITH q1 AS (SELECT list_transform([{cells}], lambda x: {_text_sql('x')}) AS l FROM {source}),"
        f" q2 AS (SELECT list_transform(l, lambda x: {{'t': x, 'n': {_number_sql('x')}}}) AS l FROM q1),"
        " q3 AS (SELECT list_transform(l, lambda s: coalesce("
        f"{_canon_sql('struct_extract(s, ' + _lit('t') + ')', 'struct_extract(s, ' + _lit('n') + ')')}, chr(30))) AS l"
        " FROM q2),"
        " q4 AS (SELECT md5_number(array_to_string(l, chr(31))) AS h FROM q3)"
        " SELECT count(*), coalesce(sum(CAST(h >> 64 AS UBIGINT)), 0),"
        " coalesce(sum(CAST(h & 18446744073709551615 AS UBIGINT)), 0) FROM q4"
    )


def _digest(names: list[str], rows: int, upper: int, lower: int) -> str:
    h = hashlib.sha256(_VERSION)
    h.update(json.dumps([names, int(rows), str(int(upper)), str(int(lower))], ensure_ascii=False).encode("utf-8"))
    return PREFIX + h.hexdigest()


def table_identity(source: str | Path | pd.DataFrame, *, name: str | None = None, threads: int | None = None) -> str:
    """The ledger identity of a table (see the module docstring for what it keeps and what it tells apart).

    ``source``: a CSV, Parquet or Excel file, a directory of Parquet files, uploaded bytes
    (``name`` gives the format, as in :func:`dpsynth.io.read_table`) or a pandas DataFrame.
    Files are read by DuckDB out of core, as the DuckDB engine reads them (CSV cells as text,
    the same delimiter detection and quoting); ``threads`` caps DuckDB's threads.
    """
    import duckdb
    import pandas as pd

    from dpsynth.engines.duckdb_engine import DuckDBEngine, source_sql
    from dpsynth.io import read_table

    if isinstance(source, bytes | bytearray | memoryview):
        return table_identity(read_table(bytes(source), name), threads=threads)
    if isinstance(source, pd.DataFrame):
        frame, src, label = _frame(source), "__dpsynth_identity", "the table"
    else:
        p = Path(source)
        label = p.name
        if "*" not in p.name and not p.exists():
            raise InputError(f"File {str(source)!r} does not exist.")
        if p.is_file() and (p.suffix.lower() in _EXCEL or _utf16(p)):
            return table_identity(read_table(p), threads=threads)
        frame, src = None, source_sql(p)
    con = DuckDBEngine(threads=threads).connect()  # the engine's memory cap under an address-space limit
    try:
        try:
            con.execute("SET TimeZone = 'UTC'")  # time-zone-aware timestamps read the same on every machine
        except duckdb.Error:
            pass  # without the ICU extension there is no session time zone to vary
        if frame is not None:
            con.register(src, frame)
        try:
            columns = [(row[0], str(row[1])) for row in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]
            if not columns:
                raise InputError(f"{label} has no columns.")
            query, names = identity_sql(columns, src)
            rows, upper, lower = con.execute(query).fetchone()
        except duckdb.Error as exc:
            first = next((ln for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
            raise InputError(f"{label} could not be read: {first}") from None
    finally:
        con.close()
    return _digest(names, rows, upper, lower)


def _frame(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` as DuckDB can scan it: text column names (refusing two that collide); object columns
    of mixed Python values turned into text (DuckDB would guess one type from a sample)."""
    import pandas as pd

    cols = [str(c) for c in df.columns]
    if not cols:
        raise InputError("The table has no columns.")
    if len(set(cols)) != len(cols):
        dup = next(c for c in cols if cols.count(c) > 1)
        raise InputError(f"The table has two columns named {dup!r}.")
    out = df.reset_index(drop=True)
    out.columns = cols
    mixed = [c for c in cols if out[c].dtype == object and pd.api.types.infer_dtype(out[c], skipna=True) not in ("string", "empty")]
    if mixed:
        out = out.assign(**{c: out[c].astype("string") for c in mixed})
    return out


def _utf16(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise InputError(f"Cannot read {path.name}: {exc.strerror}.") from None
    return head[:2] in (b"\xff\xfe", b"\xfe\xff")
