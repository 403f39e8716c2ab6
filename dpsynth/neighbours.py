"""The neighbouring relation, and every sensitivity derived from it (in this one place).

Two datasets are neighbours when they differ by one *unit of protection*:

- ``add-remove`` (unbounded DP): one unit's rows are added or removed; ``n`` changes by the
  unit's contribution, so the exact row count is itself private.
- ``replace-one`` (bounded DP, the DP lecture notes' (ch. 6) Hamming distance ``d_0``): one unit's rows are replaced
  by other rows; ``n`` is treated as public under this relation only.

A unit is a record, or a person identified by an ID column who contributes at most ``k`` rows
(contributions bounded beforehand by keeping at most ``k`` rows per ID).

Sensitivities of a histogram (a vector of cell counts; Kifer, "Basic DP algorithms and statistics", bounded vs unbounded):

=============  ======================  ===================
relation       L1 sensitivity          L2 sensitivity
=============  ======================  ===================
add-remove     k                       k
replace-one    2k                      sqrt(2) k
=============  ======================  ===================

(L2 with k rows of one unit all in one cell is k; the replace-one case moves k rows out of one
cell into another.) For any marginal (a projection of the histogram) the same bounds hold, since
a projection cannot increase the L1 or L2 change.

A hierarchical histogram (a tree of counts over one column's range, :mod:`dpsynth.value_model`)
is h histograms, one per level, each over a partition of the range: one unit's k rows change
each level's counts by at most the histogram's L1 sensitivity (k, or 2k under replace-one: a
row leaves one node and enters another), and the h levels together by h times that. A row whose
value is empty is in no node. A subset of a level's nodes (a pruned tree) cannot change more.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from dpsynth.errors import InputError


class Neighbours(StrEnum):
    """The neighbouring relation the guarantee is stated for."""

    ADD_REMOVE = "add-remove"
    REPLACE_ONE = "replace-one"

    @classmethod
    def parse(cls, value: str | Neighbours) -> Neighbours:
        """Read a relation from its name; an unknown name is an :class:`InputError`."""
        if isinstance(value, Neighbours):
            return value
        try:
            return cls(str(value).strip().lower().replace("_", "-"))
        except ValueError:
            names = ", ".join(m.value for m in cls)
            raise InputError(f"Unknown neighbouring relation {value!r}; use one of: {names}.") from None

    def describe(self) -> str:
        """One sentence a curator can read."""
        if self is Neighbours.ADD_REMOVE:
            return (
                "Adding or removing one person's records changes the output distribution by at most"
                " a factor e^ε — for ε = 1 about 2.7 times (the dataset size is also protected)."
            )
        return (
            "Replacing one person's records by any others changes the output distribution by at"
            " most a factor e^ε — for ε = 1 about 2.7 times (the dataset size is treated as public)."
        )


def histogram_l1_sensitivity(neighbours: Neighbours | str, max_contributions: int = 1) -> int:
    """L1 sensitivity of any histogram or marginal of counts (table in the module docstring)."""
    k = _check_k(max_contributions)
    return k if Neighbours.parse(neighbours) is Neighbours.ADD_REMOVE else 2 * k


def histogram_l2_sensitivity(neighbours: Neighbours | str, max_contributions: int = 1) -> float:
    """L2 sensitivity of any histogram or marginal of counts (table in the module docstring)."""
    k = _check_k(max_contributions)
    return float(k) if Neighbours.parse(neighbours) is Neighbours.ADD_REMOVE else math.sqrt(2.0) * k


def histogram_l2_sensitivity_squared(neighbours: Neighbours | str, max_contributions: int = 1) -> int:
    """Squared L2 sensitivity as an exact integer (k² or 2k²), for exact zCDP arithmetic."""
    k = _check_k(max_contributions)
    return k * k if Neighbours.parse(neighbours) is Neighbours.ADD_REMOVE else 2 * k * k


def hierarchical_histogram_l1_sensitivity(
    neighbours: Neighbours | str, max_contributions: int = 1, levels: int = 1
) -> int:
    """L1 sensitivity of ``levels`` levels of a hierarchical histogram: levels·k (add-remove) or levels·2k."""
    if int(levels) != levels or levels < 1:
        raise InputError(f"A hierarchical histogram has at least one level, got {levels!r}.")
    return int(levels) * histogram_l1_sensitivity(neighbours, max_contributions)


def count_sensitivity(neighbours: Neighbours | str, max_contributions: int = 1) -> int:
    """Sensitivity of the total row count: k under add-remove, 0 under replace-one (n public)."""
    k = _check_k(max_contributions)
    return k if Neighbours.parse(neighbours) is Neighbours.ADD_REMOVE else 0


def count_query_sensitivity(neighbours: Neighbours | str, max_contributions: int = 1) -> int:
    """Sensitivity of one count of rows meeting a condition: k under either relation.

    Adding or removing a person changes it by at most their k rows; replacing them swaps at most
    k matching rows for non-matching ones (or back), again k.
    """
    Neighbours.parse(neighbours)
    return _check_k(max_contributions)


def rounding_gap_sensitivity(neighbours: Neighbours | str, max_contributions: int = 1) -> int:
    """Sensitivity of max_x |#{v ≤ x} − #{r(v) ≤ x}|, the rows between their values and their values
    rounded by a fixed map r (a KS distance in rows): k under add-remove, 2k under replace-one.

    Each row adds +1 or −1 to the difference at every x between v and r(v) and 0 elsewhere, so adding
    or removing k rows moves every x's difference, hence its largest magnitude, by at most k; a
    replacement removes k such terms and adds k others, which may have the opposite sign: 2k.
    """
    k = _check_k(max_contributions)
    return k if Neighbours.parse(neighbours) is Neighbours.ADD_REMOVE else 2 * k


def rank_sensitivity(neighbours: Neighbours | str, max_contributions: int = 1) -> int:
    """Sensitivity of the quantile utility −|rank − q·n| (Smith 2011): k under either relation.

    A person's k rows move any rank by at most k, and q·n by at most q·k ≤ k; replacing them
    leaves n unchanged and moves the rank by at most k.
    """
    Neighbours.parse(neighbours)
    return _check_k(max_contributions)


def bound_contributions(
    df: pd.DataFrame, id_column: str | None, max_contributions: int, *, rng: np.random.Generator
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Keep at most k uniformly chosen rows per ID and drop the ID column (a stable transformation),
    so every sensitivity above holds with k; also the card's description of the unit.

    The random subset is drawn from a child ChaCha20 generator keyed by a fixed-size draw of ``rng``,
    so ``rng``'s state afterwards does not depend on the number of rows.
    """
    k = _check_k(max_contributions)
    if id_column is None:
        if k != 1:
            raise InputError("Several rows per person need an ID column to bound contributions.")
        return df, {"unit": "record", "description": "one row of the table"}
    if id_column not in df.columns:
        raise InputError(f"The ID column {id_column!r} is not in the table.")
    from dpsynth.randomness import child_rng

    shuffled = df.iloc[child_rng(rng).permutation(len(df))]
    rank = shuffled.groupby(id_column, sort=False, dropna=False).cumcount().to_numpy()
    kept = shuffled[rank < k].drop(columns=[id_column])
    return kept, {
        "unit": "person",
        "id_column": id_column,
        "max_rows_per_person": k,
        "description": f"all rows sharing a value of {id_column!r} (at most {k} kept per person, chosen at random)",
    }


def bounded_mean_sensitivity(lower: float, upper: float, n: int) -> float:
    """Sensitivity of the sample mean of n values clamped to [L, U] under replace-one: (U-L)/n.

    Seed 000 ("repeated queries", "releasing a private histogram"): the mean's perturbation
    uses Laplace((U-L)/(nε)), valid only in the bounded setting where n is public.
    """
    if n <= 0:
        raise InputError("The mean of an empty dataset is undefined.")
    return (upper - lower) / n


def _check_k(k: int) -> int:
    if int(k) != k or k < 1:
        raise InputError(f"The number of rows per person must be a whole number ≥ 1, got {k!r}.")
    return int(k)


def subset_counts_l1_sensitivity(neighbours: Neighbours | str, max_contributions: int = 1, n_queries: int = 1) -> int:
    """L1 sensitivity of ``n_queries`` counting queries, each counting the records in a subset: k·n_queries.

    Under either relation one unit changes any single count by at most its k rows (added, removed,
    or replaced by rows that may fall in or out of the subset), and it may be in every subset; so
    the vector of counts moves by at most k·n_queries in L1 (the reconstruction demonstration,
    Algorithmic Foundations slides, "Reconstruction attacks"; basic composition gives the same total).
    """
    Neighbours.parse(neighbours)
    k = _check_k(max_contributions)
    if isinstance(n_queries, bool) or int(n_queries) != n_queries or n_queries < 1:
        raise InputError(f"The number of queries must be a whole number ≥ 1, got {n_queries!r}.")
    return k * int(n_queries)


def moment_matrix_sensitivity(
    neighbours: Neighbours | str, n_columns: int, entry_bound: int, max_contributions: int = 1, *,
    rows_may_drop: bool = False,
) -> tuple[int, int]:
    """(L1, squared L2) sensitivity of the upper triangle of Σ_rows a·aᵀ, in exact integers.

    Each row gives a = (a₀, a₁ … a_c) with a₀ fixed (an intercept) and every product bounded,
    |a_i·a_j| ≤ B = ``entry_bound`` (for regression on a fixed-point grid: a₀ = G, |a_j| ≤ G, B = G²;
    Kifer's notes on differential privacy, "Linear Regression", bound XᵀX and Xᵀy the same way).
    With D = c + 1 entries on the diagonal and D(D−1)/2 above it, per row of the unit:

    - add-remove: every entry moves by at most B: L1 = B·D(D+1)/2, L2² = B²·D(D+1)/2;
    - replace-one: a₀² = B is unchanged (n is fixed); a diagonal a_j² ∈ [0, B] moves by at most B;
      an off-diagonal product ∈ [−B, B] by at most 2B: L1 = B·(c + D(D−1)) and
      L2² = B²·(c + 2·D(D−1)). If rows may be dropped (a missing value), a replacement can act as
      a removal and the count entry then moves by B: one more B in L1 and B² in L2².

    A unit of k rows moves the sum by at most k times one row's change (triangle inequality):
    L1 × k, L2² × k².
    """
    k = _check_k(max_contributions)
    rel = Neighbours.parse(neighbours)
    if isinstance(n_columns, bool) or int(n_columns) != n_columns or n_columns < 1:
        raise InputError(f"The number of columns must be a whole number ≥ 1, got {n_columns!r}.")
    if isinstance(entry_bound, bool) or int(entry_bound) != entry_bound or entry_bound < 1:
        raise InputError(f"The bound on each product must be a whole number ≥ 1, got {entry_bound!r}.")
    c, b = int(n_columns), int(entry_bound)
    d = c + 1
    if rel is Neighbours.ADD_REMOVE:
        l1, l2sq = b * d * (d + 1) // 2, b * b * d * (d + 1) // 2
    else:
        count = 1 if rows_may_drop else 0
        l1, l2sq = b * (c + d * (d - 1) + count), b * b * (c + 2 * d * (d - 1) + count)
    return k * l1, k * k * l2sq
