"""Released artifacts depend on the data only through the noisy histogram (issue 4, part 2).

With the noise step replaced by a fixed histogram H (whatever the counts were), and the
post-processing generator seeded, two datasets that differ in size, extreme values, category
order, row order, column order, extra columns and dtypes must give byte-identical downloads.
Anything else that leaks into a file — the exact n, data-derived bounds or categories, the
order values were first seen in, a dtype — shows up as a byte difference.
"""

from __future__ import annotations

import importlib
import io
import re
import zipfile

import numpy as np
import pandas as pd
import pytest

from dpsynth import value_model
from dpsynth.accounting import Ledger, PrivacyBudget
from dpsynth.artifacts import release_files, release_zip
from dpsynth.mechanisms import DiscreteGaussian, DiscreteLaplace
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema
from dpsynth.value_model import ColumnGrid, ColumnTree

RELEASE = importlib.import_module("dpsynth.release")
CREATED = "2026-01-01T00:00:00+00:00"

SCHEMA = Schema((
    NumericColumn(name="age", lower=18, upper=90, bins=6, integer=True),
    NumericColumn(name="income", lower=0, upper=200_000, bins=4, missing=True),
    CategoricalColumn(name="ward", categories=("north", "south", "east", "west"), missing=True, on_unknown="missing"),
    CategoricalColumn(name="smoker", categories=("no", "yes")),
))


def dataset_one() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    n = 400
    return pd.DataFrame({
        "age": rng.integers(18, 91, n).astype(str),
        "income": rng.uniform(0, 200_000, n).round(2).astype(str),
        "ward": rng.choice(["north", "south", "east", "west"], n),
        "smoker": rng.choice(["no", "yes"], n, p=[0.8, 0.2]),
    })


def dataset_two() -> pd.DataFrame:
    """Different size, extremes far outside the bounds, unseen and missing values, categories first
    seen in another order, shuffled rows, reordered and extra columns, numeric dtypes."""
    rng = np.random.default_rng(2)
    n = 2_357
    df = pd.DataFrame({
        "id": np.arange(n),
        "smoker": rng.choice(["yes", "no"], n),
        "ward": rng.choice(["west", "east", "south", "north", "atlantis", None], n),
        "income": np.where(rng.random(n) < 0.1, np.nan, rng.lognormal(11, 2, n)),
        "age": rng.integers(-5, 130, n),
        "notes": rng.choice(["x", "=cmd|' /C calc'!A0"], n),
    })
    df.loc[0, "age"] = 10**9
    df.loc[1, "income"] = -1e12
    return df.sample(frac=1.0, random_state=3).reset_index(drop=True)


@pytest.fixture
def fixed_noise(monkeypatch: pytest.MonkeyPatch) -> np.ndarray:
    """Replace the noise step: every mechanism returns the same histogram H, whatever the counts."""
    h = np.random.default_rng(42).integers(-3, 40, SCHEMA.n_cells).astype(np.int64)

    def fixed(self: object, counts: np.ndarray, *, rng: np.random.Generator) -> np.ndarray:
        assert np.asarray(counts).shape == h.shape
        return h.copy()

    monkeypatch.setattr(DiscreteLaplace, "__call__", fixed)
    monkeypatch.setattr(DiscreteGaussian, "__call__", fixed)

    def fixed_tree(leaves: np.ndarray, weights: np.ndarray, g: ColumnGrid, draw: object, threshold: float) -> ColumnTree:
        """The value model's noisy tree replaced too: fixed counts on the level-1 nodes, whatever the data."""
        nodes = np.arange(g.n_nodes(1), dtype=np.int64)
        return ColumnTree(g, (nodes,), (np.random.default_rng(7).integers(-3, 40, len(nodes)),))

    monkeypatch.setattr(value_model, "_measure", fixed_tree)
    # and the counts that choose a column's grid (value_model.Precision): fixed, whatever the data
    monkeypatch.setattr(value_model, "_measure_precision", lambda exact, draw: (5000,) + (3,) * (len(exact) - 1))
    return h


def make(df: pd.DataFrame, **kw: object) -> dict[str, bytes]:
    rel = RELEASE.release(df, SCHEMA, epsilon=1.0, seed=1234, created=CREATED, dataset_label="ward survey", **kw)
    files = release_files(rel)
    files["release.zip"] = release_zip(rel)
    return files


def assert_identical(a: dict[str, bytes], b: dict[str, bytes]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert a[name] == b[name], f"{name} differs between the two datasets"


def test_downloads_are_byte_identical(fixed_noise: np.ndarray) -> None:
    one, two = make(dataset_one()), make(dataset_two())
    assert_identical(one, two)
    # the files are really there and carry the fixed histogram
    assert {"synthetic.csv", "histogram.csv", "card.json", "card.md"} <= set(one)
    hist = pd.read_csv(io.BytesIO(one["histogram.csv"]))
    assert hist["count"].tolist() == fixed_noise.tolist()
    with zipfile.ZipFile(io.BytesIO(one["release.zip"])) as zf:
        assert {i.filename for i in zf.infolist()} == set(one) - {"release.zip"}


@pytest.mark.parametrize("options", [
    {"delta": 1e-6},  # discrete Gaussian
    {"neighbours": "replace-one"},
    {"rows": 777},
])
def test_identical_under_other_options(fixed_noise: np.ndarray, options: dict[str, object]) -> None:
    assert_identical(make(dataset_one(), **options), make(dataset_two(), **options))


def test_identical_with_a_ledger_and_per_person_bounding(fixed_noise: np.ndarray, tmp_path) -> None:  # noqa: ANN001
    """The ledger's record (dataset id, spend) and contribution bounding leave the files unchanged."""
    ledger = Ledger(tmp_path / "ledger.sqlite")
    one = dataset_one().assign(person=np.arange(400) // 2)
    two = dataset_two().assign(person=np.arange(2_357) % 500)
    common = {"ledger": ledger, "budget": PrivacyBudget(10.0), "id_column": "person", "max_contributions": 2}
    assert_identical(make(one, **common), make(two, **common))
    assert len(ledger.spends()) == 2


def test_the_exact_size_appears_in_no_file(fixed_noise: np.ndarray) -> None:
    """A direct check of the most common leak: n = 2,357 is written nowhere (H sums to something else)."""
    files = make(dataset_two())
    assert int(fixed_noise.sum()) != 2_357
    for name, data in files.items():
        if name.endswith((".csv", ".json", ".md")):
            assert not re.search(r"(?<![\d.])2,?357(?![\d.])", data.decode()), name


@pytest.mark.parametrize("engine", ["pandas", "duckdb"])
def test_identical_when_counted_on_an_engine(fixed_noise: np.ndarray, engine: str) -> None:
    """release_from_source (counting on an engine, no pandas load) obeys the same rule."""
    pytest.importorskip(engine)

    def files(df: pd.DataFrame) -> dict[str, bytes]:
        rel = RELEASE.release_from_source(df, SCHEMA, epsilon=1.0, engine=engine, seed=99, created=CREATED,
                                          dataset_label="ward survey")
        out = release_files(rel)
        out["release.zip"] = release_zip(rel)
        return out

    assert_identical(files(dataset_one()), files(dataset_two()))
