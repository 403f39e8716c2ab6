"""The check after a release names collapsed columns, judged against the release's own noisy tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

import dpsynth
from dpsynth.schema import CategoricalColumn, Schema
from dpsynth.verdicts import release_verdict, released_top_shares, synthetic_column_problems


def test_a_column_that_is_concentrated_in_the_release_is_not_called_collapsed() -> None:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.choice(["a", "b"], 20_000, p=[0.97, 0.03]), "y": rng.choice(["u", "v"], 20_000)})
    schema = Schema((CategoricalColumn(name="x", categories=("a", "b")), CategoricalColumn(name="y", categories=("u", "v"))))
    rel = dpsynth.release(df, schema, epsilon=5.0, seed=1)
    shares = released_top_shares(rel)
    assert shares["x"] > 0.95 and 0.45 < shares["y"] < 0.55
    assert release_verdict(rel.synthetic, shares).ok  # the data's own shape
    assert not release_verdict(rel.synthetic).ok  # without the release's tables it would look collapsed


def test_a_column_collapsed_beyond_its_released_table_is_named() -> None:
    syn = pd.DataFrame({"x": ["a"] * 99 + ["b"], "y": ["u", "v"] * 50})
    [problem] = synthetic_column_problems(syn, {"x": 0.6, "y": 0.5})
    assert problem.column == "x" and problem.kind == "collapsed"
