"""The release plan: everything a release will do, decided from public inputs only.

A release runs *plan → check → charge → measure → write* (:mod:`dpsynth.pipeline`). The plan is a
pure function of the :class:`ReleaseRequest` — schema, ε, δ, neighbouring relation and unit of
protection, method, row count, a public size hint, post-processing options — never of the data,
of the engine that will count it, or of the file that holds it. So the method, the mechanisms,
the stages and their budgets, the representation of the released tables and the list of
artifacts are the same whichever interface or engine runs the release (a property of the data,
such as its size, cannot pick a branch that shows in the output). The dashboard's previews, the
CLI's ``preview`` and the release itself all read the same :class:`ReleasePlan`. One budget is
settled later, and only from a released value: with the marginals method and the default value share,
the plan reserves ρ_n for a noisy row count measured first, and the split of the rest between the
method and the value model follows that count (:meth:`BudgetSplit.resolve`).

:func:`check_plan` refuses, before anything is charged, everything that can be known without the
data: labels that would collide once written, too many synthetic rows, a domain too large for the
method, a threshold where it does not apply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from dpsynth.errors import InputError
from dpsynth.histogram import MAX_DENSE_CELLS
from dpsynth.mechanisms import DiscreteGaussian, DiscreteLaplace, Mechanism, calibrate, check_delta, check_epsilon
from dpsynth.neighbours import Neighbours
from dpsynth.schema import Schema
from dpsynth.synthesis import MAX_SYNTHETIC_ROWS

METHODS = ("histogram", "marginals", "auto")
#: Public size hint used when the curator gives none (only to choose a method and word warnings).
DEFAULT_SIZE_HINT = 10_000


#: The smallest ε a release takes (the dashboard's own floor is 0.01). At ε = 10⁻⁴ one count's discrete Laplace noise
#: has a standard deviation of about 14,000, and the release's smallest shares of ε (a value-model level, a marginal
#: round, with up to :data:`MAX_CONTRIBUTIONS` rows per person) keep their noise about 50 times inside the exact
#: samplers' range (:mod:`dpsynth.noise`: scale ≤ 2^40, σ² ≤ 2^80), so a release below it is refused before any
#: charge rather than failing after it.
MIN_EPSILON = 1e-4
#: The smallest δ > 0 a release takes: below it 1/δ leaves float64's range in the conversions between (ε, δ) and ρ.
MIN_DELTA = 1e-300
#: The most rows per person a release bounds contributions to (the dashboard's own limit is 100).
MAX_CONTRIBUTIONS = 1000


def check_release_budget(epsilon: float, delta: float = 0.0, max_contributions: int = 1) -> tuple[float, float]:
    """(ε, δ) as a release takes them (:func:`check_epsilon`, :func:`check_delta`, then :data:`MIN_EPSILON` and
    :data:`MIN_DELTA`), and its rows per person (1 to :data:`MAX_CONTRIBUTIONS`): what a release refuses, a
    preview of it refuses too."""
    k = max_contributions
    if isinstance(k, bool) or int(k) != k or not 1 <= k <= MAX_CONTRIBUTIONS:
        raise InputError(f"The most rows per person must be a whole number from 1 to {MAX_CONTRIBUTIONS:,}, got {k!r}.")
    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    if eps < MIN_EPSILON:
        raise InputError(
            f"ε = {eps:g} is below {MIN_EPSILON:g}, the smallest ε a release takes: each count would get noise of"
            f" about ±{1.4 / eps:,.0f} people or more, which swamps all but the largest tables, and the noise's exact"
            " samplers stop there. Choose a larger ε.")
    if 0 < dlt < MIN_DELTA:
        raise InputError(f"δ = {dlt:g} is below {MIN_DELTA:g}: so small a δ is δ = 0 in effect. Use δ = 0 (pure DP,"
                         " Laplace noise) instead.")
    return eps, dlt


@dataclass(frozen=True)
class ReleaseRequest:
    """The public inputs of a release (what the curator chose); nothing here is read from the data."""

    schema: Schema
    epsilon: float
    delta: float = 0.0
    neighbours: str = "add-remove"
    mechanism: str = "auto"
    method: str = "auto"
    rows: int | None = None
    expected_rows: int | None = None
    id_column: str | None = None
    max_contributions: int = 1
    threshold: int = 1
    sparse_method: str = "auto"
    accept_data_derived: bool = False
    #: share of the budget for the value model of numeric columns — of ρ when the release is accounted
    #: in zCDP (δ > 0, Gaussian), of ε otherwise (None: the default share when there are any)
    value_share: float | None = None

    def __post_init__(self) -> None:
        eps, delta = check_release_budget(self.epsilon, self.delta, self.max_contributions)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", delta)
        object.__setattr__(self, "neighbours", Neighbours.parse(self.neighbours).value)
        if self.method not in METHODS:
            raise InputError(f"Unknown method {self.method!r}; use histogram, marginals or auto.")
        if self.rows is not None:
            if isinstance(self.rows, bool) or int(self.rows) != self.rows or self.rows < 0:
                raise InputError(f"The number of synthetic rows must be a whole number ≥ 0, got {self.rows!r}.")
            object.__setattr__(self, "rows", int(self.rows))
        if isinstance(self.threshold, bool) or int(self.threshold) != self.threshold or self.threshold < 1:
            raise InputError(f"The release threshold must be a whole number ≥ 1, got {self.threshold!r}.")
        if self.id_column is None and self.max_contributions != 1:
            raise InputError("Several rows per person need an ID column to bound contributions.")
        if self.expected_rows is not None and (int(self.expected_rows) != self.expected_rows or self.expected_rows < 1):
            raise InputError(f"The expected number of rows must be a whole number ≥ 1, got {self.expected_rows!r}.")

    @property
    def unit(self) -> dict[str, Any]:
        """The unit of protection, as the card states it."""
        if self.id_column is None:
            return {"unit": "record", "description": "one row of the table"}
        k = self.max_contributions
        return {
            "unit": "person",
            "id_column": self.id_column,
            "max_rows_per_person": k,
            "description": f"all rows sharing a value of {self.id_column!r} (at most {k} kept per person, chosen at random)",
        }


@dataclass(frozen=True)
class BudgetSplit:
    """A release's budget shared between the main method and the value model (:func:`split_budget`).

    ``epsilon_main``: the main method's ε (alone (ε_main, δ)-DP). Basic composition: the value
    model's pure ``epsilon_values``, the two adding up to at most ε. zCDP composition instead
    (δ > 0, Gaussian main method): ``rho_values`` of the value model, ``rho_main`` the main method
    may spend and ``rho_total`` = ρ(ε, δ), with ρ_main + ρ_values ≤ ρ_total.
    """

    epsilon_main: float
    epsilon_values: float = 0.0
    rho_values: float = 0.0
    rho_main: float = 0.0
    rho_total: float = 0.0
    #: ρ of the noisy row count that sets the value model's share (:func:`dpsynth.value_model.value_rho_share`;
    #: the marginals method's default); 0 when the share is fixed. Until :meth:`resolve`, ``rho_values``
    #: and ``rho_main`` are those of the default share, to be replaced.
    rho_rows: float = 0.0
    #: the released noisy row count the split was resolved with (None: not resolved, or a fixed share)
    noisy_rows: int | None = None
    #: the schema's value columns (:func:`dpsynth.value_model.value_columns`), which the share also follows
    value_columns: int = 0
    #: whether the marginals method takes its wide path (a public fact of the schema), where the share does not
    #: grow with the value columns (:data:`dpsynth.value_model.WIDE_VALUE_SHARE`)
    wide: bool = False
    #: pure ε of a histogram release's noisy row count (:data:`HISTOGRAM_ROWS_SHARE`; 0: none), composed by basic
    #: composition with the rest of the split, which was made for ε − ``epsilon_rows``
    epsilon_rows: float = 0.0

    @property
    def adaptive(self) -> bool:
        """Whether the value model's share is set by a noisy row count measured first (:meth:`resolve`)."""
        return self.rho_rows > 0

    def resolve(self, noisy_rows: int, epsilon: float, delta: float) -> BudgetSplit:
        """The split of an (ε, δ) release for its released noisy row count: the value model gets
        :func:`dpsynth.value_model.value_rho_share` of the ρ left after the count (for its noisy rows and the
        schema's value columns), the main method the rest."""
        from dpsynth.value_model import value_rho_share

        if not self.adaptive:
            raise InputError("This budget split has a fixed share; there is nothing to resolve.")
        left = (self.rho_total - self.rho_rows) * (1 - 1e-12)
        share = value_rho_share(noisy_rows, self.rho_total, self.value_columns, self.wide)
        split = _zcdp_split(left, share, delta, epsilon)
        return replace(split, rho_total=self.rho_total, rho_rows=self.rho_rows, noisy_rows=int(noisy_rows),
                       value_columns=self.value_columns, wide=self.wide)

    @property
    def has_values(self) -> bool:
        """Whether a value model is released (budget set aside for it)."""
        return self.epsilon_values > 0 or self.rho_values > 0

    @property
    def composition(self) -> str:
        """How the main method and the value model compose: ``none``, ``basic`` or ``zcdp``."""
        return "zcdp" if self.rho_values > 0 else ("basic" if self.epsilon_values > 0 else "none")

    def value_budget(self) -> dict[str, float]:
        """The value model's budget as :func:`dpsynth.value_model.fit_value_model_from_counts` takes it."""
        return {"rho": self.rho_values} if self.composition == "zcdp" else {"epsilon": self.epsilon_values}

    def main_mechanism(self, delta: float, neighbours: Neighbours | str, max_contributions: int,
                       kind: str = "auto") -> Mechanism:
        """The histogram mechanism of the main method: under zCDP composition a Gaussian calibrated to
        ``rho_main``, otherwise :func:`dpsynth.mechanisms.calibrate` at ``epsilon_main``."""
        if self.composition == "zcdp":
            return DiscreteGaussian.from_rho(self.rho_main, delta, neighbours, max_contributions)
        return calibrate(self.epsilon_main, delta, neighbours, max_contributions, kind=kind)




@dataclass(frozen=True)
class ReleasePlan:
    """What the release will do. ``representation``: ``dense`` or ``sparse`` histogram, or ``model``."""

    request: ReleaseRequest
    method: str
    why: str
    representation: str
    mechanism: Mechanism | None
    artifacts: tuple[str, ...]
    warnings: tuple[str, ...] = field(default=())
    #: the budget shared between the main method and the value model (:func:`split_budget`)
    budget: BudgetSplit = field(default=BudgetSplit(epsilon_main=0.0))
    #: which released sum sets a histogram's default row count (:func:`histogram_row_total`)
    row_total: str = "unclamped"

    @property
    def schema(self) -> Schema:
        return self.request.schema

    @property
    def rows_source(self) -> str:
        """How the synthetic row count is set (card wording)."""
        if self.request.rows is not None:
            return "set by the curator"
        if self.row_total == "count":
            return (f"a noisy count of the rows (ε = {self.budget.epsilon_rows:g}, discrete Laplace), at most"
                    f" {MAX_SYNTHETIC_ROWS:,}")
        if self.row_total == "listed":
            return (f"the sum of the released counts of at least {max(1, self.request.threshold)}, at most"
                    f" {MAX_SYNTHETIC_ROWS:,}")
        return f"the noisy total of the released counts, at most {MAX_SYNTHETIC_ROWS:,}"

    def synthetic_rows(self, result: Any) -> int:
        """Rows to write: the curator's number, or the released total the plan chose (``row_total``), capped
        at the row limit."""
        if self.request.rows is not None:
            return self.request.rows
        if self.row_total == "listed":
            total = result.listed_total
        elif self.row_total == "count":
            total = result.counted_rows
        else:
            total = result.noisy_total
        return max(0, min(int(total), MAX_SYNTHETIC_ROWS))

    def histogram_rows_mechanism(self) -> DiscreteLaplace:
        """The discrete Laplace of a histogram release's noisy row count: ε = ``budget.epsilon_rows``, calibrated
        as a one-cell histogram (L1 sensitivity k under add-remove, 2k under replace-one, where the count moves
        by less)."""
        r = self.request
        return DiscreteLaplace.calibrate(self.budget.epsilon_rows, r.neighbours, r.max_contributions)

    def row_count_mechanism(self) -> DiscreteGaussian:
        """The discrete Gaussian of the noisy row count that sets an adaptive budget split: ρ_n =
        ``budget.rho_rows``, calibrated as a one-cell histogram (squared L2 sensitivity k² under
        add-remove, 2k² under replace-one, where the true count moves by less)."""
        r = self.request
        return DiscreteGaussian.from_rho(self.budget.rho_rows, r.delta, r.neighbours, r.max_contributions)

    def describe(self) -> dict[str, Any]:
        """A plain summary for previews (pages, CLI ``preview``)."""
        r = self.request
        out: dict[str, Any] = {
            "method": self.method, "why": self.why, "representation": self.representation,
            "epsilon": r.epsilon, "delta": r.delta, "neighbours": r.neighbours, "unit": r.unit,
            "cells": self.schema.n_cells, "artifacts": list(self.artifacts), "warnings": list(self.warnings),
            "rows": r.rows if r.rows is not None else self.rows_source,
        }
        if self.mechanism is not None:
            out["mechanism"] = self.mechanism.describe()
        return out


def make_plan(request: ReleaseRequest) -> ReleasePlan:
    """The plan for ``request``: a pure function of public inputs (see the module docstring)."""
    schema = request.schema
    split = split_budget(request.epsilon, request.delta, schema, request.value_share, request.mechanism)
    mech = split.main_mechanism(request.delta, request.neighbours, request.max_contributions, request.mechanism)
    method, why = choose_method(schema, mech, request.method, request.expected_rows)
    warnings: list[str] = []
    if method == "histogram":
        representation = "dense" if schema.n_cells <= MAX_DENSE_CELLS else "sparse"
        artifacts = ("synthetic.csv", "histogram.csv", "schema.json", "card.json", "card.md")
        hint = request.expected_rows or DEFAULT_SIZE_HINT
        q = mech.tail(request.threshold) / 2.0 if request.threshold > 1 else mech.tail(1) / 2.0
        if schema.n_cells * q > 0.25 * hint:
            warnings.append(
                f"Mostly noise: about {schema.n_cells * q:,.0f} of the {schema.n_cells:,} cells will show a count of"
                f" at least {request.threshold} from noise alone, against about {hint:,} rows of data. Use fewer"
                " cells, a larger ε, or a higher threshold."
            )
        split, mech, row_total = histogram_budget(
            schema, request.epsilon, request.delta, request.neighbours, request.max_contributions, request.mechanism,
            request.value_share, request.threshold, rows_given=request.rows is not None)
    else:
        if request.threshold != 1:
            raise InputError("A release threshold applies to the histogram method only.")
        representation = "model"
        mech = None
        row_total = "unclamped"
        artifacts = ("synthetic.csv", "marginals.csv", "model.json", "schema.json", "card.json", "card.md")
        # the model's default value share follows the table's size, read from a noisy row count measured first
        split = split_budget(request.epsilon, request.delta, schema, request.value_share, request.mechanism,
                             adaptive=True)
    if split.has_values:
        artifacts = (*artifacts[:-3], "value_model.json", *artifacts[-3:])
    return ReleasePlan(request=request, method=method, why=why, representation=representation, mechanism=mech,
                       artifacts=artifacts, warnings=tuple(warnings), budget=split, row_total=row_total)


#: Share of ε spent on a histogram release's own noisy row count when neither sum of its noisy counts would
#: be nearer n (:func:`histogram_row_total`): at ε = 1 a standard deviation of 141 rows, where the unclamped
#: sum of 27 million cells' counts has 7,000 and their listed sum an excess of millions.
HISTOGRAM_ROWS_SHARE = 0.01


def histogram_row_total(n_cells: int, mechanism: Mechanism, threshold: int = 1, count_sd: float = math.inf) -> str:
    """What sets a histogram release's default row count, from public inputs only: the source whose
    expected error is smallest.

    ``"unclamped"``: the sum of every cell's noisy count, unbiased for n with standard deviation
    √N·sd(Z) over N cells. ``"listed"`` (τ = 1 only): the sum of the positive counts (the cells the
    release samples from), whose noise is that of the occupied cells only but which the empty cells
    inflate by about N·E[Z·1(Z ≥ 1)]; above τ = 1 the occupied cells below τ would deflate it by an
    amount no public input bounds. ``"count"``: a noisy count of the rows of its own, standard deviation
    ``count_sd`` (it costs :data:`HISTOGRAM_ROWS_SHARE` of ε, so every cell's noise grows by about that
    share). On a small domain the unclamped sum wins (the listed one on fewer than about ten cells); at
    τ = 1 on 27 million cells and ε = 1 the listed sum's excess is about 11 million rows and the unclamped
    sum's spread 7,000, against 141 for the count.
    """
    errors = {"unclamped": math.sqrt(n_cells) * mechanism.noise_std(), "count": count_sd}
    if threshold <= 1:
        errors["listed"] = n_cells * mechanism.upper_tail_mean(1)
    return min(errors, key=errors.__getitem__)


def histogram_budget(schema: Schema, epsilon: float, delta: float, neighbours: Neighbours | str,
                     max_contributions: int = 1, mechanism: str = "auto", value_share: float | None = None,
                     threshold: int = 1, rows_given: bool = False) -> tuple[BudgetSplit, Mechanism, str]:
    """The histogram method's budget, its cells' mechanism and what sets its row count
    (:func:`histogram_row_total`), from public inputs only: what :func:`make_plan` runs, and what a
    preview must describe (the cells' noise grows by the share a row count of its own takes)."""
    split = split_budget(epsilon, delta, schema, value_share, mechanism)
    mech = split.main_mechanism(delta, neighbours, max_contributions, mechanism)
    count_eps, rest_eps = _carve(epsilon, HISTOGRAM_ROWS_SHARE)
    counter = DiscreteLaplace.calibrate(count_eps, neighbours, max_contributions)
    # a count is bought only when it sets the rows (not when the curator gives their number)
    row_total = histogram_row_total(schema.n_cells, mech, threshold, math.inf if rows_given else counter.noise_std())
    if row_total == "count":  # the rest of ε is split as the whole would have been
        split = replace(split_budget(rest_eps, delta, schema, value_share, mechanism), epsilon_rows=count_eps)
        mech = split.main_mechanism(delta, neighbours, max_contributions, mechanism)
    return split, mech, row_total


def _carve(epsilon: float, share: float) -> tuple[float, float]:
    """(share·ε, the rest), both rounded down to floats so that as exact decimals they add up to at most ε
    (basic composition of the two parts then gives at most ε)."""
    from fractions import Fraction

    from dpsynth.mechanisms import exact_epsilon

    total = exact_epsilon(epsilon)

    def down(x: Fraction) -> float:
        f = float(x)
        return math.nextafter(f, 0.0) if Fraction(repr(f)) > x else f

    part = down(Fraction(repr(share)) * total)
    return part, down(total - Fraction(repr(part)))


def split_budget(epsilon: float, delta: float, schema: Schema, value_share: float | None,
                 mechanism: str = "auto", adaptive: bool = False) -> BudgetSplit:
    """How (ε, δ) is shared between the main method and the value model; a function of public inputs.

    With δ > 0 and a Gaussian main method (``mechanism`` not ``laplace``) both parts are accounted
    in zCDP: ρ = ρ(ε, δ) (CKS20 Cor. 13, rounded down), the value model gets ρ_v = s·ρ (s the share,
    default :data:`dpsynth.value_model.DEFAULT_VALUE_RHO_SHARE`) and the main method ρ − ρ_v, which it
    receives as ε_main = ε(ρ − ρ_v, δ); ρ adds up (Bun & Steinke 2016, Lemma 2.3), so the release is
    (ε, δ)-DP. The marginals method turns ε_main back into its ρ with the same conversion; that
    round trip is checked here to stay within ρ − ρ_v. ``adaptive`` (the marginals method with the
    default share): a noisy row count first costs ρ_n = :data:`dpsynth.value_model.ROW_COUNT_RHO_SHARE`·ρ
    and sets the share of the rest (:meth:`BudgetSplit.resolve`; ρ_n + ρ_v + ρ_main ≤ ρ, adaptive zCDP
    composition, the share being post-processing of the released count). Otherwise (δ = 0, or Laplace
    asked) the split is :func:`split_value_budget`'s basic composition of pure ε_v and (ε − ε_v, δ).
    On the marginals method's wide path (``adaptive`` and more than
    :data:`dpsynth.marginals.budget.WIDE_COLUMNS` columns) the default share is smaller
    (:data:`dpsynth.value_model.WIDE_VALUE_SHARE`).
    """
    from dpsynth import zcdp
    from dpsynth.marginals.budget import is_wide
    from dpsynth.value_model import DEFAULT_VALUE_RHO_SHARE, ROW_COUNT_RHO_SHARE, WIDE_VALUE_SHARE, value_columns

    wide = adaptive and is_wide(len(schema.columns))
    zcdp_path = delta > 0 and (mechanism or "auto").lower() != "laplace"
    if not zcdp_path or not value_columns(schema) or value_share == 0:
        main, ev = split_value_budget(epsilon, schema, WIDE_VALUE_SHARE if wide and value_share is None else value_share)
        return BudgetSplit(epsilon_main=main, epsilon_values=ev)
    share = _check_share(DEFAULT_VALUE_RHO_SHARE if value_share is None else value_share)
    rho_total = zcdp.rho_from_epsilon(epsilon, delta)
    if not (adaptive and value_share is None):
        return replace(_zcdp_split(rho_total, share, delta, epsilon), rho_total=rho_total)
    rho_rows = rho_total * ROW_COUNT_RHO_SHARE
    split = _zcdp_split((rho_total - rho_rows) * (1 - 1e-12), share, delta, epsilon)
    return replace(split, rho_total=rho_total, rho_rows=rho_rows, value_columns=len(value_columns(schema)), wide=wide)


def _zcdp_split(rho: float, share: float, delta: float, epsilon: float) -> BudgetSplit:
    """ρ shared as ρ_v = share·ρ and ρ_main = ρ − ρ_v, with ε_main = ε(ρ_main, δ) stepped down until the
    main method's own conversion back to ρ stays within ρ_main (``rho_total`` is set by the caller)."""
    from dpsynth import zcdp

    rho_values = rho * share
    rho_main = (rho - rho_values) * (1 - 1e-12)  # float sums: never a hair over ρ
    # the main method re-derives its ρ from ε_main (and a hair below, see marginals.budget.Plan):
    # step ε_main down until that ρ and ρ_v fit in ρ
    eps_main = zcdp.epsilon_from_rho(rho_main, delta)
    while zcdp.rho_from_epsilon(eps_main, delta) > rho_main:
        eps_main = math.nextafter(eps_main, 0.0) * (1 - 1e-12)
    return BudgetSplit(epsilon_main=min(eps_main, float(epsilon)), rho_values=rho_values, rho_main=rho_main,
                       rho_total=rho)


def _check_share(value_share: float) -> float:
    try:
        share = float(value_share)
    except (TypeError, ValueError):
        raise InputError(f"The value-model share of the budget must be a number, got {value_share!r}.") from None
    if not 0.0 <= share < 1.0:
        raise InputError(f"The value-model share of the budget must be at least 0 and below 1, got {value_share!r}.")
    return share


def split_value_budget(epsilon: float, schema: Schema, value_share: float | None) -> tuple[float, float]:
    """(ε of the main method, ε_v of the value model) for a share s of ε (None: the default share).

    Both are rounded *down* to floats so that, as exact decimals, they never add up to more than ε
    (basic composition then gives at most ε). s must be in [0, 1); s = 0 (or no numeric column)
    gives (ε, 0).
    """
    from dpsynth.value_model import DEFAULT_VALUE_SHARE, value_columns

    if value_share is None:
        value_share = DEFAULT_VALUE_SHARE if value_columns(schema) else 0.0
    share = _check_share(value_share)
    if share == 0.0 or not value_columns(schema):
        return epsilon, 0.0
    ev, main = _carve(epsilon, share)
    return main, ev


def choose_method(schema: Schema, mech: Mechanism, method: str, expected_rows: int | None) -> tuple[str, str]:
    """The method and the reason, decided from public inputs only (schema, ε, δ, a public size hint)."""
    n_cells = schema.n_cells
    if method == "histogram":
        return "histogram", "chosen by the curator"
    if method == "marginals":
        return "marginals", "chosen by the curator"
    if method != "auto":
        raise InputError(f"Unknown method {method!r}; use histogram, marginals or auto.")
    if n_cells > MAX_DENSE_CELLS:
        return "marginals", f"the full histogram has {n_cells:,} cells, more than fit in memory"
    hint = expected_rows if expected_rows else DEFAULT_SIZE_HINT
    noise_mass = n_cells * mech.noise_std()
    if len(schema.columns) > 2 and noise_mass > 0.25 * hint:
        return "marginals", (
            f"noise on {n_cells:,} cells (about {noise_mass:,.0f} in total) would swamp a table of about"
            f" {hint:,} rows"
        )
    return "histogram", f"the full histogram ({n_cells:,} cells) is small enough for ε = {mech.epsilon:g}"


def check_plan(plan: ReleasePlan) -> None:
    """Refuse, before any charge, what the plan cannot deliver (see the module docstring)."""
    r, schema = plan.request, plan.schema
    if r.rows is not None and r.rows > MAX_SYNTHETIC_ROWS:
        raise InputError(f"The number of synthetic rows must be at most {MAX_SYNTHETIC_ROWS:,}, got {r.rows:,}.")
    from dpsynth.provenance import refuse_data_derived

    refuse_data_derived(schema, accept=r.accept_data_derived)
    for col in schema.columns:
        labels = col.labels()
        if len(set(labels)) != len(labels):
            dupes = sorted({x for x in labels if labels.count(x) > 1})
            raise InputError(f"Column {col.name!r}: cell labels {', '.join(map(repr, dupes[:3]))} would appear more"
                             " than once in the released tables; use fewer bins or distinct categories.")
    if plan.representation == "sparse":
        from dpsynth.engines import check_indexable
        from dpsynth.sparse import check_feasible

        assert plan.mechanism is not None
        check_feasible(check_indexable(schema), plan.mechanism, r.threshold, r.sparse_method)
