"""Engine parity, fuzzed (``benchmarks/fuzz_engine_parity.py`` runs more cases and Spark): random small CSV bodies,
CSV files and typed Parquet files give the same release bytes, or the same refusal, from memory and on DuckDB. The
default engine follows the file's size, so a difference here is a property of the data choosing what is released."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "fuzz_engine_parity.py"


@pytest.fixture(scope="module")
def fuzz():
    spec = importlib.util.spec_from_file_location("fuzz_engine_parity", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("kind", "cases", "sep"), [("bodies", 300, ","), ("bodies", 150, ";"), ("bodies", 150, "\t"),
                                                    ("csv", 30, ","), ("parquet", 40, ",")])
def test_small_files_release_alike_in_memory_and_on_duckdb(fuzz, tmp_path, kind: str, cases: int, sep: str) -> None:
    rnd = random.Random(36)
    run = {"bodies": lambda: fuzz.bodies(rnd, cases, "duckdb", sep, tmp_path),
           "csv": lambda: fuzz.csv_releases(rnd, cases, "duckdb", tmp_path),
           "parquet": lambda: fuzz.parquet_releases(rnd, cases, "duckdb", tmp_path)}[kind]
    assert run() == 0
