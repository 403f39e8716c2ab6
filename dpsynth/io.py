"""Reading uploaded tables safely, and writing CSV that spreadsheets cannot execute.

Reading is defensive: a size cap, a row/column cap, a cell-length cap, explicit encodings
(UTF-8 with or without BOM, UTF-16 with BOM), no automatic decompression, and strict parsing
(ragged rows and unbalanced quotes are errors naming the line). Every failure is an
:class:`InputError` with a message a curator can act on. Cells are read as text; the schema
decides what is numeric.

Writing escapes text cells that a spreadsheet would read as a formula (OWASP CSV injection:
leading ``= + - @``, tab, CR, NUL) by prefixing ``'``; numbers stay numbers.
"""

from __future__ import annotations

import csv
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dpsynth.errors import InputError

MAX_BYTES = 200 * 1024 * 1024
MAX_ROWS = 2_000_000
MAX_COLUMNS = 500
MAX_CELL_CHARS = 10_000
MAX_XLSX_RATIO = 100
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\0")


@dataclass(frozen=True)
class Limits:
    """Caps applied while reading."""

    max_bytes: int = MAX_BYTES
    max_rows: int = MAX_ROWS
    max_columns: int = MAX_COLUMNS
    max_cell_chars: int = MAX_CELL_CHARS


def read_table(source: str | Path | bytes, name: str | None = None, *, limits: Limits = Limits()) -> pd.DataFrame:
    """Read CSV, Parquet or Excel into a DataFrame of text cells (empty cell → missing).

    ``source`` is a path or the uploaded bytes; ``name`` (the file name) picks the format.
    """
    if isinstance(source, str | Path):
        path = Path(source)
        name = name or path.name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise InputError(f"File {str(path)!r} does not exist.") from None
        if size > limits.max_bytes:
            raise InputError(f"{name} is {size / 2**20:,.0f} MB, more than the {limits.max_bytes / 2**20:,.0f} MB limit.")
        data = path.read_bytes()
    else:
        data = bytes(source)
        name = name or "upload.csv"
    if len(data) > limits.max_bytes:
        raise InputError(f"{name} is {len(data) / 2**20:,.0f} MB, more than the {limits.max_bytes / 2**20:,.0f} MB limit.")
    if not data.strip():
        raise InputError(f"{name} is empty.")
    suffix = Path(name).suffix.lower()
    if data[:2] == b"\x1f\x8b":
        raise InputError(f"{name} is gzip-compressed; decompress it and upload the plain file.")
    if suffix in {".parquet", ".pq"}:
        df = _read_parquet(data, name)
    elif suffix in {".xlsx", ".xlsm"}:
        df = _read_excel(data, name, limits)
    else:
        if data[:4] == b"PK\x03\x04":
            raise InputError(f"{name} is a zip archive (perhaps an Excel file); name it .xlsx or upload a CSV.")
        if data[:4] == b"PAR1":
            raise InputError(f"{name} is a Parquet file; name it .parquet.")
        df = _read_csv(data, name, limits)
    _check_shape(df, name, limits)
    return df


def _decode_text(data: bytes, name: str) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise InputError(f"{name} starts with a UTF-16 mark but is not valid UTF-16 (byte {exc.start}).") from None
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            raise InputError(
                f"{name} is not UTF-8 text: byte 0x{data[exc.start]:02x} on line {line} cannot be decoded."
                " Save the file as CSV UTF-8 and upload it again."
            ) from None
    nul = text.find("\0")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise InputError(f"{name} contains a NUL byte on line {line}; it is not a text CSV file.")
    return text


def _read_csv(data: bytes, name: str, limits: Limits) -> pd.DataFrame:
    text = _decode_text(data, name)
    first_line = text.split("\n", 1)[0]
    try:
        dialect = csv.Sniffer().sniff(first_line[:10_000], delimiters=",;\t|")
        sep = dialect.delimiter
    except csv.Error:
        sep = ","
    if first_line.count(sep) + 1 > limits.max_columns:
        raise InputError(f"{name} has {first_line.count(sep) + 1:,} columns, more than the {limits.max_columns:,} limit.")
    try:
        df = pd.read_csv(
            io.StringIO(text), sep=sep, dtype=str, keep_default_na=False, na_values=[""],
            on_bad_lines="error", engine="c", nrows=limits.max_rows + 1, compression=None,
            skip_blank_lines=True,
        )
    except pd.errors.EmptyDataError:
        raise InputError(f"{name} has no header row and no data.") from None
    except pd.errors.ParserError as exc:
        msg = str(exc).strip().splitlines()[-1]
        if "EOF inside string" in msg:
            raise InputError(f"{name} has an unclosed quote ({msg.replace('Error tokenizing data. C error: ', '')}).") from None
        raise InputError(f"{name} is not a well-formed CSV: {msg.replace('Error tokenizing data. C error: ', '')}.") from None
    if len(df) > limits.max_rows:
        raise InputError(f"{name} has more than {limits.max_rows:,} rows; use the command line with the DuckDB engine.")
    return df


def _read_parquet(data: bytes, name: str) -> pd.DataFrame:
    try:
        df = pd.read_parquet(io.BytesIO(data))
    except Exception as exc:  # pyarrow raises many types for a broken file
        raise InputError(f"{name} is not a readable Parquet file ({type(exc).__name__}).") from None
    return df


def _read_excel(data: bytes, name: str, limits: Limits) -> pd.DataFrame:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            total = sum(i.file_size for i in zf.infolist())
    except zipfile.BadZipFile:
        raise InputError(f"{name} is not a valid Excel (.xlsx) file.") from None
    if total > limits.max_bytes or total > MAX_XLSX_RATIO * max(1, len(data)):
        raise InputError(f"{name} expands to {total / 2**20:,.0f} MB when unzipped; refusing a possible zip bomb.")
    try:
        df = pd.read_excel(io.BytesIO(data), dtype=str, keep_default_na=False, na_values=[""], nrows=limits.max_rows + 1)
    except Exception as exc:  # openpyxl raises many types for a broken file
        raise InputError(f"{name} could not be read as Excel ({type(exc).__name__}).") from None
    if len(df) > limits.max_rows:
        raise InputError(f"{name} has more than {limits.max_rows:,} rows.")
    return df


def _check_shape(df: pd.DataFrame, name: str, limits: Limits) -> None:
    cols = [str(c) for c in df.columns]
    if len(cols) > limits.max_columns:
        raise InputError(f"{name} has {len(cols):,} columns, more than the {limits.max_columns:,} limit.")
    if len(df) == 0:
        raise InputError(f"{name} has a header but no data rows.")
    seen: set[str] = set()
    for c in cols:
        if c.startswith("Unnamed:"):
            raise InputError(f"{name} has a column with an empty header (column {cols.index(c) + 1}).")
        if c in seen:
            raise InputError(f"{name} has two columns named {c!r}.")
        seen.add(c)
    dupes = _pandas_mangled_duplicates(cols)
    if dupes:
        raise InputError(f"{name} has two columns named {dupes[0]!r}.")
    text_cols = [c for c in df.columns if df[c].dtype == object or str(df[c].dtype) == "string"]
    for c in text_cols:
        lengths = df[c].astype("string").str.len()
        if len(lengths) and lengths.max(skipna=True) > limits.max_cell_chars:
            row = int(lengths.to_numpy(dtype=float, na_value=0).argmax()) + 1
            raise InputError(f"{name}: a cell of column {c!r} (row {row}) is longer than {limits.max_cell_chars:,} characters.")


def _pandas_mangled_duplicates(cols: list[str]) -> list[str]:
    """pandas renames a repeated header 'a' to 'a.1'; report the original name."""
    s = set(cols)
    out = []
    for c in cols:
        head, _, tail = c.rpartition(".")
        if head and tail.isdigit() and head in s:
            out.append(head)
    return out


def escape_cell(value: object) -> object:
    """Prefix ``'`` to a text cell that a spreadsheet would treat as a formula; leave numbers alone."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def to_safe_csv(df: pd.DataFrame) -> bytes:
    """CSV bytes (UTF-8) with formula-like text cells escaped and numeric columns untouched."""
    out = df.copy()
    for c in out.columns:
        if not pd.api.types.is_numeric_dtype(out[c].dtype):
            text = out[c].astype("string")
            risky = text.str.startswith(_FORMULA_START).fillna(False).to_numpy(dtype=bool)
            if risky.any():
                out[c] = text.where(~risky, "'" + text)
    out.columns = [str(escape_cell(str(c))) for c in out.columns]
    # RFC 4180 line ends: the writer then quotes any field holding a CR or LF
    return out.to_csv(index=False, lineterminator="\r\n").encode("utf-8")


def write_safe_csv(df: pd.DataFrame, path: str | Path) -> None:
    """Write :func:`to_safe_csv` to a file."""
    Path(path).write_bytes(to_safe_csv(df))

