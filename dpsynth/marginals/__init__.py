"""Many columns: select–measure–reconstruct with a junction tree grown from noisy marginals.

When the full histogram is too large (Adult: ~10¹⁵ cells) we measure a few small noisy
marginals chosen well, fit a graphical model consistent with them, and sample rows from it
(Kifer, "Basic DP algorithms and statistics", "Select-Measure-Reconstruct" [LHR+10]; MST [McKenna et al. 2021]; PrivBayes [Zhang
et al. 2017]; AIM [McKenna et al. 2022]). Our design is an *AIM-lite on a growing junction tree*,
all in numpy:

1. **One-way marginals** of every column are measured (budget share ``ONE_WAY_SHARE``); they
   seed the model, and when the capacity plan buys a second installment they are observations of
   every fit too. A release with a value model (:mod:`dpsynth.value_model`, measured first) passes its
   released bin counts of the numeric columns in as further one-ways (``one_way_observations``, with
   a stated noise variance): post-processing of a release whose cost the release already counts, so a
   numeric column's one-way costs the method nothing more, and its rounds are not spent measuring it
   again (the counts are the tree's unbiased least-squares estimates, :meth:`ValueModel.bin_counts`).
   At ε = 1 over 24 seeds: 0.985 / 0.988 × the 2-/3-way TVD over the 14 tables with AIM runs
   (``benchmarks/peers/aim_suite.py``; Wages −4% / −2%, mdvis −3% / −4%).
2. **Rounds** (``ROUNDS_PER_COLUMN·(d−1)`` of them). Each round selects one two-way marginal with
   the exponential mechanism and measures it. The model is a junction tree whose cliques are
   *larger* than what we measure (as in Private-PGM): round 1 picks the root pair; a round may
   *attach* a new column ``x`` through a pair ``{x, u}`` (new clique ``{x, u}``, child of the latest
   of the largest cliques holding ``u``, so the tree grows in chains), *grow* the clique of ``x`` by
   a column ``v`` of its parent clique (measuring ``{x, v}``; clique ``{x} ∪ S`` becomes
   ``{x} ∪ S ∪ {v}``, still a junction tree), or measure an earlier pair *again*. When the rounds
   left equal the columns still outside the model, only attachments are offered, so every column
   joins. Cliques are capped in columns and cells by the capacity plan (``CLIQUE_LIMITS``: larger
   when the measurements are cleaner). From a pair signal-to-noise of ``budget.INSIDE_SNR``,
   ``budget.INSIDE_ROUNDS_PER_COLUMN`` rounds per column follow the tree's and may also measure a
   three-way table *inside* a clique that no round measured (the structure stays as it is): a clique
   holds columns that no measurement saw together, and the fit fills their table by maximum entropy.

   The score of a candidate ``m`` is AIM's [McKenna et al. 2022, §4]:
   ``q(m) = ‖M_m(D) − M̂_m‖₁ − c·E‖noise_m‖₁``, where ``M̂_m`` is the current model's estimate of
   the marginal (a function of earlier noisy releases only) and the last term, data-independent,
   is the expected L1 size of the noise the measurement would add (√(2/π)·σ per cell for the
   Gaussian), weighted by ``PENALTY_FACTOR``. Adding or removing one person changes ``q`` by at
   most the histogram's L1 sensitivity Δ₁ (:mod:`dpsynth.neighbours`); that is the sensitivity
   the exponential mechanism uses. For a marginal measured before, the gap is capped at the
   expected L1 noise of its earlier measurements and scaled by the share of that noise a new
   measurement removes (``fit._again_gain``): the raw gap also counts how far the few
   warm-started fitting steps are from the measurements, which measuring again does not mend.
   Both factors are public, so the sensitivity is unchanged. While the one-ways are observations
   of the fit, from a pair signal-to-noise of ``budget.ONE_WAYS_AGAIN_SNR``, the one-way of each
   column in the model is a candidate to measure again too, scored by its whole gap as AIM scores
   it: the rounds then spend on a column's one-way where the fitted one-way is still far from the
   data (a nearly constant or nearly independent column), as AIM's do. A round with a single
   candidate spends nothing on selection.
3. **Estimation** (post-processing): after every round, and for ``fit.MOMENTUM_ITERS`` steps at the
   end (``ESTIMATION_ITERS`` on the wide path), the junction-tree model is fitted to *all* measurements so far
   by entropic mirror descent on Σ‖M_m(μ) − y_m‖²/Var_m with exact sum-product inference (Private-PGM
   [McKenna et al. 2019], re-implemented for junction trees). The final steps carry momentum
   (``fit.MOMENTUM``) and stop early once that loss is down to ``fit.DISCREPANCY`` per measured cell (1 in
   expectation at the truth): beyond it they fit noise.
   A measured pair or triple whose noisy table is within its noise of the product of its own noisy
   one-way margins (``fit.independent_within_noise``, a pretest at ``fit.INDEPENDENCE_Z``) enters the
   fit as that product: an interaction that is all noise would be copied into the model. The model
   file keeps every table as measured. The noisy total ``N̂`` is the inverse-variance mean of the
   sums of all measured tables. The fit holds the columns fewest cells first (``fit.layout``, from
   the public sizes), so each clique table's contiguous last axis is its largest column (numpy's
   inner loops run along it); the returned model names the table's columns in their order.
4. **Pair factors** (``budget.PAIR_FACTOR_TIERS`` rounds, from a signal-to-noise of 15): rounds
   after the tree's that select (exponential mechanism, the same score against the model's table
   read off a working sample of it, ``fit.FACTOR_WORK_ROWS`` rows whatever the table's size) and
   measure pairs of columns that no clique holds — the cell
   caps keep e.g. Adult's age and hours worked apart — and turn each into log-linear terms that
   redraw one column of the sampled rows through a maximal coupling, keeping the other tables the
   model holds with it (:mod:`~dpsynth.marginals.pair_factors`). They take the budget of as many
   rounds; when fewer pairs lie outside the cliques, the spare rounds go to the tree.
5. **Sampling** (post-processing): the fitted model, written as a Bayesian network in clique
   order (``P(new column | separator)`` per clique), is sampled ancestrally with systematic draws
   inside each separator configuration (counts within one of the model's, as Private-PGM's
   sampler rounds them), vectorised per clique for all rows (O(rows·log rows × columns)). The
   released conditional tables are rounded to ``fit.CPT_DECIMALS`` decimals (a smaller model.json)
   and every row is scaled to sum to 1 where it is used (``Step.probs``, the sampler's CDF).

Guarantees of the stages and how they compose (sensitivities from :mod:`dpsynth.neighbours`):

=====================  ==================================  =================================
stage                  δ > 0 (zCDP accounting)              δ = 0 (pure DP)
=====================  ==================================  =================================
one-way marginals      discrete Gaussian, ρ = Δ₂²/(2σ²)     discrete Laplace, ε = Δ₁/scale
                       each [CKS20, Thm 4]                  each [GRS09]
selection, per round   exponential mechanism at ε_t:       exponential mechanism at ε_t:
                       ρ = ε_t²/8 [Cesar & Rogers 2021]     ε_t-DP [McSherry & Talwar 2007]
measurement, per round discrete Gaussian, ρ = Δ₂²/(2σ²)     discrete Laplace, ε = Δ₁/scale
estimation, sampling   post-processing (free)               post-processing (free)
composition            adaptive: ρ adds [BS16, Lemma 2.3];  adaptive basic composition: ε adds
                       total ρ → (ε, δ) by [CKS20, Cor. 13]
=====================  ==================================  =================================

A pair factor's round is a round like the tree's (one selection, one measurement); fitting the
factor and applying it to the rows are post-processing.

Budget: ``ONE_WAY_SHARE`` (``ONE_WAY_SHARE_PURE`` of ε under pure DP) and ``SELECT_SHARE`` of the total
(ρ or ε) go to the one-ways and the selections (split evenly over the rounds); the rest goes to the round measurements, each round
taking its share of what is left in proportion to cells^``ALLOC_POWER`` of its marginal. Every
round's budget is fixed before the round looks at the data (it depends on public sizes and
earlier releases only), so the composition is the standard adaptive one; noise parameters are
rounded toward *more* noise, so the actual spend is at or below the plan (``describe()``).

Capacity (:func:`dpsynth.marginals.budget.capacity`, on the card as ``capacity``): decided after
the one-ways from public sizes, the budget and the released noisy total and one-ways, by the
signal-to-noise of a typical pair measurement (noisy total ÷ its expected L1 noise). Below
``ONE_WAY_MORE_SNR`` (30), a second installment of ``ONE_WAY_SHARE`` goes to the one-ways, and below
``ONE_WAY_GROW_SNR`` (10) a larger one, ``ONE_WAY_SHARE``·√(30 ÷ signal-to-noise). Below 10,
``LOW_SNR_ROUNDS_PER_COLUMN`` rounds per column instead of ``ROUNDS_PER_COLUMN`` (fewer, cleaner
measurements); from 10, three-way measurements are offered (each once, its new clique the child of the
largest clique holding its other two columns) and cliques may hold 7 columns and 500,000 cells (5
and 100,000 below); from 50 (``PROPORTIONAL_SNR``), the final estimation starts
with proportional-fitting steps, so small cells reach their measurements too; from 100, the
mirror-descent iterations of each round double and cliques may hold 1,000,000 cells (the fit, not
the noise, then limits the model) (``CLIQUE_LIMITS``), and a table of 11 columns or more runs at least
``PAIR_ROUNDS_SHARE`` (0.6) of its pairs as rounds rather than 3 per column (``PAIR_ROUNDS_SNR``); with
proportional steps the final estimation runs 4/3 × ``ESTIMATION_ITERS`` iterations, half of them proportional.
Tables of more than ``WIDE_COLUMNS`` columns take one round per column, scored
against independence of the released one-ways (no refit between rounds); there, if the pairs
would raise the expected one-column TVD above ``ONE_WAY_SLACK`` × that of independent noisy
one-ways spending the whole budget, or their noise above ``ONE_WAY_FLOOR`` × theirs, a second
installment of one-ways takes the difference (all of the rest when no pair is worth it; under pure DP
the first installment is ``WIDE_ONE_WAY_SHARE_PURE``), and the fitted model is raked to the inverse-variance
mean of every released table summed onto each column (damped steps that shrink until they gain:
``TreeModel.rake``). On any
table, when a typical pair's expected L1 noise would exceed the noisy total, no typical pair is
worth measuring: the rounds (``SMALL_PAIRS_PER_COLUMN`` per column) then offer only the pairs of so few
cells that their expected L1 noise stays under 1/``SMALL_PAIR_SNR`` of the noisy total (a yes/no
column's pairs), paid for by the second one-way installment of the columns such a pair may hold (each
keeps ``SMALL_PAIRS_ONE_WAY`` of its share; a round spends one column's rest); after the rounds what they
left buys one-ways again, first of the columns that paid and no measured pair holds, and the fitted model
is raked to every released table summed onto each column (``budget.small_pairs``). With no pair that
small, none is measured and the whole budget goes to the one-ways (independent columns).

Caveat: the exponential mechanism's probabilities are computed in floating point (see
:func:`dpsynth.mechanisms.exponential_mechanism`); counts get exact integer noise.

Modules: :mod:`~dpsynth.marginals.model` (the released model, sampling, JSON),
:mod:`~dpsynth.marginals.budget` (shares, allocation, the mechanism of each measurement, the
card's stages), :mod:`~dpsynth.marginals.estimation` (junction tree, mirror descent,
projections; post-processing only), :mod:`~dpsynth.marginals.pair_factors` (pair factors:
fitting and applying them; post-processing only) and :mod:`~dpsynth.marginals.fit` (the rounds and
:func:`fit_marginal_model`, the only code that reads the data).
"""

from dpsynth.marginals.estimation import project_simplex
from dpsynth.marginals.fit import Progress, fit_marginal_model
from dpsynth.marginals.model import FORMAT, MarginalModel, Step

__all__ = ["FORMAT", "MarginalModel", "Progress", "Step", "fit_marginal_model", "project_simplex"]
