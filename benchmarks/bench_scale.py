"""Scale benchmark (issue 6): engines, out-of-core memory, sparse vs dense. Prints RATIOS.

    python benchmarks/bench_scale.py                 # 10M rows (default), all parts
    python benchmarks/bench_scale.py --rows 1000000  # quick run
    python benchmarks/bench_scale.py --parts a --engines duckdb

(a) our whole CLI release (``python -m dpsynth release --engine E``: count + noise + all
    synthetic rows written) against DuckDB alone running the equivalent GROUP BY count over the
    same file (a hand-written floor-binning query, :func:`bare_count_sql`, over the file read with
    DuckDB's own type detection, as a DuckDB user would), both as fresh subprocesses, interleaved,
    best of ``--repeat`` rounds, for CSV and Parquet. Also printed: DuckDB alone copying the same
    rows to CSV/Parquet, and the floor "DuckDB's count + DuckDB's copy" that any release writing
    those rows must pay on this machine.
(b) peak memory (max RSS) of the DuckDB-engine CLI release of an uncompressed Parquet file
    larger than the address space the process is given (``RLIMIT_AS`` set in the child).
(c) sparse vs dense noising of a 10^8-cell domain: peak RSS and time of each in its own
    subprocess, and a chi-square test that the released values of empty cells have the same law.

Data: a reproducible table (seed 2024) of 8 columns — age (integer, skewed), income
(log-normal, clamped above, in cents), hours (integer, peaked at 40), score (beta, 4 decimals,
2% missing), region (Zipf over 10 + 0.1% unknown), sector (Zipf over 5), education (skewed
over 4), sex (2 values, 1% missing) — written as CSV and Parquet to benchmarks/out/
(git-ignored; reused if present). The schema has 237,600 cells (dense path) and declares the
recorded precision (income decimals 2, score decimals 4).

Measured 2026-11-22, second session, 2-core VM with load average 0.6–1.9 (best of 3 rounds):
(a) 10M rows, DuckDB engine, whole release / bare count:
    Parquet in: 4.66x (CSV out), 3.89x (Parquet out), 5.66x (no decimals declared); count alone 1.86x
      (subprocess with imports). DuckDB alone copying the rows: 3.62x (to CSV), 2.95x (to Parquet);
      floor (count + copy) 4.62x / 3.95x, so our release / floor = 1.01 / 0.99.
    CSV in: 2.51x (CSV out), 2.26x (Parquet out), 2.91x (no decimals); count alone 1.43x.
      DuckDB copying: 1.73x / 1.47x; floor 2.73x / 2.47x; our release / floor = 0.92 / 0.91.
    Spark engine (local mode, one run): 21.7x (Parquet in), 17.2x (CSV in), CSV out.
    The 2x target is below that floor: writing 10M rows costs DuckDB itself 1.5–3.6x its count.
    First session for comparison: 6.6–7.0x (Parquet in) and 2.9–3.7x (CSV in), against a bare
    count that read CSV as text (about 8% slower than DuckDB's own detection used now).
    What changed: a one-pass count query (cheap in-range test per row, the full status chain only
    for the rest; count alone on Parquet 1.7 s -> 0.95 s in process), categories coded by CASE,
    post-processing draws from SFC64 seeded by the release generator, rows sampled and written in
    parallel chunks, declared decimals written as decimal text, lazy imports, ledger hashing
    while the library loads.
(b) 40M rows, 2.43 GB uncompressed Parquet, RLIMIT_AS = 2 GB: released; peak RSS 0.54 GB, 9.9 s
    (1M synthetic rows). glibc's per-thread malloc arenas are capped under the limit (without
    that, the threaded writer ran out of address space at 0.54 GB RSS).
(c) 10^8 cells, 1M occupied: memory ratio dense/sparse 5.1x (ε=1, τ=3), 10.9x (ε=1, τ=10),
    6.0x (ε=4, τ=1); chi-square p = 0.63 / 0.69 / 0.65 (same law).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpsynth.engines.duckdb_engine import bare_count_sql  # noqa: E402
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
REGIONS = [f"R{i:02d}" for i in range(10)]
SECTORS = ["agri", "manuf", "trade", "public", "other"]
EDUCATION = ["primary", "secondary", "vocational", "tertiary"]


def bench_schema(*, decimals: bool = True) -> Schema:
    """The public schema; ``decimals`` declares the precision the data are recorded to (income in
    cents, score to 4 places), so synthetic values are written to that precision, not as 17-digit floats."""
    return Schema((
        NumericColumn(name="age", lower=16, upper=96, bins=6, integer=True),
        NumericColumn(name="income", lower=0, upper=200_000, bins=5, decimals=2 if decimals else None),
        NumericColumn(name="hours", lower=0, upper=99, bins=3, integer=True),
        NumericColumn(name="score", lower=0, upper=1, bins=3, missing=True, decimals=4 if decimals else None),
        CategoricalColumn(name="region", categories=tuple(REGIONS), missing=True, on_unknown="missing"),
        CategoricalColumn(name="sector", categories=tuple(SECTORS)),
        CategoricalColumn(name="education", categories=tuple(EDUCATION)),
        CategoricalColumn(name="sex", categories=("F", "M"), missing=True),
    ))


def _chunk(rng: np.random.Generator, n: int) -> pa.Table:
    def zipf_choice(labels: list[str], s: float) -> np.ndarray:
        w = 1.0 / np.arange(1, len(labels) + 1) ** s
        return rng.choice(len(labels), n, p=w / w.sum())

    age = np.clip(np.round(16 + rng.gamma(4.0, 6.0, n)), 16, 99).astype(np.int64)
    income = np.round(np.exp(rng.normal(10.4, 0.7, n)), 2)
    hours = np.clip(np.round(rng.normal(40, 9, n)), 0, 99).astype(np.int64)
    score = np.round(rng.beta(2.0, 5.0, n), 4)
    score_mask = rng.random(n) < 0.02
    region_idx = zipf_choice(REGIONS + ["R99"], 1.1)
    region_idx = np.where(rng.random(n) < 0.001, len(REGIONS), np.minimum(region_idx, len(REGIONS) - 1))
    sector_idx = zipf_choice(SECTORS, 0.9)
    edu_idx = rng.choice(len(EDUCATION), n, p=[0.2, 0.4, 0.25, 0.15])
    sex_idx = rng.choice(3, n, p=[0.5, 0.49, 0.01])

    def dict_col(idx: np.ndarray, labels: list[str]) -> pa.Array:
        return pa.DictionaryArray.from_arrays(pa.array(idx.astype(np.int32)), pa.array(labels)).cast(pa.string())

    return pa.table({
        "age": pa.array(age),
        "income": pa.array(income),
        "hours": pa.array(hours),
        "score": pa.array(score, mask=score_mask),
        "region": dict_col(region_idx, REGIONS + ["R99"]),
        "sector": dict_col(sector_idx, SECTORS),
        "education": dict_col(edu_idx, EDUCATION),
        "sex": pa.array(np.array(["F", "M", None], dtype=object)[sex_idx], type=pa.string()),
    })


def generate(rows: int, *, csv: bool = True, compression: str = "snappy", tag: str = "") -> dict[str, Path]:
    """Write the table (reproducible: seed 2024, chunks of 1M rows) unless already present."""
    OUT.mkdir(parents=True, exist_ok=True)
    stem = OUT / f"scale_{rows}{tag}"
    paths = {"parquet": stem.with_suffix(".parquet")}
    if csv:
        paths["csv"] = stem.with_suffix(".csv")
    if all(p.exists() for p in paths.values()):
        return paths
    rng = np.random.default_rng(2024)
    chunk = 1_000_000
    first = _chunk(np.random.default_rng(0), 1)
    pw = pq.ParquetWriter(str(paths["parquet"]) + ".tmp", first.schema, compression=compression,
                          use_dictionary=compression != "none")
    cw = pacsv.CSVWriter(str(paths["csv"]) + ".tmp", first.schema) if csv else None
    for start in range(0, rows, chunk):
        t = _chunk(rng, min(chunk, rows - start))
        pw.write_table(t)
        if cw is not None:
            cw.write_table(t)
    pw.close()
    if cw is not None:
        cw.close()
    for p in paths.values():
        os.replace(str(p) + ".tmp", p)
    return paths


def run_child(cmd: list[str], *, as_limit: int | None = None) -> tuple[float, int, str]:
    """(seconds, peak RSS in bytes, stderr tail) of a subprocess, optionally under RLIMIT_AS."""
    def limit() -> None:
        if as_limit:
            resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))

    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limit, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])}... failed ({proc.returncode}):\n{err[-2000:]}\n{out[-500:]}")
    return elapsed, usage.ru_maxrss * 1024, out + err


def natural_source(path: Path) -> str:
    """How a DuckDB user reads the file: its own type detection (CSV numbers parsed by the reader,
    about 8% faster than our all-text read, which must see cells as pandas would)."""
    return f"read_parquet('{path}')" if path.suffix == ".parquet" else f"read_csv('{path}')"


def bare_duckdb_cmd(path: Path, schema: Schema) -> list[str]:
    q = bare_count_sql(schema, natural_source(path))
    code = f"import duckdb; r = duckdb.connect().execute({q!r}).fetchall(); print(len(r))"
    return [sys.executable, "-c", code]


def duckdb_copy_cmd(path: Path, out: Path) -> list[str]:
    """DuckDB alone copying the file's rows to ``out`` (CSV or Parquet): its own floor for writing 10M rows."""
    fmt = "(FORMAT parquet)" if out.suffix == ".parquet" else "(HEADER)"
    q = f"COPY (SELECT * FROM {natural_source(path)}) TO '{out}' {fmt}"
    return [sys.executable, "-c", f"import duckdb; duckdb.connect().execute({q!r})"]


def count_only_cmd(path: Path) -> list[str]:
    code = ("import sys; sys.path.insert(0, 'benchmarks'); from bench_scale import bench_schema;"
            " from dpsynth.engines import get_engine;"
            f" c = get_engine('duckdb').count({str(path)!r}, bench_schema()); print(int(c.dense.sum()))")
    return [sys.executable, "-c", code]


def cli_cmd(path: Path, schema_path: Path, engine: str, out: Path, ledger: Path, extra: list[str] | None = None) -> list[str]:
    if not ledger.exists():  # the CLI creates only the default ledger; a named one must exist
        from dpsynth.accounting import Ledger

        Ledger(ledger)
    return [sys.executable, "-m", "dpsynth", "release", str(path), "--schema", str(schema_path), "--epsilon", "1",
            "--engine", engine, "--out", str(out), "--ledger", str(ledger), "--budget", "1000", *(extra or [])]


def best(fn, repeat: int) -> tuple[float, int]:
    runs = [fn() for _ in range(repeat)]
    return min(r[0] for r in runs), max(r[1] for r in runs)


def part_a(rows: int, engines: list[str], repeat: int, tmp: Path) -> None:
    """Each round runs the bare count and every variant once, in turn; each figure is the best of its
    rounds. Interleaving matters here: this VM's CPU speed drifts under sustained load (runs slow
    down by up to 2x over a minute), so measuring the baseline first and the release later is unfair."""
    paths = generate(rows)
    schema = bench_schema()
    schema_path = tmp / "schema.json"
    schema_path.write_text(schema.to_json(), encoding="utf-8")
    full_path = tmp / "schema_full_precision.json"
    full_path.write_text(bench_schema(decimals=False).to_json(), encoding="utf-8")
    print(f"\n(a) whole CLI release vs bare DuckDB GROUP BY — {rows:,} rows, {schema.n_cells:,} cells,"
          f" {rows:,} synthetic rows written; best of {repeat} interleaved rounds")
    print(f"    files: CSV {paths['csv'].stat().st_size / 2**20:,.0f} MB, Parquet {paths['parquet'].stat().st_size / 2**20:,.0f} MB")
    print(f"    {'format':8} {'engine':7} {'bare duckdb s':>13} {'release s':>10} {'ratio':>7}")

    def release(p: Path, engine: str, schema_file: Path, out: str) -> tuple[float, int, str]:
        ledger = tmp / f"ledger_{time.monotonic_ns()}.sqlite"
        return run_child(cli_cmd(p, schema_file, engine, tmp / out, ledger))

    for fmt in ("parquet", "csv"):
        path = paths[fmt]
        variants: dict[str, Any] = {"bare": lambda p=path: run_child(bare_duckdb_cmd(p, schema))}
        notes: dict[str, str] = {}
        for engine in engines:
            if engine == "pandas" and rows > 2_000_000:
                notes[engine] = "skipped: read_table caps uploads at 2M rows / 200 MB (in-memory path)"
                continue
            variants[engine] = lambda p=path, e=engine: release(p, e, schema_path, "syn.csv")
            notes[engine] = "CSV out"
        if "duckdb" in engines:
            extra = {
                "duckdb-pq": (lambda p=path: release(p, "duckdb", schema_path, "syn.parquet"),
                              "synthetic rows written as Parquet: --out x.parquet"),
                "duckdb-full": (lambda p=path: release(p, "duckdb", full_path, "syn_full.csv"),
                                "no decimals declared: income and score written as shortest round-trip floats"),
                "count": (lambda p=path: run_child(count_only_cmd(p)), "count only: engine.count, same subprocess shape"),
                "copy-csv": (lambda p=path: run_child(duckdb_copy_cmd(p, tmp / "copy.csv")),
                             f"reference: DuckDB alone copying the {rows:,} rows to CSV, no counting"),
                "copy-pq": (lambda p=path: run_child(duckdb_copy_cmd(p, tmp / "copy.parquet")),
                            f"reference: DuckDB alone copying the {rows:,} rows to Parquet, no counting"),
            }
            for k, (fn, note) in extra.items():
                variants[k], notes[k] = fn, note
        times: dict[str, list[float]] = {k: [] for k in variants}
        rss: dict[str, int] = {k: 0 for k in variants}
        for r in range(repeat):
            for k, fn in variants.items():
                if k == "spark" and r > 0:
                    continue  # a minute per run: once is enough
                t, m, _ = fn()
                times[k].append(t)
                rss[k] = max(rss[k], m)
        base = min(times["bare"])
        for k in variants:
            if k == "bare":
                continue
            t = min(times[k])
            label = k if k in engines else ""
            shown = f"{base:13.2f}" if label else " " * 13
            print(f"    {fmt:8} {label:7} {shown} {t:10.2f} {t / base:7.2f}x   ({notes[k]};"
                  f" peak RSS {rss[k] / 2**30:.2f} GB)")
        for engine in engines:
            if engine not in variants:
                print(f"    {fmt:8} {engine:7} {notes[engine]}")
        if "copy-csv" in times:
            for ext, k, ours in (("CSV", "copy-csv", "duckdb"), ("Parquet", "copy-pq", "duckdb-pq")):
                floor = base + min(times[k])
                print(f"    {fmt:8} {'':7} {'':13} {floor:10.2f} {floor / base:7.2f}x   (floor: DuckDB's own count + its own"
                      f" copy of the rows to {ext}; our release / floor = {min(times[ours]) / floor:.2f})")
    print("    target: duckdb engine within 2x of the bare count")


def part_b(tmp: Path, limit_gb: float, big_rows: int) -> None:
    paths = generate(big_rows, csv=False, compression="none", tag="_uncompressed")
    size = paths["parquet"].stat().st_size
    schema_path = tmp / "schema.json"
    schema_path.write_text(bench_schema().to_json(), encoding="utf-8")
    limit = int(limit_gb * 2**30)
    cmd = cli_cmd(paths["parquet"], schema_path, "duckdb", tmp / "syn_b.csv", tmp / "ledger_b.sqlite", ["--rows", "1000000"])
    t, rss, _ = run_child(cmd, as_limit=limit)
    print(f"\n(b) DuckDB-engine release of an uncompressed Parquet file of {big_rows:,} rows under RLIMIT_AS = {limit_gb:g} GB")
    print(f"    file {size / 2**30:.2f} GB; peak RSS {rss / 2**30:.2f} GB; file / address-space limit = {size / limit:.2f};"
          f" peak RSS / file = {rss / size:.2f}; {t:.1f} s (1M synthetic rows written)")


SPARSE_CHILD = r"""
import json, sys, time
import numpy as np
from dpsynth import noise
from dpsynth.mechanisms import DiscreteLaplace
from dpsynth.sparse import noise_sparse
mode, n_cells, eps, tau = sys.argv[1], int(float(sys.argv[2])), float(sys.argv[3]), int(sys.argv[4])
rng = noise.seeded_rng(1)
occ = np.unique(np.random.default_rng(0).integers(0, n_cells, 1_000_000))
cnt = np.random.default_rng(1).integers(1, 20, len(occ))
mech = DiscreteLaplace.calibrate(eps, "add-remove")
t = time.perf_counter()
empty_mask_vals = None
if mode == "dense":
    counts = np.zeros(n_cells, dtype=np.int64)
    counts[occ] = cnt
    noisy = mech(counts, rng=rng)
    del counts
    kept = noisy >= tau
    kept[occ] = False  # empty cells only, for the law comparison
    vals = noisy[kept]
    listed = int(kept.sum()) + len(occ)
else:
    sp = noise_sparse(occ, cnt, n_cells, mech, rng=rng, threshold=tau)
    vals = sp.values[~np.isin(sp.cells, occ)]
    listed = len(sp.cells)
hist = np.bincount(np.minimum(vals, 30), minlength=31).tolist()  # empty cells released with each value >= tau
print(json.dumps({"seconds": time.perf_counter() - t, "listed": listed, "hist": hist, "occupied": len(occ)}))
"""


def part_c(tmp: Path, n_cells: int, settings: list[tuple[float, int]]) -> None:
    from scipy import stats

    print(f"\n(c) sparse vs dense noising of {n_cells:.0e} cells (1M occupied), discrete Laplace; each in its own process")
    print(f"    {'eps':>4} {'tau':>3} {'dense GB':>9} {'sparse GB':>9} {'mem ratio':>9} {'dense s':>8} {'sparse s':>8}"
          f" {'listed':>11}  chi-square p (empty-cell values)")
    base_rss = run_child([sys.executable, "-c", "import numpy, dpsynth.sparse"])[1]
    for eps, tau in settings:
        res = {}
        for mode in ("dense", "sparse"):
            t, rss, out = run_child([sys.executable, "-c", SPARSE_CHILD, mode, str(n_cells), str(eps), str(tau)])
            line = [ln for ln in out.splitlines() if ln.startswith("{")][-1]
            res[mode] = (rss, json.loads(line))
        d, s = res["dense"], res["sparse"]
        hd, hs = np.array(d[1]["hist"]), np.array(s[1]["hist"])
        k = max(len(hd), len(hs))
        hd, hs = np.pad(hd, (0, k - len(hd))), np.pad(hs, (0, k - len(hs)))
        empty = n_cells - d[1]["occupied"]
        hd[0], hs[0] = empty - hd.sum(), empty - hs.sum()  # cells released as 0
        table = np.array([hd, hs])
        table = table[:, table.sum(axis=0) >= 10]
        p = stats.chi2_contingency(table)[1] if table.shape[1] > 1 else float("nan")
        print(f"    {eps:4g} {tau:3d} {d[0] / 2**30:9.2f} {s[0] / 2**30:9.2f} {d[0] / s[0]:8.1f}x {d[1]['seconds']:8.1f}"
              f" {s[1]['seconds']:8.2f} {s[1]['listed']:11,}  {p:.3g}")
    print(f"    (peak RSS includes the interpreter and imports: {base_rss / 2**30:.2f} GB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--engines", default="duckdb,spark,pandas")
    ap.add_argument("--parts", default="abc")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--limit-gb", type=float, default=2.0, help="(b) address-space limit of the release process")
    ap.add_argument("--big-rows", type=int, default=40_000_000, help="(b) rows of the uncompressed Parquet file")
    ap.add_argument("--sparse-cells", type=float, default=1e8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if "a" in args.parts:
            part_a(args.rows, args.engines.split(","), args.repeat, tmp)
        if "b" in args.parts:
            part_b(tmp, args.limit_gb, args.big_rows)
        if "c" in args.parts:
            part_c(tmp, int(args.sparse_cells), [(1.0, 3), (1.0, 10), (4.0, 1)])


if __name__ == "__main__":
    main()
