"""The neighbouring relation, and every sensitivity derived from it (in this one place).

Two datasets are neighbours when they differ by one *unit of protection*:

- ``add-remove`` (unbounded DP): one unit's rows are added or removed; ``n`` changes by the
  unit's contribution, so the exact row count is itself private.
- ``replace-one`` (bounded DP, seed 000's Hamming distance ``d_0``): one unit's rows are replaced
  by other rows; ``n`` is treated as public under this relation only.

A unit is a record, or a person identified by an ID column who contributes at most ``k`` rows
(contributions bounded beforehand by keeping at most ``k`` rows per ID).

Sensitivities of a histogram (a vector of cell counts; seed 003, bounded vs unbounded):

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
                " a factor e^ε (the dataset size is also protected)."
            )
        return (
            "Replacing one person's records by any others changes the output distribution by at"
            " most a factor e^ε (the dataset size is treated as public)."
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
