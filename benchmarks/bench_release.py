"""Release timings on Adult, as ratios to reading the file with pandas in the same run.

    python benchmarks/bench_release.py [--data PATH] [--repeats 5]

Machines here are noisy, so each figure is the median of several runs divided by the median
time pandas takes to read the same CSV (the baseline, measured in this process).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

import dpsynth  # noqa: E402
from dpsynth.datasets import sample_path  # noqa: E402
from dpsynth.io import read_table, to_safe_csv  # noqa: E402
from dpsynth.utility import fidelity  # noqa: E402


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", default=str(sample_path("adult")))
    ap.add_argument("--schema", default=str(sample_path("adult", "schema")))
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()

    base = _median_time(lambda: pd.read_csv(a.data), a.repeats)
    df = read_table(a.data)
    full = dpsynth.load_schema(a.schema)
    cases = {
        "read_table (dpsynth.io)": lambda: read_table(a.data),
        "release, 3 columns (age, education, income)": lambda: dpsynth.release(
            df, full.select(["age", "education", "income"]), epsilon=1.0, method="histogram"),
        "release, 5 columns (+ sex, race)": lambda: dpsynth.release(
            df, full.select(["age", "education", "income", "sex", "race"]), epsilon=1.0, method="histogram"),
        "release, 3 columns, Gaussian δ=1e-9": lambda: dpsynth.release(
            df, full.select(["age", "education", "income"]), epsilon=1.0, delta=1e-9, method="histogram"),
        "write synthetic CSV (injection-safe)": lambda: to_safe_csv(
            dpsynth.release(df, full.select(["age", "education", "income"]), epsilon=1.0, seed=0,
                            method="histogram").synthetic),
    }
    print(f"baseline: pandas.read_csv of {Path(a.data).name}: {base * 1000:.1f} ms (median of {a.repeats})")
    print(f"{'case':55s} {'ratio to baseline':>18s} {'ms':>9s}")
    for name, fn in cases.items():
        t = _median_time(fn, a.repeats)
        print(f"{name:55s} {t / base:18.2f} {t * 1000:9.1f}")
    schema = full.select(["age", "education", "income"])
    tv = [fidelity(df, dpsynth.release(df, schema, epsilon=1.0, seed=s, method="histogram").synthetic, schema)["mean_one_way"]
          for s in range(5)]
    print(f"1-way TVD of synthetic vs real, 3 columns, ε = 1, 5 seeds: mean {statistics.mean(tv):.4f}, max {max(tv):.4f}")


if __name__ == "__main__":
    main()
