"""Public-domain binning and k-way marginal TVD for the peer benchmark.

Self-contained (numpy + pandas only) so that every peer's virtual environment can import it
without the project installed.  The same functions code the real data before a peer sees it,
decode a peer's coded output back to our labels, and score real against synthetic rows.

Coding of a column (the "public domain"; everything comes from the schema, nothing from data):

* numeric ``{"lower": a, "upper": b, "bins": k}``: equal-width bins of width ``w = (b - a) / k``;
  code ``floor((x - a) / w)``, i.e. half-open bins ``[a + i w, a + (i + 1) w)``; values below
  ``a`` are clipped to bin 0 and values at or above ``b`` to bin ``k - 1``.
* categorical ``{"categories": [...]}``: code = position in the list.
* ``"missing": true`` (either type): an empty cell gets its own code, the last one.
  An empty cell in a column without ``"missing"`` is an error; so is an unknown category.

Score: the total-variation distance ``TVD(p, q) = 1/2 * sum_cells |p - q|`` between the
normalised real and synthetic histograms of a set of columns, averaged over all pairs of
columns (2-way) and over a fixed sample of triples (3-way): ``numpy.random.default_rng(0)``
draws ``min(300, C(d, 3))`` triples without replacement from the lexicographically ordered
list of all triples (``itertools.combinations``), and the chosen triples are sorted.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

TRIPLE_SAMPLE = 300
TRIPLE_SEED = 0


def load_schema(path: str | Path) -> list[dict[str, Any]]:
    """Read the JSON schema (``{"columns": [...]}``) and check each column's fields."""
    cols = json.loads(Path(path).read_text())["columns"]
    for c in cols:
        if c["type"] == "numeric":
            if not (c["upper"] > c["lower"] and int(c["bins"]) >= 1):
                raise ValueError(f"column {c['name']!r}: need upper > lower and bins >= 1")
        elif c["type"] == "categorical":
            if len(set(c["categories"])) != len(c["categories"]):
                raise ValueError(f"column {c['name']!r}: repeated category")
        else:
            raise ValueError(f"column {c['name']!r}: unknown type {c['type']!r}")
    return cols


def domain_sizes(schema: list[dict[str, Any]]) -> list[int]:
    """Number of codes per column (bins or categories, plus one if missing is allowed)."""
    return [
        (int(c["bins"]) if c["type"] == "numeric" else len(c["categories"]))
        + int(bool(c.get("missing", False)))
        for c in schema
    ]


def read_csv(path: str | Path, schema: list[dict[str, Any]]) -> pd.DataFrame:
    """Read a CSV as strings (empty field -> NaN), keeping only the schema's columns."""
    df = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    names = [c["name"] for c in schema]
    absent = [n for n in names if n not in df.columns]
    if absent:
        raise ValueError(f"{path}: columns {absent} of the schema are not in the file")
    return df[names]


def encode(df: pd.DataFrame, schema: list[dict[str, Any]]) -> np.ndarray:
    """Code every column of ``df`` into ``0..size-1`` (see module docstring); shape (n, d)."""
    out = np.empty((len(df), len(schema)), dtype=np.int64)
    for j, c in enumerate(schema):
        raw = df[c["name"]]
        miss = (raw.isna() | (raw.astype(str) == "")).to_numpy()
        has_missing = bool(c.get("missing", False))
        if miss.any() and not has_missing:
            row = int(np.flatnonzero(miss)[0])
            raise ValueError(f"column {c['name']!r}, row {row}: empty cell but schema has no missing")
        if c["type"] == "numeric":
            x = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
            bad = np.isnan(x) & ~miss
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise ValueError(f"column {c['name']!r}, row {row}: not a number: {raw.iloc[row]!r}")
            k = int(c["bins"])
            lo, hi = float(c["lower"]), float(c["upper"])
            code = np.floor((np.where(miss, lo, x) - lo) * k / (hi - lo))
            code = np.clip(code, 0, k - 1).astype(np.int64)
            code[miss] = k
        else:
            cats = [str(v) for v in c["categories"]]
            lookup = pd.Index(cats)
            code = lookup.get_indexer(raw.where(~miss, None).astype(object)).astype(np.int64)
            bad = (code < 0) & ~miss
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise ValueError(f"column {c['name']!r}, row {row}: unknown category {raw.iloc[row]!r}")
            code[miss] = len(cats)
        out[:, j] = code
    return out


def decode(codes: np.ndarray, schema: list[dict[str, Any]]) -> pd.DataFrame:
    """Turn codes back into our labels: category names, bin midpoints, empty for missing.

    ``encode(decode(c)) == c`` for every valid code array, so a peer's output written with
    this function is scored on exactly the codes the peer produced.
    """
    codes = np.asarray(codes, dtype=np.int64)
    sizes = domain_sizes(schema)
    cols: dict[str, Any] = {}
    for j, c in enumerate(schema):
        v = codes[:, j]
        if v.size and (v.min() < 0 or v.max() >= sizes[j]):
            raise ValueError(f"column {c['name']!r}: code outside 0..{sizes[j] - 1}")
        if c["type"] == "numeric":
            k = int(c["bins"])
            lo, hi = float(c["lower"]), float(c["upper"])
            mids = lo + (np.arange(k) + 0.5) * (hi - lo) / k
            labels = np.array([f"{m:.10g}" for m in mids] + [""], dtype=object)
        else:
            labels = np.array([str(x) for x in c["categories"]] + [""], dtype=object)
        cols[c["name"]] = labels[v]
    return pd.DataFrame(cols)


def write_codes_csv(codes: np.ndarray, schema: list[dict[str, Any]], path: str | Path) -> None:
    """Write coded rows as a CSV in our schema's labels (missing = empty field)."""
    decode(codes, schema).to_csv(path, index=False)


def triples(d: int, k: int = TRIPLE_SAMPLE, seed: int = TRIPLE_SEED) -> list[tuple[int, ...]]:
    """The fixed seeded sample of column triples used for the 3-way score."""
    allt = list(itertools.combinations(range(d), 3))
    if len(allt) <= k:
        return allt
    idx = np.random.default_rng(seed).choice(len(allt), size=k, replace=False)
    return [allt[i] for i in sorted(idx)]


def _hist(codes: np.ndarray, cols: tuple[int, ...], sizes: list[int]) -> np.ndarray:
    shape = tuple(sizes[c] for c in cols)
    flat = np.ravel_multi_index(tuple(codes[:, c] for c in cols), shape)
    h = np.bincount(flat, minlength=int(np.prod(shape))).astype(float)
    return h / max(h.sum(), 1.0)


def tvd(real: np.ndarray, synth: np.ndarray, cols: tuple[int, ...], sizes: list[int]) -> float:
    """Total-variation distance between the normalised marginals of ``cols``."""
    return 0.5 * float(np.abs(_hist(real, cols, sizes) - _hist(synth, cols, sizes)).sum())


def score(real: np.ndarray, synth: np.ndarray, sizes: list[int]) -> dict[str, float]:
    """Average 2-way TVD over all pairs and 3-way TVD over the fixed triple sample."""
    d = real.shape[1]
    pairs = list(itertools.combinations(range(d), 2))
    t2 = float(np.mean([tvd(real, synth, p, sizes) for p in pairs]))
    tri = triples(d)
    t3 = float(np.mean([tvd(real, synth, t, sizes) for t in tri])) if tri else float("nan")
    return {"tvd2": t2, "tvd3": t3}
