"""Estimation (post-processing of released measurements): the growing junction tree, exact
inference on it, and the fit of its potentials to the noisy marginals.

- :class:`TreeModel` — the current junction tree (a forest of cliques with parents earlier in
  the list), its log-potentials and measurements; the candidates a selection round may pick and
  the model's estimate of each (what the selection score compares the data with).
- :class:`JunctionTree` — exact sum-product on such a tree.
- :func:`mirror_descent` — entropic mirror descent on Σ‖M_m(μ) − y_m‖²/Var_m (McKenna et al.
  2019, Private-PGM), re-implemented for junction trees.
- :func:`project_simplex` — Euclidean projection of a noisy table onto counts with a given total.

Nothing here reads the data: every input is a released noisy table or a public size.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from dpsynth.marginals.model import Step

#: First damping of the one-way raking (:meth:`TreeModel.rake`): each column's correction is applied at
#: this fraction, halved whenever an iteration would not bring the one-ways closer to their targets …
RAKE_STEP = 0.5
#: … until it falls below this (then the raking stops where it stands) …
RAKE_MIN_STEP = 1.0 / 64
#: … or until the mean Kullback–Leibler divergence of the one-ways from their targets is this small
#: (a total-variation distance of about 10^-5, far below any release's noise).
RAKE_TOLERANCE = 1e-10


def project_simplex(y: np.ndarray, total: float) -> np.ndarray:
    """Euclidean projection of ``y`` onto ``{t ≥ 0, Σt = total}`` (Duchi et al. 2008; O(m log m))."""
    v = np.asarray(y, dtype=np.float64).ravel()
    if total <= 0:
        return np.zeros_like(np.asarray(y, dtype=np.float64))
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - total
    ind = np.arange(1, v.size + 1)
    cond = u - css / ind > 0
    r = ind[cond][-1]
    theta = css[cond][-1] / r
    return np.maximum(v - theta, 0.0).reshape(np.shape(y))


def sum_to(table: np.ndarray, keep: Sequence[int]) -> np.ndarray:
    """Sum ``table`` over every axis not in ``keep`` (increasing), keeping those axes in order.

    numpy's reductions over scattered or short contiguous axes are slow (strided loops, transposed
    copies). Consecutive axes are merged into runs, and each run of dropped axes, from the last to
    the first, is summed as a product with a vector of ones (a BLAS matrix–vector product, or a
    stack of them for an inner run): no copy, several times faster. The runs of each (shape, keep)
    are worked out once (:func:`_sum_plan`): a fit sums the same few shapes tens of thousands of times.
    """
    if len(keep) == table.ndim:
        return table
    t = table
    for before, m, after, ones in _sum_plan(table.shape, tuple(keep), table.dtype.str):
        if after == 1:
            t = t.reshape(before, m) @ ones
        elif before == 1:
            t = ones @ t.reshape(m, after)
        else:
            t = np.matmul(ones, t.reshape(before, m, after))
    return np.asarray(t).reshape([table.shape[i] for i in keep])


@functools.lru_cache(maxsize=4096)
def _sum_plan(shape: tuple[int, ...], keep: tuple[int, ...], dtype: str) -> tuple[tuple[int, int, int, np.ndarray], ...]:
    """:func:`sum_to`'s products, last run first: (size before, size summed, size after, ones)."""
    kset = set(keep)
    runs: list[list] = []  # [kept?, merged size]
    for i, size in enumerate(shape):
        if runs and runs[-1][0] == (i in kset):
            runs[-1][1] *= size
        else:
            runs.append([i in kset, size])
    plan = []
    for r in range(len(runs) - 1, -1, -1):
        kept, m = runs[r]
        if kept:
            continue
        before = math.prod(s for _, s in runs[:r])
        after = math.prod(s for _, s in runs[r + 1:])
        ones = np.ones(m, dtype=np.dtype(dtype))
        ones.flags.writeable = False
        plan.append((before, m, after, ones))
        runs.pop(r)
    return tuple(plan)


@dataclass(frozen=True)
class Candidate:
    """One option of a round: measure ``measure``; ``kind`` says how the model changes."""

    kind: str  # "alone", "root", "attach", "grow", "again" or "inside"
    measure: tuple[int, ...]
    new: int = -1  # the column that joins (attach) or whose clique grows (grow)
    clique: int = -1  # attach: the parent clique; grow: the clique that grows


class TreeModel:
    """The current junction tree (cliques, parents, log-potentials) and its measurements.

    Every clique but a root (the first pair, or a column that joined alone) holds exactly one
    column that no earlier clique holds (its *new* column); its separator (the other columns)
    lies inside its parent clique. The cliques form a junction tree (a forest) at every step,
    so sampling and inference are exact.

    Capacity (public): cliques of at most ``max_cols`` columns and ``max_cells`` cells;
    ``triples`` offers three-way measurements when a column joins; ``alone`` offers "join
    alone" (no pair measured) for each column not yet in the model; ``one_ways_again`` offers
    measuring again the one-way of each column in the model, when the one-ways are observations;
    ``inside`` (an attribute the fit sets per round) offers the three-way tables inside a clique that no round measured
    (kind "inside": a measurement that leaves the structure as it is, like "again").
    """

    def __init__(self, sizes: tuple[int, ...], one_way: list[np.ndarray], total: float, *,
                 max_cells: int, max_cols: int, triples: bool = False, alone: bool = True,
                 one_ways_again: bool = False) -> None:
        self.sizes = sizes
        self.inside = False  # set per round by the fit (budget.INSIDE_SNR)
        self.max_cells = max_cells
        self.max_cols = max_cols
        self.triples = triples
        self.alone = alone
        self.one_ways_again = one_ways_again
        self.one_way = one_way
        self.total = total
        self.cliques: list[tuple[int, ...]] = []
        self.parent: list[int] = []
        self.new: list[int] = []  # new column of each clique (-1 for the root)
        self.theta: list[np.ndarray] = []
        self.obs: list[tuple[tuple[int, ...], np.ndarray, float]] = []
        self.mu: list[np.ndarray] = []
        self.eta: float | None = None

    # -- structure ------------------------------------------------------------------------------

    @property
    def attached(self) -> set[int]:
        return {c for cl in self.cliques for c in cl}

    def rounds_needed(self) -> int:
        left = len(self.sizes) - len(self.attached)
        return left - 1 if not self.cliques else left

    def _cells(self, cols: Sequence[int]) -> int:
        return math.prod(self.sizes[c] for c in cols)

    def candidates(self, must_attach: bool) -> list[Candidate]:
        d = len(self.sizes)
        out: list[Candidate] = []
        att = self.attached
        if self.alone:
            # A column may join on its own (its one-way only): the right call when no pair is
            # worth its noise. Score 0: no gain, no noise.
            out.extend(Candidate("alone", (), new=x) for x in range(d) if x not in att)
        if not self.cliques:
            return out + [Candidate("root", (u, v)) for u, v in combinations(range(d), 2)
                          if self._cells((u, v)) <= self.max_cells]
        # The largest clique holding u, the last such in clique order, once per column. A clique grows only by
        # its parent's columns, so a column that joins under the first of equally large cliques (the root pair)
        # fans out beside the others and can never be measured with them: on the Garch rates (1,867 rows, seven
        # columns) at ε = 10 with three rounds per column, dm and bp joined as siblings under the root, their pair
        # stayed at 0.255 TVD, and the last seven rounds had only measurements again to choose from (2-way 0.065;
        # joining under the latest such clique, which makes chains: 0.040). Paired releases (6 seeds at ε = 10, 2-/
        # 3-way ÷ the sampling floor) on the 15 of 74 real tables it changed at 2 seeds: Cigar −0.07 / −0.08,
        # Forbes2000 −0.08 / −0.05, ModeChoice −0.05 / −0.07, GaltonFamilies −0.05 / −0.06, Tobacco and Housing
        # −0.02 to −0.04; iqitems +0.04 / +0.03, politicalInformation +0.03 / +0.03. The 14 tables with AIM runs:
        # 0.998 / 0.998 at ε = 1 (24 seeds), 1.003 / 1.001 at ε = 3 (12 seeds); Adult at ε = 1 −0.00005 / −0.0002 (8 seeds).
        home: dict[int, int] = {}
        for i, cl in enumerate(self.cliques):
            for u in cl:
                if u not in home or len(cl) >= len(self.cliques[home[u]]):
                    home[u] = i
        for x in range(d):
            if x in att:
                continue
            for u in sorted(att):
                if self._cells((x, u)) > self.max_cells:
                    continue
                out.append(Candidate("attach", tuple(sorted((x, u))), new=x, clique=home[u]))
            if self.triples:
                # One candidate per three-way table, its parent the largest clique holding the other two
                # columns. Offered once under every such clique, a table had as many times the selection's
                # weight, and the clique it joined (the exponential mechanism's pick among equal scores) fixed
                # which columns its clique could ever grow by (those of its parent): on the Tuna table (13,705
                # rows, eight columns of 5–10 bins) at ε = 10 a price column joined beside the root, below
                # no column joined after it, and the 3-way TVD stayed at 1.53 × the sampling floor in six
                # releases out of six (1.18 with this rule). On 52 real tables of 800–54,000 rows
                # (benchmarks/tables/fetch_rdatasets.py, 6 seeds at ε = 10) 2-/3-way TVD −0.3% / −0.3%
                # (geometric mean; Tuna −0.41 / −0.35 × the floor, ability −0.11 / −0.12, the largest loss
                # medpar +0.06 / +0.05 ± 0.04), 17 unchanged; the first such clique instead of the largest
                # gave +0.7% / +0.3%. Paired releases at ε = 1 (6–8 seeds): Adult, the census and
                # hospital extracts, the nearly independent table and the questionnaire within ± 0.0004.
                parent_of: dict[tuple[int, ...], int] = {}
                for i, cl in enumerate(self.cliques):
                    for u, v in combinations(cl, 2):
                        m = tuple(sorted((x, u, v)))
                        if self._cells(m) <= self.max_cells and (
                                m not in parent_of or len(cl) > len(self.cliques[parent_of[m]])):
                            parent_of[m] = i
                out.extend(Candidate("attach", m, new=x, clique=i) for m, i in parent_of.items())
        if must_attach and out:
            return out
        for i, cl in enumerate(self.cliques):
            p = self.parent[i]
            if p < 0 or len(cl) >= self.max_cols:
                continue
            x = self.new[i]
            for v in self.cliques[p]:
                if v not in cl and self._cells(cl + (v,)) <= self.max_cells:
                    out.append(Candidate("grow", tuple(sorted((x, v))), new=x, clique=i))
        if self.inside:  # cliques' columns are sorted, so are their triples
            measured = {m for m, _, _ in self.obs}
            inside = {m for cl in self.cliques for m in combinations(cl, 3)} - measured
            out.extend(Candidate("inside", m) for m in sorted(inside))
        seen = set()
        for m, _, _ in self.obs:
            if (len(m) > 1 or (self.one_ways_again and m[0] in att)) and m not in seen:
                seen.add(m)
                out.append(Candidate("again", m))
        return out

    def apply(self, cand: Candidate, y: np.ndarray, variance: float) -> None:
        """Record the measurement and change the structure (the distribution is unchanged)."""
        if cand.measure:
            self.obs.append((cand.measure, y.astype(np.float64), variance))
        if cand.kind == "alone":
            self.cliques.append((cand.new,))
            self.parent.append(-1)
            self.new.append(-1)
            self.theta.append(self._independent((cand.new,)))
        elif cand.kind == "root":
            self.cliques.append(cand.measure)
            self.parent.append(-1)
            self.new.append(-1)
            self.theta.append(self._independent(cand.measure))
        elif cand.kind == "attach":
            x = cand.new
            self.cliques.append(cand.measure)
            self.parent.append(cand.clique)
            self.new.append(x)
            # x joins independent of its separator: log P(x) broadcast.
            shape = [self.sizes[c] if c == x else 1 for c in cand.measure]
            self.theta.append(np.broadcast_to(np.log(np.maximum(self.one_way[x], 1e-30)).reshape(shape),
                                              [self.sizes[c] for c in cand.measure]).copy())
        elif cand.kind == "grow":
            i = cand.clique
            old = self.cliques[i]
            v = next(c for c in cand.measure if c != cand.new)
            grown = tuple(sorted(old + (v,)))
            # Extending a potential along a new axis leaves the distribution unchanged: v is
            # already in the parent clique, and the new clique's factor does not depend on it.
            th = np.expand_dims(self.theta[i], grown.index(v))
            self.theta[i] = np.broadcast_to(th, [self.sizes[c] for c in grown]).copy()
            self.cliques[i] = grown
        self.mu = []

    def measured_variance(self, cols: tuple[int, ...]) -> float:
        """Noise variance per cell of the inverse-variance mean of the measurements of ``cols``."""
        return 1.0 / sum(1.0 / v for m, _, v in self.obs if m == cols)

    def _independent(self, cols: tuple[int, ...]) -> np.ndarray:
        th = np.zeros([self.sizes[c] for c in cols])
        for k, c in enumerate(cols):
            shape = [1] * len(cols)
            shape[k] = self.sizes[c]
            th = th + np.log(np.maximum(self.one_way[c], 1e-30)).reshape(shape)
        return th

    # -- inference ------------------------------------------------------------------------------

    def _tree(self) -> JunctionTree:
        return JunctionTree(self.sizes, self.cliques, self.parent)

    def fit(self, iters: int, precondition: float = 0.0, discrepancy: float | None = None,
            momentum: float = 0.0) -> None:
        """Mirror descent on all measurements so far (post-processing).

        With ``precondition`` κ > 0 the first half of the iterations take the proportional-fitting
        steps of :func:`mirror_descent` (a fresh step size), the second half the plain steps; with
        ``discrepancy`` the plain steps stop early, and with ``momentum`` they carry it (:func:`mirror_descent`).
        """
        if not self.cliques:
            return
        tree = self._tree()
        obs = []
        for m, y, var in self.obs:
            # The smallest clique holding the measured columns (cheapest to marginalise).
            ci = min((i for i, cl in enumerate(self.cliques) if set(m) <= set(cl)),
                     key=lambda i: self._cells(self.cliques[i]), default=-1)
            if ci >= 0:  # one-ways of columns not yet in the model wait until they join
                obs.append((ci, tuple(self.cliques[ci].index(c) for c in m), y, var))
        if iters > 0 and precondition > 0:
            first = iters // 2
            self.theta, _ = mirror_descent(tree, self.theta, obs, self.total, first, None, precondition=precondition)
            iters -= first
        if iters > 0:
            self.theta, self.eta = mirror_descent(tree, self.theta, obs, self.total, iters, self.eta,
                                                  discrepancy=discrepancy, momentum=momentum)
        self.mu = tree.marginals(self.theta, self.total)

    def rake(self, targets: list[np.ndarray], iters: int) -> None:
        """Bring every column's model marginal towards ``targets[j]`` (proportions; post-processing).

        Multiplying one clique's potential by f(x_j) multiplies the joint by f(x_j), so
        f = target/current sets P(x_j) exactly; all columns are updated together from one
        inference pass per iteration (iterative proportional fitting, Jacobi order), each update
        damped by a step that starts at :data:`RAKE_STEP` and halves whenever the iteration would
        not bring the one-ways closer to their targets (mean Kullback–Leibler divergence: smooth, so
        a small enough step always gains), which is then undone: the result is never further from
        the targets than the fit. Columns interact through their cliques, and on a long chain of
        strongly dependent columns the undamped Jacobi sweep overshoots: a 25-column random walk in
        8 bins (50,000 rows, ε = 1) went from a one-way distance of 0.009 to 0.46 with a fixed step
        of 0.5. Sixty near-copies of one binary column need steps of about 1/60; with the total
        variation distance as the yardstick (not smooth) the step had collapsed before that and
        the one-ways stayed 1.6× as far from the data as independent noisy one-ways.
        """
        if not self.cliques:
            return
        tree = self._tree()
        home = {}
        for i, cl in enumerate(self.cliques):
            for c in cl:
                home.setdefault(c, i)

        def one_way(mu: list[np.ndarray], c: int) -> np.ndarray:
            cl = self.cliques[home[c]]
            cur = mu[home[c]].sum(axis=tuple(k for k, x in enumerate(cl) if x != c))
            return cur / max(float(cur.sum()), 1e-300)

        logt = {c: np.log(np.maximum(targets[c], 1e-30)) for c in home}

        def gap(mu: list[np.ndarray]) -> float:
            """Mean Kullback–Leibler divergence of the model's one-ways from their targets."""
            return float(np.mean([np.sum(targets[c] * (logt[c] - np.log(np.maximum(one_way(mu, c), 1e-30))))
                                  for c in home]))

        mu = tree.marginals(self.theta, self.total)
        err, step = gap(mu), RAKE_STEP
        for _ in range(iters):
            if err <= RAKE_TOLERANCE:
                break
            theta = list(self.theta)
            for c, i in home.items():
                f = logt[c] - np.log(np.maximum(one_way(mu, c), 1e-30))
                shape = [self.sizes[k] if k == c else 1 for k in self.cliques[i]]
                theta[i] = theta[i] + step * f.reshape(shape)
            trial = tree.marginals(theta, self.total)
            trial_err = gap(trial)
            if trial_err < err:
                self.theta, mu, err = theta, trial, trial_err
                step = min(step * 1.25, RAKE_STEP)
            else:
                step /= 2
                if step < RAKE_MIN_STEP:
                    break
        self.mu = mu

    def _marg(self, cols: tuple[int, ...]) -> np.ndarray:
        """Model counts on ``cols`` (axes in sorted order); ``cols`` must lie in one clique."""
        i = next(i for i, cl in enumerate(self.cliques) if set(cols) <= set(cl))
        cl = self.cliques[i]
        drop = tuple(k for k, c in enumerate(cl) if c not in cols)
        return self.mu[i].sum(axis=drop) if drop else self.mu[i]

    def estimate(self, cand: Candidate) -> np.ndarray:
        """The current model's counts on ``cand.measure`` (axes in sorted order)."""
        m = cand.measure
        if cand.kind == "root":
            a, b = (self.one_way[c] for c in m)
            return self.total * np.outer(a, b)
        if not self.mu:
            self.fit(0)
        if cand.kind in ("again", "inside"):
            return self._marg(m)
        x = cand.new
        if cand.kind == "attach":
            sep = tuple(c for c in m if c != x)
            known = self._marg(sep)  # counts, axes sorted
            px = self.one_way[x]
            pos = m.index(x)
            return np.expand_dims(known, pos) * px.reshape([self.sizes[x] if c == x else 1 for c in m])
        # grow: x ⟂ v given the separator S of x's clique C; P(x, v) = Σ_S P(x, S) P(v | S).
        i = cand.clique
        cl = self.cliques[i]
        v = next(c for c in m if c != x)
        sep = tuple(c for c in cl if c != x)
        a = self._marg(tuple(sorted(sep + (x,))))  # axes sorted(sep ∪ {x})
        a = np.moveaxis(a, tuple(sorted(sep + (x,))).index(x), 0).reshape(self.sizes[x], -1)
        b = self._marg(tuple(sorted(sep + (v,))))
        b = np.moveaxis(b, tuple(sorted(sep + (v,))).index(v), -1).reshape(-1, self.sizes[v])
        cond = b / np.maximum(b.sum(axis=1, keepdims=True), 1e-300)
        xv = a @ cond  # axes (x, v)
        return xv if x < v else xv.T

    def steps(self) -> list[Step]:
        """The fitted model as a Bayesian network in clique order (what the sampler runs)."""
        d = len(self.sizes)
        if not self.cliques:
            return [Step(new=(j,), parents=(), cpt=self.one_way[j][None, :]) for j in range(d)]
        if not self.mu:
            self.fit(0)
        out: list[Step] = []
        for i, cl in enumerate(self.cliques):
            mu = self.mu[i]
            if self.parent[i] < 0:
                out.append(Step(new=cl, parents=(), cpt=(mu / max(mu.sum(), 1e-300)).reshape(1, -1)))
                continue
            x = self.new[i]
            sep = tuple(c for c in cl if c != x)
            t = np.moveaxis(mu, cl.index(x), -1).reshape(self._cells(sep), self.sizes[x])
            rs = t.sum(axis=1, keepdims=True)
            # A separator cell whose probability underflowed is never sampled; give it a valid row anyway.
            cpt = np.where(rs > 0, t / np.where(rs > 0, rs, 1.0), 1.0 / t.shape[1])
            out.append(Step(new=(x,), parents=sep, cpt=cpt))
        return out


class JunctionTree:
    """Cliques (sorted column tuples) with parents earlier in the list; exact inference."""

    def __init__(self, sizes: tuple[int, ...], cliques: list[tuple[int, ...]], parent: list[int]) -> None:
        self.sizes = sizes
        self.cliques = cliques
        self.parent = parent

    def _msg(self, table: np.ndarray, src: int, dst: int) -> np.ndarray:
        """Sum of ``table`` (on clique src) onto the separator, rescaled to max 1, shaped for dst."""
        a, b = self.cliques[src], self.cliques[dst]
        m = sum_to(table, [i for i, c in enumerate(a) if c in b])
        mx = m.max()
        if mx > 0:
            m = m / mx
        return m.reshape([self.sizes[c] if c in a else 1 for c in b])

    def marginals(self, theta: list[np.ndarray], total: float, dtype: type = np.float64) -> list[np.ndarray]:
        """Clique marginals scaled to ``total`` rows: sum-product, upward then downward.

        Works on exp(θ − max θ) per clique with every message rescaled to a maximum of 1 (the
        scale of a message cancels in the normalised beliefs), which is exact up to floating
        point and several times faster than log-domain passes.
        """
        n = len(self.cliques)
        up = []
        for t in theta:
            a = (t - t.max()).astype(dtype, copy=False)  # a fresh array: exponentiate in place
            np.exp(a, out=a)
            up.append(a)
        to_parent: list[np.ndarray] = [np.empty(0)] * n
        for i in reversed(range(n)):
            p = self.parent[i]
            if p >= 0:
                to_parent[i] = self._msg(up[i], i, p)
                up[p] *= to_parent[i]
        # Downward pass in the Hugin form: a child's belief is its upward table times (the
        # parent's belief on the separator ÷ the message the child sent up), one product per clique.
        out: list[np.ndarray] = []
        for i in range(n):
            p = self.parent[i]
            b = up[i]
            if p >= 0:
                # Separator-sized, so in double precision: a single-precision ratio overflows where
                # the child's message nearly underflowed.
                sep = self._msg(out[p], p, i).astype(np.float64)
                sent = to_parent[i].reshape(sep.shape).astype(np.float64)
                # Where the child's message underflowed the child's table is ~0 anyway: ratio 0.
                ratio = np.divide(sep, sent, out=np.zeros_like(sep), where=sent > 0)
                mr = ratio.max()
                b *= (ratio / mr if mr > 0 else ratio).astype(b.dtype)
            s = float(b.sum())
            if not (s > 0 and math.isfinite(s)):  # everything underflowed: no information left, stay valid
                out.append(np.full(b.shape, total / b.size, dtype=b.dtype))
                continue
            if total / s > 1e30:  # beliefs near underflow: to a maximum of 1 first, or the scale overflows
                b /= b.max()
                s = float(b.sum())
            b *= total / s
            out.append(b)
        return out


def mirror_descent(tree: JunctionTree, theta: list[np.ndarray], obs: list[tuple[int, tuple[int, ...], np.ndarray, float]],
                    total: float, iters: int, eta: float | None = None,
                    dtype: type = np.float32, precondition: float = 0.0,
                    discrepancy: float | None = None, momentum: float = 0.0) -> tuple[list[np.ndarray], float]:
    """Minimise Σ_m ‖M_m(μ) − y_m‖²/Var_m over junction-tree models with Σμ = total: entropic
    mirror descent with a step that grows on success and halves on failure (McKenna et al. 2019,
    Private-PGM). ``obs`` holds (clique index, clique axes of the measured columns, noisy
    counts, noise variance). Returns the potentials and the last step size.

    With ``discrepancy`` d the iterations stop once the loss is at most d × the number of measured
    cells (its expectation at the truth is that number).

    With ``momentum`` β > 0 each step adds β times the last accepted step (the heavy ball, Polyak 1964), and a
    refused step restarts it (O'Donoghue & Candès 2015): every accepted step still lowers the loss, the fixed
    point is the same, and on ill-conditioned fits it gets there in about half the steps.

    With ``precondition`` κ > 0 each observation's residual t − y is divided by (t⁺ + κ·σ) instead
    of multiplied by 2/Var: to first order the step of iterative proportional fitting,
    log(y/t) ≈ (y − t)/t (Deming & Stephan 1940), which moves a small cell as fast as a large one
    where the plain step moves it in proportion to its count, while κ·σ keeps cells at the noise
    level from taking large steps. The step size starts at 1 (a full fitting step) and a step is
    still kept only if it lowers the same loss.

    Potentials and clique tables are held in ``dtype``: single precision by default, which
    halves the memory traffic of every inference pass (the fit's whole cost) and leaves the
    fitted counts within about 1e-3 of their relative value, far inside the noise; the residuals
    and the loss are computed in double precision."""

    # Repeated measurements of the same columns on the same clique become one observation: their
    # inverse-variance mean, whose loss differs from the sum of theirs by a constant (same gradient).
    merged: dict[tuple[int, tuple[int, ...]], list] = {}
    for ci, keep, y, var in obs:
        y = np.asarray(y, dtype=np.float64)
        if (ci, keep) in merged:
            m = merged[(ci, keep)]
            m[0] = m[0] + y / var
            m[1] += 1.0 / var
        else:
            merged[(ci, keep)] = [y / var, 1.0 / var]
    # An observation whose columns lie inside another's on the same clique (a one-way inside a
    # pair, a pair inside a triple) is computed from that host's marginal, and its gradient is
    # folded into the host's before the one broadcast over the clique: exact, and far cheaper.
    items = [(ci, keep, wy / w, 1.0 / w) for (ci, keep), (wy, w) in merged.items()]
    hosts: dict[int, list] = {}
    for i, (ci, keep, y, var) in enumerate(items):
        sup = [j for j, (cj, kj, _, _) in enumerate(items) if cj == ci and set(keep) < set(kj)]
        h = max(sup, key=lambda j: (len(items[j][1]), -j)) if sup else i
        hosts.setdefault(h, [])
        if h != i:
            hk = items[h][1]
            pos = [hk.index(a) for a in keep]
            hosts[h].append((pos, [y.shape[pos.index(k)] if k in pos else 1 for k in range(len(hk))], y, var))
    prepared = []
    for h, deps in hosts.items():
        ci, keep, y, var = items[h]
        ndim = len(tree.cliques[ci])
        # keep is increasing (measured sets and cliques are sorted), so axes already match y.
        bshape = [y.shape[keep.index(i)] if i in keep else 1 for i in range(ndim)]
        prepared.append((ci, keep, bshape, y, var, deps))

    def loss_grad(mu: list[np.ndarray]) -> tuple[float, list[np.ndarray | None]]:
        """The loss and, per clique, its gradient as one array that broadcasts against the clique
        (on the union of the observed axes only: the sum is full-size only when they cover it)."""
        loss = 0.0
        grads: list[np.ndarray | None] = [None] * len(mu)
        for ci, keep, bshape, y, var, deps in prepared:
            t = sum_to(mu[ci], keep).astype(np.float64)
            r = t - y
            loss += float(np.vdot(r, r)) / var
            if precondition:
                r /= np.maximum(t, 0.0) + precondition * math.sqrt(var)
            else:
                r *= 2.0 / var
            for pos, dshape, dy, dvar in deps:
                td = sum_to(t, pos)
                dr = td - dy
                loss += float(np.vdot(dr, dr)) / dvar
                if precondition:
                    r += (dr / (np.maximum(td, 0.0) + precondition * math.sqrt(dvar))).reshape(dshape)
                else:
                    r += (2.0 / dvar) * dr.reshape(dshape)
            g = r.reshape(bshape).astype(dtype)
            grads[ci] = g if grads[ci] is None else grads[ci] + g
        return loss, grads

    def step(t: np.ndarray, g: np.ndarray | None, eta: float) -> np.ndarray:
        return t if g is None else np.subtract(t, eta * g, dtype=dtype)  # g is already in dtype

    theta = [np.asarray(t, dtype=dtype) for t in theta]
    mu = tree.marginals(theta, total, dtype)
    loss, grads = loss_grad(mu)
    if precondition and eta is None:
        eta = 1.0
    if eta is None:
        # A first step that moves log-potentials by about 1 where the gradient is largest.
        gmax = max((float(np.abs(g).max()) for g in grads if g is not None), default=1.0)
        eta = 1.0 / (gmax or 1.0)
    # Early stopping (after Morozov's discrepancy principle): the loss is a χ² of the measured cells,
    # one per cell in expectation at the truth; once it is down to ``discrepancy`` per cell the model
    # already fits its measurements better than the truth would, and further steps fit their noise.
    floor = -1.0 if discrepancy is None else discrepancy * sum(
        y.size + sum(dy.size for _, _, dy, _ in deps) for _, _, _, y, _, deps in prepared)
    prev: list[np.ndarray] | None = None  # the potentials before the last accepted step (momentum)
    for _ in range(iters):
        if loss <= floor:
            break
        new_theta = [step(t, g, eta) for t, g in zip(theta, grads, strict=True)]
        if momentum and prev is not None:
            new_theta = [np.add(n, np.subtract(t, p, dtype=dtype) * dtype(momentum), dtype=dtype)
                         for n, t, p in zip(new_theta, theta, prev, strict=True)]
        new_mu = tree.marginals(new_theta, total, dtype)
        new_loss, new_grads = loss_grad(new_mu)
        if new_loss <= loss:
            prev = theta if momentum else None
            theta, mu, loss, grads = new_theta, new_mu, new_loss, new_grads
            eta *= 1.25
        else:
            eta *= 0.5
            prev = None  # a rejected step restarts the momentum (O'Donoghue & Candès 2015)
    return theta, eta


