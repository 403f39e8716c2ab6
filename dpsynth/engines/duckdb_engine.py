"""DuckDB engine: count a CSV/Parquet file (or a DataFrame) out of core, without loading it into pandas.

The binning runs as SQL (:mod:`dpsynth.engines.sql`) inside one ``GROUP BY`` over the file;
DuckDB streams the file in parallel and spills to ``temp_directory`` if the groups do not fit
``memory_limit``. Only the groups (occupied cells × status flags) come back to Python.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from dpsynth.binning import missing_columns_error
from dpsynth.engines import (
    CellCounts,
    Engine,
    Progress,
    address_space_limit,
    check_indexable,
)
from dpsynth.engines import sql as S
from dpsynth.engines.sql import column_errors, report_from_statuses
from dpsynth.errors import InputError
from dpsynth.histogram import MAX_DENSE_CELLS
from dpsynth.io import MAX_CELL_CHARS, PARQUET_SUFFIXES
from dpsynth.schema import Schema

_FLOAT_TYPES = {"DOUBLE", "FLOAT", "REAL", "FLOAT4", "FLOAT8", "DOUBLE PRECISION"}


def source_sql(path: str | Path) -> str:
    """The DuckDB table function reading a file (CSV cells as text, as :func:`dpsynth.io.read_table`).

    CSV: the delimiter is sniffed from the header line as ``read_table`` does; quoting is
    RFC 4180 (``"`` escaped by doubling); no comment lines, no skipped rows, ragged rows are
    errors. Parquet: a file, a directory of ``*.parquet`` files, or a glob.
    """
    from dpsynth.io import check_parquet_names

    p = Path(path)
    if p.is_dir():
        check_parquet_names(p)
        return f"read_parquet({S.quote_str(str(p / '*.parquet'), 'duckdb')})"
    lit = S.quote_str(str(p), "duckdb")
    if p.suffix.lower() in PARQUET_SUFFIXES:
        check_parquet_names(p)
        return f"read_parquet({lit})"
    sep, header, encoding = csv_layout(p)
    # the names as the header spells them (DuckDB would trim their spaces), so both engines see one table
    names = ", ".join(S.quote_str(h, "duckdb") for h in header)
    read = (
        f"read_csv({lit}, header = true, all_varchar = true, delim = {S.quote_str(sep, 'duckdb')}, quote = '\"',"
        f" escape = '\"', comment = '', skip = 0, strict_mode = true, null_padding = false, names = [{names}],"
        f" encoding = '{encoding}')"
    )
    if sep == ",":
        return read
    return f"(SELECT {', '.join(S.decimal_comma_columns(header, 'duckdb'))} FROM {read})"


def csv_layout(path: Path) -> tuple[str, list[str], str]:
    """The delimiter, column names and text encoding as :func:`dpsynth.io.read_table` reads and checks them."""
    from dpsynth.io import csv_header, text_encoding

    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 22)
    except OSError as exc:
        raise InputError(f"Cannot read {path.name}: {exc.strerror}.") from None
    return (*csv_header(head, path.name), text_encoding(head[:4], path.name))


def check_csv_bytes(path: Path, decode: bool = False) -> None:
    """:func:`dpsynth.io.read_table`'s refusals of a CSV file's bytes, streamed: a NUL byte (DuckDB reads one
    inside a value as text, so the same file could be released here and refused in memory), quoting that readers
    take apart differently (:func:`dpsynth.io.check_quoting`: DuckDB read ``5, "a"`` and ``5,"a" `` as 'a', pyarrow
    refused the second and read the text ' "a"' from the first) and, with ``decode``, text that is not UTF-8 (which
    DuckDB refuses too, less clearly: checked after it fails)."""
    from dpsynth.io import CsvScan, check_scanned, check_utf8_blocks

    sep, header, encoding = csv_layout(path)
    scan = CsvScan(sep, len(header))
    try:
        if encoding == "utf-16":  # DuckDB decodes it (encoding = 'utf-16'), as read_table does
            with open(path, encoding="utf-16", newline="") as fh:
                for chunk in iter(lambda: fh.read(1 << 22), ""):
                    scan.feed(chunk.encode("utf-8"))
                scan.finish()
        else:
            with open(path, "rb") as fh:
                start = 3 if fh.read(3) == b"\xef\xbb\xbf" else 0
                fh.seek(start)
                for block in iter(lambda: fh.read(1 << 24), b""):
                    scan.feed(block)  # memchr-like passes; a NUL's line and the UTF-8 check only when needed
                scan.finish()
                if decode or scan.nul:
                    fh.seek(start)
                    check_utf8_blocks(iter(lambda: fh.read(1 << 24), b""), path.name, decode=decode)
        check_scanned(scan, path.name, lambda: open(path, encoding="utf-16" if encoding == "utf-16" else "utf-8-sig",
                                                     newline=""))
    except UnicodeDecodeError:
        return  # not UTF-8: refused with its own message by the caller's decoding check
    except OSError as exc:
        raise InputError(f"Cannot read {path.name}: {exc.strerror}.") from None


class DuckDBEngine(Engine):
    """Counting inside an embedded DuckDB (one connection per call).

    ``memory_limit`` (e.g. ``"1GB"``) and ``threads`` are passed to DuckDB; ``temp_directory``
    is where it spills. Reads ``str``/``Path`` sources (CSV, Parquet, a directory or glob of
    Parquet files), pandas DataFrames and Arrow tables.
    """

    name = "duckdb"

    def __init__(self, *, memory_limit: str | None = None, threads: int | None = None,
                 temp_directory: str | None = None) -> None:
        self.memory_limit = memory_limit
        self.threads = threads
        self.temp_directory = temp_directory

    def connect(self) -> Any:
        """A fresh DuckDB connection with this engine's settings."""
        import duckdb

        config: dict[str, Any] = {}
        memory_limit = self.memory_limit or _limit_from_rlimit()
        if memory_limit:
            config["memory_limit"] = memory_limit
        if self.threads:
            config["threads"] = int(self.threads)
        if self.temp_directory:
            config["temp_directory"] = self.temp_directory
        con = duckdb.connect(config=config)
        # an instant's text is in the session's time zone, the machine's by default: one file would be counted
        # differently on two machines (binning.cell_text writes instants in UTC)
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET enable_progress_bar = true")
        con.execute("SET enable_progress_bar_print = false")
        return con

    def count(
        self, source: Any, schema: Schema, *, max_dense_cells: int = MAX_DENSE_CELLS,
        progress: Progress | None = None,
    ) -> CellCounts:
        """Exact counts of ``source`` in the cells of ``schema`` (see :mod:`dpsynth.engines`)."""
        import duckdb

        check_indexable(schema)
        con = self.connect()
        try:
            if isinstance(source, str | Path):
                p = Path(source)
                if "*" not in p.name and not p.exists():
                    raise InputError(f"File {str(source)!r} does not exist.")
                src = source_sql(source)
                label = p.name
                if p.is_file() and p.suffix.lower() not in PARQUET_SUFFIXES:
                    check_csv_bytes(p)
            else:
                con.register("__dpsynth_src", source)
                src, label = "__dpsynth_src", "the table"
            try:
                described = con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()
            except duckdb.Error as exc:
                explain_csv_failure(source)
                raise InputError(f"{label} could not be read: {_first_line(exc)}") from None
            types = {row[0]: str(row[1]) for row in described}
            _check_columns(schema, types)
            if any(types[c.name].strip().upper() in _FLOAT_TYPES for c in schema.columns):
                # Parquet min/max statistics leave NaN out, and DuckDB's statistics propagation then folds
                # isnan(x) to false: a NaN would be counted as a number instead of refused (or, declared
                # categorical, as the category 'nan' instead of a missing cell)
                con.execute("SET disabled_optimizers = 'statistics_propagation'")
            for stmt in S.enum_ddl(schema):
                con.execute(stmt)
            odd = not (isinstance(source, str | Path) and _plain_number_bytes(Path(source)))
            # every text column of a file, as read_table measures them all (a schema may leave some out)
            measured = [c for c, t in types.items() if t.strip().upper() == "VARCHAR"] if isinstance(source, str | Path) else []
            query, n_flags = S.count_sql(schema, types, src, "duckdb", odd_numbers=odd, measured=measured)
            try:
                res = _run_with_progress(con, query, progress)
            except duckdb.Error as exc:
                explain_csv_failure(source)
                raise InputError(f"{label} could not be read: {_first_line(exc)}") from None
            cells = np.asarray(res["cell"], dtype=np.int64)
            counts = np.asarray(res["n"], dtype=np.int64)
            if isinstance(source, str | Path) and not counts.any():  # as dpsynth.io.read_table refuses it
                raise InputError(f"{label} has a header but no data rows.")
            if measured and int(np.max(res["longest"], initial=0)) > MAX_CELL_CHARS:  # bytes bound the characters
                S.refuse_long_cells(lambda q: con.execute(q).fetchone(), src, "duckdb", label, measured, MAX_CELL_CHARS)
            flags = [np.asarray(res[f"f{k}"], dtype=np.int64) for k in range(n_flags)]
            errors = column_errors(schema, flags, counts)
            if errors:
                j = min(errors)
                col = schema.columns[j]
                status = S.first_error(col, errors[j])
                rows = con.execute(S.error_rows_sql(schema, types, src, "duckdb", j, status)).fetchall()
                values = []
                if status == S.UNKNOWN_ERROR:
                    values = [r[0] for r in con.execute(S.error_values_sql(schema, types, src, "duckdb", j, status)).fetchall()]
                raise InputError(S.error_message(col, status, errors[j][status], rows, values))
            report, dropped = report_from_statuses(schema, flags, counts)
            keep = ~dropped
            return CellCounts.from_cell_index(cells[keep], schema, report, weights=counts[keep],
                                              max_dense_cells=max_dense_cells)
        finally:
            con.close()


def explain_csv_failure(source: Any) -> None:
    """After DuckDB failed on a CSV file: read_table's own message where it has one (the encoding, a row
    whose number of fields is not the header's)."""
    if not (isinstance(source, str | Path) and Path(source).is_file()
            and Path(source).suffix.lower() not in PARQUET_SUFFIXES):
        return
    from dpsynth.io import explain_fields

    path = Path(source)
    check_csv_bytes(path, decode=True)
    sep, header, encoding = csv_layout(path)
    try:
        with open(path, encoding="utf-16" if encoding == "utf-16" else "utf-8-sig", newline="") as fh:
            explain_fields(fh, sep, len(header), path.name)
    except (UnicodeError, OSError):
        return  # DuckDB's own message stands


def _plain_number_bytes(path: Path) -> bool:
    """True if ``path`` is one CSV file without a ``_`` or ``+`` byte (a memchr pass, ~0.1 s per GB).

    Then no cell can be one of the two number forms DuckDB parses and pandas refuses
    (``1_000``, ``+-1``), and the count skips that per-row test. Parquet, directories and globs: False.
    """
    if path.suffix.lower() in PARQUET_SUFFIXES or not path.is_file():
        return False
    try:
        with open(path, "rb") as fh:
            while block := fh.read(1 << 24):
                if b"_" in block or b"+" in block:
                    return False
    except OSError:
        return False
    return True


def _limit_from_rlimit() -> str | None:
    """Under an address-space limit (ulimit -v, prlimit), let DuckDB use a third of it (it spills the rest)."""
    soft = address_space_limit()
    return None if soft is None else f"{max(64, soft // 3 // 2**20)}MB"


def _check_columns(schema: Schema, types: dict[str, str]) -> None:
    missing = [c.name for c in schema.columns if c.name not in types]
    if missing:
        raise InputError(missing_columns_error(missing, types))
    for c in schema.columns:
        if c.type == "numeric" and S.type_class(types[c.name]) == "bool":
            raise InputError(S.bool_error(c.name))


def _run_with_progress(con: Any, query: str, progress: Progress | None) -> dict[str, np.ndarray]:
    """Run the query; while it runs, report DuckDB's own progress estimate to ``progress``."""
    if progress is None:
        return con.execute(query).fetchnumpy()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["res"] = con.execute(query).fetchnumpy()
        except BaseException as exc:  # re-raised in the caller's thread
            box["exc"] = exc

    t = threading.Thread(target=work, daemon=True)
    t.start()
    while t.is_alive():
        t.join(0.25)
        try:
            pct = float(con.query_progress())
        except Exception:  # progress is best-effort; never fail a count over it
            pct = -1.0
        if pct >= 0:
            progress(min(pct, 100.0) / 100.0, f"Counting rows into cells ({pct:.0f}%)")
    if "exc" in box:
        raise box["exc"]
    progress(1.0, "Counted")
    return box["res"]


def _first_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def bare_count_sql(schema: Schema, source: str) -> str:
    """The GROUP BY a DuckDB user would write by hand (floor binning, no checks): the benchmark baseline."""
    keys = []
    for c in schema.columns:
        x = S.quote_ident(c.name, "duckdb")
        if c.type == "numeric":
            h = (c.upper - c.lower) / c.bins
            keys.append(f"least(greatest(floor((TRY_CAST({x} AS DOUBLE) - {c.lower!r}) / {h!r}), 0), {c.bins - 1})")
        else:
            keys.append(x)
    sel = ", ".join(f"{k} AS k{i}" for i, k in enumerate(keys))
    return f"SELECT {', '.join(f'k{i}' for i in range(len(keys)))}, count(*) FROM (SELECT {sel} FROM {source}) GROUP BY ALL"

