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

import codecs
import contextlib
import csv
import io
import itertools
import re
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpsynth.errors import InputError, TooLargeForMemoryError

MAX_BYTES = 200 * 1024 * 1024
MAX_ROWS = 2_000_000
#: File names read and written as Parquet (every other name is CSV-like).
PARQUET_SUFFIXES = frozenset({".parquet", ".pq"})
MAX_COLUMNS = 500
MAX_CELL_CHARS = 10_000
MAX_XLSX_RATIO = 100
#: What the cells of a Parquet or Excel file may take once read (text and one pointer a cell). Reading
#: holds about three times this at its peak (Arrow's buffers, then Python's strings).
MAX_DECODED_BYTES = 100 * 1024 * 1024
#: what a too-large table is told to do (the command line drops it where the DuckDB engine is no way out)
DUCKDB_HINT = "; use the command line with the DuckDB engine."
#: The padding a cell may carry around a number, and what makes a cell blank: ASCII whitespace only, which every
#: engine trims alike (DuckDB and Spark do not trim a no-break space; pandas' strip() would, and the same file was
#: then released by one engine and refused by another).
BLANKS = " \t\n\r\x0b\x0c"
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\0")


@dataclass(frozen=True)
class Limits:
    """Caps applied while reading."""

    max_bytes: int = MAX_BYTES
    max_rows: int = MAX_ROWS
    max_columns: int = MAX_COLUMNS
    max_cell_chars: int = MAX_CELL_CHARS
    max_decoded_bytes: int = MAX_DECODED_BYTES


def read_table(source: str | Path | bytes, name: str | None = None, *, limits: Limits = Limits()) -> pd.DataFrame:
    """Read CSV, Parquet or Excel into a DataFrame of text cells (empty cell → missing).

    ``source`` is a path or the uploaded bytes; ``name`` (the file name) picks the format.
    Time and memory are bounded by the limits: a file is refused as soon as a limit is seen to
    be crossed (CSV rows are counted while streaming, Parquet and Excel sizes are read from
    their metadata before anything is expanded).
    """
    if isinstance(source, str | Path):
        path = Path(source)
        name = name or path.name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise InputError(f"File {str(path)!r} does not exist.") from None
        if size > limits.max_bytes:
            raise TooLargeForMemoryError(f"{name} is {size / 2**20:,.0f} MB, more than the {limits.max_bytes / 2**20:,.0f} MB limit.")
        data = path.read_bytes()
    else:
        data = bytes(source)
        name = name or "upload.csv"
    if len(data) > limits.max_bytes:
        raise TooLargeForMemoryError(f"{name} is {len(data) / 2**20:,.0f} MB, more than the {limits.max_bytes / 2**20:,.0f} MB limit.")
    if not data.strip():
        raise InputError(f"{name} is empty.")
    suffix = Path(name).suffix.lower()
    if data[:2] == b"\x1f\x8b":
        raise InputError(f"{name} is gzip-compressed; decompress it and upload the plain file.")
    if data[:3] == b"BZh" or data[:6] == b"\xfd7zXZ\x00" or data[:4] == b"\x28\xb5\x2f\xfd":
        raise InputError(f"{name} is compressed (bzip2, xz or zstd); decompress it and upload the plain file.")
    header: list[str] | None = None
    if suffix in PARQUET_SUFFIXES:
        df = _read_parquet(data, name, limits)
    elif suffix in {".xlsx", ".xlsm"}:
        df, header = _read_excel(data, name, limits)
    else:
        if data[:4] == b"PK\x03\x04":
            raise InputError(f"{name} is a zip archive (perhaps an Excel file); name it .xlsx or upload a CSV.")
        if data[:4] == b"PAR1":
            raise InputError(f"{name} is a Parquet file; name it .parquet.")
        df, header = _read_csv(data, name, limits)
    _check_shape(df, name, limits, header)
    return df


def _utf8(data: bytes, name: str) -> bytes:
    """The file as UTF-8 bytes without a byte-order mark; a clear error for any other encoding.

    Validation streams through an incremental decoder, so no second copy of a large file is held.
    """
    if text_encoding(data[:4], name) == "utf-16":
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise InputError(f"{name} starts with a UTF-16 mark but is not valid UTF-16 (byte {exc.start}).") from None
        data = text.encode("utf-8")
        del text
    elif data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    step = 1 << 24
    check_utf8_blocks((data[start: start + step] for start in range(0, len(data), step)), name)
    return data


def text_encoding(head: bytes, name: str) -> str:
    """``utf-16`` for a file that starts with a UTF-16 byte-order mark, else ``utf-8``; UTF-32 is refused."""
    if head.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        raise InputError(f"{name} is UTF-32 text; save it as CSV UTF-8 and upload it again.")
    if head.startswith(b"\xfe\xff"):  # every engine reads little-endian UTF-16 (Excel's "Unicode text"); not this
        raise InputError(f"{name} is big-endian UTF-16 text; save it as CSV UTF-8 and upload it again.")
    return "utf-16" if head.startswith(b"\xff\xfe") else "utf-8"


def check_utf8_blocks(blocks: Iterable[bytes], name: str, *, decode: bool = True) -> None:
    """Refuse text that is not UTF-8 or holds a NUL byte, naming the line, from consecutive blocks of a file
    (after any byte-order mark): :func:`read_table`'s check, which the DuckDB engine streams over a file.
    ``decode=False`` looks for NUL bytes only (a memchr pass; a reader that validates UTF-8 itself)."""
    decoder = codecs.getincrementaldecoder("utf-8")() if decode else None
    lines, head = 1, None
    for block in blocks:
        head = block[:4096] if head is None else head
        nul = block.find(b"\x00")
        if nul >= 0:
            if head.count(b"\x00") * 3 > len(head):
                raise InputError(f"{name} looks like UTF-16 text without a byte-order mark; save it as CSV UTF-8 and"
                                 " upload it again.")
            line = lines + block.count(b"\n", 0, nul)
            raise InputError(f"{name} contains a NUL byte on line {line}; it is not a text CSV file.")
        try:
            if decoder is not None:
                decoder.decode(block, final=False)
        except UnicodeDecodeError as exc:
            at = max(0, min(exc.start, len(block) - 1))
            line = lines + block.count(b"\n", 0, at)
            raise InputError(
                f"{name} is not UTF-8 text: byte 0x{block[at]:02x} on line {line} cannot be decoded. Save the file as"
                " CSV UTF-8 and upload it again."
            ) from None
        lines += block.count(b"\n")
    if decoder is None:
        return
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise InputError(f"{name} is not UTF-8 text: it ends inside a character (line {lines}). Save the file as CSV"
                         " UTF-8 and upload it again.") from None


def _line(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def csv_header(head: bytes, name: str, limits: Limits = Limits()) -> tuple[str, list[str]]:
    """The delimiter and the column names of a CSV file from its first bytes, read and checked exactly as
    :func:`read_table` reads them (a UTF-8 byte-order mark dropped; empty, over-long or repeated names
    refused): what another reader of the same file (:func:`dpsynth.engines.duckdb_engine.source_sql`) uses
    so that both see the same columns."""
    if text_encoding(head[:4], name) == "utf-16":
        cut = len(head) - len(head) % 2
        head = head[:cut].decode("utf-16", errors="ignore").encode("utf-8")
    elif head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    sep, header = _header(head, name, limits)
    _check_header(header, name, limits)
    return sep, header


def _header(data: bytes, name: str, limits: Limits) -> tuple[str, list[str]]:
    """The delimiter and the header's field names, read by the csv module from the file's start."""
    head = data[: 1 << 22].decode("utf-8", errors="replace")
    first_line = head.split("\n", 1)[0]
    sep = _delimiter(first_line)
    if first_line.count(sep) + 1 > limits.max_columns:
        raise InputError(f"{name} has {first_line.count(sep) + 1:,} columns, more than the {limits.max_columns:,} limit.")
    try:
        fields = next(csv.reader(io.StringIO(head, newline=""), delimiter=sep, quotechar='"', doublequote=True, strict=True))
    except StopIteration:
        raise InputError(f"{name} has no header row.") from None
    except csv.Error as exc:
        if "field larger" in str(exc):
            raise InputError(f"{name}: a column name is longer than {limits.max_cell_chars:,} characters.") from None
        raise InputError(f"{name}: the header row is not well-formed CSV ({exc}).") from None
    _check_table_like(head, sep, fields, name)
    return sep, fields


#: Delimiters a CSV upload may use, in order of preference on a tie.
DELIMITERS = (",", ";", "\t", "|")
#: Records read from the file's start to judge whether it is a table at all.
TABLE_CHECK_RECORDS = 50


def _delimiter(first_line: str) -> str:
    """The delimiter, read from the header line only (column names, not anyone's values): the candidate
    that occurs most often outside quotes; ``,`` when none occurs (a one-column file)."""
    outside = re.sub(r'"[^"]*"', "", first_line[:100_000])
    counts = {d: outside.count(d) for d in DELIMITERS}
    best = max(DELIMITERS, key=lambda d: counts[d])  # max keeps the first of equal counts
    return best if counts[best] else ","


def _sentence_like(text: str) -> bool:
    words = text.split()
    return len(words) >= 6 or len(text) > 80 or (len(words) >= 3 and text.rstrip()[-1:] in ".!?:")


def _check_table_like(head: str, sep: str, header: list[str], name: str) -> None:
    """Refuse a file that is not a table (prose renamed .csv): a single column whose header or lines read
    like sentences, a header and lines made mostly of sentences, or first lines whose numbers of fields
    mostly differ from the header's."""
    reader = csv.reader(io.StringIO(head, newline=""), delimiter=sep, quotechar='"', doublequote=True)
    records: list[list[str]] = []
    try:
        for rec in reader:
            if rec:
                records.append(rec)
            if len(records) > TABLE_CHECK_RECORDS:
                break
    except csv.Error:
        return  # a malformed quote is reported precisely by the parser
    body = records[1:]
    not_table = f"{name}: this does not look like a table"
    if len(header) == 1:
        lines = [r[0] for r in body]
        wordy = sum(_sentence_like(x) for x in lines)
        if _sentence_like(header[0]) or (lines and wordy * 2 > len(lines)):
            raise InputError(
                f"{not_table}: no delimiter (comma, semicolon, tab or |) separates columns and the lines read like"
                " sentences. Upload a CSV with one row per record and a header row of column names."
            )
        return
    cells = [c for r in body for c in r]
    if (sum(len(h.split()) >= 4 for h in header) * 2 > len(header)
            and cells and sum(len(c.split()) >= 4 for c in cells) * 2 > len(cells)):
        raise InputError(
            f"{not_table}: the header and the lines read like sentences, not column names and values. Upload a CSV"
            " with one row per record and a header row of column names."
        )
    ragged = [len(r) for r in body if len(r) != len(header)]
    if body and len(ragged) * 2 > len(body):
        shown = ", ".join(str(n) for n in sorted(set(ragged))[:5])
        raise InputError(
            f"{not_table}: the header has {len(header)} fields but most of the first {len(body)} lines have a"
            f" different number ({shown}). Check the delimiter, or save the sheet as CSV again."
        )


#: A number with a decimal comma ("11,69") and one grouped by dots ("1.234,5"): read as numbers in a file not
#: delimited by commas (:func:`_decimal_commas`; the DuckDB engine applies the same patterns in SQL)
DECIMAL_COMMA = r"[+-]?\d+,\d+"
GROUPED_DECIMAL_COMMA = r"[+-]?\d{1,3}(?:\.\d{3})+(?:,\d+)?"


def _decimal_commas(df: pd.DataFrame) -> pd.DataFrame:
    """In a file not delimited by commas, numbers written with a decimal comma ("11,69", "1.234,5") become
    "11.69", "1234.5". Each cell is read on its own (no other row decides how it is parsed)."""
    for c in df.columns:
        col = df[c]
        if col.dtype != object and not pd.api.types.is_string_dtype(col):
            continue
        text = col.astype("string")
        plain = text.str.fullmatch(DECIMAL_COMMA).fillna(False)
        grouped = text.str.fullmatch(GROUPED_DECIMAL_COMMA).fillna(False)
        if not (plain.any() or grouped.any()):
            continue
        fixed = text.where(~grouped, text.str.replace(".", "", regex=False))
        fixed = fixed.where(~(plain | grouped), fixed.str.replace(",", ".", regex=False))
        df[c] = fixed.astype(object).where(fixed.notna(), None)
    return df


_ROW = re.compile(r"Row #(\d+): Expected (\d+) columns, got (\d+)")


def _read_csv(data: bytes, name: str, limits: Limits) -> tuple[pd.DataFrame, list[str]]:
    """Strict RFC 4180 parsing (pyarrow, streamed): every row must have the header's number of fields;
    stops as soon as the row limit is crossed."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    body = _utf8(data, name)
    sep, header = _header(body, name, limits)
    if len(header) > limits.max_columns:
        raise InputError(f"{name} has {len(header):,} columns, more than the {limits.max_columns:,} limit.")
    _check_header(header, name, limits)
    check_scanned(CsvScan.of([body], sep, len(header)), name, lambda: contextlib.nullcontext(
        io.StringIO(body.decode("utf-8"), newline="")))
    # a row (all its cells) must fit a block; cells are capped far below this anyway
    block = max(1 << 20, min(64 << 20, 2 * limits.max_cell_chars * max(1, len(header)) + (1 << 16)))
    try:
        reader = pacsv.open_csv(
            io.BytesIO(body),
            read_options=pacsv.ReadOptions(use_threads=False, block_size=block, encoding="utf8"),
            parse_options=pacsv.ParseOptions(delimiter=sep, quote_char='"', double_quote=True, escape_char=False,
                                             newlines_in_values=True, ignore_empty_lines=True),
            convert_options=pacsv.ConvertOptions(column_types={h: pa.string() for h in header}, null_values=[""],
                                                 strings_can_be_null=True, quoted_strings_can_be_null=True),
        )
        batches, rows = [], 0
        for batch in reader:
            rows += batch.num_rows
            if rows > limits.max_rows:
                raise TooLargeForMemoryError(f"{name} has more than {limits.max_rows:,} rows{DUCKDB_HINT}")
            batches.append(batch)
        table = pa.Table.from_batches(batches, schema=reader.schema)
    except pa.ArrowInvalid as exc:
        if _ROW.search(str(exc)):
            explain_fields(io.StringIO(body.decode("utf-8"), newline=""), sep, len(header), name)
        raise InputError(_csv_problem(str(exc), name, len(header), block)) from None
    if table.column_names != header or any(t != pa.string() for t in table.schema.types):
        raise InputError(f"{name}: the header row could not be read consistently; check its quotes.")
    df = table.to_pandas()
    del table
    if sep != ",":
        df = _decimal_commas(df)
    return df, header


@dataclass
class CsvScan:
    """What one streamed pass over a CSV file's UTF-8 blocks (after any byte-order mark) records for the checks
    every engine applies alike: NUL bytes, an unclosed quote (:func:`check_unclosed_quote`) and quoting worth
    parsing (:func:`check_quoting`)."""

    sep: str
    #: the header's fields (0: records are not counted)
    columns: int = 0
    nul: bool = False
    quotes: int = 0
    #: whether the last quote opens a value (the file's start, a delimiter or a line break before it)
    last_quote_opens: bool = False
    suspect: bool = False
    _lines: int = 1
    _tail: bytes = b""
    _pending: bool = False
    _last: tuple[int, bytes, int] = (0, b"", 0)
    _carry: bytes = b""
    _record_seps: int = 0  # delimiters outside quoted values since the last line break outside them
    _edge: np.ndarray | None = None
    #: the first line ending with each kind of line break outside quoted values (b"\n", b"\r\n", b"\r"), and where
    #: in the file it stands
    endings: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    _offset: int = 0

    @classmethod
    def of(cls, blocks: Iterable[bytes], sep: str, columns: int = 0) -> CsvScan:
        """The scan of a whole file's consecutive blocks."""
        scan = cls(sep, columns)
        for block in blocks:
            scan.feed(block)
        return scan.finish()

    def finish(self) -> CsvScan:
        """Take the end of the file (a line break held back in case the next block began with its second byte)."""
        if self._carry:
            carry, self._carry = self._carry, b""
            self._process(carry)
        if self.columns and self._tail == self.sep.encode() and self._record_seps + 1 > self.columns:
            self.suspect = True  # the last record, with no line break after it, ends with the delimiter
        return self

    @property
    def needs_parse(self) -> bool:
        """Whether :func:`check_quoting` must parse the file: a suspect quote, or an odd number of quotes (the file
        ends inside a quoted value)."""
        return self.suspect or self.quotes % 2 == 1

    @property
    def last_quote_line(self) -> int:
        """The line of the last quote (counted only when asked)."""
        lines, block, at = self._last
        return lines + block.count(b"\n", 0, at)

    def feed(self, block: bytes) -> None:
        """Take the next block (judged in pieces that stay in the processor's cache: three times faster)."""
        if b'"' not in block:
            self._take(block)
            return
        view = memoryview(block)
        for start in range(0, len(block), 1 << 18):
            self._take(view[start: start + (1 << 18)].tobytes())

    def _set_edge(self) -> np.ndarray:
        self._edge = _edge_bytes(self.sep)
        return self._edge

    def _take(self, block: bytes) -> None:
        if self._carry:
            block, self._carry = self._carry + block, b""
        if block.endswith(b"\r"):  # a CRLF may straddle two blocks
            block, self._carry = block[:-1], b"\r"
        if block:
            self._process(block)

    def _process(self, block: bytes) -> None:
        self.nul = self.nul or b"\x00" in block
        edge = self._edge if self._edge is not None else self._set_edge()
        if self._pending and block and not edge[block[0]]:
            self.suspect = True
        self._pending = False
        lf = block.count(b"\n")
        cr = b"\r" in block
        if b'"' in block:
            data = np.frombuffer(block, dtype=np.uint8)
            q = np.flatnonzero(data == 34)
            last = int(q[-1])
            self._last = (self._lines, block, last)
            self.last_quote_opens = bool(edge[block[last - 1]]) and block[last - 1] != 34 if last else (
                not self._tail or (bool(edge[self._tail[0]]) and self._tail[0] != 34))
            if not self.suspect:
                self._judge(data, q, edge)
            self._line_breaks(block, lf, cr, data, q)
            if not self.suspect:
                self._records(block, lf, cr, data, q)
            self.quotes += len(q)
        elif self.quotes % 2 == 0:  # no quote here, none open: every line break is outside quoted values
            self._line_breaks(block, lf, cr, None, None)
            if not self.suspect:
                self._records(block, lf, cr, None, None)
        self._lines += lf
        self._tail = block[-1:]
        self._offset += len(block)

    def _line_breaks(self, block: bytes, lf: int, cr: bool, data: np.ndarray | None, q: np.ndarray | None) -> None:
        """Record which kinds of line break end lines outside quoted values (inside one, any kind is text). A block
        whose line breaks are all of one kind already recorded teaches nothing: most blocks end here."""
        if not lf and not cr:
            return
        crs = block.count(b"\r") if cr else 0
        crlf = block.count(b"\r\n") if cr else 0
        only = b"\n" if not cr else b"\r\n" if crs == crlf == lf else None
        if only is not None and only in self.endings:
            return
        if q is None or data is None:
            for kind, n in ((b"\n", lf - crlf), (b"\r\n", crlf), (b"\r", crs - crlf)):
                if n and kind not in self.endings:
                    self.endings[kind] = self._first_line(block, kind)
            return
        breaks = np.flatnonzero((data == 10) | (data == 13))
        outside = (self.quotes + np.searchsorted(q, breaks)) % 2 == 0
        breaks = breaks[outside]
        nxt = data[np.minimum(breaks + 1, len(data) - 1)]
        is_lf = data[breaks] == 10
        is_cr = ~is_lf
        kinds = {
            b"\n": breaks[is_lf & ((breaks == 0) | (data[np.maximum(breaks - 1, 0)] != 13))],
            b"\r\n": breaks[is_cr & (breaks + 1 < len(data)) & (nxt == 10)],
            b"\r": breaks[is_cr & ~((breaks + 1 < len(data)) & (nxt == 10))],
        }
        for kind, at in kinds.items():
            if len(at) and kind not in self.endings:
                self.endings[kind] = (self._lines + block.count(b"\n", 0, int(at[0])), self._offset + int(at[0]))

    def _last_outside_break(self, block: bytes, q: np.ndarray) -> int:
        """The last line break of the block outside quoted values (-1: none)."""
        end = len(block)
        while True:
            at = max(block.rfind(b"\n", 0, end), block.rfind(b"\r", 0, end))
            if at < 0 or (self.quotes + int(np.searchsorted(q, at))) % 2 == 0:
                return at
            end = at

    def _records(self, block: bytes, lf: int, cr: bool, data: np.ndarray | None, q: np.ndarray | None) -> None:
        """Suspect a record with more fields than the header whose last is empty (``a,b,`` under ``x,y``), which
        DuckDB reads as ``a,b`` where every other reader refuses the row: counted only in blocks where a delimiter
        ends a line; elsewhere only the delimiters after the last line break are carried to the next block."""
        if not self.columns:
            return
        sep = self.sep.encode()
        if not ((lf and sep + b"\n" in block) or (cr and sep + b"\r" in block)
                or (self._tail == sep and block[:1] in (b"\n", b"\r"))):
            if q is None:
                last = max(block.rfind(b"\n"), block.rfind(b"\r"))
                self._record_seps = block.count(sep, last + 1) if last >= 0 else self._record_seps + block.count(sep)
                return
            last = self._last_outside_break(block, q) if (lf or cr) else -1
            after = data[last + 1:]  # type: ignore[index]
            tail_q = q[q > last] - (last + 1)
            seps = np.flatnonzero(after == sep[0])
            before = self.quotes + int(np.sum(q <= last)) if last >= 0 else self.quotes
            outside = int(np.sum((before + np.searchsorted(tail_q, seps)) % 2 == 0))
            self._record_seps = outside if last >= 0 else self._record_seps + outside
            return
        if data is None:
            data = np.frombuffer(block, dtype=np.uint8)
        seps = np.flatnonzero(data == sep[0])
        breaks = np.flatnonzero((data == 10) | (data == 13))
        breaks = breaks[~((data[breaks] == 10) & (breaks > 0) & (data[np.maximum(breaks - 1, 0)] == 13))]
        if q is not None:
            seps = seps[(self.quotes + np.searchsorted(q, seps)) % 2 == 0]
            breaks = breaks[(self.quotes + np.searchsorted(q, breaks)) % 2 == 0]
        if not len(breaks):
            self._record_seps += len(seps)
            return
        upto = np.searchsorted(seps, breaks)
        per = np.diff(upto, prepend=0)
        per[0] += self._record_seps
        ends_sep = data[np.maximum(breaks - 1, 0)] == sep[0]
        if breaks[0] == 0:
            ends_sep[0] = self._tail == sep
        if np.any(ends_sep & (per + 1 > self.columns)):
            self.suspect = True
        self._record_seps = len(seps) - int(upto[-1])

    def _first_line(self, block: bytes, kind: bytes) -> tuple[int, int]:
        if kind == b"\n":
            at = next(i for i in _find_all(block, b"\n") if i == 0 or block[i - 1] != 13)
        elif kind == b"\r":
            at = next(i for i in _find_all(block, b"\r") if block[i + 1: i + 2] != b"\n")
        else:
            at = block.find(b"\r\n")
        return self._lines + block.count(b"\n", 0, at), self._offset + at

    def _judge(self, data: np.ndarray, q: np.ndarray, edge: np.ndarray) -> None:
        """Suspect a quote where a well-formed file has none: by the parity of the quotes so far, an opening quote
        must follow a delimiter, a line break, the file's start or another quote (the second of a doubled pair),
        and a closing quote must be followed by one of those or the file's end. Inside a quoted value quotes come
        doubled, so the parity holds; an inch mark (``12" screen``) breaks it and is itself a suspect."""
        first = self.quotes % 2  # 1: the block's first quote closes a value opened before it
        opening, closing = q[first::2], q[1 - first::2]
        if len(opening) and opening[0] == 0:
            if self._tail and not edge[self._tail[0]]:
                self.suspect = True
            opening = opening[1:]
        if len(closing) and closing[-1] == len(data) - 1:
            self._pending = True  # judged by the next block's first byte (the file's end is an edge)
            closing = closing[:-1]
        if not (edge[data[opening - 1]].all() and edge[data[closing + 1]].all()):
            self.suspect = True


def _find_all(block: bytes, needle: bytes) -> Iterator[int]:
    at = block.find(needle)
    while at >= 0:
        yield at
        at = block.find(needle, at + 1)


_LINE_BREAK_NAMES = {b"\n": "LF (Unix)", b"\r\n": "CRLF (Windows)", b"\r": "CR (old Mac)"}


def check_line_endings(endings: Mapping[bytes, tuple[int, int]], name: str) -> None:
    """Refuse a file whose lines end in more than one way outside quoted values (``endings``: each kind's first
    line, and its place in the file; a line break inside a quoted value is text, of any kind): pyarrow took each as a line end, DuckDB fixes
    one and misread the others (it released a row of three fields under a header of two)."""
    if len(endings) > 1:
        (k1, (l1, _)), (k2, (l2, _)) = sorted(endings.items(), key=lambda kv: kv[1][1])[:2]
        raise InputError(f"{name} mixes line endings: line {l1} ends with {_LINE_BREAK_NAMES[k1]} and line {l2} with"
                         f" {_LINE_BREAK_NAMES[k2]}; save it again with one kind of line ending.")


def check_scanned(scan: CsvScan, name: str, text: Callable[[], AbstractContextManager[Iterable[str]]]) -> None:
    """Every engine's checks of a scanned CSV file (:class:`CsvScan`), in one order: an unclosed quote, then the
    strict parse of :func:`check_quoting` where the scan cannot judge alone (``text`` opens the file's lines with
    their line breaks), else the line breaks the scan saw."""
    check_unclosed_quote(scan, name)
    if scan.needs_parse:
        with text() as lines:
            check_quoting(lines, scan.sep, name, scan.columns)
    else:
        check_line_endings(scan.endings, name)


def _edge_bytes(sep: str) -> np.ndarray:
    """Which bytes may stand beside a quote at a value's edge: the delimiter, line breaks, another quote."""
    edge = np.zeros(256, dtype=bool)
    edge[list((sep + '\n\r"').encode())] = True
    return edge


def check_unclosed_quote(scan: CsvScan, name: str) -> None:
    """A quote that opens a value and is never closed would swallow the rest of the file into one cell
    (pyarrow accepts it at the end of the file): refuse it, naming the line where it opens."""
    if scan.quotes % 2 and scan.last_quote_opens:
        raise InputError(f"{name} has an unclosed quote: the quote that opens a value on line {scan.last_quote_line}"
                         " is never closed.")


def malformed_csv_message(name: str, line: int, problem: str) -> str:
    """The refusal of text after a closing quote (``5,"a"b``), the same from every engine: pyarrow alone read 'ab',
    DuckDB refused the file with 'Error when sniffing file'."""
    return (f"{name}: line {line} is not well-formed CSV ({problem}); a quoted value must be followed by the"
            " delimiter or the end of its line.")


def spaced_quote_message(name: str, line: int) -> str:
    """The refusal of spaces before an opening quote (``5, "a"``), the same from every engine: pyarrow read the
    text ' "a"', DuckDB 'a' (after one space; after two, the text)."""
    return (f"{name}: line {line} has a value with spaces before its opening quote (as in 5, \"a\"), which CSV"
            " readers take apart differently; remove the spaces before the quote.")


def check_quoting(text: Iterable[str], sep: str, name: str, columns: int = 0) -> None:
    """Run when :attr:`CsvScan.needs_parse` (a quote beside other text or beside spaces at a value's edge: ``"a"b``,
    ``5, "a"``, ``"a" ,``, or an inch mark, ``12" screen``; a well-formed file holds none and is never parsed twice).
    Refuse what RFC 4180 readers take apart differently, naming the line: text after a closing quote
    (:func:`malformed_csv_message`) and spaces before an opening quote (:func:`spaced_quote_message`). ``text`` is
    the whole file's lines (newlines kept). Two strict parses side by side, the second skipping spaces after a
    delimiter: a value they read differently that starts, after its spaces, with a quote had spaces before its
    opening quote (a quoted value that holds spaces and quotes, such as ``" ""a"" b"``, reads alike in both)."""
    # the line break ending each physical line not yet judged, and its line as other messages count them (line
    # feeds before it, plus one: a CR alone does not start a line there)
    breaks: dict[int, tuple[bytes, tuple[int, int]]] = {}

    def lines() -> Iterator[str]:
        feeds = 0
        for number, line in enumerate(text, 1):
            stripped = line.rstrip("\r\n")
            if len(stripped) < len(line):
                breaks[number] = (line[len(stripped):].encode(), (feeds + 1, number))
                feeds += line.endswith("\n")
            yield line

    endings: dict[bytes, tuple[int, int]] = {}
    judged = rows = 0
    first, second = itertools.tee(lines())
    plain = csv.reader(first, delimiter=sep, quotechar='"', doublequote=True, strict=True)
    skipping = csv.reader(second, delimiter=sep, quotechar='"', doublequote=True, strict=True, skipinitialspace=True)
    while True:
        try:
            fields = next(plain, None)
        except csv.Error as exc:
            raise InputError(malformed_csv_message(name, plain.line_num, str(exc))) from None
        try:
            skipped = next(skipping, None)
        except csv.Error:
            raise InputError(spaced_quote_message(name, plain.line_num)) from None
        if fields is None:
            check_line_endings(endings, name)
            return
        for number in range(judged + 1, plain.line_num + 1):  # a record's last line ends outside quoted values
            found = breaks.pop(number, None)
            if number == plain.line_num and found is not None:
                endings.setdefault(*found)
        judged = plain.line_num
        if len(endings) > 1:
            check_line_endings(endings, name)
        if columns and fields:
            rows += 1
            if rows > 1 and len(fields) != columns:
                raise InputError(ragged_row_message(name, columns, rows - 1, len(fields)))
        if fields != skipped and any(a != b and a.lstrip(" ").startswith('"')
                                     for a, b in itertools.zip_longest(fields, skipped or [], fillvalue="")):
            raise InputError(spaced_quote_message(name, plain.line_num))


def explain_fields(text: Iterable[str], sep: str, columns: int, name: str) -> None:
    """After a reader failed on a CSV file: the first data row (1-based, empty lines not counted) whose number of
    fields is not the header's, or the first line that is not well-formed, by the csv module's strict parse of
    ``text`` (the whole file's lines), the same whichever reader failed (pyarrow's own messages guessed an unclosed
    quote where a row of one quoted value had one field too few)."""
    rows = csv.reader(text, delimiter=sep, quotechar='"', doublequote=True, strict=True)
    try:
        next(rows, None)
        row = 0
        for fields in rows:
            if not fields:  # an empty line, skipped as every reader skips it
                continue
            row += 1
            if len(fields) != columns:
                raise InputError(ragged_row_message(name, columns, row, len(fields)))
    except csv.Error as exc:  # e.g. text after a closing quote ('5,"a"b'), which DuckDB calls a sniffing error
        raise InputError(malformed_csv_message(name, rows.line_num, str(exc))) from None


def ragged_row_message(name: str, expected: int, row: int, got: int) -> str:
    """The refusal of a data row (1-based, empty lines not counted) whose number of fields is not the header's."""
    return f"{name}: Expected {expected} fields (one per column of the header), but row {row} has {got}."


def _csv_problem(msg: str, name: str, expected: int, block: int) -> str:
    m = _ROW.search(msg)
    if m:
        row, got = int(m.group(1)) - 1, int(m.group(3))
        text = msg.split(":", 2)[-1] if msg.count(":") >= 2 else ""
        if text.count('"') % 2 == 1 or got < expected and '"' in text:
            return f"{name} has an unclosed quote starting in row {row}."
        return ragged_row_message(name, expected, row, got)
    if "straddling" in msg or "block" in msg:
        return f"{name} has a row longer than {block / 2**20:,.0f} MB."
    if "UTF8" in msg or "utf8" in msg.lower():
        return f"{name} is not UTF-8 text."
    return f"{name} is not a well-formed CSV file ({msg.splitlines()[0][:200]})."


def _check_header(header: list[str], name: str, limits: Limits) -> None:
    check_column_names(header, name, limits)


def check_column_names(header: Sequence[str], name: str, limits: Limits = Limits()) -> None:
    """Refuse an empty, over-long or repeated column name, and two names that differ only in case: SQL engines
    (DuckDB, Spark) do not tell ``x`` from ``X``, and renamed or refused such a table where pandas read it, so
    every reader of any format applies this one rule."""
    seen: dict[str, str] = {}
    for i, c in enumerate(header):
        if not isinstance(c, str) or not c.strip():
            raise InputError(f"{name} has a column with an empty header (column {i + 1}).")
        if len(c) > limits.max_cell_chars:
            raise InputError(f"{name}: the name of column {i + 1} is longer than {limits.max_cell_chars:,} characters.")
        key = c.casefold()
        if key in seen:
            if seen[key] == c:
                raise InputError(f"{name} has two columns named {c!r}.")
            raise InputError(f"{name} has columns named {seen[key]!r} and {c!r}, which differ only in case; rename one"
                             " (database engines cannot tell them apart).")
        seen[key] = c


def nullable_dtype(t: Any) -> Any:
    """pandas' nullable dtype of an Arrow integer or boolean type (whole numbers with missing values kept whole,
    true/false with missing values kept boolean rather than Python objects written 'True')."""
    import pyarrow as pa

    if pa.types.is_boolean(t):
        return pd.BooleanDtype()
    if not pa.types.is_integer(t):
        return None
    return pd.api.types.pandas_dtype(f"{'U' if pa.types.is_unsigned_integer(t) else ''}Int{t.bit_width}")


def check_parquet_names(path: str | Path) -> None:
    """:func:`check_column_names` on a Parquet file's columns (or each file of a folder of them), from the
    footers alone (a folder or glob: each file): what an engine reading the file itself must check, as
    :func:`read_table` does (DuckDB renames an empty name to ``C1`` and a repeated one to ``x_1``, names no file holds)."""
    import pyarrow.parquet as pq

    p = Path(path)
    files = sorted(p.glob("*.parquet")) if p.is_dir() else sorted(p.parent.glob(p.name)) if "*" in p.name else [p]
    for f in files:
        try:
            names = pq.read_schema(f).names
        except Exception as exc:  # pyarrow raises many types for a broken file
            raise InputError(f"{f.name} is not a readable Parquet file ({type(exc).__name__}).") from None
        check_column_names(names, f.name)


def _read_parquet(data: bytes, name: str, limits: Limits) -> pd.DataFrame:
    """Refuse from the footer's metadata (rows, columns, uncompressed size) before decoding anything."""
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(io.BytesIO(data)).metadata
    except Exception as exc:  # pyarrow raises many types for a broken file
        raise InputError(f"{name} is not a readable Parquet file ({type(exc).__name__}).") from None
    if meta.num_columns > limits.max_columns:
        raise InputError(f"{name} has {meta.num_columns:,} columns, more than the {limits.max_columns:,} limit.")
    check_column_names(meta.schema.to_arrow_schema().names, name, limits)
    if meta.num_rows > limits.max_rows:
        raise TooLargeForMemoryError(f"{name} has {meta.num_rows:,} rows, more than the {limits.max_rows:,} limit.")
    expanded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if expanded > limits.max_bytes:
        raise TooLargeForMemoryError(f"{name} expands to {expanded / 2**20:,.0f} MB when decoded, more than the"
                         f" {limits.max_bytes / 2**20:,.0f} MB limit.")
    decoded = _parquet_decoded_bytes(data, name, limits)
    if decoded > limits.max_decoded_bytes:
        raise TooLargeForMemoryError(f"{name} expands to more than {limits.max_decoded_bytes / 2**20:,.0f} MB of cells when decoded"
                         f" (at least {decoded / 2**20:,.0f} MB; a few kilobytes of dictionary- or run-length-encoded values can"
                         " stand for gigabytes); refusing a possible decompression bomb.")
    try:
        df = pd.read_parquet(io.BytesIO(data))
        # whole numbers with gaps stay whole (pandas alone turned them into floats: 0 read as "0.0" where the
        # SQL engines read "0"), exactly, in pandas' nullable integers; true/false with gaps stay boolean (pandas
        # alone read Python objects, written 'True' where the SQL engines write 'true')
        arrow = meta.schema.to_arrow_schema()
        gappy = [f.name for f in arrow if nullable_dtype(f.type) is not None and f.name in df.columns
                 and df[f.name].isna().any()]
        if gappy:
            table = pq.read_table(io.BytesIO(data), columns=gappy)
            for c in gappy:
                df[c] = pd.Series(table.column(c).to_pandas(types_mapper=nullable_dtype).array, index=df.index)
    except Exception as exc:  # pyarrow raises many types for a broken file
        raise InputError(f"{name} is not a readable Parquet file ({type(exc).__name__}).") from None
    return df


def _parquet_decoded_bytes(data: bytes, name: str, limits: Limits) -> int:
    """What the cells take once decoded, stopping as soon as it passes ``limits.max_decoded_bytes``.

    Dictionary and run-length encodings let a small file declare small pages that decode to a
    huge table (one 1,000-character value repeated a million times: 110 KB on disk, 1 GB of text),
    so the footer's sizes are not enough. Text columns are read one column chunk at a time *as
    dictionaries* (indices and distinct values, never the repeated text), and their decoded length
    is the sum of the dictionary lengths taken at the indices; fixed-width columns count 8 bytes a
    cell. Nested columns (lists, structs, maps) are refused: a table cell holds one value.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(io.BytesIO(data))
    fields = list(pf.schema_arrow)
    for f in fields:
        if pa.types.is_nested(f.type):
            raise InputError(f"{name}: column {f.name!r} holds nested values ({f.type}); flatten it to one value a cell.")
    text = [f.name for f in fields
            if pa.types.is_string(f.type) or pa.types.is_large_string(f.type) or pa.types.is_binary(f.type)
            or pa.types.is_large_binary(f.type) or pa.types.is_dictionary(f.type)]
    total = 0
    try:
        pf = pq.ParquetFile(io.BytesIO(data), read_dictionary=text)
        for g in range(pf.metadata.num_row_groups):
            n = pf.metadata.row_group(g).num_rows
            total += 8 * n * len(fields)  # a pointer or a number per cell
            for c in text:
                col = pf.read_row_group(g, columns=[c]).column(0)
                for chunk in col.chunks:
                    if not isinstance(chunk, pa.DictionaryArray):
                        chunk = chunk.dictionary_encode()
                    dictionary = chunk.dictionary
                    if pa.types.is_dictionary(dictionary.type) or not (
                            pa.types.is_string(dictionary.type) or pa.types.is_large_string(dictionary.type)
                            or pa.types.is_binary(dictionary.type) or pa.types.is_large_binary(dictionary.type)):
                        dictionary = dictionary.cast(pa.string())
                    lengths = pc.binary_length(dictionary).cast(pa.int64())
                    total += int(pc.sum(pc.take(lengths, chunk.indices)).as_py() or 0)
                if total > limits.max_decoded_bytes:
                    return total
    except InputError:
        raise
    except Exception as exc:  # pyarrow raises many types for a broken file
        raise InputError(f"{name} is not a readable Parquet file ({type(exc).__name__}).") from None
    return total


#: What one cell of a sheet costs once read (a Python object and the pointers to it), besides its text.
_XLSX_CELL_BYTES = 64
#: What an empty cell costs when a row is padded to the widest row (a pointer in a list and an array).
_XLSX_PAD_BYTES = 16


def _read_excel(data: bytes, name: str, limits: Limits) -> tuple[pd.DataFrame, list[str]]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            total = sum(i.file_size for i in zf.infolist())
    except zipfile.BadZipFile:
        raise InputError(f"{name} is not a valid Excel (.xlsx) file.") from None
    # zipfile never inflates a member beyond its declared size, so the declared total bounds the work
    if total > limits.max_bytes or total > MAX_XLSX_RATIO * max(1, len(data)):
        raise InputError(f"{name} expands to {total / 2**20:,.0f} MB when unzipped; refusing a possible zip bomb.")
    from dpsynth.xlsx_scan import scan_first_sheet

    scan_first_sheet(data, name, limits=limits, cell_bytes=_XLSX_CELL_BYTES, pad_bytes=_XLSX_PAD_BYTES)
    try:
        raw = pd.read_excel(io.BytesIO(data), dtype=str, keep_default_na=False, na_values=[""], header=None,
                            nrows=limits.max_rows + 2)
    except Exception as exc:  # openpyxl raises many types for a broken file
        raise InputError(f"{name} could not be read as Excel ({type(exc).__name__}); the file may be damaged.") from None
    if raw.empty:
        raise InputError(f"{name} has no header row and no data.")
    header = ["" if pd.isna(v) else str(v) for v in raw.iloc[0]]
    _check_header(header, name, limits)
    df = raw.iloc[1:].reset_index(drop=True)
    df.columns = header
    if len(df) > limits.max_rows:
        raise InputError(f"{name} has more than {limits.max_rows:,} rows.")
    return df, header


def _check_shape(df: pd.DataFrame, name: str, limits: Limits, header: list[str] | None = None) -> None:
    cols = [str(c) for c in df.columns]
    if len(cols) > limits.max_columns:
        raise InputError(f"{name} has {len(cols):,} columns, more than the {limits.max_columns:,} limit.")
    if len(df) == 0:
        raise InputError(f"{name} has a header but no data rows.")
    _check_header(header if header is not None else cols, name, limits)
    for c in df.columns:
        if pd.api.types.is_numeric_dtype(df[c].dtype) or pd.api.types.is_bool_dtype(df[c].dtype):
            continue
        lengths = _cell_lengths(df[c])
        longest = lengths.max(skipna=True)
        if len(lengths) and pd.notna(longest) and longest > limits.max_cell_chars:
            row = int(lengths.to_numpy(dtype=float, na_value=0).argmax()) + 1
            raise InputError(f"{name}: a cell of column {c!r} (row {row}) is longer than {limits.max_cell_chars:,} characters.")


def _cell_lengths(col: pd.Series) -> pd.Series:
    """Characters in each cell (missing: NA). A categorical column (Parquet's dictionary columns) is
    measured on its categories, never expanded to one string a cell."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        per_category = col.cat.categories.astype("string").str.len().to_numpy(dtype=float, na_value=np.nan)
        codes = col.cat.codes.to_numpy()
        out = np.full(len(codes), np.nan)
        present = codes >= 0
        out[present] = per_category[codes[present]]
        return pd.Series(out, index=col.index)
    return col.astype("string").str.len()


_NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"


def escape_cell(value: object) -> object:
    """Prefix ``'`` to a text cell that a spreadsheet would treat as a formula; leave numbers alone.

    A text cell that is a plain number (``-1``, ``+2.5e3``) is not a formula and stays as it is, so
    a category such as ``-1`` reads back unchanged; ``-1+2`` or ``=1`` are escaped.
    """
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not re.fullmatch(_NUMBER, value):
        return "'" + value
    return value


def to_safe_csv(df: pd.DataFrame) -> bytes:
    """CSV bytes (UTF-8) with formula-like text cells escaped and numeric columns untouched."""
    out = df.copy()
    for c in out.columns:
        if not pd.api.types.is_numeric_dtype(out[c].dtype):
            text = out[c].astype("string")
            risky = (text.str.startswith(_FORMULA_START) & ~text.str.fullmatch(_NUMBER)).fillna(False).to_numpy(dtype=bool)
            if risky.any():
                out[c] = text.where(~risky, "'" + text)
    out.columns = [str(escape_cell(str(c))) for c in out.columns]
    # RFC 4180 line ends: the writer then quotes any field holding a CR or LF
    return out.to_csv(index=False, lineterminator="\r\n").encode("utf-8")


def write_safe_csv(df: pd.DataFrame, path: str | Path) -> None:
    """Write :func:`to_safe_csv` to a file."""
    Path(path).write_bytes(to_safe_csv(df))

