"""Re-identification risk (lecture notes on differential privacy, ch. 6): records unique on quasi-identifiers.

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
from dpsynth.humanize import likelihood_factor, number, percent
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


def column_codes(df: pd.DataFrame, schema: Schema, names: Sequence[str], cache: dict[str, np.ndarray] | None = None,
                 ) -> np.ndarray:
    """Cell codes of ``names`` (rows × columns); columns already in ``cache`` are not encoded again."""
    if cache is None:
        return encode(df, schema.select(list(names))).codes
    missing = [n for n in names if n not in cache]
    if missing:
        codes = encode(df, schema.select(missing)).codes
        if len(codes) != len(df):  # a 'drop' policy left rows out: rows no longer align column by column
            return encode(df, schema.select(list(names))).codes
        cache.update({n: codes[:, i] for i, n in enumerate(missing)})
    return np.column_stack([cache[n] for n in names]) if names else np.zeros((len(df), 0), dtype=np.int64)


def uniqueness_report(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema, quasi_identifiers: Sequence[str],
                      *, cache: dict[str, dict[str, np.ndarray]] | None = None) -> dict[str, Any]:
    """Uniqueness in the real data (raw values and binned by the schema) and in the synthetic data,
    and the share of synthetic rows that fall in a binned combination unique to one real person.

    ``cache`` (``{"real": {}, "synthetic": {}}``, kept by the caller for one release) holds each column's cell
    codes, so choosing other quasi-identifiers encodes only the new columns."""
    qi = list(quasi_identifiers)
    sub = schema.select(qi)
    rc = column_codes(real, schema, qi, None if cache is None else cache.setdefault("real", {}))
    sc = column_codes(synthetic, schema, qi, None if cache is None else cache.setdefault("synthetic", {}))
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


#: Up to this ε the guarantee itself makes a match with a unique person uninformative; above STRONG_MATCH_EPSILON
#: it no longer does (e^3 ≈ 20: a person's presence may make an output 20 times more likely).
REASSURING_EPSILON, STRONG_MATCH_EPSILON = 1.0, 3.0


def risk_sentences(report: dict[str, Any], epsilon: float) -> tuple[list[str], str, str]:
    """Plain bullets explaining :func:`uniqueness_report` at the release's ε, and a closing judgement with its
    tone ('info' or 'warning'). The reassurance depends on ε: at ε = 10 a person's presence may make an output
    e^10 ≈ 22,000 times more likely, so a synthetic row matching a unique real person is not explained away."""
    times = likelihood_factor(epsilon)
    match = report["synthetic_matching_real_unique"]
    bullets = [
        f"**{percent(report['real_unique_raw'])}** of real records are unique on their exact values,"
        f" **{percent(report['real_unique_binned'])}** once binned as in the schema.",
        f"**{percent(report['synthetic_unique_binned'])}** of synthetic rows are unique — but a synthetic row is not"
        " a person: it was sampled from noisy counts.",
        f"**{percent(match)}** of synthetic rows land on a combination that only one real person has.",
    ]
    if epsilon <= REASSURING_EPSILON:
        closing = (f"At ε = {number(epsilon)}, any output is at most {times} times more (or less) likely with a given"
                   " person in the data than without them, so these matches are about as likely whether or not that"
                   " person is in the data: they reveal little about them.")
        return bullets, closing, "info"
    if epsilon <= STRONG_MATCH_EPSILON:
        closing = (f"At ε = {number(epsilon)}, an output may be up to {times} times more likely with a given person"
                   " in the data than without them. The matches above are partly explained by the guarantee, not"
                   " fully: look at them before publishing, and prefer a smaller ε if they are many.")
        return bullets, closing, "warning" if match > 0.01 else "info"
    closing = (f"At ε = {number(epsilon)}, an output may be up to {times} times more likely with a given person in the"
               " data than without them: the guarantee no longer makes these matches harmless. A synthetic row that"
               " matches the only real person with those values may reveal that person. Use a smaller ε (1 or less),"
               " fewer or coarser quasi-identifier columns, or do not publish this release.")
    return bullets, closing, "warning"


def _keys(codes: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """One integer per row identifying its combination of cells (same sizes → comparable keys)."""
    if codes.size == 0:
        return np.zeros(0, dtype=np.int64)
    if np.prod(sizes, dtype=float) < 2**62:
        return np.ravel_multi_index(tuple(codes.T), sizes)
    return pd.util.hash_pandas_object(pd.DataFrame(codes), index=False).to_numpy().view(np.int64)
