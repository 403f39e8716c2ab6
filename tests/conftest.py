"""Shared fixtures: small tables and schemas built in code, and the bundled Adult sample."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpsynth.datasets import sample_path
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema, load_schema


@pytest.fixture
def small_schema() -> Schema:
    return Schema((
        NumericColumn(name="age", lower=0, upper=100, bins=5, integer=True),
        CategoricalColumn(name="colour", categories=("red", "green", "blue"), missing=True),
    ))


@pytest.fixture
def small_df() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 500
    return pd.DataFrame({
        "age": rng.integers(0, 101, n).astype(str),
        "colour": rng.choice(["red", "green", "blue", ""], n, p=[0.5, 0.3, 0.15, 0.05]),
    })


@pytest.fixture(scope="session")
def adult() -> pd.DataFrame:
    return pd.read_csv(sample_path("adult"), dtype=str, keep_default_na=False, na_values=[""])


@pytest.fixture(scope="session")
def adult_schema() -> Schema:
    return load_schema(sample_path("adult", "schema"))
