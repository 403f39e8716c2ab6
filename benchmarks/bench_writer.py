"""Sampling + writing 10M synthetic rows of the bench schema: CSV and Parquet, with and without ``decimals``.

Measures :func:`dpsynth.writer.write_synthetic_csv` on a :class:`dpsynth.synthesis.RowSampler`
(everything after the noise in a release: chunk split, expansion, shuffle, decode, format,
write) for the schema of ``bench_scale.py`` (237,600 cells), once as declared there and once
with ``decimals`` on its continuous columns (income 2, score 4: what the generated data holds).
The baseline, in the same process, is Arrow alone writing an already built table of the same
size and column types (the float columns holding the same grid values) to the same format:
no sampling, no decoding, one thread. Best of ``--repeat``; ratios are release writer / baseline
(wall); CPU seconds (all threads) are printed too, since the machine may be shared.

    python benchmarks/bench_writer.py [--rows 10000000] [--repeat 3] [--out-dir DIR]

Measured 2026-11-22 on the 2-core dev machine, quiet (load < 1), 10M rows, best of 3 — writer
wall s (CPU s, all threads) vs baseline wall s, ratio:
CSV no decimals 3.14 (5.30) vs 3.10, 1.01x; CSV with decimals 2.21 (3.84) vs 3.03, 0.73x;
Parquet no decimals 1.44 (2.41) vs 2.29, 0.63x; Parquet with decimals 1.58 (2.67) vs 2.26, 0.70x.
The previous writer (sample_cells on ChaCha + the slice-parallel writer), same process: CSV 4.19 s,
Parquet 3.15 s. Under load from other runs (load 1.5-3) every figure is 1.5-2x higher.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_scale import bench_schema  # noqa: E402

from dpsynth.schema import NumericColumn, Schema  # noqa: E402
from dpsynth.synthesis import RowSampler  # noqa: E402
from dpsynth.writer import write_synthetic_csv  # noqa: E402

DECIMALS = {"income": 2, "score": 4}


def with_decimals(schema: Schema, on: bool = True) -> Schema:
    """The bench schema with (or without) the decimals its generated data has (income cents, score to 4 places)."""
    cols = tuple(
        dataclasses.replace(c, decimals=DECIMALS[c.name] if on else None)
        if isinstance(c, NumericColumn) and c.name in DECIMALS else c
        for c in schema.columns
    )
    return Schema(cols)


def noisy_counts(schema: Schema, rows: int) -> np.ndarray:
    """A skewed histogram of ``rows`` rows over the schema's cells, plus discrete noise (some cells negative)."""
    g = np.random.default_rng(7)
    p = g.gamma(0.3, size=schema.n_cells)
    counts = g.multinomial(rows, p / p.sum())
    return counts + g.integers(-2, 3, size=len(counts))


def best(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Best wall seconds and best process CPU seconds (all threads) of ``repeat`` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return min(walls), min(cpus)


def baseline_table(schema: Schema, rows: int) -> pa.Table:
    """A random table of the release's Arrow types: int64, float64 (grid values with d decimals), strings."""
    g = np.random.default_rng(1)
    cols = {}
    for c in schema.columns:
        if isinstance(c, NumericColumn):
            if c.integer:
                cols[c.name] = pa.array(g.integers(int(c.lower), int(c.upper) + 1, rows))
            else:
                v = g.uniform(c.lower, c.upper, rows)
                d = DECIMALS.get(c.name)
                cols[c.name] = pa.array(np.round(v, d) if d is not None else v)
        else:
            labels = pa.array(list(c.categories))
            cols[c.name] = labels.take(pa.array(g.integers(0, len(c.categories), rows)))
    return pa.table(cols)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out-dir", default=None)
    a = ap.parse_args()
    tmp = Path(a.out_dir or tempfile.mkdtemp(prefix="bench_writer_"))
    tmp.mkdir(parents=True, exist_ok=True)
    base_schema = with_decimals(bench_schema(), on=False)  # whatever bench_scale declares by default
    counts = noisy_counts(base_schema, a.rows)
    print(f"{a.rows:,} synthetic rows, {base_schema.n_cells:,} cells; best of {a.repeat}; files in {tmp}")
    print(f"{'format':8} {'decimals':9} {'writer s':>9} {'cpu s':>6} {'baseline s':>11} {'cpu s':>6} {'ratio':>6} {'MB':>6}")
    for fmt in ("csv", "parquet"):
        for label, schema in (("no", base_schema), ("yes", with_decimals(base_schema))):
            path = tmp / f"syn.{fmt}"
            sampler = RowSampler.dense(counts, a.rows, seed=12345)
            t_writer, c_writer = best(lambda s=sampler, sc=schema, p=path: write_synthetic_csv(s, sc, p), a.repeat)
            size = path.stat().st_size / 2**20
            table = baseline_table(schema, a.rows)
            bpath = tmp / f"base.{fmt}"
            if fmt == "csv":
                def write_base(t: pa.Table = table, p: Path = bpath) -> None:
                    pacsv.write_csv(t, p, write_options=pacsv.WriteOptions(quoting_style="needed", eol="\r\n"))
            else:
                def write_base(t: pa.Table = table, p: Path = bpath) -> None:
                    pq.write_table(t, p)
            t_base, c_base = best(write_base, a.repeat)
            print(f"{fmt:8} {label:9} {t_writer:9.2f} {c_writer:6.2f} {t_base:11.2f} {c_base:6.2f} {t_writer / t_base:6.2f}"
                  f" {size:6.0f}")
            del table


if __name__ == "__main__":
    main()
