"""What archiving a release costs: ``archived_release`` against a bare ``release`` of the bundled Adult
sample, in the same process, as a ratio (median of a few runs each; fsyncs included).

    python benchmarks/bench_archive.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from dpsynth.accounting import Ledger, PrivacyBudget  # noqa: E402
from dpsynth.archive import Archive, archived_release  # noqa: E402
from dpsynth.artifacts import release_files  # noqa: E402
from dpsynth.datasets import sample_path  # noqa: E402
from dpsynth.release import release  # noqa: E402
from dpsynth.schema import load_schema  # noqa: E402


def main(runs: int = 7) -> None:
    df = pd.read_csv(sample_path("adult"), dtype=str, keep_default_na=False, na_values=[""])
    schema = load_schema(sample_path("adult", "schema")).select(["age", "education", "sex", "income"])
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(Path(tmp) / "ledger.sqlite")
        ledger.register("d", PrivacyBudget(1e6))
        archive = Archive(Path(tmp) / "archive", ledger=ledger)
        bare, archived = [], []
        for _ in range(runs):
            t = time.perf_counter()
            rel = release(df, schema, epsilon=1.0, ledger=ledger, dataset_id="d")
            release_files(rel)  # the bare path also builds the files it would offer
            bare.append(time.perf_counter() - t)
            t = time.perf_counter()
            archived_release(df, schema, epsilon=1.0, ledger=ledger, archive=archive, dataset_id="d")
            archived.append(time.perf_counter() - t)
        b, a = statistics.median(bare), statistics.median(archived)
        size = sum(p.stat().st_size for p in (Path(tmp) / "archive" / "blobs").rglob("*") if p.is_file())
        print(f"{len(df):,} rows, {schema.n_cells:,} cells: release + files {b * 1000:.0f} ms,"
              f" archived {a * 1000:.0f} ms, ratio {a / b:.2f}; archive holds {size / 2**20:.1f} MB for {runs} releases")


if __name__ == "__main__":
    main()
