"""The budget plan of the marginals method: shares per stage, allocation over rounds, noise per stage.

The total (ρ of zCDP when δ > 0, ε when δ = 0) is split into the three stages of
:func:`dpsynth.marginals.fit_marginal_model`: ``ONE_WAY_SHARE`` for the one-way marginals,
``SELECT_SHARE`` for the selections (evenly over the rounds), the rest for the measurements of
the selected marginals, each round taking its share of what is left in proportion to
cells^``ALLOC_POWER`` (:func:`allocate`). Every number here is a function of public inputs and
earlier releases, fixed before the round it pays for looks at the data.

Each measurement is a mechanism object of :mod:`dpsynth.mechanisms` (exact discrete Gaussian or
discrete Laplace), with its noise parameter rounded toward *more* noise, so the spend recorded by
:class:`Plan` is at or below the plan; :func:`stage` writes the card's entry for a stage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpsynth import noise, zcdp
from dpsynth.mechanisms import DiscreteGaussian, DiscreteLaplace
from dpsynth.neighbours import Neighbours, histogram_l1_sensitivity, histogram_l2_sensitivity_squared

# Budget shares (of ρ for δ > 0, of ε for δ = 0); chosen on Adult and Titanic, see benchmarks/.
ONE_WAY_SHARE = 0.05
# The first one-way installment under pure DP (δ = 0). A share of ρ buys noise ∝ 1/√share, a share of ε
# noise ∝ 1/share, so the split that minimises Σ aᵢ·noiseᵢ moves from shares ∝ aᵢ^(2/3) to ∝ aᵢ^(1/2): the
# one-ways' 5 : 95 against the rest becomes (5/95)^(3/4) : 1, about 10%. Paired releases at ε = 1, δ = 0
# (2-/3-way TVD): 24 R tables (benchmarks/tables/fetch_rdatasets.py, seeds 3000–3005) geometric mean
# −2.0% / −1.2%, 28 others −2.5% / −1.9%; 30 seeds each: Adult −0.0025 / −0.0031, hospital admissions
# −0.0042 / −0.0064, the survey extract −0.0021 / −0.0030, the AR(1) panel +0.0009 / +0.0012, Fair
# +0.0000 / +0.0011, Titanic +0.0018 ± 0.0022 / +0.0051 ± 0.0035. Raising the second installment's base
# with it (both 10%) gained more on those 24 (−7.8% / −4.7%) but cost the panel +0.0134 / +0.0243.
ONE_WAY_SHARE_PURE = 0.10
# … and on the wide path, where under pure DP the one-ways take nearly the whole budget in two installments
# (:data:`ONE_WAY_FLOOR`): two Laplace measurements at ε₁ + ε₂ are as precise as one at √(ε₁² + ε₂²) only, so
# the first is small. At 5% + 95% (the zCDP share, where installments lose nothing) the 100 × 50,000 table's
# one-column TVD came out 1.036 × that of independent noisy one-ways at ε = 1; at 1% + 99% 0.964–0.976. The
# fit combines both installments.
WIDE_ONE_WAY_SHARE_PURE = 0.01
SELECT_SHARE = 0.10
# Measurement budget ∝ cells^ALLOC_POWER (2/3 would minimise the total expected L1 noise of a
# fixed set of tables; 0 = equal split; 1/3 did best on Adult).
ALLOC_POWER = 1.0 / 3.0

#: The least noise variance the fit assumes of a count. At a very large ε the discrete Laplace's variance
#: 2p/(1 − p)² underflows to 0 (p = e^(−1/scale)), and the fit weighs a table by 1/variance; a count's
#: error below 0.001 is nothing against its integer unit.
MIN_NOISE_VARIANCE = 1e-6
_MIN_NOISE_SD = math.sqrt(MIN_NOISE_VARIANCE)


@dataclass(frozen=True)
class Measurement:
    """One noisy measurement as planned: the mechanism applied and the budget it costs.

    ``cost`` is ρ = Δ₂²/(2σ²) (discrete Gaussian, CKS20 Thm 4) or ε = Δ₁/scale (discrete
    Laplace, GRS09), computed from the rounded noise parameter the mechanism actually uses.
    """

    mechanism: DiscreteGaussian | DiscreteLaplace
    cost: float

    @property
    def pure(self) -> bool:
        return isinstance(self.mechanism, DiscreteLaplace)

    @property
    def param(self) -> Fraction:
        """σ² for the Gaussian, the scale for the Laplace."""
        m = self.mechanism
        return m.scale if isinstance(m, DiscreteLaplace) else m.sigma2

    @property
    def mean_abs(self) -> float:
        """E|Z| of one draw (Gaussian: √(2/π)σ, a close upper bound for the discrete one), at least the
        standard deviation :data:`MIN_NOISE_VARIANCE` stands for."""
        if self.pure:
            p = math.exp(-1.0 / float(self.param))
            return max(2.0 * p / (1.0 - p * p), _MIN_NOISE_SD)
        return max(math.sqrt(2.0 / math.pi * float(self.param)), _MIN_NOISE_SD)

    @property
    def variance(self) -> float:
        """Variance of one draw (Gaussian: ≤ σ², CKS20 Prop. 19), at least :data:`MIN_NOISE_VARIANCE`."""
        if self.pure:
            p = math.exp(-1.0 / float(self.param))
            return max(2.0 * p / (1.0 - p) ** 2, MIN_NOISE_VARIANCE)
        return max(float(self.param), MIN_NOISE_VARIANCE)

    def __call__(self, counts: np.ndarray, *, rng: np.random.Generator) -> np.ndarray:
        """Noisy counts: the mechanism's exact integer noise on every cell, empty ones included."""
        return self.mechanism(counts, rng=rng)

    def info(self) -> dict[str, Any]:
        """What the model file records for this measurement."""
        if self.pure:
            return {"noise": "discrete Laplace", "scale": str(self.param), "epsilon": self.cost}
        return {"noise": "discrete Gaussian", "sigma2": str(self.param), "rho": self.cost}


class Plan:
    """Turns a budget (ρ or ε) into mechanisms, recording each spend."""

    def __init__(self, epsilon: float, delta: float, neighbours: Neighbours, k: int) -> None:
        self.pure = delta == 0.0
        self.delta = delta
        self.neighbours = neighbours
        self.l1 = histogram_l1_sensitivity(neighbours, k)
        self.l2sq = histogram_l2_sensitivity_squared(neighbours, k)
        # A hair below the budget so that float rounding in the splits can never overspend.
        self.total = (epsilon if self.pure else zcdp.rho_from_epsilon(epsilon, delta)) * (1 - 1e-9)
        self.spent = 0.0

    def preview(self, budget: float) -> Measurement:
        """The measurement ``budget`` would buy (nothing is spent)."""
        if self.pure:
            scale = Fraction(noise.rational_at_least(self.l1 / budget))
            cost = self.l1 / float(scale)
            return Measurement(DiscreteLaplace(epsilon=cost, l1_sensitivity=self.l1, scale=scale), cost)
        sigma2 = Fraction(noise.rational_at_least(self.l2sq / (2.0 * budget)))
        cost = float(zcdp.gaussian_rho(sigma2, self.l2sq))
        # The mechanism alone is (ε, δ)-DP for the classic conversion ε = ρ + 2√(ρ ln(1/δ)) [BS16,
        # Prop. 1.3] (the release as a whole is accounted in ρ, not through this ε).
        eps = cost + 2.0 * math.sqrt(cost * math.log(1.0 / self.delta))
        mech = DiscreteGaussian(epsilon=eps, delta=self.delta, l2_sensitivity=math.sqrt(self.l2sq),
                                sigma2=sigma2, neighbours=self.neighbours)
        return Measurement(mech, cost)

    def measurement(self, budget: float) -> Measurement:
        """The measurement ``budget`` buys; its cost is recorded as spent."""
        m = self.preview(budget)
        self.spent += m.cost
        return m

    def selection_epsilon(self, budget: float) -> float:
        """ε of an exponential mechanism costing ``budget`` (ρ = ε²/8 [Cesar & Rogers 2021] under zCDP)."""
        eps = budget if self.pure else zcdp.exponential_mechanism_epsilon(budget) * (1 - 1e-12)
        self.spent += eps if self.pure else eps * eps / 8.0
        return eps


def allocate(left: float, rounds_left: int, weight: float, earlier: list[float]) -> float:
    """This round's share of the measurement budget: ∝ cells^ALLOC_POWER, against the mean weight
    of the cliques measured so far standing in for the rounds still to come. Depends only on
    public sizes and earlier (released) selections."""
    if rounds_left <= 1:
        return left
    typical = (sum(earlier) + weight) / (len(earlier) + 1)
    return left * weight / (weight + (rounds_left - 1) * typical)


def noisy_total(measurements: list[tuple[tuple[int, ...], np.ndarray]], mechs: list[Measurement]) -> float:
    """Inverse-variance weighted mean of the tables' sums (each sum has variance cells·Var(Z))."""
    num = den = 0.0
    for (_, y), m in zip(measurements, mechs, strict=True):
        w = 1.0 / (y.size * m.variance)
        num += w * float(y.sum())
        den += w
    return num / den


# -- the card's entries ---------------------------------------------------------------------------


def stage(name: str, plan: Plan, cost: float, detail: str) -> dict[str, Any]:
    """One stage of the release card: its cost, share of the budget and guarantee."""
    unit = "epsilon" if plan.pure else "rho"
    return {"stage": name, unit: cost, "share": cost / plan.total if plan.total else 0.0,
            "guarantee": (f"{cost:.6g}-DP" if plan.pure else f"{cost:.6g}-zCDP"), "detail": detail}


def range_text(name: str, values: list[float]) -> str:
    if not values:
        return f"no {name}"
    lo, hi = min(values), max(values)
    return f"{name} = {lo:.4g}" if math.isclose(lo, hi, rel_tol=1e-9) else f"{name} from {lo:.4g} to {hi:.4g}"


def mech_text(m: Measurement, plan: Plan) -> str:
    if m.pure:
        return f"discrete Laplace scale {float(m.param):.4g} (Δ₁ = {plan.l1}, {m.cost:.4g}-DP)"
    return f"discrete Gaussian σ = {math.sqrt(float(m.param)):.4g} (Δ₂² = {plan.l2sq}, {m.cost:.4g}-zCDP)"


# -- capacity: how much model the budget buys (decided from public values only) -------------------

# Tables wider than this take the wide path: one round per column (a spanning tree, as in MST),
# candidates scored against independence of the released one-ways (all pair counts once, no
# refit between rounds), so selection costs O(d²) counts rather than O(d³) model estimates.
WIDE_COLUMNS = 24


def is_wide(columns: int) -> bool:
    """Whether a table of ``columns`` columns takes the wide path (more than :data:`WIDE_COLUMNS`): a public
    fact of the schema, which the release's budget split (:func:`dpsynth.plan.split_budget`) reads too."""
    return columns > WIDE_COLUMNS

# Three-way measurements are offered when a typical pair measurement's expected L1 noise is at most
# 1/TRIPLES_SNR of the noisy total (AIM's rule of keeping a measurement's noise below its signal).
TRIPLES_SNR = 10.0
# Below this signal-to-noise (a typical pair's expected L1 noise above the noisy total itself) a
# typical pair measurement carries nothing: the budget goes to the one-ways (independent columns), but
# for a few pairs of few cells (SMALL_PAIR_SNR below).
MIN_PAIR_SNR = 1.0
# Above this signal-to-noise the fit's optimisation error, not the noise, limits the model: the
# mirror-descent iterations per round and at the end are doubled.
MORE_ITERS_SNR = 100.0
# One-way fallback: the planned one-way precision may raise the mean expected one-column TVD of the
# synthetic rows (noise and sampling together) at most this factor above that of independent noisy
# one-ways spending the whole budget; otherwise more of the budget goes to the one-ways.
ONE_WAY_SLACK = 1.02
# … and whatever that rule says, the one-way installments' noise standard deviation stays within this factor of
# that of independent noisy one-ways spending the whole budget (noise alone: a share of ρ buys precision ∝
# share, a share of ε ∝ share²). The rule above adds sampling error to both sides, but the synthetic rows'
# one-ways follow the model's within one row (controlled rounding), so as the noise shrinks that error hid it:
# on the 100 × 50,000 table the one-ways' share of ρ fell from 92.5% at ε = 1 to 67.5% at 3 and 22.5% at 10,
# and the release's one-column TVD came out 1.05 × and 1.33 × that of independent noisy one-ways (pure DP at
# ε = 10: 1.33 ×). 1.06 holds the one-ways at 90% or more of ρ, which the rule already gives at ε ≤ 1 (92.5% on
# that table, 90% on sixty near-copies of a yes/no column, where the pairs carry much of the one-ways'
# accuracy): those releases are unchanged, and at ε = 3 and 10 the one-column TVD comes out at that of
# independent noisy one-ways (see benchmarks/peers/README.md, twenty-eighth session).
ONE_WAY_FLOOR = 1.06
# Below this signal-to-noise of a typical pair, a second one-way installment of ONE_WAY_SHARE is
# measured and the one-ways become observations of the fit (they then carry more of each column's
# accuracy than the noisy pairs do). `benchmarks/bench_paired.py --against e82e07c --eps 1 3
# --seeds 12` (whole Adult releases): at ε = 1 (pair signal-to-noise 18) 2-/3-way TVD
# 0.0198/0.0432 → 0.0188/0.0420; at ε = 3 (50) fitting the one-ways cost 0.0003/0.0008.
ONE_WAY_MORE_SNR = 30.0
# Below this signal-to-noise of a typical pair the second installment grows to
# ONE_WAY_SHARE·√(ONE_WAY_MORE_SNR ÷ signal-to-noise), at most ONE_WAY_MORE_MAX of the total (8.7% at 10, 12%
# at 5, 19% at 2), unless that would take the pairs below MIN_PAIR_SNR. There a column's one-way carries
# most of its accuracy, and every pair holding the column inherits its error. On 52 real tables of 6 to
# 17 columns and 800 to 54,000 rows from the R datasets (benchmarks/tables/fetch_rdatasets.py, schemas
# drafted from the data; `bench_paired.py --against 0743706 --data DIR --all --seeds 6`, ε = 1) the 40
# tables the rule changes gained 3.1% / 1.5% of 2-/3-way TVD (geometric mean; 34 of 40 lower), e.g. the
# otitis trial OME −0.0136 / −0.0165, RetSchool −0.0067 / −0.0116, and the arthritis trial (906 rows,
# signal-to-noise 2), which had come out worse than independent columns (0.125 against 0.099), −0.0052;
# it was chosen on 24 of them (seeds 3000–3005: −5.1% / −3.2%) over √ and linear growth from 10, 20 or 30.
# Under pure DP (δ = 0, the dashboard's default; seeds 3000–3005) the gain is larger: 13.2% / 10.0% on those
# 24, 7.2% / 4.9% on the other 28 (seven of them unchanged), e.g. the colon-cancer trial −0.072 / −0.088.
# On the benchmark tables (12 paired seeds): Titanic at 891 rows −0.0096 / −0.0077, at ε = 0.3 −0.0071 /
# −0.0020, the ANES extract at ε = 2 −0.0139 / −0.0097, the AR(1) panel at ε = 1 −0.0047 / −0.0033, Adult
# at ε = 0.2 −0.0018 / −0.0019, Fair at 0.3 −0.0030 / −0.0033; Titanic at ε = 1 +0.0006 ± 0.0023 / +0.0022
# ± 0.0041. From 10 to 30 the same growth was neutral on seven R tables (0.998 / 1.003) and cost the
# generated survey extract +0.0008 / +0.0015 and the census extract +0.0004 / +0.0006 (Adult +0.0002 /
# +0.0003): there the fixed installment stays.
ONE_WAY_GROW_SNR = 10.0
ONE_WAY_MORE_MAX = 0.3
# From this signal-to-noise of a typical pair (while the one-ways are observations of the fit, below
# ONE_WAY_MORE_SNR), each column's one-way is a candidate to measure again in the rounds, scored like
# any other candidate by its whole gap as in AIM (not by the share of its noise a new measurement
# removes, which the larger tables' re-measures use): the rounds then spend on a column's one-way where
# the fitted one-way is still far from the data. Paired whole releases at ε = 1, 2-/3-way TVD (12 seeds
# unless noted): a generated census extract (benchmarks/tables/generated.py, signal-to-noise 16)
# −0.0018 / −0.0020, nine nearly independent columns (11) −0.0013 / −0.0017, the survey extract (13)
# −0.0006 / −0.0005, the claims extract (16) −0.0003 / −0.0004, hospital admissions (17, 24 seeds)
# −0.0003 / +0.0004, a questionnaire (10, 24 seeds) +0.0003 / +0.0006, Adult (19) +0.0000 / +0.0002.
# Below it the rounds are few and a noisy one-way's gap is mostly noise: on a twelve-column AR(1)
# panel (1.8, 24 seeds) one-ways measured again cost +0.0033 / +0.0043 (the lab panel, 5.8, gained
# −0.0010 / −0.0012; Titanic and Fair within ±0.0005). Under pure DP at ε = 1: the census extract
# −0.0029 / −0.0047 (6 seeds), the nearly independent table −0.0016 / −0.0020, Adult +0.0009 ± 0.0006 /
# +0.0016 ± 0.0012 (10 seeds), Titanic unchanged (its signal-to-noise is under 10).
ONE_WAYS_AGAIN_SNR = TRIPLES_SNR
# Below MIN_PAIR_SNR a few small pairs may still be worth their noise: a pair of a yes/no column and a
# seven-level one has 14 cells where two seven-level columns have 49. Those of at most the cells that
# keep a pair's expected L1 noise under 1/SMALL_PAIR_SNR of the noisy total are then candidates (a pair
# with a column of one cell counts for none: it has no dependence to measure), in
# SMALL_PAIRS_PER_COLUMN rounds per column (fewer if fewer such pairs, or columns, there are). They are
# paid for by the one-ways of the columns such a pair may hold: each keeps SMALL_PAIRS_ONE_WAY of its
# second installment's share (rest0 ÷ d), and each round spends one column's spare share
# (SMALL_PAIRS_SELECT of it on the selection). What the rounds leave (a round that chose "join alone",
# fewer pairs than columns that gave) goes back, after the rounds, to the one-ways of the columns that no
# measured pair holds. Whole releases at ε = 1 against independent columns (paired seeds, 2-/3-way TVD):
# the ANES 1996 extract (benchmarks/tables/fetch_tables.py; 944 rows, signal-to-noise 0.8; 12 seeds)
# −0.0153 / −0.0363 (bench_marginals.py: 0.1700 / 0.3286 → 0.1580 / 0.2973, 0.89 / 0.98 → 0.82 / 0.88 × AIM;
# its mean KS 0.079 → 0.083), Adult's rows subsampled to 1,000 −0.0056 /
# −0.0129, to 2,000 at ε = 0.5 −0.0050 / −0.0117, Titanic at ε = 0.1 +0.0006 ± 0.0036 (60 seeds), at
# 0.15 −0.0026 / −0.0063, 500 rows of RAND −0.0004 / −0.0006 (24 seeds); generated tables (benchmarks/
# tables/generated.py): the census extract at 1,000 rows +0.0052 ± 0.0023 / +0.0051, at 500 −0.0031 /
# −0.0040, hospital admissions at 500 −0.0056 / −0.0068, nine nearly independent columns at 500
# +0.0048 ± 0.0033 / +0.0040 (a pair measured there costs its columns' one-ways and buys nothing). A pair
# with a yes/no column (× vote in the ANES extract) measures the other column's one-way nearly as well as
# the installment it replaces, and the dependence besides. Tried: every column's one-way paying alike,
# 0.55 of its share kept (ANES −0.0145 / −0.0371, but the census extract at 1,000 rows +0.0218 /
# +0.0219); only the columns a small pair may hold paying, 0.55 kept (census +0.0096); keeping 0.4 rather
# than 0.15 (ANES −0.0116 / −0.0231); 0.4 of a round's budget on its selection (ANES −0.0081 / −0.0206).
SMALL_PAIR_SNR = 3.0
SMALL_PAIRS_PER_COLUMN = 0.4
SMALL_PAIRS_ONE_WAY = 0.15
SMALL_PAIRS_SELECT = 0.1
# From this signal-to-noise a table of many columns gets at least PAIR_ROUNDS_SHARE of its pairs as rounds
# (instead of fit.ROUNDS_PER_COLUMN per column, which it exceeds from 11 columns): where noise no longer
# limits the model, 3 rounds per column leave most of the pairs of a wide table unmeasured, and the
# model's structure, not its noise, keeps the 3-way TVD above the sampling floor. 52 R tables at ε = 10
# (benchmarks/bench_floor_ratio.py, 2 seeds; 4 on the tables that changed): Wages (12 columns, 8 yes/no)
# 1.32 → 1.18 × the floor, DoctorContacts (15) 1.61 → 1.51, VietNamI 0.94 → 0.95, the other 49 unchanged;
# 3-way within 1.3 × the floor on 46 of 52 tables rather than 45. From 50 instead: mdvis, RetSchool and rwm1984
# −4 to −20% as well, but Cracker +7%, Catsup +5%, and Adult at ε = 3 twice the time for nothing. The price is
# time: at ε = 10 DoctorContacts took 25 s instead of 10, Adult 27 s instead of 14 (3-way −0.0004).
PAIR_ROUNDS_SNR = 100.0
PAIR_ROUNDS_SHARE = 0.6
# From this signal-to-noise, INSIDE_ROUNDS_PER_COLUMN × d rounds after the tree's offer the three-way tables
# inside its cliques that no round measured (besides measuring again). A clique holds the columns of the pairs
# and triples that built it, but the model fills its other tables by maximum entropy: on the diamonds (53,940
# rows) at ε = 10 carat, color and price share a clique of six columns, no round measured the three together,
# and their table stayed at 0.052 TVD against a sampling floor of 0.017 (price depends on carat and colour
# jointly). Offered during the tree's rounds, such tables took rounds from columns still to join or cliques
# to grow (the diamonds 1.41 → 1.44 × the floor on 3-way TVD, DoctorContacts 1.48 → 1.63), hence rounds of
# their own, after them. 52 R tables at ε = 10 (benchmarks/bench_floor_ratio.py, 2 seeds; 2-/3-way TVD ÷ the
# floor, geometric mean of this ÷ before): from 30 with 3 rounds per column 0.971 / 0.946, 3-way within 1.3 ×
# the floor on 48 of 52 instead of 45 (the diamonds 1.41 → 1.06, DoctorContacts 1.48 → 1.29, MedExp 1.31 →
# 1.16, Tuna 1.19 → 0.85; 2-way up where it is far under the floor: Wages 0.76 → 0.85, Yogurt 0.75 → 0.86;
# 3-way Hdma 0.96 → 0.99, Wages 1.15 → 1.17); with 1 or 2 per column 0.979 / 0.956 and 0.980 /
# 0.955 (47); from 10 (1 per column) 0.984 / 0.952 (46; vote92 0.76 → 0.90); from 100 (2 per column, 4 tables)
# 0.994 / 0.988 (46). At ε = 1 only the RAND extract of the 14 AIM tables reaches 30: ±0.0001 (24 seeds); Adult
# (4 paired seeds) is unchanged at ε = 1, −0.0009 on 3-way TVD at ε = 3 and −0.0015 at ε = 10 (2-way +0.0001 and
# +0.0002). The price is time: Adult at ε = 10 runs 63 + 45 rounds over cliques of up to 1,000,000 cells (one
# release on an idle machine: 43 s → 78–94 s; at ε = 3 9.7 → 17–21 s).
INSIDE_SNR = 30.0
INSIDE_ROUNDS_PER_COLUMN = 3.0
# Rounds per column after the first when a typical pair's signal-to-noise is below TRIPLES_SNR
# (instead of fit.ROUNDS_PER_COLUMN): each measurement then gets a larger share of the budget.
LOW_SNR_ROUNDS_PER_COLUMN = 2.0
# From this signal-to-noise of a typical pair the final estimation starts with proportional-fitting
# steps (fit.PRECONDITION). The plain mirror-descent steps move a cell in proportion to its count,
# so after the planned iterations small cells are still far from their measurements: on Adult at
# ε = 10 the same release at ε = 10⁴ gave the same 2-/3-way TVD (0.0089 / 0.0256), and 10× the
# iterations gave 0.0081 / 0.0239. Where the noise dominates, stopping early regularises, and the
# gain grows with the signal-to-noise. `benchmarks/bench_paired.py --against 2ca557e` (proportional
# steps from 30 on): Adult ε = 1 (signal-to-noise 19) one seed 0.0185 / 0.0421 against
# 0.0174 / 0.0399; ε = 2 (about 37, 4 seeds) −0.0001 / −0.0001; ε = 3 (55, 5 seeds)
# −0.0007 / −0.0011; ε = 10 (165, 5 seeds) −0.0008 / −0.0014; Titanic ε = 10 (35, 20 seeds)
# +0.0002 / +0.0003.
PROPORTIONAL_SNR = 50.0
# How large a model clique the budget buys, by the signal-to-noise of a typical pair measurement:
# (signal-to-noise at least, most cells of a clique, most columns of a clique). A clean measurement
# makes a larger clique's fitted table reliable, and larger cliques carry more of the joint
# structure (benchmarks/bench_marginals.py: on Adult the 2- and 3-way error falls with each tier).
# From TRIPLES_SNR, 7 columns and 500,000 cells rather than 6 and 200,000: paired whole Adult
# releases (seeds 2000–2019 at ε = 1, 2000–2007 at ε = 3) 2-/3-way TVD −0.0005 ± 0.0001 /
# −0.0012 ± 0.0001 at both; Titanic (30 seeds, ε = 3 and 10) unchanged. 1,000,000 cells gained
# a little more (−0.0007 / −0.0015 at ε = 1) but doubled the release time. From MORE_ITERS_SNR,
# 1,000,000 cells: once the final estimation converged there (PROPORTIONAL_SNR), paired whole Adult
# releases at ε = 10 (seeds 2000–2003) gave −0.0006 ± 0.0001 / −0.0015 ± 0.0003 (3-way 1.52 → 1.42 ×
# the floor) for a release of about 13 s instead of 8.5 s and a model.json of 35 MB instead of 20 MB
# (zip 14 MB); 8 columns instead of 7 and 4 rounds per column instead of 3 (25 s) gained nothing
# more, nor did 2,000,000 cells (29 s). At ε = 3 (signal-to-noise 55) 1,000,000 cells gained only
# −0.0002 / −0.0006 for 1.2 s more, so that tier keeps 500,000.
CLIQUE_LIMITS = ((0.0, 100_000, 5), (TRIPLES_SNR, 500_000, 7), (MORE_ITERS_SNR, 1_000_000, 7))
# Pair factors (dpsynth.marginals.pair_factors) per column, by the signal-to-noise of a typical pair:
# (signal-to-noise at least, factors per column); rounds after the tree's that measure pairs no clique
# holds, each with the budget of one round. Paired whole releases against none
# (benchmarks/bench_paired.py --against 5bc6ab2, 6 seeds on Adult, 20 on Titanic), 2-/3-way TVD:
# Adult ε = 1 (signal-to-noise 19, 5 factors) −0.0005 / −0.0020, ε = 3 (55, 10) −0.0011 / −0.0029,
# ε = 10 (165, 15) −0.0009 / −0.0028; Titanic ε = 10 (35, 3) −0.0003 / −0.0017. Below 15 noisy pairs
# cost more than they mend: Titanic ε = 3 (11.3) +0.0012 / +0.0016 with factors from 10 on; at ε = 5
# (18.3) −0.0009 ± 0.0005 / −0.0004 ± 0.0008 without them (within the noise). At ε = 1 on Adult, 10
# factors rather than 5 gave +0.0005 / +0.0008 (4 seeds).
PAIR_FACTOR_TIERS = ((15.0, 1.0 / 3.0), (PROPORTIONAL_SNR, 2.0 / 3.0), (MORE_ITERS_SNR, 1.0))


@dataclass(frozen=True)
class Capacity:
    """The model a budget buys: rounds, three-way measurements, the wide path, extra one-way share.

    A function of public inputs (sizes, the budget) and released values (the noisy total and the
    noisy one-way marginals) only, fixed before any round looks at the data.
    """

    rounds: int
    triples: bool
    wide: bool
    one_way_extra: float  # share of the total spent on a second measurement of every one-way
    select_share: float
    snr: float  # noisy total ÷ expected L1 noise of a typical pair measurement
    iters_factor: int = 1  # multiplies the mirror-descent iterations (each round's; the final ones unless proportional)
    max_cells: int = CLIQUE_LIMITS[0][1]  # most cells of a model clique
    max_cols: int = CLIQUE_LIMITS[0][2]  # most columns of a model clique
    proportional: bool = False  # the final estimation starts with proportional-fitting steps
    pair_factors: int = 0  # rounds after the tree's for pairs no clique holds
    inside_rounds: int = 0  # rounds after the tree's that may measure three-way tables inside its cliques
    # Small pairs (below MIN_PAIR_SNR): each column's share of the total in the second one-way installment
    # (its budget is that × total ÷ d), and the share of the total that the rounds' measurements get.
    one_way_cols: tuple[float, ...] | None = None
    pairs_share: float = 0.0
    # … and what each column gave of its one-way to pay for the pairs (its share of the total; 0 for a column
    # no small pair may hold). Kept apart from ``one_way_cols``: when every column may be in a small pair,
    # they all keep the same share, and what they gave cannot be read off the differences between them.
    one_way_spare: tuple[float, ...] = ()

    @property
    def small_pairs(self) -> bool:
        return self.one_way_cols is not None

    @property
    def one_ways_in_fit(self) -> bool:
        """Whether the one-ways are observations of the fit: with the second installment, off the
        wide path (there the fitted model is raked to them instead)."""
        return not self.wide and self.one_way_extra > 0

    def describe(self) -> str:
        if self.small_pairs:
            gave = sum(1 for x in self.one_way_spare if x > 0)
            return (f"{self.rounds} selection rounds of small pairs only (at most {self.max_cells:,} cells): at a"
                    f" signal-to-noise of {self.snr:.3g} for a typical pair (below {MIN_PAIR_SNR:g}) only a pair of"
                    f" so few cells is worth its noise; they are paid for by the one-ways of the {gave} columns"
                    " such a pair may hold, and what the rounds leave goes back to the one-ways of those that"
                    " no measured pair holds")
        if self.rounds == 0 and self.snr == 0 and self.one_way_extra == 0:
            return "one column: its one-way marginal is the whole model"
        if self.rounds == 0:
            return ("no pair measured: " + (
                f"at a signal-to-noise of {self.snr:.3g} for a typical pair (below {MIN_PAIR_SNR:g}) a pair's noise would"
                " outweigh its signal" if self.snr > 0 else "the budget buys no pair worth its cost to the one-ways")
                + f"; {self.one_way_extra:.0%} of the budget added to the one-way marginals, and the columns are"
                " drawn independently of each other")
        return (f"{self.rounds} selection rounds, {'pairs and triples' if self.triples else 'pairs'}"
                f" measured{', wide-table path (one round per column)' if self.wide else ''},"
                f" model cliques of at most {self.max_cols} columns and {self.max_cells:,} cells"
                f"{f', {self.iters_factor}× fitting iterations per round' if self.iters_factor > 1 else ''}"
                f"{', estimation started with proportional-fitting steps' if self.proportional else ''}"
                f"{f', then {self.inside_rounds} rounds that may measure triples inside the cliques' if self.inside_rounds else ''}"
                f"{f', up to {self.pair_factors} pairs outside the cliques as sampling factors' if self.pair_factors else ''};"
                f" signal-to-noise of a typical pair {self.snr:.3g}"
                + (f"; {self.one_way_extra:.0%} of the budget added to the one-ways" if self.one_way_extra else ""))


def first_one_way_share(pure: bool, d: int) -> float:
    """The first one-way installment's share of the total: all of it for one column, else under pure DP
    :data:`ONE_WAY_SHARE_PURE` off the wide path and :data:`WIDE_ONE_WAY_SHARE_PURE` on it, and
    :data:`ONE_WAY_SHARE` under zCDP (public inputs only). On the wide path the one-ways often take the whole
    budget in two installments, and two Laplace measurements at ε₁ + ε₂ = ε are as precise as one at
    √(ε₁² + ε₂²) only: at 10% + 90% the 100 × 50,000 table's one-column TVD came out 1.058 × that of
    independent noisy one-ways, at 5% + 95% 1.016–1.036, at 1% + 99% 0.964–0.976."""
    if d <= 1:
        return 1.0
    if pure:
        return WIDE_ONE_WAY_SHARE_PURE if is_wide(d) else ONE_WAY_SHARE_PURE
    return ONE_WAY_SHARE


def _expected_tvd(p: np.ndarray, n: float, noise_var: float) -> float:
    """E[TVD] of a column's synthetic proportions: per cell a centred normal with the sampling
    variance p(1−p)/n plus the noise variance on counts / n² (E|Z| = √(2/π)·sd)."""
    sd = np.sqrt(p * (1.0 - p) / n + noise_var / (n * n))
    return float(0.5 * math.sqrt(2.0 / math.pi) * sd.sum())


def capacity(plan: Plan, sizes: tuple[int, ...], n_hat: float, one_way: list[np.ndarray],
             rounds_per_column: float, base_share: float) -> Capacity:
    """Plan the rounds and the one-way fallback from public sizes and released values.

    The one-way precision counts the one-way installments only (inverse variances add for
    independent unbiased measurements); what the pairs add to a column's accuracy is not counted,
    which keeps the rule conservative (the fit does not recover all of it). On the wide path the
    installments also keep their noise within :data:`ONE_WAY_FLOOR` × that of one measurement with the
    whole budget, by their shares alone, at every ε.
    """
    d = len(sizes)
    if d < 2:
        return Capacity(rounds=0, triples=False, wide=False, one_way_extra=0.0, select_share=0.0, snr=0.0)
    n = max(float(n_hat), 1.0)
    wide = is_wide(d)
    rounds = (d - 1) if (d <= 2 or wide) else max(d - 1, round(rounds_per_column * (d - 1)))
    base_var = plan.preview(plan.total / d).variance
    base = sum(_expected_tvd(p, n, base_var) for p in one_way)
    first_prec = 1.0 / plan.preview(plan.total * base_share / d).variance
    sel0 = SELECT_SHARE
    rest0 = 1.0 - base_share

    def shares(extra: float) -> tuple[float, float]:
        rest = rest0 - extra
        sel = sel0 * rest / rest0
        return sel, rest - sel

    def ours(extra: float) -> float:
        prec = first_prec + (1.0 / plan.preview(plan.total * extra / d).variance if extra > 0 else 0.0)
        return sum(_expected_tvd(p, n, 1.0 / prec) for p in one_way)

    def relative_precision(extra: float) -> float:
        """The installments' precision ÷ that of one measurement with the whole budget, by their shares
        (the continuous mechanisms' law: the discrete ones' variance falls faster where it is far below
        one count, which no synthetic row can show)."""
        return base_share**2 + extra**2 if plan.pure else base_share + extra

    steps = 38  # extra share in steps of 1/38 of the rest, up to all of it
    for k in range(steps + 1 if wide else 1):  # the one-way fallback is the wide path's
        extra = rest0 * k / steps
        if k == steps or (ours(extra) <= ONE_WAY_SLACK * base and relative_precision(extra) * ONE_WAY_FLOOR**2 >= 1.0):
            break
    sel, pairs = shares(extra)
    if k == steps:  # no pair is worth its cost to the one-ways: independent columns
        return Capacity(rounds=0, triples=False, wide=wide, one_way_extra=rest0, select_share=0.0, snr=0.0)
    planned = rounds
    rounds, snr = rounds_and_snr(plan, sizes, n, plan.total * pairs, planned)
    if not wide and snr < ONE_WAY_MORE_SNR:
        extra = ONE_WAY_SHARE
        sel, pairs = shares(extra)
        rounds, snr = rounds_and_snr(plan, sizes, n, plan.total * pairs, planned)
        if MIN_PAIR_SNR <= snr < ONE_WAY_GROW_SNR:
            more = min(ONE_WAY_MORE_MAX, ONE_WAY_SHARE * math.sqrt(ONE_WAY_MORE_SNR / snr))
            r_more, snr_more = rounds_and_snr(plan, sizes, n, plan.total * shares(more)[1], planned)
            if snr_more >= MIN_PAIR_SNR:  # the pairs keep a signal-to-noise of 1 or more
                extra, rounds, snr = more, r_more, snr_more
                sel, pairs = shares(extra)
    if snr < MIN_PAIR_SNR:
        few = None if wide or d < 3 else small_pairs(plan, sizes, n, rest0, snr)
        return few or Capacity(rounds=0, triples=False, wide=wide, one_way_extra=rest0, select_share=0.0, snr=snr)
    more = round(PAIR_ROUNDS_SHARE * d * (d - 1) / 2)
    if not wide and snr >= PAIR_ROUNDS_SNR and more > rounds:
        rounds, snr = rounds_and_snr(plan, sizes, n, plan.total * pairs, more)
    cells, cols = clique_limits(snr, wide)
    per_column = [f for t, f in PAIR_FACTOR_TIERS if snr >= t]
    factors = 0 if wide or d < 3 or not per_column else round(per_column[-1] * d)
    triples = (not wide) and snr >= TRIPLES_SNR
    inside = round(INSIDE_ROUNDS_PER_COLUMN * d) if triples and snr >= INSIDE_SNR else 0
    return Capacity(rounds=rounds, triples=triples, wide=wide,
                    one_way_extra=extra, select_share=sel, snr=snr, iters_factor=2 if snr >= MORE_ITERS_SNR else 1,
                    max_cells=cells, max_cols=cols, proportional=(not wide) and snr >= PROPORTIONAL_SNR,
                    pair_factors=factors, inside_rounds=inside)


def small_pairs(plan: Plan, sizes: tuple[int, ...], n: float, rest0: float, snr: float) -> Capacity | None:
    """The capacity below :data:`MIN_PAIR_SNR`: a few rounds over the pairs small enough to be measured at a
    signal-to-noise of :data:`SMALL_PAIR_SNR` (each with one column's spare one-way share), or None when no
    pair is that small. Public sizes, the budget and the noisy total only."""
    d = len(sizes)
    spare = rest0 - SMALL_PAIRS_ONE_WAY  # of a column's share that a pair may take
    per_pair = spare / d * (1.0 - SMALL_PAIRS_SELECT)
    cells = int(n / (plan.preview(plan.total * per_pair).mean_abs * SMALL_PAIR_SNR))
    pairs = sum(1 < a and 1 < b and a * b <= cells for i, a in enumerate(sizes) for b in sizes[i + 1:])
    cover = [1 < a and any(1 < b and a * b <= cells for k, b in enumerate(sizes) if k != j)
             for j, a in enumerate(sizes)]
    if pairs == 0:
        return None
    rounds = min(max(1, round(SMALL_PAIRS_PER_COLUMN * d)), pairs, sum(cover) - 1)
    cols = tuple(SMALL_PAIRS_ONE_WAY if c else rest0 for c in cover)
    return Capacity(rounds=rounds, triples=False, wide=False, one_way_extra=sum(cols) / d,
                    select_share=rounds * spare / d * SMALL_PAIRS_SELECT, snr=snr, max_cells=cells, max_cols=2,
                    one_way_cols=cols, pairs_share=rounds * per_pair,
                    one_way_spare=tuple(spare / d if c else 0.0 for c in cover))


def rounds_and_snr(plan: Plan, sizes: tuple[int, ...], n: float, pairs_budget: float, rounds: int) -> tuple[int, float]:
    """The rounds to run and the signal-to-noise of a typical pair measurement (the noisy total ÷
    the expected L1 noise of a pair of geometric-mean sizes, its budget an equal share of
    ``pairs_budget``). Below :data:`TRIPLES_SNR` the rounds drop to ``LOW_SNR_ROUNDS_PER_COLUMN``
    per column (fewer, cleaner measurements when noise dominates: MST measures d − 1)."""
    d = len(sizes)
    s_bar = math.exp(sum(math.log(s) for s in sizes) / d)

    def snr_of(r: int) -> float:
        return n / (plan.preview(pairs_budget / r).mean_abs * s_bar * s_bar)

    snr = snr_of(rounds)
    fewer = max(d - 1, round(LOW_SNR_ROUNDS_PER_COLUMN * (d - 1)))
    if snr < TRIPLES_SNR and fewer < rounds:
        rounds, snr = fewer, snr_of(fewer)
    return rounds, snr


def clique_limits(snr: float, wide: bool = False) -> tuple[int, int]:
    """Most cells and columns of a model clique at this signal-to-noise (:data:`CLIQUE_LIMITS`);
    the wide path keeps the smallest (its rounds attach columns, they do not grow cliques)."""
    if wide:
        return CLIQUE_LIMITS[0][1], CLIQUE_LIMITS[0][2]
    tier = [t for t in CLIQUE_LIMITS if snr >= t[0]][-1]
    return tier[1], tier[2]
