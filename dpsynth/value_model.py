"""The released fine one-column distribution of numeric columns: values true to life inside their bins.

The main methods release counts of *bins*; decoding used to draw a value uniformly inside each
bin, so point masses (Adult's capital_gain is 0 for 92% of people, 40 working hours a week) and
skew inside a bin were lost. A :class:`ValueModel` is a separate pure ε_v-DP release of each
numeric column's distribution at its declared precision, from which :meth:`ValueModel.sample_in_bins`
draws each synthetic value *given its bin*, so the joint structure still comes from the main model.
A column whose declared grid has a single point in every bin (Adult's education_num with
``integer``) gets no tree and no budget: its bin is its value (one whose *estimated* grid has a
single point in every bin gets no tree either: only its precision count is spent).

Mechanism (:func:`fit_value_model`): per numeric column, a hierarchical histogram (a tree of
counts) over the public range [lower, upper] on the column's value grid — whole numbers for
``integer``, multiples of 10^-d for ``decimals`` d. A column with neither has an automatic grid
(:func:`auto_decimals`): multiples of 10^-d with d the largest whole number (possibly negative:
steps of 10, 100, …) giving at most :data:`AUTO_GRID_POINTS` points (never finer than 10^-9, and
at least 2 points per bin); when whole numbers are a candidate as well (:class:`Precision`: the
schema alone decides), the release chooses among them, the grids between them and the automatic
grid, and the finer ones up to :data:`FINE_GRID_POINTS` points (a finer grid only when the values lie
on it: :attr:`Precision.fallback`) from one noisy histogram per column — its rows by the coarsest candidate grid each value lies on — that
costs :data:`PRECISION_SHARE` of the value model's budget (split equally over those columns) and
is measured first; the levels of the chosen grids share the rest (adaptive composition: the choice
is post-processing of released counts). Undeclared whole numbers (age, counts of relatives, hours)
then come out whole instead of smeared over a 0.01 grid, a lab value with one decimal keeps it,
and a fare keeps its pence. (The regular candidates start at the coarsest grid with a point in every
bin; a column whose whole numbers are too many starts at its automatic grid.) Grids finer than
:data:`FINE_GRID_POINTS`, up to :data:`EXACT_GRID_POINTS`, are *exact* candidates: the rows off every
regular grid form one cell of that histogram. A column that this histogram shows with significantly
more than :data:`ROUNDING_GAP_SHARE` of its rows off the regular grid it chose
(:meth:`Precision.may_need_exact`) gets a second one (:data:`EXACT_PRECISION_SHARE`, split over those
columns alone) that counts them by the coarsest exact grid they lie on; then the column's rounding gap — max_x |#{v ≤ x} − #{r(v) ≤ x}|
for r the nearest point of the grid chosen so far (:func:`rounding_gap`, sensitivity 1 under
add-remove, 2 under replace-one) — is measured (:data:`ROUNDING_GAP_SHARE_OF_BUDGET`), and a large one
(:meth:`Precision.choose`) moves the column to the exact grid its values lie on, or, for values on
none, to the grid 10^-k finer that makes the gap small. Each of these is a histogram or a count of
its own with its own noise, chosen from released counts before it is measured (adaptive composition).
Every grid point is a leaf, declared or estimated, however fine the grid (a model released before
this rule may group consecutive points into equal leaves of ``width`` points, and still samples).
Branching factor b ≤ ``max_branching`` per column, the fewest levels h with b^h ≥ leaves
(Qardaji, Yang & Li 2013, "Understanding hierarchical methods for differentially private
histograms": fanouts around 16 minimise range-query error of a full tree; here pruning removes
most empty nodes and the levels are smoothed, and a limit of 24 gave a lower KS distance than 16
or 64, see :data:`MAX_BRANCHING`).
Exact discrete Laplace noise on every visited node's count (:mod:`dpsynth.noise`); every level of a
tree is a histogram of a partition of the range, so its L1 sensitivity is that of a histogram
(:func:`dpsynth.neighbours.hierarchical_histogram_l1_sensitivity`: k per level under add-remove,
2k under replace-one). ε_v (after the precision counts' share, if any) is split equally over all
(column, level) pairs: one row is in one node of every level of every column, and in one cell of
every precision count, so basic (sequential) composition over all of them gives ε_v.

With a zCDP budget ρ_v instead (:func:`fit_value_model_from_counts` with ``rho``; what a release
with δ > 0 and a Gaussian main method uses), every visited node gets exact discrete Gaussian noise
of variance σ² = L·Δ₂²/(2ρ_v) (ρ_v less the precision counts' share), L the number of (column,
level) pairs and Δ₂² the squared L2 sensitivity of one level (a histogram: :func:`dpsynth.neighbours.histogram_l2_sensitivity_squared`);
each level is then Δ₂²/(2σ²)-zCDP (Canonne, Kamath & Steinke 2020, Thm 4) and the L levels compose
to ρ_v (Bun & Steinke 2016, Lemma 2.3), also adaptively. The release adds ρ_v to the main method's
ρ and converts the sum to (ε, δ) once: with the default 6% of ρ for the values the main method keeps 94% of ρ
rather than the 82% that ε − 0.1ε buys (ε = 1, δ = 1e-9), and every node has less noise as well. The
marginals method's default share grows to :data:`VALUE_RHO_SHARE_MAX` on small tables, set by a noisy row
count measured first (:func:`value_rho_share`, :meth:`dpsynth.plan.BudgetSplit.resolve`), and with it in
proportion to the numeric columns to describe beyond :data:`VALUE_COLUMNS_REFERENCE`.

Pruning keeps huge grids (capital_gain: 100,000 whole numbers) fast and small: level 1 is measured
in full; a node's children are measured only if its noisy count reached the public threshold
θ = scale · ln(2b), b the largest branching of the release (an empty node reaches it with
probability p^⌈θ⌉/(1+p) ≤ 1/(2b), p = e^(−1/scale): about 1/(4b) at the usual scales); with Gaussian
noise θ = σ·Φ⁻¹(1 − 1/(4b)), the same tail probability. Which nodes
are visited depends only on earlier released noisy counts, and each visited node's noise is drawn
when it is visited whether or not any row is there, so every level is the discrete Laplace (or
Gaussian) mechanism on a data-independent (given the past releases) set of disjoint cells: the
adaptive composition of h·(columns) pure-DP steps is ε_v-DP (of ρ_v/(h·columns)-zCDP steps,
ρ_v-zCDP). The released object is the noisy counts of the visited nodes (:meth:`ValueModel.to_dict`).

Post-processing (free): least-squares consistency over the visited tree (Hay, Rastogi, Miklau &
Suciu 2010, "Boosting the accuracy of differentially private histograms through consistency",
in its two-pass form — bottom-up inverse-variance combination, top-down distribution of the
residual — valid for a tree whose unexpanded nodes are leaves, since every expanded node has all
its children measured), then, level by level, a smoothing of the consistent counts (:func:`_smooth`:
each node shrunk towards the mean density of its two neighbours by a local James–Stein factor;
nodes more than :data:`SMOOTH_Z` standard deviations from that mean, such as point masses and the
nodes beside them, kept as they are; children at the noise level — their parent's count under
:data:`PARENT_LINE_SDS` sds per child, in a release whose level-1 rows reach :data:`PARENT_LINE_MIN_SNR` sds —
are shrunk instead towards a straight line fitted through the children around them, their parent's
and its neighbours' within :data:`PARENT_LINE_REACH` of a parent's width, and scaled to their parent's
count, :func:`_smooth_along_parents`), then a top-down non-negative split: a parent's mass goes to
its children that reached θ in proportion to their (clamped) consistent counts, and the consistent remainder of
the others, if positive, is split among them in proportion to their clamped consistent counts plus
a pseudo-count of :data:`SPLIT_PRIOR` noise standard deviations each (scaled by the child's size), which
pulls children at the noise level towards an even split (on Adult and Titanic the clamped counts
alone gave a lower KS distance than an even split, and the pseudo-count lower still). A node is
spread evenly over its grid points when none of its children holds mass.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from dpsynth import noise
from dpsynth.errors import InputError
from dpsynth.marginals.budget import MIN_NOISE_VARIANCE
from dpsynth.mechanisms import check_epsilon, discrete_laplace_std, exact_epsilon
from dpsynth.neighbours import (
    Neighbours,
    hierarchical_histogram_l1_sensitivity,
    histogram_l2_sensitivity_squared,
    rounding_gap_sensitivity,
)
from dpsynth.randomness import systematic_uniforms
from dpsynth.schema import NumericColumn, Schema, grid_ranges

#: Grid points of the automatic grid of a column with neither ``integer`` nor ``decimals``.
AUTO_GRID_POINTS = 1 << 12
#: Default largest branching factor of a tree. With the smoothing of each level (:func:`_smooth`), 24
#: against 64 (the value models alone, ρ_v of an ε = 1 release, bin masses exact, KS of raw values,
#: 8–20 seeds): Titanic 0.059 → 0.055, Adult at 5,000 / 10,000 / 20,000 / all 48,842 rows 0.036 /
#: 0.023 / 0.015 / 0.0090 → 0.032 / 0.021 / 0.013 / 0.0080, generated mixed tables at 5,000 / 10,000 /
#: 20,000 rows 0.038 / 0.025 / 0.017 → 0.040 / 0.026 / 0.016; pure ε_v = 0.1 lower or equal as well.
#: 16 and 32 were close to 24; 64 had been best before the smoothing.
MAX_BRANCHING = 24
#: Draws of noise alone over a released tree's shape that set the variance of its bin counts (:meth:`ValueModel.bin_counts`).
BIN_VARIANCE_DRAWS = 32
#: Default share of ε spent on the value model when the schema has numeric columns (pure DP, basic
#: composition: δ = 0 or a Laplace main method).
DEFAULT_VALUE_SHARE = 0.1
#: Default share of ρ spent on the value model when the release is accounted in zCDP (δ > 0). 6% rather
#: than 4%: paired whole releases (benchmarks/bench_paired.py, 8 seeds) left Adult's 2-/3-way TVD unchanged
#: at ε = 1, 3 and 10 (±0.0003) and Titanic's within noise (+0.0009 ± 0.0013, 30 seeds), while the mean
#: KS at ε = 1 (benchmarks/bench_value_ks.py, 8 seeds) fell on Titanic 0.077 → 0.066 and on Adult
#: subsamples 0.045 → 0.036 (5,000 rows) and 0.026 → 0.022 (10,000 rows). 8% began to cost joint accuracy.
DEFAULT_VALUE_RHO_SHARE = 0.06
#: The marginals method's default share grows as the table shrinks (:func:`value_rho_share`), up to this.
#: Both the value model's error and the main model's noise scale as 1/(n·√ρ), but KS ≤ 0.03 is an
#: absolute target that large tables meet with room to spare and tables of a few thousand rows miss:
#: paired whole releases at ε = 1 (benchmarks/bench_value_share.py, 0.06 → 0.12) took Titanic's KS
#: 0.059 → 0.044 for −0.0007 ± 0.0016 / −0.0002 ± 0.0021 of 2-/3-way TVD (24 seeds), Adult at 5,000
#: rows 0.031 → 0.028 for +0.0013 ± 0.0016 / +0.0017 ± 0.0022, a generated mixed table at 5,000 rows
#: 0.040 → 0.032 for +0.0018 ± 0.0010 / +0.0029 ± 0.0013; 0.16 bought less KS (0.040, 0.029, 0.030)
#: for about twice the TVD.
VALUE_RHO_SHARE_MAX = 0.12
#: n̂·√ρ (noisy rows times the root of the release's ρ) at and above which the share is
#: :data:`DEFAULT_VALUE_RHO_SHARE`; below it the share grows as 1/(n̂·√ρ)², reaching
#: :data:`VALUE_RHO_SHARE_MAX` at 5,000 rows at ε = 1, δ = 1e-9 (about 7,000 rows or fewer get more than 6%).
VALUE_SHARE_FULL_SIZE = 866.0
#: Value columns (:func:`value_columns`) the rule above was set for (Fair has 5, Titanic 4, Adult and the
#: generated mixed table 6). ρ_v is split over every (column, level) pair, so each column's noise grows as
#: √(columns); with more columns the growing part of the share and its cap grow in proportion (the floor
#: does not: a large table keeps 6%). On a generated laboratory panel of 6,497 rows with 11 value columns
#: (``bench_value_ks.py --only lab``), at ε = 1 (12 paired seeds): share 7.2% → 15.8%, mean KS 0.039 → 0.030,
#: 2-/3-way TVD +0.0019 ± 0.0009 / +0.0027 ± 0.0012, where AIM (mbi 2.0, one seed) is at 0.0222 / 0.0373
#: and dpsynth at 0.0165 / 0.0285 (0.74 / 0.76 × AIM; 0.83 / 0.84 after). The mixed table at 5,000 rows
#: (6 columns): 12% → 14.4%, KS 0.034 → 0.031, TVD +0.0003 ± 0.0009 / +0.0000 ± 0.0012; Adult at 5,000 rows (6):
#: KS 0.0287 → 0.0283, TVD +0.0011 ± 0.0021 / +0.0012 ± 0.0031; the whole of Adult keeps its 6%.
VALUE_COLUMNS_REFERENCE = 5
#: … and whatever the columns, the main method keeps at least three quarters of ρ.
VALUE_RHO_SHARE_CEILING = 0.25
#: On the marginals method's wide path (more than :data:`dpsynth.marginals.budget.WIDE_COLUMNS` columns) the
#: release promises one-column marginals no worse than independent noisy one-ways spending the whole budget
#: (issue 14), and the value model's share is taken from every column's one-way, categorical ones included,
#: while only the numeric ones get its bin counts back. There the zCDP share does not grow with the numeric
#: columns (f = 1 in :func:`value_rho_share`: at most :data:`VALUE_RHO_SHARE_MAX`), and under pure DP the
#: default share is this instead of :data:`DEFAULT_VALUE_SHARE` (under basic composition a share of ε costs
#: the one-ways' noise about twice what the same share of ρ does). Tables of Adult's columns copied side by
#: side, rows shuffled per copy (``benchmarks/tables/wide_copies.py``), at ε = 1
#: (``benchmarks/bench_independent.py --delta 1e-9 / 0``, 16 seeds; the one-column TVD of the synthetic rows ÷
#: that of independent noisy one-ways), zCDP / pure DP, before → after:
#: 2,000 rows × 30 columns (12 numeric) 1.008 → 0.921 / 1.022 → 0.958; 1,000 × 60 (24 numeric) 1.012 → 0.965 /
#: 0.973 → 0.949; 30 numeric columns × 2,000 rows 1.002 → 0.927 / 0.980 → 0.964; 2,000 × 45 and 5,000 × 45 were
#: under 1 and gained 1–6%. The price is the values' KS distance on such tables (zCDP, 4 seeds): 1,000 × 60 0.158
#: → 0.197, 30 numeric × 2,000 rows 0.068 → 0.079, 5,000 × 45 0.033 → 0.036. (3% of ε under pure DP: 0.988, 0.918
#: and 0.909 on the first three, mixed against 5%, for more KS.)
WIDE_VALUE_SHARE = 0.05
#: Share of ρ spent on the noisy row count that sets the marginals method's split (:func:`value_rho_share`):
#: σ ≈ 82 rows at ε = 1, δ = 1e-9, against a rule that changes by a factor of 2 over ±30% of the rows.
ROW_COUNT_RHO_SHARE = 0.005


def value_columns_factor(columns: int) -> float:
    """f = max(1, columns/:data:`VALUE_COLUMNS_REFERENCE`): how much the growing value share and its cap are
    multiplied for ``columns`` value columns (:func:`value_rho_share`)."""
    return max(1.0, float(columns) / VALUE_COLUMNS_REFERENCE)


def value_rho_share(noisy_rows: float, rho: float, columns: int = VALUE_COLUMNS_REFERENCE, wide: bool = False) -> float:
    """The value model's share of ρ for a table of ``noisy_rows`` (a released noisy count) at total ρ with
    ``columns`` value columns (the schema's): f·:data:`DEFAULT_VALUE_RHO_SHARE`·(:data:`VALUE_SHARE_FULL_SIZE`/(n̂·√ρ))²,
    f = max(1, columns/:data:`VALUE_COLUMNS_REFERENCE`) (1 on the marginals method's ``wide`` path, see
    :data:`WIDE_VALUE_SHARE`), between that default and f·:data:`VALUE_RHO_SHARE_MAX`, at most
    :data:`VALUE_RHO_SHARE_CEILING` (post-processing of the noisy count and the public schema: it costs
    nothing more)."""
    f = 1.0 if wide else value_columns_factor(columns)
    m = max(float(noisy_rows), 1.0) * math.sqrt(max(float(rho), 1e-300))
    share = f * DEFAULT_VALUE_RHO_SHARE * (VALUE_SHARE_FULL_SIZE / m) ** 2
    return float(min(VALUE_RHO_SHARE_CEILING, f * VALUE_RHO_SHARE_MAX, max(DEFAULT_VALUE_RHO_SHARE, share)))

#: Pseudo-count, in noise standard deviations, that a child below the threshold adds to its clamped
#: consistent count when its parent's remainder is split (0: in proportion to the noisy counts alone).
#: Paired on the same releases at ε = 1, 1 lowered the mean KS on Titanic by 0.004 ± 0.001, on Adult
#: at 10,000 rows by 0.0008 ± 0.0003 and on generated mixed tables by 0.0015–0.0024; full Adult unchanged.
#: With the lines through neighbouring parents' children (:data:`PARENT_LINE_REACH`), half of that did
#: better (value models alone at ε = 1, δ = 1e-9, 30 paired seeds, 1 → 0.5): the laboratory panel 0.0256 →
#: 0.0246, Titanic 0.0380 → 0.0375, the mixed table 0.0251 → 0.0249, Fair and Adult at 6,497 rows +0.0001;
#: 0.25 and 0 lost more on Adult, Fair and the survey extract than they gained on the lab panel.
SPLIT_PRIOR = 0.5

#: Smoothing of each level's consistent counts (:func:`_smooth`): a node whose count departs from the
#: mean density of its two neighbours by more than this many standard deviations of that difference
#: (a point mass, an edge) keeps its count …
SMOOTH_Z = 4.0
#: … and the others are shrunk towards that mean by a James–Stein factor estimated over this many
#: nodes on either side (local, so a region with real structure keeps it while a flat one is smoothed).
#: Whole releases at ε = 1 (benchmarks/bench_value_ks.py, 4 seeds, trees of branching ≤ 64 then) lowered the mean KS on generated
#: mixed tables 0.0495 → 0.0396 (5,000 rows), 0.0294 → 0.0255 (10,000), 0.0170 → 0.0146 (20,000) and on
#: Adult subsamples 0.0384 → 0.0341 (5,000) and 0.0243 → 0.0232 (10,000); Titanic 0.059 → 0.061 (age
#: 0.056 → 0.047, but fare, whose pence cluster at 7.05–8.05 is at the noise level, 0.116 → 0.128).
#: A global factor per level (one λ) smoothed capital_gain's spikes on full Adult; a threshold of 3
#: or 5 standard deviations, or a bandwidth chosen by leave-one-out cross-validation, did no better.
SMOOTH_WINDOW = 4
#: Children whose parent's consistent count is under this many noise standard deviations per child
#: are shrunk towards a straight line fitted through their parent's children (:func:`_smooth_along_parents`;
#: since :data:`PARENT_LINE_REACH`, through the children around each child)
#: instead of towards their two neighbours: where every child is at the noise level, the mean of two
#: noisy neighbours carries half a node's noise variance into the prior, while a line fitted through a
#: parent's dozen or more children carries a fraction of it. Value models alone at ε = 1, δ = 1e-9
#: (12 seeds, mean KS): a generated laboratory panel of 6,497 rows (``bench_value_ks.py --only lab``)
#: 0.0411 → 0.0370, the RAND extract 0.0267 → 0.0253, Fair 0.0221 → 0.0214, Titanic 0.0388 → 0.0381,
#: Adult at 5,000 rows 0.0261 → 0.0254, the generated mixed table 0.0308 → 0.0300 (at 2 sds per child; 1 did
#: less, and a line through the parents' level, a frequency polygon, did worse). 3 rather than 2, with the value
#: shares that follow the numeric columns (12 seeds; Titanic and Fair 32): the lab panel 0.0318 → 0.0305, Adult
#: at 5,000 rows 0.0245 → 0.0235, the mixed table 0.0319 → 0.0312, Fair 0.0217 → 0.0216, the RAND extract
#: 0.0253 → 0.0252, Titanic 0.0369 → 0.0376 (± 0.0005); at ε = 3 and on all of Adult within ± 0.0003; 4 no better.
PARENT_LINE_SDS = 3.0
#: … only when the level-1 counts add up to at least this many noise standard deviations (a released
#: count): below it (pure ε_v = 0.1 on Titanic, 20 sds; a generated mixed table of 5,000 rows, 21) a
#: parent's line is itself noise, and the lines cost Titanic's fare 0.197 → 0.245 (mean KS 0.112 → 0.123).
PARENT_LINE_MIN_SNR = 30.0
#: A child's line (:func:`_smooth_along_parents`) goes through the children whose centres lie within this many
#: of its parent's widths of its own, its neighbours in the next parents included, rather than through its
#: parent's children alone: the line is continuous across parent boundaries and its slope rests on more
#: children. Value models alone at ε = 1, δ = 1e-9 (mean KS, 30 paired seeds; ``bench_value_ks.py --alone``):
#: the laboratory panel 0.0292 → 0.0256, the mixed table at 5,000 rows 0.0279 → 0.0263, the survey extract at
#: 5,000 rows 0.0276 → 0.0267, Adult at 5,000 rows 0.0214 → 0.0208, Titanic 0.0385 → 0.0380, Fair and the
#: RAND extract ± 0.0001; at ε = 3 the same or lower; pure DP at ε = 1 unchanged (its lines are off). Whole
#: releases (12 seeds): the lab panel 0.0280 → 0.0257, the survey extract 0.0238 → 0.0228. A half-width of
#: 0.5 did about as well, 1 and more worse (lab 0.0264 at 1: the curve bends inside the window), and a local
#: quadratic through 1.5 parents no better than this line.
PARENT_LINE_REACH = 0.75

FORMAT = "dpsynth-value-model/1"
#: The format of a model with discrete Gaussian noise (zCDP); /1 is the pure (Laplace) one.
FORMAT_GAUSSIAN = "dpsynth-value-model/2"
SOURCES = (
    "Hay, Rastogi, Miklau & Suciu 2010, 'Boosting the accuracy of differentially private histograms through"
    " consistency' (hierarchical histogram, least-squares consistency); Qardaji, Yang & Li 2013,"
    " 'Understanding hierarchical methods for differentially private histograms' (branching factor);"
    " James & Stein 1961 and Efron & Morris 1975, 'Data analysis using Stein's estimator and its"
    " generalizations' (shrinkage of each level towards its neighbours)"
)
SOURCES_GAUSSIAN = SOURCES + ("; Canonne, Kamath & Steinke 2020, 'The discrete Gaussian for differential privacy'"
                              " (noise, ρ-zCDP); Bun & Steinke 2016 (zCDP composition)")


# ------------------------------------------------------------------------------------ the grid


@dataclass(frozen=True)
class ColumnGrid:
    """The public value grid and tree shape of one numeric column (a function of the schema alone).

    Grid point k (int64) is the value k·10^-d (d may be negative for automatic grids); the grid is
    k = ``first`` … ``last``; leaf j holds grid points first + j·width … first + (j+1)·width − 1.
    """

    name: str
    decimals: int
    declared: bool
    first: int
    last: int
    width: int
    leaves: int
    branching: int
    levels: int

    @classmethod
    def of(cls, col: NumericColumn, max_branching: int = MAX_BRANCHING, decimals: int | None = None) -> ColumnGrid:
        """The grid of ``col`` and its tree (see the module docstring); ``decimals`` overrides the
        automatic grid of a column that declares no precision (a grid the release estimated)."""
        d = col.grid_decimals
        declared = d is not None
        if d is None:
            d = auto_decimals(col) if decimals is None else int(decimals)
        lo, hi = _grid_ranges(col.edges(), d)
        first, last = int(lo[0]), int(hi[-1])
        points = last - first + 1
        # one leaf per grid point: inside a leaf of several points the release cannot tell them apart,
        # so a point mass there (fares of 0 declared to four decimals on [0, 600], at the former limit
        # of 2^20 leaves six points per leaf) came out spread over the leaf and its KS distance was
        # most of the mass (Titanic's fare, value model alone at ε = 1: 0.34; one point per leaf: 0.095).
        # Pruning keeps a deep tree cheap (only nodes over the threshold are expanded); a grid of
        # 2^53 points (the float64 limit of the schema) takes 12 levels at branching 24.
        width = 1
        leaves = points
        b = max(2, int(max_branching))
        levels = max(1, math.ceil(math.log(leaves) / math.log(b) - 1e-12)) if leaves > 1 else 1
        while b ** (levels - 1) >= leaves and levels > 1:
            levels -= 1
        while b**levels < leaves:
            levels += 1
        # the smallest branching with the same number of levels: no wasted empty nodes
        branching = max(2, math.ceil(leaves ** (1.0 / levels) - 1e-9))
        while branching**levels < leaves:
            branching += 1
        return cls(col.name, d, declared, first, last, width, leaves, branching, levels)

    def bin_ranges(self, col: NumericColumn) -> tuple[np.ndarray, np.ndarray]:
        """Per bin, its first and last grid point (encoding's rule: lower edge in, upper out, last bin closed)."""
        return _grid_ranges(col.edges(), self.decimals)

    def units(self, values: np.ndarray) -> np.ndarray:
        """Nearest grid point of each (finite) value, clamped into the grid."""
        k = np.rint(_scaled(values, self.decimals))
        return np.clip(k, self.first, self.last).astype(np.int64)

    def positions(self, values: np.ndarray) -> np.ndarray:
        """Float grid units of ``values`` (k for the value k·10^-d, not rounded nor clamped); a value on
        the grid up to float parsing error (:func:`off_grid`) is on its point exactly."""
        x = _scaled(values, self.decimals)
        return np.where(off_grid(values, self.decimals), x, np.rint(x))

    def values(self, k: np.ndarray) -> np.ndarray:
        """Float64 values k·10^-d, correctly rounded (the float a reader parses from k written with d decimals)."""
        k = np.asarray(k)
        if self.decimals >= 0:
            return k / 10.0**self.decimals
        return k * float(10 ** (-self.decimals))

    def node_width(self, level: int) -> int:
        """Leaves under one node of ``level`` (1 = top, ``levels`` = leaves)."""
        return self.branching ** (self.levels - level)

    def n_nodes(self, level: int) -> int:
        """Nodes of ``level``."""
        return -(-self.leaves // self.node_width(level))


def auto_decimals(col: NumericColumn, points: int = AUTO_GRID_POINTS) -> int:
    """Decimals d of the automatic grid of a column with no declared precision: the largest d (possibly
    negative: steps of 10, 100, …) giving at most ``points`` grid points on [lower, upper], but at least
    two grid points per bin and never finer than 10^-9."""
    span = col.upper - col.lower
    ratios = points / span, 2 * col.bins / span
    if not all(math.isfinite(r) for r in ratios):  # a range below float64's normal numbers: d → ∞, so the finest
        return 9
    d = math.floor(math.log10(ratios[0]))
    d = max(d, math.ceil(math.log10(ratios[1])))
    return min(d, 9)


def _scaled(values: np.ndarray, d: int) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    return v * 10.0**d if d >= 0 else v / float(10 ** (-d))


def _grid_ranges(edges: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`dpsynth.schema.grid_ranges`, also for steps of 10^-d with d < 0 (exact integer values)."""
    if d >= 0:
        return grid_ranges(edges, d)
    u = float(10 ** (-d))
    e = np.asarray(edges, dtype=np.float64)
    first = np.ceil(e / u)
    first = np.where(first * u < e, first + 1, first)
    first = np.where((first - 1) * u >= e, first - 1, first)
    last = np.floor(e[-1] / u)
    last = last - 1 if last * u > e[-1] else last
    last = last + 1 if (last + 1) * u <= e[-1] else last
    lo, hi = first[:-1].copy(), first[1:] - 1
    hi[-1] = last
    return lo.astype(np.int64), hi.astype(np.int64)


# ------------------------------------------------------ the precision of a column that declares none

#: Grid points of the finest grid a column with no declared precision may get: 64³ (fares in pounds
#: and pence on [0, 600], or whole numbers up to 262,143, are exact on it).
FINE_GRID_POINTS = 64**3
#: Grid points of the finest grid a column with no declared precision may get when its values lie on it and
#: rounding to a coarser grid would move them far (:data:`ROUNDING_GAP_SHARE`): 2^30,
#: so values stored with six or seven significant digits (logarithms, ratios, rates of a survey's coding)
#: keep them. Rounded to a coarser grid such values no longer equal the real ones, and where they repeat
#: the gap shows at any ε: on the RAND Health Insurance Experiment extract (20,190 rows; statsmodels'
#: ``randhie``), ln(coinsurance + 1) takes five values such as 3.258096, and on hundredths the KS distance of
#: that column was 0.20 (the rounding alone 0.20); four of its six numeric columns were 0.12–0.20.
EXACT_GRID_POINTS = 1 << 30
#: An exact grid replaces the regular one only when the noisy count of rows by which rounding to the
#: regular grid would shift the column's distribution (its KS distance in rows, :func:`rounding_gap`, a
#: measurement of its own) is at least this share of the rows … A continuous column whose values have
#: many digits loses little by rounding (Adult's fnlwgt, whole numbers on [0, 1,500,000]: 0.0036 on
#: steps of 1,000) and its deeper tree would cost the other columns' noise (mean KS at 5,000 rows
#: 0.030 → 0.033); the RAND extract loses 0.12–0.20 per column.
ROUNDING_GAP_SHARE = 0.01
#: … and at least this many standard deviations of its noise. A column for which that many exceed this
#: share of its (noisy) rows is not measured for exact grids at all, and its part of their budget goes to
#: the levels: at pure ε = 1 on Titanic (ε_v = 0.1) a gap's noise is larger than the table.
ROUNDING_GAP_Z = 3.0
#: … while a gap of at least this many (and the same share) moves the choice to a finer *regular* grid
#: (:meth:`Precision.choose`): at most :data:`FINE_GRID_POINTS` points, so one level more at most instead
#: of the exact grid's several. Money with cents, 60% zeros and the rest log-normal around 3,000 under
#: bounds of [0, 1,000,000], 8,000 rows at ε = 1, fell back to steps of 1,000 (values under 500 became
#: 0): its gap of about 380 rows is under 3 sds of the gap's noise (236) but mostly over 1.5. Value
#: models alone at ε = 1, δ = 1e-9 (30 paired seeds): the survey extract at 5,000 rows 0.0266 → 0.0224,
#: three such money columns with an age (10 seeds) 0.046 → 0.038, the mixed table 0.0259 → 0.0257,
#: Fair 0.0224 → 0.0232 (its affairs are fractions such as 0.1111111 that thousandths do not hold
#: either, and the finer grid costs a level), Adult at 5,000 rows and the RAND extract +0.0002 or less,
#: Titanic, the lab panel and all of Adult unchanged. 2 instead of 1.5: the survey 0.0235, the money
#: columns 0.042, Fair 0.0228; 1: the money columns a further −0.0014 at 5,000 rows (−0.0036 at 8,000),
#: Fair 0.0235 and the other tables +0.0001 to +0.0002.
ROUNDING_GAP_WEAK_Z = 1.5
#: A rounding gap of at least this share of the rows says that rounding moves most of the column: the
#: values lie below the scale of the grid, and the gap of a finer grid cannot be told from it (the rule
#: "10^-k of the gap on a grid k decimals finer" holds for values spread over many steps). Such a column
#: gets the finest candidate. Whole numbers log-normal around 160,000 under bounds of [0, 10^12] (more
#: whole numbers than the finest grid holds) had been given steps of 10^6, and the KS distance of their
#: values was 0.70 at ε = 1 and at ε = 10.
ROUNDING_GAP_SATURATED = 0.5
#: Share of a column's noisy rows its rounding gap must be able to reach (at ROUNDING_GAP_Z sds) for it to be measured.
EXACT_MIN_GAP = 0.5
#: Share of the value model's budget spent on the precision counts (split equally over the columns
#: that have a :class:`Precision` to choose; none is spent when no column has one).
PRECISION_SHARE = Fraction(1, 10)
#: Share of the value model's budget spent, when some column has exact candidates, on their second
#: histograms (split equally over those columns: their rows off every regular grid, by the coarsest exact
#: grid they lie on; the first histogram keeps one class for all of them, so the choice among regular
#: grids is as accurate as before the exact grids existed) …
EXACT_PRECISION_SHARE = Fraction(1, 50)
#: … and on their rounding gaps (:data:`ROUNDING_GAP_SHARE`). Together 5% of the value model's budget:
#: the levels' noise grows by 3%.
ROUNDING_GAP_SHARE_OF_BUDGET = Fraction(3, 100)
#: Share of a column's rows a candidate grid may leave off and still be chosen (they are rounded to its nearest point).
PRECISION_TOLERANCE = 0.02
#: The noisy count of rows off a candidate grid may exceed the tolerance by this many noise standard deviations …
PRECISION_Z = 2.0
#: … and the column's noisy row count must be at least this many standard deviations, or the finest candidate is kept.
PRECISION_MIN_ROWS = 5.0


@dataclass(frozen=True)
class Precision:
    """The grids (decimals, coarsest first) among which a column with no declared precision chooses,
    from one noisy histogram of its rows by the coarsest candidate grid each value lies on.

    Whole numbers are always a candidate, when every bin holds one and there are at most
    :data:`FINE_GRID_POINTS` of them on [lower, upper]; so is every grid between them and the
    automatic grid (:func:`auto_decimals`), and every finer one up to the finest of at most
    :data:`FINE_GRID_POINTS` points. Age, counts of relatives or working hours are whole numbers that
    a schema often does not declare: on the automatic grid their values would be smeared over 0.1 or
    0.01 steps; a lab value with one decimal on [0, 20] would be smeared over 0.01 steps; capital
    gains are whole dollars, but the automatic grid of their wide range has steps of 100; a fare with
    pence would be rounded to whole pounds; a lab value with three decimals on [0, 50] would be
    rounded to tenths, and its real values would stand between the synthetic ones (a KS distance of
    about 0.02 at any ε on a skewed column, see ``bench_value_ks.py``).

    ``fallback``: the grid when the counts cannot tell, or when the column's values lie off every
    candidate (continuous values): the automatic grid, or, when that is whole numbers, the finest
    candidate (None: the finest). A grid finer than it is chosen only for values that lie on it.

    ``regular``: how many of the candidates have at most :data:`FINE_GRID_POINTS` points (None: all);
    the finer ones, up to :data:`EXACT_GRID_POINTS`, are *exact* candidates (:meth:`choose`).
    """

    candidates: tuple[int, ...]
    fallback: int | None = None
    regular: int | None = None

    @classmethod
    def of(cls, col: NumericColumn) -> Precision | None:
        """The choice of ``col`` (the schema alone decides), or None when it declares a grid or has none to choose.

        Regular candidates: from whole numbers (or the automatic grid, when it is coarser) to the finest
        grid of at most :data:`FINE_GRID_POINTS` points — but never a grid that misses a bin, so a
        column on [0, 1] starts at tenths, and one whose whole numbers are too many starts at its
        automatic grid. Exact candidates: the finer grids up to :data:`EXACT_GRID_POINTS` points.
        """
        if col.grid_decimals is not None:
            return None
        auto = auto_decimals(col)
        finest = max(auto, auto_decimals(col, FINE_GRID_POINTS))
        exact = max(finest, auto_decimals(col, EXACT_GRID_POINTS))
        first = min(0, auto)
        while first < auto and not _points_in_every_bin(col, first):
            first += 1
        top = max(finest, first)
        if first == exact:  # one grid: nothing to choose
            return None
        # when nothing fits: the automatic grid; whole numbers when it is coarser and they are regular;
        # the finest regular grid when the automatic grid is whole numbers
        fallback = auto if auto > 0 or finest < 0 else 0 if auto < 0 else finest
        return cls(tuple(range(first, exact + 1)), None if fallback == top else fallback,
                   None if exact == top else top - first + 1)

    @property
    def n_regular(self) -> int:
        """How many candidates (the coarsest) have at most :data:`FINE_GRID_POINTS` points."""
        return len(self.candidates) if self.regular is None else self.regular

    @property
    def coarse(self) -> int:
        """The coarsest candidate."""
        return self.candidates[0]

    @property
    def fine(self) -> int:
        """The grid when the counts cannot tell (the fallback, else the finest regular candidate)."""
        return self.candidates[self.n_regular - 1] if self.fallback is None else self.fallback

    def classes(self, values: np.ndarray) -> np.ndarray:
        """Per value, the index of the coarsest candidate grid it lies on (len(candidates): none)."""
        out = np.full(len(values), len(self.candidates), dtype=np.int64)
        for i in range(len(self.candidates) - 1, -1, -1):
            out[~off_grid(values, self.candidates[i])] = i
        return out

    @property
    def n_counts(self) -> tuple[int, int]:
        """Cells of the two histograms (:meth:`histograms`): regular, exact (0: none)."""
        reg = self.n_regular
        return reg + 1, 0 if self.regular is None else len(self.candidates) - reg + 1

    def histograms(self, values: np.ndarray) -> tuple[int, ...]:
        """Exact counts of the values: by the coarsest regular grid each lies on (the last cell: none of
        them), then, of the values in that last cell, by the coarsest exact grid (the last: none). Each
        value is in one cell of the first and at most one of the second: both are histograms."""
        cls = self.classes(values)
        reg = self.n_regular
        first = np.bincount(np.minimum(cls, reg), minlength=reg + 1)
        if self.regular is None:
            return tuple(int(k) for k in first)
        second = np.bincount(cls[cls >= reg] - reg, minlength=len(self.candidates) - reg + 1)
        return tuple(int(k) for k in first) + tuple(int(k) for k in second)

    def regular_choice(self, counts: Sequence[int], sd: float) -> int:
        """The grid from the released noisy counts of the first histogram (post-processing): among the
        regular candidates, the coarsest such that the column has enough rows to tell (their noisy total
        at least :data:`PRECISION_MIN_ROWS`·sd) and at most :data:`PRECISION_TOLERANCE` of them lie off
        it, up to :data:`PRECISION_Z` standard deviations of the noise of the count off it; otherwise the
        fallback (:attr:`fine`). ``sd``: the standard deviation of one count's noise."""
        first = np.asarray(counts[:self.n_regular + 1], dtype=np.float64)
        total = float(first.sum())
        if not (total > 0 and total >= PRECISION_MIN_ROWS * sd):
            return self.fine
        last = self.n_regular if self.fallback is not None else self.n_regular - 1
        return next((d for i, d in enumerate(self.candidates[:last]) if _fits(first, i, total, sd)), self.fine)

    def may_need_exact(self, counts: Sequence[int], sd: float) -> bool:
        """Whether the released first histogram (post-processing) puts more than :data:`ROUNDING_GAP_SHARE`
        of the rows off the regular choice, by :data:`PRECISION_Z` noise sds ``sd`` of their count: only
        then can rounding to it move the distribution that far (the rounding gap is at most the rows it
        moves), so only then are the second histogram and the rounding gap worth measuring."""
        first = np.asarray(counts[:self.n_regular + 1], dtype=np.float64)
        i = self.candidates.index(self.regular_choice(first, sd))
        return not _fits(first, i, float(first.sum()), sd, ROUNDING_GAP_SHARE)

    def choose(self, counts: Sequence[int], sd: float, sd_exact: float | None = None, sd_gap: float | None = None) -> int:
        """The grid from all the released noisy counts (post-processing): :meth:`regular_choice`, unless the
        column has exact candidates and the released rounding gap of the regular choice (the last count,
        its noise ``sd_gap``) is at least :data:`ROUNDING_GAP_SHARE` of the rows and
        :data:`ROUNDING_GAP_Z` standard deviations: then the coarsest finer candidate off which the
        histograms put at most :data:`PRECISION_TOLERANCE` of the rows — a finer regular one (values of
        whole years and a few halves, the halves within the regular test's noise allowance), else an
        exact one (the second histogram, noise ``sd_exact``) — with no noise allowance (a grid one step
        too fine costs at most a level of one column's tree, one too coarse rounds the values it was
        chosen to keep); failing that, the finest exact candidate when it holds most of the rows off
        every regular grid. When none does (continuous values), the gap of a grid k decimals finer is
        about 10^-k of it: the coarsest grid that brings it under a quarter of the threshold — unless
        the gap is :data:`ROUNDING_GAP_SATURATED` of the rows or more, when the values lie below the
        grid's scale and nothing tells how far: the finest candidate. A gap
        between :data:`ROUNDING_GAP_WEAK_Z` and :data:`ROUNDING_GAP_Z` standard deviations (and at least
        :data:`ROUNDING_GAP_SHARE` of the rows) moves the choice the same number of decimals finer,
        but no further than the finest regular candidate."""
        chosen = self.regular_choice(counts, sd)
        n1, n2 = self.n_counts
        if not n2 or sd_exact is None or sd_gap is None or len(counts) != n1 + n2 + 1:
            return chosen
        c = np.asarray(counts, dtype=np.float64)
        total = float(c[:n1].sum())
        if not (total >= PRECISION_MIN_ROWS * sd and c[-1] >= max(ROUNDING_GAP_WEAK_Z * sd_gap, ROUNDING_GAP_SHARE * total)):
            return chosen
        if c[-1] < ROUNDING_GAP_Z * sd_gap:
            # weaker evidence: a finer regular grid (at most one level more), never an exact one
            return max(chosen, min(chosen + _closing_decimals(float(c[-1]), total), self.candidates[self.n_regular - 1]))
        first = c[:n1]
        for i in range(self.candidates.index(chosen) + 1, self.n_regular):
            if _fits(first, i, total, 0.0):
                return self.candidates[i]
        second = c[n1:n1 + n2]
        j = next((j for j in range(n2 - 1) if _fits(second, j, total, 0.0)), None)
        if j is not None:
            return self.candidates[self.n_regular + j]
        if second[-1] <= 0.5 * float(second.sum()) or c[-1] >= ROUNDING_GAP_SATURATED * total:
            return self.candidates[-1]
        return min(chosen + _closing_decimals(float(c[-1]), total), self.candidates[-1])


def _closing_decimals(gap: float, total: float) -> int:
    """How many decimals finer a grid must be for the rounding gap of continuous values (about 10^-k of
    ``gap`` on a grid k decimals finer) to fall under a quarter of :data:`ROUNDING_GAP_SHARE` of the rows."""
    return max(1, math.ceil(math.log10(gap / (ROUNDING_GAP_SHARE * total / 4))))


def _fits(cells: np.ndarray, i: int, total: float, sd: float, tolerance: float = PRECISION_TOLERANCE) -> bool:
    """Whether at most ``tolerance`` of ``total`` rows lie after cell ``i``, up to :data:`PRECISION_Z`
    noise sds ``sd`` of their sum (0: no allowance)."""
    off = float(cells[i + 1:].sum())
    return off <= tolerance * total + PRECISION_Z * sd * math.sqrt(len(cells) - 1 - i)


def rounding_gap(leaves: np.ndarray, weights: np.ndarray, finer: ColumnGrid, decimals: int) -> int:
    """max_x |#{v ≤ x} − #{r(v) ≤ x}| over the rows (a KS distance in rows), v their values on the grid
    ``finer`` (its occupied ``leaves`` and their counts), r the nearest point of the grid of ``decimals``
    (coarser): how far rounding to that grid would move the column's distribution. Sensitivity:
    :func:`dpsynth.neighbours.rounding_gap_sensitivity`."""
    if len(leaves) == 0:
        return 0
    step = 10 ** (finer.decimals - decimals)
    k = finer.first + np.asarray(leaves, dtype=np.int64) * finer.width
    r = np.rint(k / step).astype(np.int64) * step
    pos = np.concatenate([k, r])
    w = np.concatenate([np.asarray(weights, dtype=np.int64), -np.asarray(weights, dtype=np.int64)])
    order = np.argsort(pos, kind="stable")
    pos, w = pos[order], w[order]
    at = np.r_[pos[1:] != pos[:-1], True]  # the difference after all the rows at one position
    return int(np.max(np.abs(np.cumsum(w)[at]), initial=0))


def off_grid(values: np.ndarray, decimals: int) -> np.ndarray:
    """Whether each value is off the grid of multiples of 10^-decimals (beyond float parsing error)."""
    x = _scaled(values, decimals)
    return np.abs(x - np.rint(x)) > 1e-9 * np.maximum(1.0, np.abs(x))


@dataclass(frozen=True)
class ColumnCounts:
    """Exact counts of one numeric column for the value model (never released as such).

    ``leaves``: per candidate grid (decimals), the occupied leaves of its tree and their counts
    (:func:`leaf_index`); ``precision``: for a column with a :class:`Precision` to choose, its rows
    per :meth:`Precision.classes` (each row is in exactly one class: a histogram).
    """

    leaves: dict[int, tuple[np.ndarray, np.ndarray]]
    precision: tuple[int, ...] | None = None

    def __add__(self, other: ColumnCounts) -> ColumnCounts:
        """The counts of two disjoint batches of rows of the same column."""
        leaves = {}
        for d, (idx, n) in self.leaves.items():
            idx2, n2 = other.leaves[d]
            occ, inv = np.unique(np.concatenate([idx, idx2]), return_inverse=True)
            leaves[d] = (occ, np.bincount(inv, weights=np.concatenate([n, n2]), minlength=len(occ)).astype(np.int64))
        prec = None if self.precision is None or other.precision is None else tuple(
            a + b for a, b in zip(self.precision, other.precision, strict=True))
        return ColumnCounts(leaves, prec)


def count_column(values: np.ndarray, col: NumericColumn, max_branching: int = MAX_BRANCHING) -> ColumnCounts:
    """The exact :class:`ColumnCounts` of a column's parsed values (float64, NaN for empty: not counted):
    leaf counts on its declared or automatic grid, or on every candidate of its :class:`Precision`."""
    v = np.asarray(values, dtype=np.float64)
    v = np.sort(v[~np.isnan(v)])  # once: the leaf map is monotone, so each grid's leaves come out sorted
    prec = Precision.of(col)
    leaves = {}
    for d in [None] if prec is None else prec.candidates:
        g = ColumnGrid.of(col, max_branching, d)
        leaf = leaf_index(v, col, g)
        start = np.flatnonzero(np.r_[True, leaf[1:] != leaf[:-1]]) if len(leaf) else np.empty(0, dtype=np.int64)
        leaves[g.decimals] = (leaf[start].astype(np.int64), np.diff(np.r_[start, len(leaf)]).astype(np.int64))
    if prec is None:
        return ColumnCounts(leaves)
    return ColumnCounts(leaves, prec.histograms(np.clip(v, col.lower, col.upper)))


# ------------------------------------------------------------------------------- the mechanism


@dataclass(frozen=True)
class ColumnTree:
    """The released noisy counts of one column's visited nodes: per level, node indices and counts.

    ``precision``: for a column whose grid the release chose, the :class:`Precision` and the released
    noisy counts of its rows per :meth:`Precision.classes`. No levels (``nodes`` empty): the chosen
    grid has one point in every bin, so the bin is the value.
    """

    grid: ColumnGrid
    nodes: tuple[np.ndarray, ...]
    counts: tuple[np.ndarray, ...]
    precision: tuple[Precision, tuple[int, ...]] | None = None


@dataclass(frozen=True)
class ValueModel:
    """The released fine distributions of a schema's numeric columns: ε_v-DP (pure) or ρ_v-zCDP.

    Pure (``rho`` = 0): ``scale`` is the discrete Laplace scale of every node. zCDP (``rho`` > 0,
    ``epsilon`` = 0): every node has discrete Gaussian noise of variance ``sigma2``. ``threshold``
    is the public expansion threshold θ. Sampling (:meth:`sample_in_bins`) is post-processing.
    """

    epsilon: float
    neighbours: Neighbours
    max_contributions: int
    scale: Fraction | None
    threshold: float
    trees: dict[str, ColumnTree]
    rho: float = 0.0
    sigma2: Fraction | None = None
    #: the noise of every precision count (:class:`Precision`): a discrete Laplace scale, or a Gaussian σ²
    precision_noise: Fraction | None = None
    #: the noise of every count of the second precision histograms (rows off every regular grid), if any
    exact_precision_noise: Fraction | None = None
    #: the noise of every rounding gap (:func:`rounding_gap`), if any
    rounding_gap_noise: Fraction | None = None
    _compiled: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def columns(self) -> list[str]:
        """Names of the modelled columns."""
        return list(self.trees)

    def sample_in_bins(self, column: str, bin_codes: np.ndarray, *, rng: np.random.Generator,
                       col: NumericColumn | None = None) -> np.ndarray:
        """Grid points k (int64; the value is k·10^-d, :meth:`ColumnGrid.values`) for synthetic rows in ``bin_codes``.

        Each row's value is drawn from the released fine distribution restricted to its bin (an
        inverse CDF over the pieces of the bin, then over the grid points of the piece); a bin
        holding no released mass gets a uniform grid point of the bin. Codes ≥ bins (missing)
        get an arbitrary grid point, to be masked by the caller. The rows of a bin invert the CDF
        at systematic points (:func:`dpsynth.randomness.systematic_uniforms`): each row's value has
        the model's law inside its bin and is independent of the other columns given the bin, while
        the bin's values follow the model's shape without the sampling error of i.i.d. draws.
        Post-processing: no privacy cost.
        """
        comp = self._compile(column, col)
        codes = np.asarray(bin_codes, dtype=np.int64)
        bins = len(comp["bin_lo"])
        c = np.minimum(codes, bins - 1)
        # missing rows (codes ≥ bins) form their own groups, so a bin's points are not shared with them
        u = systematic_uniforms(codes, int(codes.max(initial=0)) + 1, rng=rng)
        bin_mass = comp["bin_mass"][c]
        target = comp["bin_start"][c] + u * bin_mass
        piece = np.searchsorted(comp["cum"], target, side="right")
        piece = np.clip(piece, comp["first_piece"][c], comp["last_piece"][c])
        a, b = comp["piece_lo"][piece], comp["piece_hi"][piece]
        piece_start = np.where(piece > 0, comp["cum"][np.maximum(piece - 1, 0)], 0.0)
        piece_mass = comp["cum"][piece] - piece_start
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(piece_mass > 0, (target - piece_start) / piece_mass, u)
        empty = ~(bin_mass > 0)
        a = np.where(empty, comp["bin_lo"][c], a)
        b = np.where(empty, comp["bin_hi"][c], b)
        frac = np.where(empty, u, np.clip(frac, 0.0, 1.0))
        return np.minimum(a + np.floor(frac * (b - a + 1)).astype(np.int64), b)

    def _compile(self, column: str, col: NumericColumn | None) -> dict[str, Any]:
        """Per bin, the pieces (frontier ∩ bin) with their masses, cumulated (cached)."""
        if column in self._compiled:
            return self._compiled[column]
        tree = self.trees[column]
        g = tree.grid
        if col is None:
            raise InputError(f"The value model of {column!r} needs its schema column to sample.")
        bin_lo, bin_hi = g.bin_ranges(col)
        if int(bin_lo[0]) != g.first or int(bin_hi[-1]) != g.last or np.any(bin_hi < bin_lo):
            raise InputError(f"The value model of {column!r} does not match the schema's column (other bounds or grid).")
        if tree.nodes:
            sd = _noise_sd(self.sigma2 if self.gaussian else self.scale, self.gaussian)
            starts, masses = _frontier(tree, self.threshold, sd)  # in leaves
        else:  # no levels: one grid point per bin, drawn "uniformly"
            starts, masses = np.zeros(1, dtype=np.int64), np.zeros(1)
        # frontier intervals in grid units: [first + start·width, …), density per grid point
        f_lo = g.first + starts * g.width
        f_hi = np.append(f_lo[1:], g.last + 1)
        density = masses / np.maximum(f_hi - f_lo, 1)
        breaks = np.unique(np.concatenate([f_lo, bin_lo, [g.last + 1]]))
        p_lo, p_hi = breaks[:-1], breaks[1:] - 1
        fid = np.searchsorted(f_lo, p_lo, side="right") - 1
        bid = np.searchsorted(bin_lo, p_lo, side="right") - 1
        pmass = density[fid] * (p_hi - p_lo + 1)
        cum = np.cumsum(pmass)
        bins = len(bin_lo)
        first_piece = np.searchsorted(bid, np.arange(bins), side="left")
        last_piece = np.searchsorted(bid, np.arange(bins), side="right") - 1
        bin_mass = np.bincount(bid, weights=pmass, minlength=bins)
        start = np.where(first_piece > 0, cum[np.maximum(first_piece - 1, 0)], 0.0)
        comp = {"bin_lo": bin_lo, "bin_hi": bin_hi, "piece_lo": p_lo, "piece_hi": p_hi, "cum": cum,
                "bin_mass": bin_mass, "bin_start": start, "first_piece": first_piece,
                "last_piece": np.maximum(last_piece, first_piece)}
        self._compiled[column] = comp
        return comp

    def cdf(self, column: str, col: NumericColumn, units: np.ndarray, bin_shares: np.ndarray | None = None) -> np.ndarray:
        """The released distribution's CDF at positions ``units`` on the column's grid (float grid units:
        the share of mass on grid points ≤ each), with each bin's mass replaced by ``bin_shares`` when
        given (a bin with no released mass spread evenly over its points). Works piece by piece, never
        point by point: an exact grid may have 2^30 points. Post-processing."""
        comp = self._compile(column, col)
        p_lo, p_hi = comp["piece_lo"], comp["piece_hi"]
        pm = np.diff(np.r_[0.0, comp["cum"]])
        if bin_shares is not None:
            bid = np.searchsorted(comp["bin_lo"], p_lo, side="right") - 1
            bm = comp["bin_mass"][bid]
            size = (p_hi - p_lo + 1).astype(np.float64)
            bin_size = (comp["bin_hi"] - comp["bin_lo"] + 1).astype(np.float64)[bid]
            share = np.asarray(bin_shares, dtype=np.float64)[bid]
            pm = np.where(bm > 0, pm * share / np.where(bm > 0, bm, 1.0), share * size / bin_size)
        before = np.r_[0.0, np.cumsum(pm)]
        u = np.floor(np.asarray(units, dtype=np.float64))
        j = np.clip(np.searchsorted(p_lo, u, side="right") - 1, 0, len(p_lo) - 1)
        inside = np.clip(u - p_lo[j] + 1, 0, p_hi[j] - p_lo[j] + 1) / (p_hi[j] - p_lo[j] + 1)
        out = before[j] + pm[j] * inside
        return np.where(u < p_lo[0], 0.0, out) / max(before[-1], 1e-300)

    def bin_distribution(self, column: str, col: NumericColumn) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per bin, (grid points, probabilities) of the released distribution inside it (for tests and plots)."""
        comp = self._compile(column, col)
        out = []
        for b in range(len(comp["bin_lo"])):
            lo, hi = comp["bin_lo"][b], comp["bin_hi"][b]
            k = np.arange(lo, hi + 1)
            if not comp["bin_mass"][b] > 0:
                out.append((k, np.full(len(k), 1.0 / len(k))))
                continue
            pieces = slice(comp["first_piece"][b], comp["last_piece"][b] + 1)
            plo, phi = comp["piece_lo"][pieces], comp["piece_hi"][pieces]
            pm = np.diff(np.concatenate([[comp["bin_start"][b]], comp["cum"][pieces]]))
            idx = np.searchsorted(plo, k, side="right") - 1
            p = pm[idx] / (phi - plo + 1)[idx]
            out.append((k, p / p.sum()))
        return out

    def bin_counts(self, column: str, col: NumericColumn) -> tuple[np.ndarray, float] | None:
        """Unbiased estimates of the counts of the column's schema bins from the released tree, and their mean
        noise variance (post-processing: no privacy cost). None for a column without levels.

        The estimates are the least-squares consistent counts of the tree (Hay et al. 2010: the two passes
        of :func:`_frontier`, without its smoothing and its clamping at zero, which bias a count), an
        interval of the partition spread evenly over its leaves where a bin edge cuts it (a node below the
        expansion threshold). Their noise is a linear function of the nodes' noise, so its variance is that
        of the same estimates on noise alone over the released tree's shape (public), averaged over
        :data:`BIN_VARIANCE_DRAWS` draws and over the bins. (The sampler's smoothed, clamped bin masses fitted
        as observations did as well within noise: 0.981 / 0.986 against 0.985 / 0.988 × the 2-/3-way TVD of
        the 14 tables of ``benchmarks/peers/aim_suite.py``, 24 seeds; but their error is not their stated
        variance, and a bin's bias reached 1.2 standard deviations.)
        """
        tree = self.trees[column]
        if not tree.nodes:
            return None
        g = tree.grid
        lo, hi = g.bin_ranges(col)
        first_leaf = (np.asarray(lo) - g.first) // g.width
        end_leaf = (np.asarray(hi) - g.first) // g.width + 1
        sd = _noise_sd(self.sigma2 if self.gaussian else self.scale, self.gaussian)  # type: ignore[arg-type]

        def per_bin(levels: Sequence[np.ndarray]) -> np.ndarray:
            starts, size, x = _consistent_frontier(tree, levels)
            cum = np.append(0.0, np.cumsum(x))

            def below(leaf: np.ndarray) -> np.ndarray:  # the estimate on leaves < leaf
                k = np.clip(np.searchsorted(starts, leaf, side="right") - 1, 0, len(x) - 1)
                return cum[k] + x[k] * np.clip(leaf - starts[k], 0, size[k]) / size[k]

            return below(end_leaf) - below(first_leaf)

        counts = per_bin(tree.counts)
        # a deterministic quadrature of a public quantity (the tree's shape and σ), not noise of the release
        sim = np.random.default_rng(0)
        noise_only = np.array([per_bin([sim.standard_normal(len(c)) for c in tree.counts])
                               for _ in range(BIN_VARIANCE_DRAWS)])
        return counts, max(sd * sd * float(np.mean(noise_only**2)), MIN_NOISE_VARIANCE)

    # ---- release card and serialisation

    @property
    def gaussian(self) -> bool:
        """Whether the nodes carry discrete Gaussian noise (a ρ_v-zCDP model) rather than Laplace."""
        return self.sigma2 is not None

    def unit_cost(self, noise_parameter: Fraction) -> float:
        """What one histogram (a level, or a precision count) with this noise costs: ε (Δ₁/scale) or ρ (Δ₂²/(2σ²))."""
        return _cost(noise_parameter, self.gaussian, *_histogram_sensitivities(self.neighbours, self.max_contributions))

    def gap_cost(self) -> float:
        """What one noisy rounding gap costs (Δ from :func:`dpsynth.neighbours.rounding_gap_sensitivity`); 0 without any."""
        if self.rounding_gap_noise is None:
            return 0.0
        dg = rounding_gap_sensitivity(self.neighbours, self.max_contributions)
        return _cost(self.rounding_gap_noise, self.gaussian, dg, dg * dg)

    def describe(self) -> dict[str, Any]:
        """Release-card stage: mechanism, ε_v (or ρ_v), its split, sensitivity, sources."""
        per_level = self.unit_cost(self.sigma2 if self.gaussian else self.scale)
        per_precision = self.unit_cost(self.precision_noise) if self.precision_noise is not None else 0.0
        per_exact = self.unit_cost(self.exact_precision_noise) if self.exact_precision_noise is not None else 0.0
        per_exact += self.gap_cost()
        sd = _noise_sd(self.precision_noise, self.gaussian) if self.precision_noise is not None else 0.0
        exact_text = ("" if self.exact_precision_noise is None else
                      f"; {float(EXACT_PRECISION_SHARE):.0%} split equally over the columns with grids of more than"
                      f" {FINE_GRID_POINTS:,} points to choose from whose first noisy counts put significantly more"
                      f" than {ROUNDING_GAP_SHARE:.0%} of their rows off the grid they chose (their noisy counts of the"
                      " rows off every coarser grid, by the coarsest finer grid they lie on; the other columns' part"
                      f" goes to the levels), and {float(ROUNDING_GAP_SHARE_OF_BUDGET):.0%}"
                      " on their rounding gaps (the largest difference, in rows, between the distribution of their"
                      " values and of their values rounded to the grid chosen so far); a column whose rounding gap"
                      f" could not be told from noise even if {EXACT_MIN_GAP:.0%} of its rows moved is not measured"
                      " for them, and its part goes to the levels")
        split = (f"{float(PRECISION_SHARE):.0%} of it split equally over the columns whose grid is estimated (their"
                 " noisy counts of rows by the coarsest candidate grid they lie on, one count for the rows off them all)"
                 + exact_text + ", the rest equally over every (column, level) pair of the chosen grids; "
                 if self.precision_noise is not None else "split equally over every (column, level) pair; ")
        if self.gaussian:
            noise_part: dict[str, Any] = {
                "mechanism": "hierarchical histogram with discrete Gaussian noise per visited node, pruned by a public"
                             " threshold on released noisy counts",
                "guarantee": f"{self.rho:.6g}-zCDP",
                "rho": self.rho,
                "split": "ρ_v " + split + "zCDP composition (one row is in one node of every level of every column)",
                "rho_per_level": per_level,
                "l2_sensitivity_squared_per_level": histogram_l2_sensitivity_squared(self.neighbours,
                                                                                     self.max_contributions),
                "sigma": math.sqrt(float(self.sigma2)),
                "sigma2": str(self.sigma2),
                "sampler": "exact integer sampler (Canonne, Kamath & Steinke 2020, Alg. 3)",
                "sources": SOURCES_GAUSSIAN,
            }
        else:
            noise_part = {
                "mechanism": "hierarchical histogram with discrete Laplace noise per visited node, pruned by a public"
                             " threshold on released noisy counts",
                "guarantee": f"{self.epsilon:g}-DP (pure)",
                "epsilon": self.epsilon,
                "delta": 0.0,
                "split": "ε_v " + split + "basic composition (one row is in one node of every level of every column)",
                "epsilon_per_level": per_level,
                "l1_sensitivity_per_level": hierarchical_histogram_l1_sensitivity(self.neighbours,
                                                                                  self.max_contributions, 1),
                "scale": str(self.scale),
                "sampler": "exact integer sampler (Canonne, Kamath & Steinke 2020, Alg. 2)",
                "sources": SOURCES,
            }
        if self.precision_noise is not None:
            noise_part["precision_count_noise"] = (f"σ² = {self.precision_noise}" if self.gaussian
                                                   else f"scale {self.precision_noise}")
        if self.exact_precision_noise is not None:
            noise_part["exact_precision_count_noise"] = (f"σ² = {self.exact_precision_noise}" if self.gaussian
                                                         else f"scale {self.exact_precision_noise}")
        if self.rounding_gap_noise is not None:
            noise_part["rounding_gap_noise"] = (f"σ² = {self.rounding_gap_noise}" if self.gaussian
                                                else f"scale {self.rounding_gap_noise}")
            noise_part["rounding_gap_sensitivity"] = rounding_gap_sensitivity(self.neighbours, self.max_contributions)
        key = "rho" if self.gaussian else "epsilon"

        def column(t: ColumnTree) -> dict[str, Any]:
            out: dict[str, Any] = {
                "grid": f"multiples of 10^{-t.grid.decimals}" + (
                    "" if t.grid.declared else " (automatic grid: the column declares no precision)"
                    if t.precision is None else " (estimated: the column declares no precision)"),
                "leaves": t.grid.leaves, "grid_points_per_leaf": t.grid.width,
                "branching": t.grid.branching, "levels": len(t.nodes),
                key: per_level * len(t.nodes) + (per_precision if t.precision is not None else 0.0)
                + (per_exact if t.precision is not None and len(t.precision[1]) > t.precision[0].n_counts[0] else 0.0),
                "visited_nodes": int(sum(len(n) for n in t.nodes)),
            }
            if t.precision is not None:
                prec, noisy = t.precision
                names = [f"multiples of 10^{-d}" for d in prec.candidates]
                reg = prec.n_regular
                regular_names = names[:reg] + ["none of them" if prec.regular is None else "none of these"]
                out["precision"] = {
                    "candidates": names,
                    "noisy_rows_by_coarsest_grid": dict(zip(regular_names, noisy[:reg + 1], strict=True)),
                    "rule": f"the coarsest candidate off which at most {PRECISION_TOLERANCE:.0%} of the rows lie (up to"
                            f" {PRECISION_Z:g} noise standard deviations), when the rows number at least"
                            f" {PRECISION_MIN_ROWS:g} standard deviations; else "
                            + ("the finest" if prec.fallback is None else f"multiples of 10^{-prec.fallback}")
                            + ("" if prec.regular is None else
                               f"; among the grids of more than {FINE_GRID_POINTS:,} points (from multiples of"
                               f" 10^{-prec.candidates[prec.n_regular]}), the coarsest that passes the same test"
                               f" replaces it when the noisy rounding gap of that choice is at least"
                               f" {ROUNDING_GAP_SHARE:.0%} of the rows and {ROUNDING_GAP_Z:g} noise standard deviations"
                               f" (for values on none of them, the grid finer by the decades of the gap over"
                               f" {ROUNDING_GAP_SHARE / 4:.2%} of the rows, or the finest when the gap is"
                               f" {ROUNDING_GAP_SATURATED:.0%} of the rows or more)"
                               f"; a gap of that share and {ROUNDING_GAP_WEAK_Z:g} to {ROUNDING_GAP_Z:g} standard"
                               " deviations moves the choice to a finer grid of at most"
                               f" {FINE_GRID_POINTS:,} points"),
                    key: per_precision,
                }
                if prec.regular is not None and len(noisy) == reg + 1:
                    out["precision"]["exact_grids"] = "not measured: " + (
                        f"{ROUNDING_GAP_Z:g} noise standard deviations of a rounding gap exceed {EXACT_MIN_GAP:.0%} of"
                        " the noisy rows" if prec.may_need_exact(noisy, sd) else
                        f"the noisy counts put no more than {ROUNDING_GAP_SHARE:.0%} of the rows (up to"
                        f" {PRECISION_Z:g} noise standard deviations) off the grid chosen, so rounding to it cannot"
                        " move the distribution that far")
                elif prec.regular is not None:
                    out["precision"]["of_none_of_these_by_coarsest_exact_grid"] = dict(
                        zip([*names[reg:], "none of them"], noisy[reg + 1:-1], strict=True))
                    out["precision"]["noisy_rounding_gap_rows"] = noisy[-1]
                    out["precision"][key] += per_exact
            if not t.nodes:
                out["note"] = "every bin holds one grid point: the bin is the value, no tree is measured"
            return out

        return {
            **noise_part,
            "expansion_threshold": self.threshold,
            "columns": {name: column(t) for name, t in self.trees.items()},
            "post_processing": "least-squares consistency over the visited tree (two-pass form), each level's"
                               " counts shrunk towards the mean of their neighbours where the noise hides any"
                               " shape (point masses kept), then a top-down non-negative split; values drawn"
                               " from it inside each synthetic row's bin",
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-able released object: the noisy counts of the visited nodes and the public parameters."""
        head: dict[str, Any] = (
            {"format": FORMAT_GAUSSIAN, "rho": self.rho, "sigma2": str(self.sigma2)} if self.gaussian
            else {"format": FORMAT, "epsilon": self.epsilon, "scale": str(self.scale)})
        if self.precision_noise is not None:
            head["precision_noise"] = str(self.precision_noise)
        if self.exact_precision_noise is not None:
            head["exact_precision_noise"] = str(self.exact_precision_noise)
        if self.rounding_gap_noise is not None:
            head["rounding_gap_noise"] = str(self.rounding_gap_noise)

        def column(t: ColumnTree) -> dict[str, Any]:
            out: dict[str, Any] = {
                "grid": {"decimals": t.grid.decimals, "declared": t.grid.declared, "first": t.grid.first,
                         "last": t.grid.last, "width": t.grid.width, "leaves": t.grid.leaves,
                         "branching": t.grid.branching, "levels": t.grid.levels},
                "nodes": [n.tolist() for n in t.nodes],
                "counts": [c.tolist() for c in t.counts],
            }
            if t.precision is not None:
                prec, noisy = t.precision
                out["precision"] = {"candidates": list(prec.candidates), "counts": list(noisy)}
                if prec.fallback is not None:
                    out["precision"]["fallback"] = prec.fallback
                if prec.regular is not None:
                    out["precision"]["regular"] = prec.regular
            return out

        return {
            **head,
            "neighbours": self.neighbours.value,
            "max_contributions": self.max_contributions,
            "threshold": self.threshold,
            "columns": {name: column(t) for name, t in self.trees.items()},
        }

    def to_json(self) -> str:
        """Deterministic JSON text of :meth:`to_dict` (sorted keys, no spaces)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_bytes(cls, data: bytes, what: str = "value_model.json") -> ValueModel:
        """Read a model from the bytes of its JSON file (:meth:`to_json`); an unreadable one is an :class:`InputError`
        naming ``what``."""
        try:
            d = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"The release's {what} is not readable: {exc}.") from None
        if not isinstance(d, dict):
            raise InputError(f"The release's {what} is not a value model.")
        return cls.from_dict(d)

    def check(self, schema: Schema) -> None:
        """Refuse, before anything is drawn, a model that does not describe ``schema``: a column it does not
        have or that is not numeric, or other bounds or grid (:meth:`_compile`'s test)."""
        cols = {c.name: c for c in schema.columns}
        for name in self.trees:
            col = cols.get(name)
            if not isinstance(col, NumericColumn):
                raise InputError(f"The value model describes {name!r}, which the schema has not as a numeric column;"
                                 " give the value model of this release.")
            self._compile(name, col)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ValueModel:
        """Read a model written by :meth:`to_dict`; a malformed one is an :class:`InputError`."""
        try:
            if d.get("format") not in (FORMAT, FORMAT_GAUSSIAN):
                raise InputError(f"Not a value model ({d.get('format')!r}); expected {FORMAT!r} or {FORMAT_GAUSSIAN!r}.")
            trees = {}
            for name, t in d["columns"].items():
                g = t["grid"]
                grid = ColumnGrid(name=str(name), decimals=int(g["decimals"]), declared=bool(g["declared"]),
                                  first=int(g["first"]), last=int(g["last"]), width=int(g["width"]),
                                  leaves=int(g["leaves"]), branching=int(g["branching"]), levels=int(g["levels"]))
                nodes = tuple(np.asarray(n, dtype=np.int64) for n in t["nodes"])
                counts = tuple(np.asarray(c, dtype=np.int64) for c in t["counts"])
                if len(nodes) != len(counts) or any(len(a) != len(b) for a, b in zip(nodes, counts, strict=True)):
                    raise InputError(f"Value model of {name!r}: nodes and counts do not match.")
                p = t.get("precision")
                prec = None if p is None else (
                    Precision(tuple(int(d) for d in p["candidates"]),
                              None if p.get("fallback") is None else int(p["fallback"]),
                              None if p.get("regular") is None else int(p["regular"])),
                    tuple(int(k) for k in p["counts"]))
                if prec is not None and len(prec[1]) not in {prec[0].n_counts[0],
                                                             sum(prec[0].n_counts) + (prec[0].regular is not None)}:
                    raise InputError(f"Value model of {name!r}: its precision counts do not match its candidates.")
                trees[str(name)] = ColumnTree(grid, nodes, counts, prec)
            pn, en, gn = d.get("precision_noise"), d.get("exact_precision_noise"), d.get("rounding_gap_noise")
            common = {"neighbours": Neighbours.parse(d["neighbours"]), "max_contributions": int(d["max_contributions"]),
                      "threshold": float(d["threshold"]), "trees": trees,
                      "precision_noise": None if pn is None else Fraction(pn),
                      "exact_precision_noise": None if en is None else Fraction(en),
                      "rounding_gap_noise": None if gn is None else Fraction(gn)}
            if d["format"] == FORMAT_GAUSSIAN:
                return cls(epsilon=0.0, scale=None, rho=float(d["rho"]), sigma2=Fraction(d["sigma2"]), **common)
            return cls(epsilon=float(d["epsilon"]), scale=Fraction(d["scale"]), **common)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"Malformed value model: {exc}.") from None


def value_columns(schema: Schema) -> list[NumericColumn]:
    """The numeric columns of ``schema`` a value model describes: all, except one whose bins are
    narrower than the finest automatic grid (its values stay uniform inside bins) and one whose
    declared grid has a single point in every bin (the bin is the value: nothing to learn, so no
    budget is spent on it)."""
    return [c for c in schema.columns
            if isinstance(c, NumericColumn) and _has_grid_in_every_bin(c) and not _one_point_per_bin(c)]


def bin_count_observations(values: ValueModel, schema: Schema) -> dict[int, tuple[np.ndarray, float]]:
    """Per numeric column the value model describes (by its position in ``schema``), the released counts of
    its bins and their noise variance (:meth:`ValueModel.bin_counts`): further noisy one-ways for the
    marginals method to fit (post-processing of the value model's release). A column that allows missing
    values is left out: the value model does not count its missing cell."""
    out: dict[int, tuple[np.ndarray, float]] = {}
    for j, col in enumerate(schema.columns):
        if isinstance(col, NumericColumn) and col.name in values.trees and not col.missing:
            got = values.bin_counts(col.name, col)
            if got is not None and len(got[0]) == col.n_cells:
                out[j] = got
    return out


def _one_point_per_bin(col: NumericColumn) -> bool:
    """True when the column declares a grid and every bin holds exactly one of its points."""
    if col.grid_decimals is None:
        return False
    lo, hi = col.grid_ranges()
    return bool(np.all(hi == lo))


def fit_value_model(
    data: pd.DataFrame | Mapping[str, np.ndarray], schema: Schema, *, epsilon: float | None = None,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE, max_contributions: int = 1, rng: np.random.Generator,
    max_branching: int = MAX_BRANCHING, rho: float | None = None,
) -> ValueModel:
    """Release the fine distribution of every numeric column of ``schema``: ε-DP (pure, discrete Laplace)
    for ``epsilon``, or ρ-zCDP (discrete Gaussian) for ``rho`` — exactly one of the two (module docstring).

    ``data`` holds the rows after contribution bounding (at most ``max_contributions`` rows per
    person): a table, or per numeric column its parsed float64 values with NaN for empty
    (:attr:`dpsynth.binning.Encoded.raw`, which saves parsing the text twice). Values outside the
    bounds are clamped, then put on the nearest grid point; empty values are not counted (a row is
    then in no node of that column). Noise is drawn from ``rng``.
    """
    counts = {col.name: count_column(_column_values(data, col), col, max_branching) for col in value_columns(schema)}
    return fit_value_model_from_counts(counts, schema, epsilon=epsilon, neighbours=neighbours,
                                       max_contributions=max_contributions, rng=rng, max_branching=max_branching,
                                       rho=rho)


def _has_grid_in_every_bin(col: NumericColumn) -> bool:
    """False for a column so narrow that the automatic grid (at most 10^-9 fine) misses a bin."""
    if col.grid_decimals is not None:
        return True  # the schema already checks it
    return _points_in_every_bin(col, ColumnGrid.of(col).decimals)


def _points_in_every_bin(col: NumericColumn, decimals: int) -> bool:
    """Whether every bin of ``col`` holds a point of the grid of multiples of 10^-decimals."""
    lo, hi = _grid_ranges(col.edges(), decimals)
    return bool(np.all(hi >= lo))


def leaf_index(values: np.ndarray, col: NumericColumn, g: ColumnGrid) -> np.ndarray:
    """Leaf of each non-empty value: clamp to [lower, upper], nearest grid point k (half to even), (k − first) // width.

    A per-row map (1-stable). An engine that counts where the data is computes the same map and
    returns the counts of the occupied leaves to :func:`fit_value_model_from_counts`.
    """
    v = np.asarray(values, dtype=np.float64)
    v = np.clip(v[~np.isnan(v)], col.lower, col.upper)
    return (g.units(v) - g.first) // g.width


def fit_value_model_from_counts(
    counts: Mapping[str, ColumnCounts], schema: Schema, *, epsilon: float | None = None,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE, max_contributions: int = 1, rng: np.random.Generator,
    max_branching: int = MAX_BRANCHING, rho: float | None = None,
) -> ValueModel:
    """:func:`fit_value_model` from exact counts: per numeric column, its :class:`ColumnCounts` (:func:`count_column`).

    Same guarantee: ε-DP (pure) for ``epsilon``, ρ-zCDP for ``rho``, when the counts come from rows
    bounded to ``max_contributions`` per person. When some column has a :class:`Precision` to
    choose, :data:`PRECISION_SHARE` of the budget goes, in equal parts, to those columns' precision
    counts, which are measured first; each grid is chosen from them (post-processing), and the rest
    of the budget is split equally over the levels of the chosen grids (adaptive composition: the
    split depends only on released counts). Otherwise every level gets an equal share of the budget.
    """
    if (epsilon is None) == (rho is None):
        raise InputError("The value model needs exactly one budget: epsilon (pure DP) or rho (zCDP).")
    rel = Neighbours.parse(neighbours)
    cols = value_columns(schema)
    for col in cols:
        if col.name not in counts:
            raise InputError(f"No counts were given for the numeric column {col.name!r}.")
    precs = {c.name: Precision.of(c) for c in cols}
    n_prec = sum(p is not None for p in precs.values())
    gaussian = rho is not None
    if gaussian:
        rho_v, eps = float(rho), 0.0
        if not (math.isfinite(rho_v) and rho_v > 0):
            raise InputError(f"The value model's ρ must be a positive number, got {rho!r}.")
        budget = Fraction(rho_v)
    else:
        rho_v, eps = 0.0, check_epsilon(epsilon)
        budget = exact_epsilon(eps)
    l1, l2sq = _histogram_sensitivities(rel, max_contributions)

    def noise_for(histograms: int, part: Fraction, l1: int = l1, l2sq: int = l2sq) -> Fraction:
        """The noise parameter that makes each of ``histograms`` histograms (or other queries of these
        sensitivities) cost an equal share of ``part``: σ² = k·Δ₂²/(2ρ) or scale k·Δ₁/ε, rounded up to a
        rational (never less noise)."""
        if gaussian:
            return noise.rational_at_least(Fraction(l2sq * histograms) / (2 * part))
        return noise.rational_at_least(Fraction(l1 * histograms) / part)

    def sampler(param: Fraction) -> Callable[[int], np.ndarray]:
        if gaussian:
            return lambda size: noise.discrete_gaussian(param, size, rng=rng)
        return lambda size: noise.discrete_laplace(param, size, rng=rng)

    # 1. the precision counts (PRECISION_SHARE of the budget, and EXACT_PRECISION_SHARE and
    # ROUNDING_GAP_SHARE_OF_BUDGET for the second histograms and the rounding gaps of the columns that
    # may need exact grids), then each column's grid from them
    precision_noise = noise_for(n_prec, PRECISION_SHARE * budget) if n_prec else Fraction(0)
    grids, chosen, firsts = {}, {}, {}
    sd = _noise_sd(precision_noise, gaussian) if n_prec else 0.0
    for col in cols:
        prec, c = precs[col.name], counts[col.name]
        if prec is None:
            continue
        if c.precision is None:
            raise InputError(f"No precision counts were given for the numeric column {col.name!r}.")
        n1, n2 = prec.n_counts
        if len(c.precision) != n1 + n2:
            raise InputError(f"The precision counts of {col.name!r} do not fit its {len(prec.candidates)} candidate grids.")
        firsts[col.name] = _measure_precision(c.precision[:n1], sampler(precision_noise))
    # only columns whose released first histogram puts significantly more than ROUNDING_GAP_SHARE of
    # the rows off the regular choice can have a rounding gap that large: the exact budget is split
    # over them alone, and the others' part goes to the levels (adaptive composition: the decision
    # reads only released counts)
    exact = {c.name for c in cols if precs[c.name] is not None and precs[c.name].n_counts[1]
             and precs[c.name].may_need_exact(firsts[c.name], sd)}
    n_exact = len(exact)
    exact_noise = noise_for(n_exact, EXACT_PRECISION_SHARE * budget) if n_exact else None
    dg = rounding_gap_sensitivity(rel, max_contributions)
    gap_noise = noise_for(n_exact, ROUNDING_GAP_SHARE_OF_BUDGET * budget, dg, dg * dg) if n_exact else None
    sd_gap = None if gap_noise is None else _noise_sd(gap_noise, gaussian)
    # a column whose rounding gap could not be told from noise even if half its rows moved cannot get
    # an exact grid: its share of the exact budget goes to the levels instead (adaptive composition:
    # the decision reads only the released first histograms)
    unused = 0
    for col in cols:
        prec = precs[col.name]
        if prec is None:
            grids[col.name] = ColumnGrid.of(col, max_branching)
            continue
        c, noisy = counts[col.name], firsts[col.name]
        n1, n2 = prec.n_counts
        if col.name in exact and sd_gap is not None and ROUNDING_GAP_Z * sd_gap > EXACT_MIN_GAP * sum(noisy):
            unused += 1
        elif col.name in exact:
            assert exact_noise is not None and gap_noise is not None
            noisy += _measure_precision(c.precision[n1:], sampler(exact_noise))
            # how far rounding to the grid chosen so far would move the values (measured after that choice)
            finest = ColumnGrid.of(col, max_branching, prec.candidates[-1])
            if finest.decimals not in c.leaves:
                raise InputError(f"No leaf counts were given for the grid of 10^{-finest.decimals} of {col.name!r}.")
            gap = rounding_gap(*c.leaves[finest.decimals], finest, prec.regular_choice(noisy, sd))
            noisy += _measure_precision((gap,), sampler(gap_noise))
        chosen[col.name] = (prec, noisy)
        grids[col.name] = ColumnGrid.of(col, max_branching, prec.choose(
            noisy, sd, None if exact_noise is None else _noise_sd(exact_noise, gaussian), sd_gap))
    # 2. the rest of the budget, split equally over the levels of the chosen grids (none for a grid
    # with one point per bin)
    measured = {c.name: 0 if _one_point_per_bin_of(grids[c.name], c) else grids[c.name].levels for c in cols}
    level_part = (1 - (PRECISION_SHARE if n_prec else 0)
                  - ((EXACT_PRECISION_SHARE + ROUNDING_GAP_SHARE_OF_BUDGET) * Fraction(n_exact - unused, n_exact) if n_exact else 0))
    level_noise = noise_for(max(sum(measured.values()), 1), level_part * budget)
    b = max((g.branching for g in grids.values()), default=2)
    if gaussian:
        scale, sigma2 = None, level_noise
        threshold = math.sqrt(float(sigma2)) * NormalDist().inv_cdf(1.0 - 1.0 / (4 * b))
    else:
        scale, sigma2 = level_noise, None
        threshold = float(scale) * math.log(2 * b)  # an empty node reaches θ with probability ≈ 1/(4b)
    draw = sampler(level_noise)
    trees = {}
    for col in cols:
        g = grids[col.name]
        leaf_counts = counts[col.name].leaves
        if g.decimals not in leaf_counts:
            raise InputError(f"No leaf counts were given for the grid of 10^{-g.decimals} of {col.name!r}.")
        idx, n = (np.asarray(a, dtype=np.int64) for a in leaf_counts[g.decimals])
        if len(idx) != len(n) or (len(idx) and (idx.min() < 0 or idx.max() >= g.leaves or n.min() < 0)):
            raise InputError(f"The leaf counts of {col.name!r} do not fit its {g.leaves:,} leaves.")
        tree = _measure(idx, n, g, draw, threshold) if measured[col.name] else ColumnTree(g, (), ())
        trees[col.name] = ColumnTree(tree.grid, tree.nodes, tree.counts, chosen.get(col.name))
    return ValueModel(epsilon=eps, neighbours=rel, max_contributions=int(max_contributions), scale=scale,
                      threshold=threshold, trees=trees, rho=rho_v, sigma2=sigma2,
                      precision_noise=precision_noise if n_prec else None, exact_precision_noise=exact_noise,
                      rounding_gap_noise=gap_noise)


def _histogram_sensitivities(rel: Neighbours, max_contributions: int) -> tuple[int, int]:
    """L1 and squared L2 sensitivity of one histogram (a level of a tree, a precision count)."""
    return (hierarchical_histogram_l1_sensitivity(rel, max_contributions, 1),
            histogram_l2_sensitivity_squared(rel, max_contributions))


def _cost(param: Fraction, gaussian: bool, l1: int, l2sq: int) -> float:
    """What one query of these sensitivities costs with this noise: ρ = Δ₂²/(2σ²) or ε = Δ₁/scale."""
    return l2sq / (2 * float(param)) if gaussian else l1 / float(param)


def _noise_sd(param: Fraction, gaussian: bool) -> float:
    """Standard deviation of the noise: at most σ for the discrete Gaussian of σ², that of the discrete
    Laplace of scale ``param`` otherwise."""
    return math.sqrt(float(param)) if gaussian else discrete_laplace_std(param)


def _measure_precision(exact: tuple[int, ...], draw: Callable[[int], np.ndarray]) -> tuple[int, ...]:
    """Noisy counts of a column's rows per :meth:`Precision.classes` (a histogram: every cell gets noise)."""
    noisy = np.asarray(exact, dtype=np.int64) + draw(len(exact))
    return tuple(int(k) for k in noisy)


def _one_point_per_bin_of(g: ColumnGrid, col: NumericColumn) -> bool:
    """True when every bin of ``col`` holds exactly one point of the grid ``g`` (its bin is its value)."""
    lo, hi = g.bin_ranges(col)
    return g.width == 1 and bool(np.all(hi == lo))


def _column_values(data: pd.DataFrame | Mapping[str, np.ndarray], col: NumericColumn) -> np.ndarray:
    """Float64 values of ``col`` with NaN for empty (text parsed as :func:`dpsynth.binning.encode` does)."""
    if isinstance(data, pd.DataFrame):
        if col.name not in data.columns:
            raise InputError(f"The data has no column {col.name!r} named in the schema.")
        from dpsynth.binning import _to_float

        values, empty = _to_float(data[col.name], col.name)
        return np.where(empty, np.nan, values)
    if col.name not in data:
        raise InputError(f"The data has no column {col.name!r} named in the schema.")
    return np.asarray(data[col.name], dtype=np.float64)


def _measure(leaves: np.ndarray, weights: np.ndarray, g: ColumnGrid, draw: Callable[[int], np.ndarray],
             threshold: float) -> ColumnTree:
    """Noisy counts of the visited nodes, level by level, from the exact counts of the occupied leaves."""
    nodes, counts = [], []
    # counts of the visited nodes from the occupied leaves alone: a grid may have 2^30 leaves
    order = np.argsort(leaves, kind="stable")
    occupied = np.asarray(leaves, dtype=np.int64)[order]
    cum = np.r_[0, np.cumsum(np.rint(np.asarray(weights, dtype=np.float64)[order]).astype(np.int64))]
    visit = np.arange(g.n_nodes(1), dtype=np.int64)
    for level in range(1, g.levels + 1):
        w = g.node_width(level)
        exact = cum[np.searchsorted(occupied, (visit + 1) * w)] - cum[np.searchsorted(occupied, visit * w)]
        noisy = exact + draw(len(visit))
        nodes.append(visit)
        counts.append(noisy.astype(np.int64))
        if level == g.levels:
            break
        grow = visit[noisy >= threshold]
        child = (grow[:, None] * g.branching + np.arange(g.branching)[None, :]).ravel()
        visit = child[child < g.n_nodes(level + 1)]
    return ColumnTree(g, tuple(nodes), tuple(counts))


# -------------------------------------------------------------------------- post-processing


def _frontier(tree: ColumnTree, threshold: float, sd: float) -> tuple[np.ndarray, np.ndarray]:
    """A partition of the leaves into intervals (their first leaves, sorted) and a mass for each.

    Least-squares consistency (two passes) over the visited tree, each level smoothed (:func:`_smooth`),
    then the top-down non-negative split of the module docstring; ``sd`` is one node's noise standard
    deviation.
    """
    g = tree.grid
    h = len(tree.nodes)
    y = [c.astype(np.float64) for c in tree.counts]
    pos, expanded, x = _consistent(tree, y)
    # children at the noise level are shrunk towards their parent's line when the release is not all noise
    lines = float(np.sum(y[0])) >= PARENT_LINE_MIN_SNR * sd
    # top-down non-negative split; a virtual root holds the level-1 nodes. The intervals emitted
    # (every visited node that was not expanded, and the leaves) partition the leaves.
    width = [g.node_width(lv + 1) for lv in range(h)]

    def split(level: int, parent_of: np.ndarray, n_parents: int, parent_x: np.ndarray,
              parent_m: np.ndarray) -> np.ndarray:
        """Masses of the children at ``level`` given their parents' consistent estimates and masses."""
        size = _node_sizes(tree.nodes[level], width[level], g.leaves).astype(np.float64)
        xc = _smooth(x[level], tree.nodes[level], size, sd)
        if level > 0 and lines:
            kids = np.bincount(parent_of, minlength=n_parents)
            quiet = np.maximum(parent_x, 0.0) < PARENT_LINE_SDS * sd * np.maximum(kids, 1)
            if quiet.any():
                along = _smooth_along_parents(x[level], tree.nodes[level] * width[level] + size / 2.0, size,
                                              parent_of, parent_x, sd, PARENT_LINE_REACH * width[level - 1])
                xc = np.where(quiet[parent_of], along, xc)
        sig = y[level] >= threshold
        a = np.where(sig, np.maximum(xc, 0.0), 0.0)
        sum_a = np.bincount(parent_of, weights=a, minlength=n_parents)
        sum_sig_x = np.bincount(parent_of, weights=np.where(sig, xc, 0.0), minlength=n_parents)
        rest_size = np.bincount(parent_of, weights=np.where(sig, 0.0, size), minlength=n_parents)
        all_size = np.bincount(parent_of, weights=size, minlength=n_parents)
        rest = np.where(rest_size > 0, np.maximum(parent_x - sum_sig_x, 0.0), 0.0)
        denom = sum_a + rest
        ok = denom > 0
        f = np.where(ok, parent_m / np.where(ok, denom, 1.0), 0.0)[parent_of]
        # the remainder goes to the children below θ in proportion to their clamped consistent
        # counts plus a pseudo-count of SPLIT_PRIOR noise standard deviations (scaled by size): a
        # point mass just under θ keeps most of it, children at the noise level share it nearly evenly
        mean_size = all_size / np.maximum(np.bincount(parent_of, minlength=n_parents), 1)
        wr = np.where(sig, 0.0, np.maximum(xc, 0.0) + SPLIT_PRIOR * sd * size / np.maximum(mean_size[parent_of], 1.0))
        wsum = np.bincount(parent_of, weights=wr, minlength=n_parents)[parent_of]
        share_rest = np.where(wsum > 0, wr / np.where(wsum > 0, wsum, 1.0), size / np.maximum(rest_size[parent_of], 1.0))
        shared = np.where(sig, f * a, f * rest[parent_of] * share_rest)
        # no child holds mass: the parent's mass is spread evenly over its leaves
        even = parent_m[parent_of] * size / np.maximum(all_size[parent_of], 1.0)
        return np.where(ok[parent_of], shared, even)

    root_x = np.array([x[0].sum()])
    m = split(0, np.zeros(len(y[0]), dtype=np.int64), 1, root_x, np.maximum(root_x, 0.0))
    starts_out, mass_out = [], []
    for lv in range(h):
        done = ~expanded[lv]
        starts_out.append(tree.nodes[lv][done] * width[lv])
        mass_out.append(m[done])
        if lv < h - 1:
            m = split(lv + 1, pos[lv], len(m), x[lv], m)
    starts = np.concatenate(starts_out)
    mass = np.concatenate(mass_out)
    order = np.argsort(starts, kind="stable")
    return starts[order], mass[order]


def _consistent(tree: ColumnTree, y: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Least-squares consistency over the visited tree (Hay et al. 2010, two passes) of the counts ``y`` (per
    level, the visited nodes'): each level's parent positions, which nodes were expanded, and the consistent
    counts. Linear in ``y`` and unbiased."""
    h = len(tree.nodes)
    b = tree.grid.branching
    # the children of an expanded node are all visited, in order: their parent's position
    pos = [np.searchsorted(tree.nodes[lv], tree.nodes[lv + 1] // b) for lv in range(h - 1)]
    expanded = [np.bincount(pos[lv], minlength=len(y[lv])) > 0 for lv in range(h - 1)] + [np.zeros(len(y[-1]), bool)]
    # bottom-up: z = best estimate from the subtree, v its variance (unit: one node's noise variance)
    z: list[np.ndarray] = [np.empty(0)] * h
    v: list[np.ndarray] = [np.empty(0)] * h
    z[h - 1], v[h - 1] = np.array(y[h - 1], dtype=np.float64), np.ones(len(y[h - 1]))
    for lv in range(h - 2, -1, -1):
        sz = np.bincount(pos[lv], weights=z[lv + 1], minlength=len(y[lv]))
        sv = np.bincount(pos[lv], weights=v[lv + 1], minlength=len(y[lv]))
        e = expanded[lv]
        zz, vv = np.array(y[lv], dtype=np.float64), np.ones(len(y[lv]))
        w = 1.0 / np.where(e, sv, 1.0)
        zz[e] = ((y[lv] + sz * w) / (1.0 + w))[e]
        vv[e] = (1.0 / (1.0 + w))[e]
        z[lv], v[lv] = zz, vv
    # top-down: distribute each expanded node's residual over its children in proportion to their variances
    x = [z[0].copy()] + [np.empty(0)] * (h - 1)
    for lv in range(h - 1):
        sz = np.bincount(pos[lv], weights=z[lv + 1], minlength=len(y[lv]))
        sv = np.bincount(pos[lv], weights=v[lv + 1], minlength=len(y[lv]))
        p = pos[lv]
        x[lv + 1] = z[lv + 1] + v[lv + 1] / np.maximum(sv[p], 1e-300) * (x[lv] - sz)[p]
    return pos, expanded, x


def _consistent_frontier(tree: ColumnTree, counts: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The intervals of :func:`_frontier`'s partition (first leaves, sorted; numbers of leaves) and their
    consistent counts (:func:`_consistent`, no smoothing, no clamping) from ``counts``."""
    _, expanded, x = _consistent(tree, counts)
    starts = np.concatenate([tree.nodes[lv][~expanded[lv]] * tree.grid.node_width(lv + 1) for lv in range(len(x))])
    values = np.concatenate([x[lv][~expanded[lv]] for lv in range(len(x))])
    order = np.argsort(starts, kind="stable")
    starts = starts[order]
    return starts, np.diff(np.append(starts, tree.grid.leaves)), values[order]


def _smooth(x: np.ndarray, nodes: np.ndarray, size: np.ndarray, sd: float) -> np.ndarray:
    """One level's consistent counts ``x`` (visited ``nodes``, sorted, of ``size`` leaves), smoothed where
    the noise hides any shape (post-processing).

    A node's prior is its size times the mean density of its adjacent visited neighbours, the node
    itself left out, so the prior's error is independent of the node's noise: the difference d has
    variance s² = sd²(1 + 1/k), k ≤ 2 neighbours, plus the squared bias of the neighbours' mean. Nodes
    with two neighbours and |d| ≤ :data:`SMOOTH_Z`·s become prior + λd, λ = max(0, 1 − Σs²/Σd²) over
    such nodes within :data:`SMOOTH_WINDOW` places (the positive-part James–Stein estimator, James &
    Stein 1961, applied locally as in Efron & Morris 1975, "Data analysis using Stein's estimator and
    its generalizations"); the rest keep their counts. On a smooth column (ages, a lab value) at a
    few thousand rows, the level-1 nodes carry noise of a fifth or more of their counts and the
    within-bin shape came out jagged; on a point mass or a spike the difference is many s and
    the count is kept.
    """
    n = len(x)
    if n < 3:
        return x
    d = x / np.maximum(size, 1)
    left = np.r_[False, nodes[1:] == nodes[:-1] + 1]
    right = np.r_[nodes[:-1] + 1 == nodes[1:], False]
    both = left & right
    prior = np.zeros(n)
    prior[1:-1] = 0.5 * (d[:-2] + d[2:]) * size[1:-1]
    var = sd * sd * 1.5
    smooth = both & (np.abs(x - prior) <= SMOOTH_Z * math.sqrt(var))
    return _shrink(x, prior, var, smooth)


def _shrink(x: np.ndarray, prior: np.ndarray, var: float, smooth: np.ndarray) -> np.ndarray:
    """``x`` where not ``smooth``; elsewhere prior + λ·(x − prior), λ = max(0, 1 − Σvar/Σ(x − prior)²) over
    the smoothed nodes within :data:`SMOOTH_WINDOW` places (the positive-part James–Stein factor, local)."""
    n = len(x)
    dev = x - prior

    def window(a: np.ndarray) -> np.ndarray:
        c = np.r_[0.0, np.cumsum(a)]
        i = np.arange(n)
        return c[np.minimum(i + SMOOTH_WINDOW + 1, n)] - c[np.maximum(i - SMOOTH_WINDOW, 0)]

    ss = window(np.where(smooth, dev * dev, 0.0))
    vs = window(np.where(smooth, var, 0.0))
    lam = np.where(ss > 0, np.maximum(0.0, 1.0 - vs / np.where(ss > 0, ss, 1.0)), 0.0)
    return np.where(smooth, prior + lam * dev, x)


def _smooth_along_parents(x: np.ndarray, centre: np.ndarray, size: np.ndarray, parent_of: np.ndarray,
                          parent_x: np.ndarray, sd: float, reach: float) -> np.ndarray:
    """One level's consistent counts ``x`` (children at ``centre``, in leaves, of ``size`` leaves) shrunk
    towards a straight line through the children around them (post-processing).

    First the spikes: children more than :data:`SMOOTH_Z` noise sds from an even share of their parent
    (a point mass) are kept as they are. Then each child's prior is the least-squares line through the
    densities of the children (itself included, spikes not) whose centres lie within ``reach`` leaves of
    its own (weighted by size, across parent boundaries: :func:`_local_line`), evaluated at its centre, clamped at zero and
    scaled so that its parent's children add up to the parent's consistent count less its spikes; the
    spikes are found again against it. The other children become prior + λ·(x − prior), λ the
    positive-part James–Stein factor over :data:`SMOOTH_WINDOW` places either side (as :func:`_smooth`,
    whose prior is the mean of two noisy neighbours)."""
    n, m = len(x), len(parent_x)
    spike = np.zeros(n, dtype=bool)
    dens = x / np.maximum(size, 1.0)
    for flat in (True, False):
        keep = np.where(spike, 0.0, size)
        kept = np.bincount(parent_of, weights=keep, minlength=m)
        rest = np.maximum(parent_x - np.bincount(parent_of, weights=np.where(spike, x, 0.0), minlength=m), 0.0)
        even = rest[parent_of] * keep / np.maximum(kept[parent_of], 1.0)
        if flat:
            prior = even
        else:
            line = np.where(spike, 0.0, np.maximum(_local_line(centre, keep, dens, reach), 0.0) * size)
            total = np.bincount(parent_of, weights=line, minlength=m)[parent_of]
            prior = np.where(total > 0, line * rest[parent_of] / np.where(total > 0, total, 1.0), even)
        dev = x - prior
        spike = np.abs(dev) > SMOOTH_Z * sd

    return _shrink(x, prior, sd * sd, ~spike)


def _local_line(centre: np.ndarray, weight: np.ndarray, y: np.ndarray, reach: float) -> np.ndarray:
    """At each of the sorted ``centre``s, the ``weight``-ed least-squares line through the ``y`` of the
    points within ``reach`` of it, evaluated there (local linear regression with a box kernel, Fan &
    Gijbels 1996, "Local polynomial modelling and its applications"); the weighted mean where the
    points cannot fix a slope. Vectorised over offsets: a window holds at most a few dozen nodes."""
    n = len(centre)
    if n == 0:
        return np.zeros(0)
    lo = np.searchsorted(centre, centre - reach, side="left")
    hi = np.searchsorted(centre, centre + reach, side="right")
    i = np.arange(n)
    s0, s1, s2, t0, t1 = (np.zeros(n) for _ in range(5))
    for k in range(-int(np.max(i - lo)), int(np.max(hi - i))):
        j = i + k
        inside = (j >= lo) & (j < hi)
        jj = np.clip(j, 0, n - 1)
        w = np.where(inside, weight[jj], 0.0)
        u = (centre[jj] - centre) / max(reach, 1e-300)
        s0 += w
        s1 += w * u
        s2 += w * u * u
        t0 += w * y[jj]
        t1 += w * u * y[jj]
    det = s0 * s2 - s1 * s1
    ok = det > 1e-9 * np.maximum(s0 * s2, 1e-300)
    mean = t0 / np.maximum(s0, 1e-300)
    return np.where(ok, (s2 * t0 - s1 * t1) / np.where(ok, det, 1.0), mean)


def _node_sizes(idx: np.ndarray, width: int, leaves: int) -> np.ndarray:
    """Leaves under each node (the last node of a level may be short)."""
    return np.minimum((idx + 1) * width, leaves) - idx * width
