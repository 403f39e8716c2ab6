"""Pair factors: measured pairs of columns that no clique of the junction tree holds.

The junction tree's cliques are capped in cells (:data:`dpsynth.marginals.budget.CLIQUE_LIMITS`),
so once a column's clique is full, a dependence on a column elsewhere in the tree cannot be added:
on Adult the tree never held age and hours worked together, and their 2-way TVD stayed at 0.07–0.09
at every ε (independent columns: 0.11; resampling the real rows: 0.012). A pair factor is a noisy
measurement of such a pair (g, c) turned into log-linear terms on top of the model's law,

    P'(x) ∝ P(x) · φ(x_g, x_c) · Π_S exp λ_S(x_S, x_c),

the pair's term φ and one term λ_S for every other table the model holds with c (its one-way, each
table the tree measured with c, earlier factors' tables), fitted (post-processing, :func:`fit_factor`:
iterative proportional fitting, Deming & Stephan 1940; Csiszár 1975) so that the rows' (g, c) table
takes the measured conditional law of c given g (:func:`target_table`) *while* every other table
with c stays as it was. Without the λ_S, tilting hours worked by age also moved hours against
occupation and relationship, since age and those columns go together.

Sampling draws rows from the tree (:meth:`dpsynth.marginals.MarginalModel.sample`) and then,
factor after factor, redraws c of each row through a *maximal coupling* with its current value: a
row keeps its value with probability min(1, p(v)/q(v)) (q: c's conditional law given the rest of
the row before the factor, p: with its terms) and otherwise takes a value from (p − q)⁺, so only
the rows the factor must move (the total-variation distance of q and p, a few percent) change and
the others keep the controlled counts of the tree's sampler (Thorisson 2000, *Coupling, Stationarity,
and Regeneration*, ch. 1). The result has law p when the current values follow q; where they do not
quite (columns near one an earlier factor redrew), the terms are fitted to the law the coupling
actually gives from the rows' current values (:func:`coupled_law`), so the tables come out as
fitted either way. This plays the role of "GUM" in PrivSyn (Zhang et al. 2021), with a model-based
conditional in place of its record edits. A column is redrawn by one factor at most, and never
after an earlier factor conditions on it (:mod:`dpsynth.marginals.fit` chooses the pairs so).

The factors are fitted on a working sample drawn the way the sampler draws, so what they match is
the expected table of such rows; :meth:`dpsynth.marginals.MarginalModel.joint` computes the exact
law of the sampled rows on small domains (the tests compare the two). Everything here reads
released values only (the model's tables, the factors, noisy measurements) and the generator it
is given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse

#: Rows per block when a factor is applied (bounds memory at rows × categories × 8 bytes per block).
BLOCK_ROWS = 1 << 16
#: Sweeps of proportional fitting over a factor's terms. Whole Adult releases (2–3 seeds) gave the
#: same 2-/3-way TVD with 4, 6 and 12 at ε = 1 (0.0163 / 0.0363) and at ε = 10 (0.0066 / 0.0194 with 4,
#: 0.0067 / 0.0196 with 12), and 4 take a third of the time.
FIT_ITERS = 4
#: Expected rows (on the rows a factor is fitted to) below which a (given, col) cell is out of its
#: reach: no weight of moderate size reaches it, and a noisy count there is mostly noise.
MIN_REACH = 0.5
#: Largest change of a log-weight in one fitting step, and the lowest log-weight (relative to a row's largest).
MAX_STEP, MAX_LOG_WEIGHT = 2.0, 60.0
#: Noise standard deviations of a cell's difference from the model that a factor's target takes as noise.
#: 2 instead of 1 (paired releases, 4–6 seeds): Adult ε = 1 +0.0002 / +0.0006 2-/3-way TVD, an 8-column
#: Adult extract of 15,000 rows at ε = 3 +0.0005 / +0.0009; a generated table of mostly independent
#: columns (whose pairs outside the cliques carry nothing) −0.0003 / −0.0003.
TARGET_SHRINK = 1.0


@dataclass(frozen=True, eq=False)
class PairFactor:
    """φ(given, col) as a (sizes[given] × sizes[col]) table of log-weights; sampling redraws ``col``.

    ``kept``: the terms that keep the other tables the model holds with ``col`` as they were, each
    (columns S, log-weights λ_S) with λ_S a (configurations of S, row-major × sizes[col]) table."""

    given: int
    col: int
    log_phi: np.ndarray
    kept: tuple[tuple[tuple[int, ...], np.ndarray], ...] = ()

    def logits(self, sizes: Sequence[int], rows: np.ndarray) -> np.ndarray:
        """The factor's log-weights of each row's values of ``col`` (rows × sizes[col])."""
        out = self.log_phi[rows[:, self.given]]
        for cols, lam in self.kept:
            out = out + lam[config_index(sizes, rows, cols)]
        return out

    def to_dict(self) -> dict:
        return {"given": int(self.given), "col": int(self.col),
                "log_phi": np.round(self.log_phi, 7).ravel().tolist(),
                "kept": [{"cols": [int(c) for c in cols], "log_weights": np.round(lam, 7).ravel().tolist()}
                         for cols, lam in self.kept]}

    @classmethod
    def from_dict(cls, d: dict, sizes: Sequence[int]) -> PairFactor:
        given, col = int(d["given"]), int(d["col"])
        if not (0 <= given < len(sizes) and 0 <= col < len(sizes)) or given == col:
            raise ValueError(f"pair factor on columns {given}, {col}")
        table = np.asarray(d["log_phi"], dtype=np.float64).reshape(sizes[given], sizes[col])
        kept = []
        for t in d.get("kept", []):
            cols = tuple(int(c) for c in t["cols"])
            if any(not 0 <= c < len(sizes) or c == col for c in cols) or len(set(cols)) != len(cols):
                raise ValueError(f"pair factor term on columns {list(cols)}")
            kept.append((cols, np.asarray(t["log_weights"], dtype=np.float64)
                         .reshape(math.prod(sizes[c] for c in cols), sizes[col])))
        if not all(np.all(np.isfinite(x)) for x in [table] + [lam for _, lam in kept]):
            raise ValueError("pair factor with a non-finite weight")
        return cls(given, col, table, tuple(kept))


def config_index(sizes: Sequence[int], rows: np.ndarray, cols: Sequence[int], vary: int = -1) -> np.ndarray:
    """Row-major index of each row's configuration of ``cols`` (rows,); with ``vary`` in ``cols``, for
    every value of that column in turn (rows × sizes[vary])."""
    n = len(rows)
    base = np.zeros(n, dtype=np.int64)
    for j in cols:
        base *= int(sizes[j])
        if j != vary:
            base += rows[:, j]
    if vary not in cols:
        return base
    stride = math.prod(int(sizes[j]) for j in cols[list(cols).index(vary) + 1:])
    return base[:, None] + np.arange(int(sizes[vary]), dtype=np.int64)[None, :] * stride


def conditional_logits(steps: Sequence, sizes: Sequence[int], factors: Sequence[PairFactor],
                       rows: np.ndarray, c: int, cache: dict | None = None) -> np.ndarray:
    """log P(x_c = v | the rest of each row) + a constant per row, for every value v (rows × sizes[c]),
    under the tree's steps times ``factors``: the sum of the log-probabilities of every step that
    holds c (as its new column or a parent) and of every factor on c. ``cache`` keeps each
    step's log-table between calls."""
    n, k = len(rows), int(sizes[c])
    out = np.zeros((n, k))
    for st in steps:
        if c not in st.parents and c not in st.new:
            continue
        key = id(st)
        if cache is not None and key in cache:
            logp = cache[key]
        else:
            logp = np.log(np.maximum(st.probs, 1e-300))
            if cache is not None:
                cache[key] = logp
        pi = config_index(sizes, rows, st.parents, c)
        ni = config_index(sizes, rows, st.new, c)
        out += logp[pi if pi.ndim == 2 else pi[:, None], ni if ni.ndim == 2 else ni[:, None]]
    for f in factors:
        if f.col == c:
            out += f.logits(sizes, rows)
            continue
        if f.given == c:
            out += f.log_phi[:, rows[:, f.col]].T
        for cols, lam in f.kept:
            if c in cols:
                out += lam[config_index(sizes, rows, cols, c), rows[:, f.col][:, None]]
    return out


#: Widest rows that :func:`_row_max` and :func:`_row_sum` reduce column by column; numpy's own reduction
#: along a short last axis runs per row and took 2–3 ms on 65,536 rows of 2–16 values, the column-wise
#: form 0.05–0.9 ms (more columns: numpy's is faster).
ROW_LOOP_MAX = 16


def _row_max(x: np.ndarray) -> np.ndarray:
    """``x.max(axis=1)`` of a tall 2-D array (exactly: a maximum does not depend on the order)."""
    if x.shape[1] > ROW_LOOP_MAX or x.shape[1] < 2:
        return x.max(axis=1)
    out = np.maximum(x[:, 0], x[:, 1])
    for j in range(2, x.shape[1]):
        np.maximum(out, x[:, j], out=out)
    return out


def _row_sum(x: np.ndarray) -> np.ndarray:
    """``x.sum(axis=1)`` of a tall 2-D array, adding in the order numpy's pairwise summation adds a short
    row (one after another below 8 values, else into 8 running sums combined pairwise), so the sums are
    the same to the last bit as numpy 2's on this machine; a different order would only round differently."""
    k = x.shape[1]
    if k > ROW_LOOP_MAX or k < 2:
        return x.sum(axis=1)
    if k < 8:
        out = x[:, 0] + x[:, 1]
        for j in range(2, k):
            out += x[:, j]
        return out
    r = x[:, :8].copy()
    i = 8
    while i < k - k % 8:
        r += x[:, i:i + 8]
        i += 8
    out = ((r[:, 0] + r[:, 1]) + (r[:, 2] + r[:, 3])) + ((r[:, 4] + r[:, 5]) + (r[:, 6] + r[:, 7]))
    for j in range(i, k):
        out += x[:, j]
    return out


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - _row_max(logits)[:, None]
    np.exp(z, out=z)
    z /= _row_sum(z)[:, None]
    return z


def coupled_law(current: np.ndarray, q_logits: np.ndarray, p_logits: np.ndarray,
                q: np.ndarray | None = None) -> np.ndarray:
    """The law of :func:`coupled_values`' output for each row given its current value (rows × k):
    the current value with probability min(1, p/q), otherwise (p − q)⁺ normalised. ``q``: softmax of
    ``q_logits`` when the caller has it."""
    q = _softmax(q_logits) if q is None else q
    p = _softmax(p_logits)
    idx = np.arange(len(current))
    qv, pv = q[idx, current], p[idx, current]
    keep = np.where(qv > 0, np.minimum(1.0, pv / np.where(qv > 0, qv, 1.0)), 1.0)
    np.subtract(p, q, out=p)
    np.maximum(p, 0.0, out=p)
    tot = _row_sum(p)
    keep = np.where(tot > 0, keep, 1.0)
    p *= ((1.0 - keep) / np.where(tot > 0, tot, 1.0))[:, None]
    p[idx, current] += keep
    return p


def coupled_values(current: np.ndarray, q_logits: np.ndarray, p_logits: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Maximal coupling of each row's current value (drawn from q) with a draw from p: each row's value
    of :func:`coupled_law` at its uniform ``u`` (inverse CDF), so it keeps its value with probability
    min(1, p/q), else takes one from (p − q)⁺; the result has law p whenever the current value has law q."""
    cdf = np.cumsum(coupled_law(current, q_logits, p_logits), axis=1)
    return np.minimum((cdf < u[:, None] * cdf[:, -1:]).sum(axis=1), cdf.shape[1] - 1)


def apply_factors(steps: Sequence, sizes: Sequence[int], factors: Sequence[PairFactor], rows: np.ndarray,
                  rng: np.random.Generator) -> np.ndarray:
    """Apply ``factors`` in order to rows drawn from the tree (changed in place and returned).

    One uniform per row and factor is drawn whatever the rows hold, so the generator's later state
    depends on the number of rows only."""
    n = len(rows)
    cache: dict = {}
    for j, f in enumerate(factors):
        u = rng.random(n)
        for a in range(0, n, BLOCK_ROWS):
            b = min(n, a + BLOCK_ROWS)
            block = rows[a:b]
            q = conditional_logits(steps, sizes, factors[:j], block, f.col, cache)
            rows[a:b, f.col] = coupled_values(block[:, f.col], q, q + f.logits(sizes, block), u[a:b])
    return rows


def grouping(cfg: np.ndarray, configs: int, weights: np.ndarray | None = None) -> sparse.csr_matrix:
    """The (configs × rows) matrix that sums rows by their configuration ``cfg``, each row ``weights``
    times (default once): built once per term of a factor, it makes :func:`expected_table` a sparse
    product, which sums each configuration's rows in row order as ``np.bincount`` did (the same
    floating-point result) in a third of the time (65,536 rows × 42 categories: 3 ms against 11 ms; a
    factor's sweeps take one per term)."""
    n = len(cfg)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    return sparse.csr_matrix((w, (cfg, np.arange(n))), shape=(configs, n))


def distinct_rows(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first row of each distinct combination of the rows of ``columns`` (arrays of the same length,
    1-D or 2-D, compared byte for byte) and how many rows share it. Rows that agree on every input of
    :func:`fit_factor` have the same law, so it fits each combination once, weighted by its rows."""
    n = len(columns[0])
    key = np.ascontiguousarray(np.concatenate(
        [np.ascontiguousarray(c).reshape(n, -1).view(np.uint8).reshape(n, -1) for c in columns], axis=1))
    rows = key.view(np.dtype((np.void, key.shape[1]))).ravel()
    _, first, counts = np.unique(rows, return_index=True, return_counts=True)
    return first, counts


def expected_table(p: np.ndarray, group: sparse.csr_matrix) -> np.ndarray:
    """Σ over rows of p (rows × k) grouped by configuration (``group`` from :func:`grouping`): configs × k."""
    return np.asarray(group @ p, dtype=np.float64)


def fit_factor(q_logits: np.ndarray, cfgs: Sequence[np.ndarray], targets: Sequence[np.ndarray],
               iters: int = FIT_ITERS, current: np.ndarray | None = None) -> list[np.ndarray]:
    """Log-weights λ_i (configurations_i × k), one per term, such that the rows' expected table of
    each term (rows grouped by their configuration ``cfgs[i]``) comes to ``targets[i]`` (counts):
    iterative proportional fitting, the terms in turn, the last one last in every sweep (with
    inconsistent targets it is matched best). The rows' law is softmax(q + Σ λ_i[cfg_i]) or, with
    their ``current`` values, that of the coupling from them (:func:`coupled_law`), which is the same
    when the current values follow q and stays right when they do not (a column whose law given the
    rest earlier factors changed).

    A cell the rows barely take (q gives it under :data:`MIN_REACH` expected rows) is left out of
    its term: its target mass is spread over the rest of its row and its weight stays 0. A target
    row is scaled to the rows with that configuration. Each step moves a log-weight by at most
    :data:`MAX_STEP`.

    The rows are fitted once per distinct combination of their logits, configurations and current
    value (:func:`distinct_rows`), each weighted by its rows: their laws are the same, so the tables
    are the same sums up to the order of floating-point additions. On Adult's working sample of 65,536
    rows the factors see 1,000–47,000 distinct rows (``benchmarks/bench_factor_fit.py``)."""
    k = q_logits.shape[1]
    first, mult = distinct_rows(q_logits, *cfgs, *([] if current is None else [current]))
    q_logits = np.asarray(q_logits)[first]
    cfgs = [np.asarray(c)[first] for c in cfgs]
    current = None if current is None else np.asarray(current)[first]
    weight = mult.astype(np.float64)
    base = _softmax(np.array(q_logits, dtype=np.float64))
    lams, goals, reach, active, groups = [], [], [], [], []
    for cfg, target in zip(cfgs, targets, strict=True):
        configs = len(target)
        groups.append(grouping(cfg, configs, weight))
        r = expected_table(base, groups[-1]) >= MIN_REACH
        counts = np.bincount(cfg, weights=weight, minlength=configs)
        t = np.where(r, np.maximum(np.asarray(target, dtype=np.float64), 0.0), 0.0)
        ts = t.sum(axis=1, keepdims=True)
        t = np.where(ts > 0, t / np.where(ts > 0, ts, 1.0), 0.0) * counts[:, None]
        lams.append(np.zeros((configs, k)))
        goals.append(t)
        reach.append(r)
        active.append((counts > 0) & (t.sum(axis=1) > 0))
    # The laws in single precision (the sweeps' whole cost is their exponentials); tables and weights in double.
    base32 = base.astype(np.float32)
    logits = np.log(np.maximum(base32, np.float32(1e-37)))
    p = logits.copy()  # logits + Σ λ_i[cfg_i], kept up to date
    for _ in range(iters):
        for i, cfg in enumerate(cfgs):
            law = _softmax(p) if current is None else coupled_law(current, logits, p, base32)
            e = expected_table(law, groups[i])
            t, ok = goals[i], reach[i] & (e > 0)
            step = np.zeros(e.shape)
            step[ok] = np.log(np.where(t[ok] > 0, t[ok], 1.0) / e[ok])
            step[ok & (t <= 0)] = -MAX_STEP  # driven down steadily rather than to −∞ at once
            lam = lams[i].copy()
            lam[active[i]] += np.clip(step, -MAX_STEP, MAX_STEP)[active[i]]
            top = np.where(reach[i], lam, -np.inf).max(axis=1, keepdims=True)
            lam = np.where(reach[i], np.maximum(lam - np.where(np.isfinite(top), top, 0.0), -MAX_LOG_WEIGHT), 0.0)
            p += (lam - lams[i]).astype(np.float32)[cfg]
            lams[i] = lam
    return lams


def target_table(noisy: np.ndarray, sd: float, current: np.ndarray) -> np.ndarray:
    """The (given × col) table a factor's pair aims at, from its noisy measurement and the rows'
    current table (both as counts of the current rows): each cell the current count moved toward the
    measurement by the part of their difference beyond :data:`TARGET_SHRINK` noise standard
    deviations (soft thresholding, Donoho & Johnstone 1994: differences at the noise level are
    taken as noise, larger ones as the model's error), clamped at 0; each row g then scaled to the
    current rows of g (post-processing)."""
    y = np.asarray(noisy, dtype=np.float64)
    cur = np.asarray(current, dtype=np.float64)
    diff = y - cur
    t = np.maximum(cur + np.sign(diff) * np.maximum(np.abs(diff) - TARGET_SHRINK * sd, 0.0), 0.0)
    rows = cur.sum(axis=1, keepdims=True)
    ts = t.sum(axis=1, keepdims=True)
    return np.where(ts > 0, t / np.where(ts > 0, ts, 1.0), cur / np.maximum(rows, 1e-300)) * rows
