"""Dashboard responsiveness on Adult (48,842 rows): AppTest run time of each interaction.

Reported as a ratio to a baseline measured in the same process: ``pandas.read_csv`` of the bundled
adult.csv (the cost of merely reading the data once). The machine is shared and noisy, so each
timing is the median of ``--repeat`` runs, and ratios matter more than milliseconds.

Usage: python benchmarks/bench_app.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from dpsynth.datasets import sample_path  # noqa: E402

APP = str(ROOT / "app.py")


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def median_time(fn: Callable[[], object], repeat: int) -> float:
    return statistics.median(timed(fn) for _ in range(repeat))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    os.environ["DPSYNTH_LEDGER"] = str(Path(tmp) / "ledger.sqlite")

    base = median_time(lambda: pd.read_csv(sample_path("adult"), dtype=str), args.repeat)

    at = AppTest.from_file(APP, default_timeout=600)
    rows: list[tuple[str, float]] = []

    def once(name: str, fn: Callable[[], object]) -> None:
        rows.append((name, timed(fn)))
        assert not at.exception, [e.value for e in at.exception]

    def repeated(name: str, fn: Callable[[], object]) -> None:
        rows.append((name, median_time(fn, args.repeat)))
        assert not at.exception, [e.value for e in at.exception]

    once("first page load (no data)", at.run)
    once("load the Adult sample (read, fingerprint, schema)", lambda: at.button(key="load_sample").click().run())
    repeated("Data page rerun", at.run)
    at.switch_page("pages/2_schema.py")
    repeated("Schema page (editor, domain size, sparsity check)", at.run)
    at.switch_page("pages/3_privacy.py").run()
    eps = iter([0.5, 1.0, 2.0, 1.5, 1.0, 0.8, 1.0, 0.9, 1.1, 1.0] * 5)
    repeated("Privacy page: change ε (preview recomputed)", lambda: at.number_input(key="privacy_epsilon").set_value(next(eps)).run())
    at.switch_page("pages/4_release.py")
    repeated("Release page before releasing", at.run)
    once("RELEASE (marginals method, 15 columns; one-off, with progress bar)",
         lambda: at.button(key="release_button_0").click().run())
    repeated("Release page rerun after the release (no new noise)", at.run)
    at.switch_page("pages/5_utility.py")
    once("Utility page first view (TVDs, correlations, 1,000-run mean simulation)", at.run)
    repeated("Utility page rerun", at.run)
    cols = iter(["workclass", "age", "sex", "education", "race"] * 10)
    repeated("Utility: pick another column", lambda: at.selectbox(key="util_column").set_value(next(cols)).run())
    nums = iter(["capital_gain", "age", "hours_per_week", "fnlwgt", "capital_loss"] * 10)
    repeated("Utility: look closer at another numeric column (values, ECDF)",
             lambda: at.selectbox(key="util_values_column").set_value(next(nums)).run())
    once("Utility: prepare the two HTML reports (one-off, explicit button)",
         lambda: at.button(key="util_prepare_reports").click().run())
    repeated("Utility page rerun with the reports ready", at.run)
    at.switch_page("pages/7_risk.py")
    once("Risk page first view", at.run)
    repeated("Risk page rerun", at.run)
    once("Risk: choose another set of quasi-identifiers (first time)",
         lambda: at.multiselect(key="risk_qi").set_value(["age", "sex", "race", "native_country"]).run())
    at.switch_page("pages/8_mechanisms.py")
    repeated("Mechanisms page (four live demos)", at.run)
    at.switch_page("pages/9_ledger.py")
    repeated("Ledger page", at.run)

    print(f"baseline: pandas.read_csv(adult.csv) = {base * 1000:.0f} ms (median of {args.repeat})")
    print(f"{'interaction':<72} {'ms':>8} {'× baseline':>11}")
    for name, t in rows:
        print(f"{name:<72} {t * 1000:8.0f} {t / base:11.2f}")


if __name__ == "__main__":
    main()
