"""Re-identification risk (seed 000): how many records are unique on a set of quasi-identifiers.

A record unique on (say) ZIP code, birth date and sex can be re-identified by linking with a
public register (Sweeney). This compares the real table with the synthetic one. The real side
is for the curator's eyes only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpsynth.binning import encode
from dpsynth.errors import InputError
from dpsynth.schema import Schema


def fraction_unique(df: pd.DataFrame, quasi_identifiers: Sequence[str]) -> float:
    """Share of rows whose combination of quasi-identifier values occurs exactly once."""
    if not quasi_identifiers:
        raise InputError("Choose at least one quasi-identifier column.")
    missing = [c for c in quasi_identifiers if c not in df.columns]
    if missing:
        raise InputError(f"No column(s) {', '.join(map(repr, missing))} in the table.")
    if len(df) == 0:
        return 0.0
    sizes = df.groupby(list(quasi_identifiers), dropna=False, sort=False, observed=True).transform("size")
    if isinstance(sizes, pd.DataFrame):
        sizes = sizes.iloc[:, 0]
    if len(sizes) == 0:  # all columns are QIs: groupby-transform returns no columns
        counts = df.value_counts(list(quasi_identifiers), dropna=False)
        return float((counts == 1).sum() / len(df))
    return float((sizes.to_numpy() == 1).mean())


def uniqueness_report(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema, quasi_identifiers: Sequence[str]) -> dict[str, Any]:
    """Uniqueness in the real data (raw values and binned by the schema) and in the synthetic data,
    and the share of synthetic rows that fall in a binned combination unique to one real person."""
    qi = list(quasi_identifiers)
    sub = schema.select(qi)
    rc = encode(real, sub).codes
    sc = encode(synthetic, sub).codes
    r_keys = _keys(rc, sub.sizes)
    s_keys = _keys(sc, sub.sizes)
    ru, rcnt = np.unique(r_keys, return_counts=True)
    unique_real = ru[rcnt == 1]
    return {
        "quasi_identifiers": qi,
        "real_unique_raw": fraction_unique(real, qi),
        "real_unique_binned": float(np.isin(r_keys, unique_real).mean()) if len(r_keys) else 0.0,
        "synthetic_unique_binned": fraction_unique(pd.DataFrame(sc, columns=qi), qi) if len(sc) else 0.0,
        "synthetic_matching_real_unique": float(np.isin(s_keys, unique_real).mean()) if len(s_keys) else 0.0,
    }


def _keys(codes: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """One integer per row identifying its combination of cells (same sizes → comparable keys)."""
    if codes.size == 0:
        return np.zeros(0, dtype=np.int64)
    if np.prod(sizes, dtype=float) < 2**62:
        return np.ravel_multi_index(tuple(codes.T), sizes)
    return pd.util.hash_pandas_object(pd.DataFrame(codes), index=False).to_numpy().view(np.int64)
