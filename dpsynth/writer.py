"""Writing millions of synthetic rows fast: sample, decode and format in chunks on worker threads.

Content: the rows of :class:`dpsynth.synthesis.RowSampler` decoded as :func:`dpsynth.binning.decode_with`
does — numeric values drawn uniformly inside their bin (grid points for ``integer`` and
``decimals`` columns), category labels, empty cells for missing — so for the same seed the file
holds the same values as ``RowSampler.frame``. CSV: ``decimals`` columns are written with
exactly d decimals (Arrow decimal formatting of the grid units), other numbers as Arrow formats
int64 / float64 (shortest round trip); text that a spreadsheet would run as a formula is
prefixed with ``'`` (applied once per category label and to the header, the only text written);
RFC 4180 line ends. A ``.parquet`` path gets Parquet: the same values (``decimals`` columns as
float64 k / 10^d), labels and names unescaped, categories dictionary-encoded.

Randomness is post-processing (:mod:`dpsynth.synthesis`): chunk i draws from its own fast
generator keyed by (seed, i), where the seed is 256 bits of the release's generator. Each chunk
(at most ``chunk_rows`` rows) is sampled, decoded and formatted on a worker thread
(numpy and Arrow release the GIL) and written in order, so the bytes do not depend on the
number of threads, and memory is O(cells + chunk × threads): the full cell vector is never built.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from dpsynth.binning import draw_numeric, unravel
from dpsynth.engines import address_space_limit
from dpsynth.io import PARQUET_SUFFIXES, escape_cell
from dpsynth.randomness import CHUNK_KEY, fast_rng, post_processing_seed
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema
from dpsynth.synthesis import CHUNK_ROWS, RowSampler

#: Threads sampling, decoding and formatting chunks (None: one per core, at most 4).
FORMAT_WORKERS: int | None = None
#: Rows formatted per Arrow CSV call: a few MB of text, so buffers stay in cache and are reused.
SLICE_ROWS = 65_536

Job = Callable[[], tuple[np.ndarray, np.random.Generator]]


@dataclass(frozen=True)
class _Plan:
    """Per column, what the chunks need: the output type, and the labels of categorical columns."""

    schema: Schema
    target: pa.Schema
    parquet: bool
    labels: list[pa.Array | None]
    values: Any = None  # a released dpsynth.value_model.ValueModel, or None (uniform inside bins)


def _plan(schema: Schema, parquet: bool, values: Any = None) -> _Plan:
    fields, labels = [], []
    esc = (lambda v: v) if parquet else escape_cell
    for col in schema.columns:
        name = col.name if parquet else str(escape_cell(col.name))
        if isinstance(col, CategoricalColumn):
            cats = [str(esc(c)) for c in col.categories]
            if parquet:
                # indices into the label list: Parquet stores them as its dictionary encoding directly
                labels.append(pa.array(cats, type=pa.string()))
                fields.append(pa.field(name, pa.dictionary(pa.int32(), pa.string())))
            else:
                labels.append(pa.array([*cats, None], type=pa.string()))  # the missing cell's code takes None
                fields.append(pa.field(name, pa.string()))
            continue
        d = col.grid_decimals
        typ = pa.int64() if d == 0 else pa.float64() if d is None or parquet else pa.decimal64(18, d)
        # decimal64: the int64 grid units reinterpreted with scale d, which Arrow formats ~2x faster
        # than float64 and with exactly d decimals (precision 18 holds every |k| ≤ 2^53). Numbers
        # stay numeric types: Arrow quotes every string value, and numbers are written unquoted.
        labels.append(None)
        fields.append(pa.field(name, typ))
    return _Plan(schema, pa.schema(fields), parquet, labels, values)


def _numeric_array(c: np.ndarray, col: NumericColumn, gen: np.random.Generator, typ: pa.DataType,
                   values: Any = None) -> pa.Array:
    """:func:`dpsynth.binning.draw_numeric` (the same draws as ``decode_with``) as an Arrow array of ``typ``."""
    vals, mask = draw_numeric(c, col, gen, values)
    d = col.grid_decimals
    if d is None or d == 0:
        return pa.array(vals, type=typ, mask=mask)
    if pa.types.is_floating(typ):
        return pa.array(vals / 10.0**d, type=typ, mask=mask)  # correctly rounded: the float parsed from the CSV text
    units = pa.array(vals.astype(np.int64, copy=False), type=pa.int64(), mask=mask)
    return pa.Array.from_buffers(typ, len(units), units.buffers(), units.null_count)


def _decode_table(cells: np.ndarray, gen: np.random.Generator, plan: _Plan) -> pa.Table:
    # flat cell indices (histograms) or one code per column (a model's rows, whose domain may not fit int64)
    codes = list(cells.T) if cells.ndim == 2 else unravel(cells, plan.schema.sizes)
    arrays = []
    for j, col in enumerate(plan.schema.columns):
        c = codes[j]
        if isinstance(col, CategoricalColumn):
            labels = plan.labels[j]
            assert labels is not None
            if plan.parquet:
                idx = c.astype(np.int32, copy=False)
                mask = (idx == len(col.categories)) if col.missing else None
                arrays.append(pa.DictionaryArray.from_arrays(pa.array(idx, mask=mask), labels))
            else:
                arrays.append(labels.take(pa.array(c)))
        else:
            arrays.append(_numeric_array(c, col, gen, plan.target.field(j).type, plan.values))
    return pa.Table.from_arrays(arrays, schema=plan.target)


def _csv_bytes(table: pa.Table, header: bool) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    options = pacsv.WriteOptions(include_header=header, quoting_style="needed", eol="\r\n")
    pacsv.write_csv(table, sink, write_options=options)
    return sink.getvalue()


def _csv_chunk(job: Job, plan: _Plan, header: bool) -> tuple[int, list[pa.Buffer]]:
    cells, gen = job()
    table = _decode_table(cells, gen, plan)
    return len(cells), [_csv_bytes(table.slice(k, SLICE_ROWS), header and k == 0) for k in range(0, len(cells), SLICE_ROWS)]


def _table_chunk(job: Job, plan: _Plan) -> pa.Table:
    cells, gen = job()
    return _decode_table(cells, gen, plan)


def _jobs(rows: RowSampler | np.ndarray | Any, rng: np.random.Generator | None, chunk_rows: int) -> tuple[int, Iterator[Job]]:
    """The row count and, in order, one job per chunk giving its cells and its generator."""
    if hasattr(rows, "chunk_cells"):  # a RowSampler or a dpsynth.results.ModelSampler
        sampler = rows

        def sampled() -> Iterator[Job]:
            for i in range(sampler.n_chunks):
                yield lambda i=i: sampler.chunk_cells(i)

        return sampler.rows, sampled()
    if rng is None:
        raise TypeError("writing a given cell vector needs rng (the release's generator)")
    cells = np.asarray(rows)
    seed = post_processing_seed(rng)

    def given() -> Iterator[Job]:
        for i, start in enumerate(range(0, len(cells), chunk_rows)):
            yield lambda i=i, start=start: (cells[start : start + chunk_rows], fast_rng(seed, CHUNK_KEY, i))

    return len(cells), given()


def write_synthetic_csv(
    rows: RowSampler | np.ndarray, schema: Schema, path: str | Path, *, rng: np.random.Generator | None = None,
    chunk_rows: int = CHUNK_ROWS, progress: Callable[[float, str], None] | None = None, parquet: bool | None = None,
    values: Any = None,
) -> int:
    """Write synthetic rows to CSV (or Parquet for a ``.parquet`` path); returns the row count.

    ``rows`` is a :class:`dpsynth.synthesis.RowSampler` (its own seed and chunks; ``rng`` and
    ``chunk_rows`` unused), or flat cell indices (row-major over ``schema.sizes``) to decode,
    in chunks of ``chunk_rows``, with generators seeded by 256 bits of ``rng``; a single chunk then
    holds the values of ``decode(codes, schema, rng=rng)``. Post-processing of released cells:
    adds no privacy loss. The bytes do not depend on :data:`FORMAT_WORKERS`. ``values``: a released
    :class:`dpsynth.value_model.ValueModel` to draw numeric values inside bins from (None: uniform).
    """
    report = progress or (lambda _f, _m: None)
    if parquet is None:
        parquet = not hasattr(path, "write") and Path(path).suffix.lower() in PARQUET_SUFFIXES
    if address_space_limit() is not None:
        # Arrow's default allocator (jemalloc/mimalloc) reserves large virtual regions up front,
        # which fails under ulimit -v / RLIMIT_AS; plain malloc does not.
        pa.set_memory_pool(pa.system_memory_pool())
    plan = _plan(schema, parquet, values)
    n, jobs = _jobs(rows, rng, chunk_rows)
    workers = FORMAT_WORKERS or max(1, min(4, os.cpu_count() or 1))
    done = 0

    def advance(k: int) -> None:
        nonlocal done
        done += k
        report(min(1.0, done / n), f"Writing synthetic rows ({done:,} of {n:,})")

    # At most workers + 1 chunks in flight: every core busy, memory bounded by a few chunks.
    pending: deque[Future[Any]] = deque()
    if parquet:
        # store_schema=False: readers see plain strings, not Arrow dictionaries (pandas categoricals).
        # Dictionary pages only where values repeat (categories, whole numbers): hashing millions of
        # distinct floats costs more than it saves; no min/max statistics (a third of the encoding time).
        dictionary = [f.name for f in plan.target if not pa.types.is_floating(f.type)]
        with pq.ParquetWriter(path if hasattr(path, "write") else str(path), plan.target, store_schema=False, use_dictionary=dictionary,
                              write_statistics=False) as writer, ThreadPoolExecutor(workers) as pool:
            if n == 0:
                writer.write_table(plan.target.empty_table())
            for job in jobs:
                pending.append(pool.submit(_table_chunk, job, plan))
                while len(pending) > workers:
                    table = pending.popleft().result()
                    writer.write_table(table)  # encodes on this thread (GIL released) while workers decode
                    advance(len(table))
            while pending:
                table = pending.popleft().result()
                writer.write_table(table)
                advance(len(table))
        return n
    with _binary(path) as fh, ThreadPoolExecutor(workers) as pool:
        if n == 0:
            fh.write(_csv_bytes(plan.target.empty_table(), True))
        first = True
        for job in jobs:
            pending.append(pool.submit(_csv_chunk, job, plan, first))
            first = False
            while len(pending) > workers:
                advance(_write_all(fh, pending.popleft().result()))
        while pending:
            advance(_write_all(fh, pending.popleft().result()))
    return n


def _binary(path: Any) -> Any:
    """An open binary file for a path, or the given file object (left open)."""
    if hasattr(path, "write"):
        return contextlib.nullcontext(path)
    return open(path, "wb")


def synthetic_bytes(rows: Any, schema: Schema, *, parquet: bool = False, values: Any = None) -> bytes:
    """The synthetic file's bytes in memory (the same bytes :func:`write_synthetic_csv` writes to a path)."""
    buf = io.BytesIO()
    write_synthetic_csv(rows, schema, buf, parquet=parquet, values=values)
    return buf.getvalue()


def _write_all(fh: Any, chunk: tuple[int, list[pa.Buffer]]) -> int:
    """Write a formatted chunk's buffers in order; returns its row count."""
    rows, pieces = chunk
    for buf in pieces:
        fh.write(buf)
    return rows
