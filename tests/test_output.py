"""The chunked synthetic-row sampler and writer: law of the rows, same values as in memory, thread-independent bytes."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpsynth import noise
from dpsynth import writer as output
from dpsynth.binning import encode
from dpsynth.errors import InputError
from dpsynth.randomness import fast_rng, post_processing_seed
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema
from dpsynth.synthesis import RowSampler, sample_cells, synthesize
from dpsynth.writer import write_synthetic_csv

SCHEMA = Schema((
    NumericColumn(name="age", lower=0, upper=100, bins=5, integer=True, missing=True),
    NumericColumn(name="=x", lower=-1, upper=1, bins=3, missing=True),
    NumericColumn(name="income", lower=-50, upper=2_000_000, bins=4, decimals=2),  # large grid: decimal64 text
    NumericColumn(name="score", lower=-1, upper=1, bins=3, decimals=3, missing=True),  # small grid: label text
    CategoricalColumn(name="colour", categories=("red", "-green", "a,b", 'q"u\note'), missing=True),
))


def weights(schema: Schema, seed: int = 0) -> np.ndarray:
    w = np.random.default_rng(seed).gamma(0.5, size=schema.n_cells) * 10
    w[::7] = -3.0  # negative noisy counts: clamped to 0, never sampled
    return w


def read_csv(path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def test_file_holds_the_in_memory_rows_across_chunks(tmp_path) -> None:
    """CSV and Parquet written in chunks of 777 rows hold exactly RowSampler.frame's values."""
    sampler = RowSampler.dense(weights(SCHEMA), 5000, seed=11, chunk_rows=777)
    ref = sampler.frame(SCHEMA)
    assert len(ref) == 5000 and sampler.n_chunks == 7
    write_synthetic_csv(sampler, SCHEMA, tmp_path / "o.csv")
    write_synthetic_csv(sampler, SCHEMA, tmp_path / "o.parquet")
    got = read_csv(tmp_path / "o.csv")
    pq = pd.read_parquet(tmp_path / "o.parquet")
    assert list(got.columns) == ["age", "'=x", "income", "score", "colour"]
    assert list(pq.columns) == SCHEMA.names
    for name, csv_name in zip(SCHEMA.names, got.columns, strict=True):
        want = ref[name]
        if name == "colour":
            labels = want.map(lambda v: "" if v is None else ("'" + v if v.startswith("-") else v))
            assert got[csv_name].tolist() == labels.tolist()
            assert pq[name].fillna("").tolist() == want.fillna("").tolist()
            continue
        as_float = pd.to_numeric(got[csv_name].replace("", np.nan)).to_numpy(dtype=float)
        np.testing.assert_array_equal(as_float, want.to_numpy(dtype=float, na_value=np.nan))
        np.testing.assert_array_equal(pq[name].to_numpy(dtype=float, na_value=np.nan), as_float)
    assert pd.api.types.is_string_dtype(pq["colour"]) or pq["colour"].dtype == object  # plain strings, no categorical


def test_decimal_columns_are_written_with_exactly_their_decimals(tmp_path) -> None:
    sampler = RowSampler.dense(weights(SCHEMA), 4000, seed=3, chunk_rows=1500)
    write_synthetic_csv(sampler, SCHEMA, tmp_path / "o.csv")
    got = read_csv(tmp_path / "o.csv")
    assert got["income"].str.fullmatch(r"-?\d+\.\d{2}").all()
    score = got["score"][got["score"] != ""]
    assert score.str.fullmatch(r"-?\d\.\d{3}").all() and (score.str.startswith("-")).any()
    assert got["age"][got["age"] != ""].str.fullmatch(r"\d+").all()
    # every written value re-encodes to a cell that has positive weight
    back = encode(got.replace("", np.nan).rename(columns={"'=x": "=x"}).assign(
        colour=lambda d: d["colour"].str.removeprefix("'")), SCHEMA).codes
    flat = np.ravel_multi_index(tuple(back.T), SCHEMA.sizes)
    assert (weights(SCHEMA)[flat] > 0).all()


def test_bytes_do_not_depend_on_the_number_of_threads(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    sampler = RowSampler.dense(weights(SCHEMA), 20_000, seed=5, chunk_rows=3000)
    out = {}
    for workers in (1, 3):
        monkeypatch.setattr(output, "FORMAT_WORKERS", workers)
        for ext in ("csv", "parquet"):
            path = tmp_path / f"w{workers}.{ext}"
            write_synthetic_csv(sampler, SCHEMA, path)
            out[workers, ext] = path.read_bytes()
    assert out[1, "csv"] == out[3, "csv"]
    assert out[1, "parquet"] == out[3, "parquet"]


def test_cell_counts_follow_the_multinomial_law() -> None:
    """Chi-square goodness of fit of 200,000 rows drawn in 9 chunks against the clamped probabilities."""
    w = weights(SCHEMA, seed=2)[:60]
    sampler = RowSampler.from_weights(np.arange(60), w, 60, 200_000, seed=8, chunk_rows=23_456)
    cells = sampler.cells()
    p = np.clip(w, 0, None) / np.clip(w, 0, None).sum()
    observed = np.bincount(cells, minlength=60)
    assert observed[p == 0].sum() == 0
    pos = p > 0
    assert stats.chisquare(observed[pos], 200_000 * p[pos]).pvalue > 1e-4
    # a wrong law must be caught: the same counts against the uniform distribution on the support
    assert stats.chisquare(observed[pos], np.full(pos.sum(), 200_000 / pos.sum())).pvalue < 1e-6


@pytest.mark.parametrize("w", [np.array([0.5, 0.3, 0.2]), np.array([5, 3, 2])], ids=["probabilities", "counts"])
def test_rows_are_exchangeable_across_chunk_boundaries(w: np.ndarray) -> None:
    """3 rows in chunks of 2 over 3 cells: each of the 27 sequences has probability p_a·p_b·p_c."""
    p = w / w.sum()
    seqs = {s: i for i, s in enumerate(itertools.product(range(3), repeat=3))}
    observed = np.zeros(27)
    for seed in range(12_000):
        cells = RowSampler.from_weights(np.arange(3), w, 3, 3, seed=seed, chunk_rows=2).cells()
        observed[seqs[tuple(cells.tolist())]] += 1
    expected = np.array([np.prod(p[list(s)]) for s in seqs]) * 12_000
    assert stats.chisquare(observed, expected).pvalue > 1e-4
    # sensitivity: rows sorted within the sample (a missing shuffle) fail the same test
    sorted_obs = np.zeros(27)
    for s, i in seqs.items():
        sorted_obs[seqs[tuple(sorted(s))]] += observed[i]
    assert stats.chisquare(sorted_obs, expected).pvalue < 1e-6


@pytest.mark.parametrize("shape", ["even", "skewed"])
def test_integer_weights_are_drawn_exactly_in_proportion(shape: str) -> None:
    """Whole-number weights take the integer inverse transform (guide table, searchsorted fallback)."""
    g = np.random.default_rng(5)
    w = g.integers(1, 50, 3000) if shape == "even" else np.where(g.random(3000) < 0.1, 1000, 1)
    w[::11] = 0  # never drawn
    n = 600_000
    sampler = RowSampler.from_weights(np.arange(3000) * 7, w, 21_000, n, seed=3, chunk_rows=70_000)
    assert sampler.cdf is not None and sampler.weights is None and sampler.bucket > 1  # the guide walk is used
    cells = sampler.cells()
    assert (cells % 7 == 0).all()
    observed = np.bincount(cells // 7, minlength=3000)
    assert observed[w == 0].sum() == 0
    # per-cell chi-square; cells expecting fewer than 10 rows pooled into one bin
    expected = w / w.sum() * n
    big, small = expected >= 10, (expected < 10) & (w > 0)

    def pvalue(obs: np.ndarray) -> float:
        o, e = np.append(obs[big], obs[small].sum()), np.append(expected[big], expected[small].sum())
        return stats.chisquare(o * (e.sum() / o.sum()), e).pvalue

    assert pvalue(observed) > 1e-4
    # sensitivity: the counts of each cell's neighbour (an off-by-one inverse transform) are rejected
    assert pvalue(np.roll(observed, 1)) < 1e-6


def test_values_are_uniform_on_the_grid_inside_their_bin() -> None:
    schema = Schema((NumericColumn(name="v", lower=0, upper=1, bins=3, decimals=1),
                     NumericColumn(name="n", lower=0, upper=10, bins=2, integer=True)))
    sampler = RowSampler.dense(np.ones(schema.n_cells), 60_000, seed=4, chunk_rows=7_000)
    df = sampler.frame(schema)
    bins = encode(df, schema).codes
    for col, b, grid in (("v", 0, [0.0, 0.1, 0.2, 0.3]), ("v", 1, [0.4, 0.5, 0.6]), ("v", 2, [0.7, 0.8, 0.9, 1.0]),
                         ("n", 0, [0, 1, 2, 3, 4]), ("n", 1, [5, 6, 7, 8, 9, 10])):
        vals = df[col].to_numpy()[bins[:, schema.names.index(col)] == b]
        counts = np.array([(vals == g).sum() for g in grid])
        assert counts.sum() == len(vals)  # nothing off the grid
        assert stats.chisquare(counts).pvalue > 1e-4


def test_uniform_when_no_cell_is_positive_and_empty_output(tmp_path) -> None:
    sampler = RowSampler.dense(np.full(SCHEMA.n_cells, -2.0), 30_000, seed=1, chunk_rows=10_000)
    assert sampler.weights is None
    cells = sampler.cells()
    assert stats.chisquare(np.bincount(cells, minlength=SCHEMA.n_cells)).pvalue > 1e-4
    empty = RowSampler.dense(weights(SCHEMA), 0, seed=1)
    assert write_synthetic_csv(empty, SCHEMA, tmp_path / "e.csv") == 0
    assert (tmp_path / "e.csv").read_bytes() == b'"age","\'=x","income","score","colour"\r\n'  # Arrow quotes header names
    write_synthetic_csv(empty, SCHEMA, tmp_path / "e.parquet")
    assert list(pd.read_parquet(tmp_path / "e.parquet").columns) == SCHEMA.names
    assert len(empty.frame(SCHEMA)) == 0


def test_quoting_line_ends_and_progress(tmp_path) -> None:
    schema = Schema((CategoricalColumn(name="c", categories=("a,b", 'q"u', "x\ny")),))
    seen: list[float] = []
    sampler = RowSampler.dense(np.array([1.0, 1.0, 1.0]), 3000, seed=2, chunk_rows=1000)
    write_synthetic_csv(sampler, schema, tmp_path / "q.csv", progress=lambda f, _m: seen.append(f))
    text = (tmp_path / "q.csv").read_bytes().decode()
    assert text.startswith('"c"\r\n') and set(re.split(r"\r\n", text)[1:-1]) <= {'"a,b"', '"q""u"', '"x\ny"'}
    assert read_csv(tmp_path / "q.csv")["c"].value_counts().size == 3
    assert seen == sorted(seen) and seen[-1] == 1.0 and len(seen) == 3


def test_seeded_helpers_are_reproducible_and_consume_a_fixed_draw() -> None:
    a, b = noise.seeded_rng(9), noise.seeded_rng(9)
    assert post_processing_seed(a) == post_processing_seed(b) and a.bytes(8) == b.bytes(8)
    assert fast_rng(1, 1, 0).random() != fast_rng(1, 1, 1).random()
    w = weights(SCHEMA)
    pd.testing.assert_frame_equal(synthesize(w, SCHEMA, 500, rng=noise.seeded_rng(2)),
                                  synthesize(w, SCHEMA, 500, rng=noise.seeded_rng(2)))
    r1, r2 = noise.seeded_rng(4), noise.seeded_rng(4)
    sample_cells(np.ones(10) / 10, 10, rng=r1)
    sample_cells(np.ones(10) / 10, 100_000, rng=r2)
    assert r1.bytes(8) == r2.bytes(8)  # the generator's state after sampling does not depend on the size


def test_row_limits() -> None:
    with pytest.raises(InputError, match="between 0 and"):
        RowSampler.dense(np.ones(3), -1, seed=0)
    with pytest.raises(InputError, match="between 0 and"):
        RowSampler.dense(np.ones(3), 10**9, seed=0)


def test_numbers_are_unquoted_and_labels_quoted(tmp_path) -> None:
    """The CSV dialect: Arrow quotes every string (labels) and no number; missing is an empty field."""
    schema = Schema((NumericColumn(name="a", lower=0, upper=9, bins=1, integer=True),
                     NumericColumn(name="d", lower=0, upper=1, bins=1, decimals=2, missing=True),
                     NumericColumn(name="f", lower=0, upper=1, bins=1),
                     CategoricalColumn(name="c", categories=("x",), missing=True)))
    write_synthetic_csv(RowSampler.dense(np.ones(schema.n_cells), 2000, seed=1), schema, tmp_path / "o.csv")
    lines = (tmp_path / "o.csv").read_bytes().decode().split("\r\n")[1:-1]
    pattern = re.compile(r'\d,(\d\.\d\d)?,[0-9.e-]+,("x")?')
    assert all(pattern.fullmatch(line) for line in lines)
    assert {line.endswith(',"x"') for line in lines} == {True, False}
    assert {",," in line for line in lines} == {True, False}
