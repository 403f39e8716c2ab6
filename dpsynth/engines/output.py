"""Writing millions of synthetic rows fast: decode cell indices in chunks and stream them to CSV.

Same content as ``to_safe_csv(decode(codes, schema, rng=rng))`` (:mod:`dpsynth.io`,
:mod:`dpsynth.binning`): numeric values drawn uniformly inside their bin (whole numbers for
integer columns), category labels, empty cells for missing; text that a spreadsheet would run as
a formula is prefixed with ``'`` (applied once per category label and to the header, since
those are the only text written); RFC 4180 line ends. Decoded in chunks of ``chunk_rows`` rows
(straight to Arrow arrays, no pandas) and formatted by Arrow's C++ CSV writer in slices on worker
threads, written in order, so memory stays O(chunk) besides the cell vector. The bytes do not
depend on the number of threads. With a single chunk the values are identical to ``decode`` for
the same generator state (same draws, same order).
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from dpsynth.io import escape_cell
from dpsynth.schema import CategoricalColumn, Schema

CHUNK_ROWS = 1_000_000
#: Threads formatting CSV (None: one per core, at most 4).
FORMAT_WORKERS: int | None = None
#: Rows formatted per task: a few MB of text, so buffers stay in cache and are reused.
SLICE_ROWS = 65_536


def _arrow_schema(schema: Schema, *, escape: bool = True) -> pa.Schema:
    fields = []
    for col in schema.columns:
        name = str(escape_cell(col.name)) if escape else col.name
        if isinstance(col, CategoricalColumn):
            fields.append(pa.field(name, pa.string()))
        elif col.integer:
            fields.append(pa.field(name, pa.int64()))
        else:
            fields.append(pa.field(name, pa.float64()))
    return pa.schema(fields)


def _address_space_limited() -> bool:
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return False
    return soft not in (resource.RLIM_INFINITY,) and soft > 0


def _numeric_array(c: np.ndarray, col: Any, rng: np.random.Generator, typ: pa.DataType) -> pa.Array:
    """:func:`dpsynth.binning._decode_numeric` straight to Arrow: the same draws in the same order, no pandas."""
    b = np.minimum(c, col.bins - 1)
    mask = (c >= col.bins) if col.missing else None
    if col.integer:
        lo, hi = col.integer_ranges()
        vals = rng.integers(lo[b], (hi + 1)[b])
        return pa.array(vals.astype(np.int64, copy=False), type=typ, mask=mask)
    edges = col.edges()
    vals = edges[:-1][b] + rng.random(len(c)) * (edges[1:] - edges[:-1])[b]
    np.clip(vals, col.lower, col.upper, out=vals)
    return pa.array(vals, type=typ, mask=mask)


def _unravel(part: np.ndarray, sizes: tuple[int, ...]) -> list[np.ndarray]:
    """``np.unravel_index`` (row-major); in 32-bit arithmetic, twice as fast, when the domain allows."""
    if int(np.prod(sizes, dtype=object)) > np.iinfo(np.int32).max:
        return [np.asarray(c, dtype=np.int64) for c in np.unravel_index(part, sizes)]
    q = np.asarray(part).astype(np.int32)
    out: list[np.ndarray] = [q] * len(sizes)
    for j in range(len(sizes) - 1, 0, -1):
        q, out[j] = np.divmod(q, np.int32(sizes[j]))
    out[0] = q
    return out


def _decode_table(part: np.ndarray, schema: Schema, rng: np.random.Generator, target: pa.Schema,
                  labels: list[pa.Array | None]) -> pa.Table:
    codes = _unravel(part, schema.sizes)
    arrays = []
    for j, col in enumerate(schema.columns):
        c = codes[j]
        if isinstance(col, CategoricalColumn):
            arrays.append(labels[j].take(pa.array(np.minimum(c, len(col.categories)))))
        else:
            arrays.append(_numeric_array(c, col, rng, target.field(j).type))
    return pa.Table.from_arrays(arrays, schema=target)


def _csv_bytes(table: pa.Table, header: bool) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    options = pacsv.WriteOptions(include_header=header, quoting_style="needed", eol="\r\n")
    pacsv.write_csv(table, sink, write_options=options)
    return sink.getvalue()


def write_synthetic_csv(
    cells: np.ndarray, schema: Schema, path: str | Path, *, rng: np.random.Generator,
    chunk_rows: int = CHUNK_ROWS, progress: Callable[[float, str], None] | None = None,
) -> int:
    """Decode flat cell indices (row-major over ``schema.sizes``) into rows and write them; returns the row count.

    Post-processing of released cells: adds no privacy loss. A path ending in ``.parquet`` gets
    Parquet instead (same values; labels and names unescaped, since no spreadsheet evaluates
    Parquet): no number formatting, so several times faster for millions of rows.
    """
    report = progress or (lambda _f, _m: None)
    parquet = Path(path).suffix.lower() in {".parquet", ".pq"}
    if _address_space_limited():
        # Arrow's default allocator (jemalloc/mimalloc) reserves large virtual regions up front,
        # which fails under ulimit -v / RLIMIT_AS; plain malloc does not.
        pa.set_memory_pool(pa.system_memory_pool())
    target = _arrow_schema(schema, escape=not parquet)
    esc = (lambda v: v) if parquet else escape_cell
    labels = [
        pa.array([str(esc(c)) for c in col.categories] + [None], type=pa.string())
        if isinstance(col, CategoricalColumn) else None
        for col in schema.columns
    ]
    n = len(cells)
    if parquet:
        _write_parquet(cells, schema, str(path), rng, target, labels, chunk_rows, report)
        return n
    # Number formatting is most of the work: slices of each decoded chunk are formatted to bytes on
    # worker threads (Arrow releases the GIL) while the next chunk is decoded; bytes are written in order.
    workers = FORMAT_WORKERS or max(1, min(4, os.cpu_count() or 1))
    pieces: deque[Future[pa.Buffer]] = deque()
    with open(path, "wb") as fh, ThreadPoolExecutor(workers) as pool:
        if n == 0:
            fh.write(_csv_bytes(target.empty_table(), True))
        first = True
        for start in range(0, n, chunk_rows):
            part = cells[start : start + chunk_rows]
            table = _decode_table(part, schema, rng, target, labels)
            for k in range(0, len(part), SLICE_ROWS):
                pieces.append(pool.submit(_csv_bytes, table.slice(k, SLICE_ROWS), first))
                first = False
                while len(pieces) > 4 * workers:
                    fh.write(pieces.popleft().result())
            report(min(1.0, (start + len(part)) / n), f"Writing synthetic rows ({start + len(part):,} of {n:,})")
        while pieces:
            fh.write(pieces.popleft().result())
    return n


def _write_parquet(cells: np.ndarray, schema: Schema, path: str, rng: np.random.Generator, target: pa.Schema,
                   labels: list[pa.Array | None], chunk_rows: int, report: Callable[[float, str], None]) -> None:
    n = len(cells)
    # Arrow encodes and writes chunk i on a second thread (it releases the GIL) while chunk i+1 is decoded.
    with pq.ParquetWriter(path, target) as writer, ThreadPoolExecutor(1) as pool:
        pending = pool.submit(writer.write_table, target.empty_table()) if n == 0 else None
        for start in range(0, n, chunk_rows):
            part = cells[start : start + chunk_rows]
            table = _decode_table(part, schema, rng, target, labels)
            if pending is not None:
                pending.result()
            pending = pool.submit(writer.write_table, table)
            report(min(1.0, (start + len(part)) / n), f"Writing synthetic rows ({start + len(part):,} of {n:,})")
        if pending is not None:
            pending.result()


class ProgressBar:
    """A one-line text progress bar for long counts and releases (``progress(fraction, message)``).

    Draws on ``stream`` (stderr) only when it is a terminal, unless ``force``; redraws at most
    every 0.2 s. Compatible with the ``progress`` callbacks of :func:`dpsynth.release.release`
    and the engines (the dashboard passes ``st.progress(...).progress`` the same way).
    """

    def __init__(self, stream: Any = None, *, force: bool = False, width: int = 30) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = force or bool(getattr(self.stream, "isatty", lambda: False)())
        self.width = width
        self._last = 0.0
        self._start = time.monotonic()

    def __call__(self, fraction: float, message: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if fraction < 1.0 and now - self._last < 0.2:
            return
        self._last = now
        f = min(max(float(fraction), 0.0), 1.0)
        filled = int(round(f * self.width))
        line = f"\r[{'#' * filled}{'.' * (self.width - filled)}] {f * 100:3.0f}% {now - self._start:6.1f}s {message[:60]:<60}"
        self.stream.write(line)
        if f >= 1.0 and message == "Done":
            self.stream.write("\n")
        self.stream.flush()
