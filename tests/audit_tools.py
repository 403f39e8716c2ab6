"""A black-box privacy audit of ``dpsynth.release()``: event-based lower bounds on ε.

If a mechanism M is (ε, δ)-DP then for neighbouring datasets D, D′ and every event S on its
output, P[M(D) ∈ S] ≤ e^ε · P[M(D′) ∈ S] + δ. Running M N times on each dataset and counting
k₁, k₂ runs in S gives, with confidence 1 − α (Clopper–Pearson at α/2 on each side),

    ε_lb = ln((CP_lower(k₁, N) − δ) / CP_upper(k₂, N)),

a lower bound on the true ε (Ding et al. 2018, StatDP; Jagielski et al. 2020; Google's
``VerifyApproximateDp``). ε_lb > claimed ε means the code is *not* ε-DP (up to probability α).

The event and the direction are picked on a separate, smaller selection run (so picking the
luckiest of thousands of events costs nothing in confidence), then one event is tested on fresh
runs. Events: a cell's noisy count ≥ t, two cells jointly (a ≥ t and b < u, which sees the
factor e^{2/scale} of a replace-one move), the synthetic row count (== t, ≥ t), presence of a
label in the synthetic data, and the synthetic maximum above a bin edge; each also complemented.

The black box is the real ``dpsynth.release.release`` looked up at call time (so planted bugs
apply). The one speed-up, :func:`memoized_encode`, caches ``encode(df, schema)`` per dataset:
encoding is a deterministic per-row map that draws no randomness (checked when it is installed),
so caching it cannot change the distribution of any output.

The planted bugs (``MUTANTS``) patch the real code the way a real bug would look; each must
make the audit fail on its pair. Used by ``tests/test_audit.py`` and ``benchmarks/audit_nightly.py``.
"""

from __future__ import annotations

import atexit
import importlib
import math
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from dpsynth import noise
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema

RELEASE = importlib.import_module("dpsynth.release")
MECHANISMS = importlib.import_module("dpsynth.mechanisms")
PIPELINE = importlib.import_module("dpsynth.pipeline")
RESULTS = importlib.import_module("dpsynth.results")


# ---------------------------------------------------------------- Clopper–Pearson and ε_lb


def cp_lower(k: np.ndarray | int, n: int, alpha: float) -> np.ndarray:
    """One-sided (1 − alpha) Clopper–Pearson lower bound on a binomial p from k of n."""
    k = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = stats.beta.ppf(alpha, k, n - k + 1)
    return np.where(k <= 0, 0.0, out)


def cp_upper(k: np.ndarray | int, n: int, alpha: float) -> np.ndarray:
    """One-sided (1 − alpha) Clopper–Pearson upper bound on a binomial p from k of n."""
    k = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = stats.beta.isf(alpha, k + 1, n - k)
    return np.where(k >= n, 1.0, out)


def epsilon_lower_bound(
    k1: np.ndarray | int, n1: int, k2: np.ndarray | int, n2: int, *, alpha: float, delta: float = 0.0
) -> np.ndarray:
    """ε_lb = ln((CP_lower(k₁/n₁) − δ) / CP_upper(k₂/n₂)), each bound at alpha/2; −inf if not positive."""
    lo = cp_lower(k1, n1, alpha / 2) - delta
    hi = cp_upper(k2, n2, alpha / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(lo > 0, np.log(np.maximum(lo, 1e-300) / hi), -np.inf)


# ---------------------------------------------------------------- outputs of many releases


@dataclass
class Outputs:
    """What the audit reads from each release (one row per run)."""

    counts: np.ndarray  # (runs, cells): the released histogram's noisy counts
    rows: np.ndarray  # (runs,): number of synthetic rows
    present: np.ndarray  # (runs, labels): label present in the synthetic data
    present_names: list[str]
    maxima: np.ndarray  # (runs, numeric columns): synthetic maximum (−inf if no values)
    maxima_names: list[str]
    edges: list[np.ndarray]  # per numeric column: the schema's bin edges (event thresholds)

    @property
    def runs(self) -> int:
        return len(self.rows)


def _labels(schema: Schema) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for c in schema.columns:
        if isinstance(c, CategoricalColumn):
            out += [(c.name, v) for v in c.categories]
            if c.missing:
                out.append((c.name, None))
    return out


def collect(
    df: pd.DataFrame, schema: Schema, runs: int, *, rng: np.random.Generator, **release_kwargs: Any
) -> Outputs:
    """Run the real ``release()`` ``runs`` times on ``df`` and extract the audited features."""
    labels = _labels(schema)
    names = sorted({n for n, _ in labels})
    numeric = [c for c in schema.columns if isinstance(c, NumericColumn)]
    counts: list[np.ndarray] = []
    rows = np.empty(runs, dtype=np.int64)
    present = np.zeros((runs, len(labels)), dtype=bool)
    maxima = np.full((runs, len(numeric)), -np.inf)
    for i in range(runs):
        rel = RELEASE.release(df, schema, rng=rng, **release_kwargs)
        if rel.noisy_counts is not None:
            noisy = np.asarray(rel.noisy_counts, dtype=np.int64)
            if i == 0 and not np.array_equal(rel.histogram["count"].to_numpy(dtype=np.int64), noisy):
                raise AssertionError("the released histogram table differs from the noisy counts")
        else:  # the marginals method: every released noisy marginal, cell by cell
            noisy = np.rint(np.concatenate([f["count"].to_numpy(dtype=np.float64) for f in rel.marginals])).astype(np.int64)
        counts.append(noisy)
        syn = rel.synthetic
        rows[i] = len(syn)
        if len(syn):
            seen = {n: set(syn[n].tolist()) if n in syn.columns else set() for n in names}
            for j, (name, v) in enumerate(labels):
                s = seen[name]
                present[i, j] = (v in s) if v is not None else any(x is None or x is pd.NA or x != x for x in s)
            for q, c in enumerate(numeric):
                if c.name in syn.columns:
                    col = syn[c.name].to_numpy(dtype=np.float64, na_value=np.nan)
                    if np.isfinite(col).any():
                        maxima[i, q] = float(np.nanmax(col))
    width = max((len(c) for c in counts), default=0)
    mat = np.full((runs, width), _ABSENT, dtype=np.int64)
    for i, c in enumerate(counts):
        mat[i, : len(c)] = c  # a mutant may change the number of cells; pad so events stay defined
    return Outputs(
        counts=mat, rows=rows, present=present,
        present_names=[f"{n}={'(missing)' if v is None else v}" for n, v in labels],
        maxima=maxima, maxima_names=[c.name for c in numeric], edges=[c.edges() for c in numeric],
    )


def merge(parts: list[Outputs]) -> Outputs:
    """Concatenate the outputs of several batches of runs of the same dataset."""
    width = max(p.counts.shape[1] for p in parts)
    counts = np.concatenate([np.pad(p.counts, ((0, 0), (0, width - p.counts.shape[1])), constant_values=_ABSENT)
                             for p in parts])
    first = parts[0]
    return Outputs(
        counts=counts, rows=np.concatenate([p.rows for p in parts]),
        present=np.concatenate([p.present for p in parts]), present_names=first.present_names,
        maxima=np.concatenate([p.maxima for p in parts]), maxima_names=first.maxima_names, edges=first.edges,
    )


_ABSENT = np.iinfo(np.int64).min


# ---------------------------------------------------------------- events


@dataclass(frozen=True)
class Event:
    """A measurable set of outputs: ``kind`` and its parameters; ``negate`` takes the complement."""

    kind: str
    a: int = 0
    t: float = 0
    b: int = 0
    u: float = 0
    negate: bool = False

    def evaluate(self, out: Outputs) -> np.ndarray:
        if self.kind == "cell>=":
            r = _col(out.counts, self.a) >= self.t
        elif self.kind == "cell>=&cell<":
            r = (_col(out.counts, self.a) >= self.t) & (_col(out.counts, self.b) < self.u)
        elif self.kind == "rows==":
            r = out.rows == self.t
        elif self.kind == "rows>=":
            r = out.rows >= self.t
        elif self.kind == "present":
            r = out.present[:, self.a]
        elif self.kind == "max>":
            r = out.maxima[:, self.a] > self.t
        else:
            raise ValueError(self.kind)
        return ~r if self.negate else r

    def describe(self, out: Outputs | None = None) -> str:
        if self.kind == "cell>=":
            s = f"noisy count of cell {self.a} ≥ {self.t:g}"
        elif self.kind == "cell>=&cell<":
            s = f"cell {self.a} ≥ {self.t:g} and cell {self.b} < {self.u:g}"
        elif self.kind == "rows==":
            s = f"synthetic rows == {self.t:g}"
        elif self.kind == "rows>=":
            s = f"synthetic rows ≥ {self.t:g}"
        elif self.kind == "present":
            s = f"{out.present_names[self.a] if out else self.a} present in synthetic data"
        else:
            s = f"max of {out.maxima_names[self.a] if out else self.a} > {self.t:g}"
        return f"not ({s})" if self.negate else s


def _col(m: np.ndarray, j: int) -> np.ndarray:
    return m[:, j] if j < m.shape[1] else np.full(m.shape[0], _ABSENT)


def _grid(values: np.ndarray, limit: int) -> np.ndarray:
    v = values[values > _ABSENT]
    if len(v) == 0:
        return np.zeros(1)
    lo, hi = np.quantile(v, [0.005, 0.995])
    g = np.arange(math.floor(lo), math.ceil(hi) + 2)
    if len(g) > limit:
        g = np.unique(np.round(np.linspace(g[0], g[-1], limit)))
    return g.astype(np.float64)


def candidate_events(x: Outputs, y: Outputs) -> tuple[list[Event], np.ndarray, np.ndarray]:
    """Every candidate event (thresholds from both selection runs) and its hit counts on x and y."""
    events: list[Event] = []
    kx: list[np.ndarray] = []
    ky: list[np.ndarray] = []

    def add(evs: list[Event], hx: np.ndarray, hy: np.ndarray) -> None:
        events.extend(evs)
        kx.append(hx)
        ky.append(hy)

    cells = max(x.counts.shape[1], y.counts.shape[1])
    pooled = np.concatenate([x.counts, y.counts]) if x.counts.shape[1] == y.counts.shape[1] else None
    grids = [_grid(pooled[:, j] if pooled is not None else np.concatenate([_col(x.counts, j), _col(y.counts, j)]), 40)
             for j in range(cells)]
    for j in range(cells):
        g = grids[j]
        add([Event("cell>=", a=j, t=t) for t in g],
            (_col(x.counts, j)[:, None] >= g).sum(0), (_col(y.counts, j)[:, None] >= g).sum(0))
    for a in range(cells):
        for b in range(cells):
            if a == b:
                continue
            # many cells (the marginals method): coarser joint grids keep the candidate count near 10⁵
            step = 1 if cells <= 8 else max(1, len(grids[a]) // 10)
            ga, gb = grids[a][::step], grids[b][::step]

            def hits(o: Outputs, a: int = a, b: int = b, ga: np.ndarray = ga, gb: np.ndarray = gb) -> np.ndarray:
                ca, cb = _col(o.counts, a), _col(o.counts, b)
                return ((ca[:, None, None] >= ga[None, :, None]) & (cb[:, None, None] < gb[None, None, :])).sum(0).ravel()

            add([Event("cell>=&cell<", a=a, t=t, b=b, u=u) for t in ga for u in gb], hits(x), hits(y))
    rg = _grid(np.concatenate([x.rows, y.rows]), 40)
    add([Event("rows==", t=t) for t in rg], (x.rows[:, None] == rg).sum(0), (y.rows[:, None] == rg).sum(0))
    add([Event("rows>=", t=t) for t in rg], (x.rows[:, None] >= rg).sum(0), (y.rows[:, None] >= rg).sum(0))
    add([Event("present", a=j) for j in range(x.present.shape[1])], x.present.sum(0), y.present.sum(0))
    for q, edges in enumerate(x.edges):
        add([Event("max>", a=q, t=float(e)) for e in edges],
            (x.maxima[:, q][:, None] > edges).sum(0), (y.maxima[:, q][:, None] > edges).sum(0))
    return events, np.concatenate(kx), np.concatenate(ky)


# ---------------------------------------------------------------- the audit


@dataclass
class AuditResult:
    """The tested event, the counts, and the lower bound on ε."""

    pair: str
    claimed_epsilon: float
    delta: float
    event: str
    direction: str  # "D over D′" or "D′ over D"
    k1: int
    n1: int
    k2: int
    n2: int
    eps_lb: float
    alpha: float
    selection_eps_lb: float = float("nan")
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """The audit passes when the lower bound does not exceed the claim."""
        return not self.eps_lb > self.claimed_epsilon

    def summary(self) -> str:
        verdict = "pass" if self.passed else "FAIL"
        return (f"{self.pair}: ε_lb = {self.eps_lb:.3f} (claimed {self.claimed_epsilon:g}) → {verdict}; "
                f"event [{self.event}], {self.direction}, {self.k1}/{self.n1} vs {self.k2}/{self.n2}")


@dataclass(frozen=True)
class Pair:
    """Neighbouring datasets for the audit, with the schema and the release's privacy options."""

    name: str
    schema: Schema
    d: pd.DataFrame
    d_prime: pd.DataFrame
    options: dict[str, Any]
    #: public constants set for the pair's releases, as (module, attribute, value); applied in every
    #: worker process too (a pair that must reach a code path its tiny table would not, e.g. capped cliques)
    settings: tuple[tuple[str, str, Any], ...] = ()

    @property
    def epsilon(self) -> float:
        return float(self.options["epsilon"])

    @property
    def delta(self) -> float:
        return float(self.options.get("delta", 0.0))


def audit(
    pair: Pair, *, runs: int = 10_000, selection_runs: int = 1_000, alpha: float = 1e-3, seed: int = 0,
    mutant: str | None = None, workers: int | None = None, secure: bool = False,
) -> AuditResult:
    """Audit ``release()`` on ``pair``: select an event and direction on two rounds of
    ``selection_runs`` runs per dataset, then bound ε from ``runs`` fresh runs per dataset.

    ``mutant`` plants one of :data:`MUTANTS` for the duration (also in worker processes).
    Runs are cut into fixed batches with their own seeds, so the result does not depend on
    ``workers`` (default: 2 processes if the machine has 2 or more cores, else in-process).
    ``secure`` draws from :func:`dpsynth.noise.secure_rng` instead (not reproducible; nightly).
    """
    ss = np.random.SeedSequence(seed)

    def jobs(df: pd.DataFrame, n: int) -> list[tuple[Any, ...]]:
        k = max(1, math.ceil(n / _BATCH))
        sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
        return [(pair, df, size, int(child.generate_state(1)[0]), mutant, secure)
                for size, child in zip(sizes, ss.spawn(k), strict=True)]

    def run(*datasets: tuple[pd.DataFrame, int]) -> list[Outputs]:
        batches = [jobs(df, n) for df, n in datasets]
        flat = [j for b in batches for j in b]
        results = _map(flat, workers)
        out, i = [], 0
        for b in batches:
            out.append(merge(results[i: i + len(b)]))
            i += len(b)
        return out

    t0 = time.perf_counter()
    x1, y1, x2, y2 = run((pair.d, selection_runs), (pair.d_prime, selection_runs),
                         (pair.d, selection_runs), (pair.d_prime, selection_runs))
    event, forward, sel_lb = select_event((x1, y1), (x2, y2), delta=pair.delta)
    mx, my = run((pair.d, runs), (pair.d_prime, runs))
    hx, hy = int(event.evaluate(mx).sum()), int(event.evaluate(my).sum())
    k1, k2 = (hx, hy) if forward else (hy, hx)
    lb = float(epsilon_lower_bound(k1, runs, k2, runs, alpha=alpha, delta=pair.delta))
    return AuditResult(
        pair=pair.name, claimed_epsilon=pair.epsilon, delta=pair.delta, event=event.describe(mx),
        direction="D over D′" if forward else "D′ over D", k1=k1, n1=runs, k2=k2, n2=runs, eps_lb=lb,
        alpha=alpha, selection_eps_lb=sel_lb,
        extra={"mutant": mutant, "seconds": time.perf_counter() - t0, "releases": 4 * selection_runs + 2 * runs},
    )


_BATCH = 2_500


def _collect_job(job: tuple[Any, ...]) -> Outputs:
    """One batch of releases (runs in a worker process or in-process)."""
    pair, df, n, seed, mutant, secure = job
    rng = noise.secure_rng() if secure else noise.seeded_rng(seed)
    ctx = planted(mutant) if mutant else nullcontext()
    with ctx, configured(pair.settings), memoized_encode():
        return collect(df, pair.schema, n, rng=rng, **pair.options)


@contextmanager
def configured(settings: tuple[tuple[str, str, Any], ...]) -> Iterator[None]:
    """Set a pair's public constants (:attr:`Pair.settings`) for the duration of a block."""
    with _patching() as setattr_:
        for module, attr, value in settings:
            setattr_(importlib.import_module(module), attr, value)
        yield


_POOL: dict[int, Any] = {}


def _map(jobs: list[tuple[Any, ...]], workers: int | None) -> list[Outputs]:
    n = workers if workers is not None else min(2, os.cpu_count() or 1)
    if n <= 1 or len(jobs) == 1:
        return [_collect_job(j) for j in jobs]
    if n not in _POOL:
        # spawn, not fork: the test process may run other threads (Streamlit's), and a forked
        # child could inherit a held lock; workers plant mutants themselves, by name
        ctx = multiprocessing.get_context("spawn")
        _POOL[n] = ProcessPoolExecutor(max_workers=n, mp_context=ctx)
        atexit.register(_POOL[n].shutdown, wait=False, cancel_futures=True)
    return list(_POOL[n].map(_collect_job, jobs))


def score_events(
    events: list[Event], kx: np.ndarray, ky: np.ndarray, nx: int, ny: int, *, alpha: float, delta: float,
    min_fraction: float,
) -> list[tuple[float, Event, bool]]:
    """(score, event, forward) for every event, complement and direction.

    The score is the sample's own (looser, ``alpha``) ε lower bound, and only events holding in at
    least ``min_fraction`` of the numerator's runs count: for pure DP a tail event cannot show a
    larger ratio, and rare tails merely look extreme among thousands of candidates.
    """
    out: list[tuple[float, Event, bool]] = []
    for negate in (False, True):
        ax, ay = (nx - kx, ny - ky) if negate else (kx, ky)
        for forward in (True, False):
            k1, n1, k2, n2 = (ax, nx, ay, ny) if forward else (ay, ny, ax, nx)
            score = epsilon_lower_bound(k1, n1, k2, n2, alpha=alpha, delta=delta)
            score = np.where(k1 >= min_fraction * n1, score, -np.inf)
            for i in np.flatnonzero(np.isfinite(score)):
                e = events[i]
                out.append((float(score[i]), Event(e.kind, e.a, e.t, e.b, e.u, negate), forward))
    return out


def select_event(
    first: tuple[Outputs, Outputs], second: tuple[Outputs, Outputs], *, alpha: float = 0.05, delta: float = 0.0,
    min_fraction: float = 0.05, shortlist: int = 25,
) -> tuple[Event, bool, float]:
    """Pick the event and direction in two stages: the ``shortlist`` best on the first selection
    runs, then the best of those on the second (fresh) selection runs, which removes most of the
    winner's curse of choosing among thousands of correlated candidates."""
    x, y = first
    events, kx, ky = candidate_events(x, y)
    scored = score_events(events, kx, ky, x.runs, y.runs, alpha=alpha, delta=delta, min_fraction=min_fraction)
    if not scored:
        return Event("rows>=", t=0), True, -np.inf
    scored.sort(key=lambda r: -r[0])
    short = scored[:shortlist]
    x2, y2 = second
    best: tuple[float, Event, bool] = (-np.inf, short[0][1], short[0][2])
    for _, ev, forward in short:
        hx, hy = int(ev.evaluate(x2).sum()), int(ev.evaluate(y2).sum())
        k1, n1, k2, n2 = (hx, x2.runs, hy, y2.runs) if forward else (hy, y2.runs, hx, x2.runs)
        sc = float(epsilon_lower_bound(k1, n1, k2, n2, alpha=alpha, delta=delta))
        if sc > best[0]:
            best = (sc, ev, forward)
    return best[1], best[2], best[0]


@contextmanager
def memoized_encode() -> Iterator[None]:
    """Cache ``dpsynth.pipeline.encode`` per (dataset, schema) while auditing (it is deterministic)."""
    real = PIPELINE.encode
    cache: dict[tuple[int, Schema], tuple[Any, Any]] = {}

    def encode(df: pd.DataFrame, schema: Schema) -> Any:
        key = (id(df), schema)  # schemas are frozen and compare by value
        if key not in cache:
            first, second = real(df, schema), real(df, schema)
            if not np.array_equal(first.codes, second.codes):
                raise AssertionError("encode() is not deterministic; it cannot be cached in the audit")
            cache[key] = (df, first)  # holding df keeps its id from being reused
        return cache[key][1]

    PIPELINE.encode = encode
    try:
        yield
    finally:
        PIPELINE.encode = real


# ---------------------------------------------------------------- neighbouring pairs


def pairs(epsilon: float = 0.5) -> dict[str, Pair]:
    """The audited neighbour pairs (tiny schemas, 3–4 cells, n ≤ 7)."""
    colours = CategoricalColumn(name="colour", categories=("red", "green", "blue"))
    base = pd.DataFrame({"colour": ["red"] * 3 + ["green"] * 2})
    x = NumericColumn(name="x", lower=0, upper=100, bins=4)
    xs = pd.DataFrame({"x": ["5", "10", "15", "20", "30"]})
    missing = CategoricalColumn(name="colour", categories=("red", "green", "blue"), missing=True, on_unknown="missing")
    dropping = CategoricalColumn(name="colour", categories=("red", "green", "blue"), on_unknown="drop")
    seen = pd.DataFrame({"colour": ["red"] * 3 + ["green"] * 2 + ["blue"]})
    add = {"epsilon": epsilon, "neighbours": "add-remove"}
    return {
        "add to empty cell": Pair("add to empty cell", Schema((colours,)), base,
                                  pd.concat([base, pd.DataFrame({"colour": ["blue"]})], ignore_index=True), add),
        "extreme value": Pair("extreme value", Schema((x,)), xs,
                              pd.concat([xs, pd.DataFrame({"x": ["1000000"]})], ignore_index=True), add),
        "replace-one move": Pair("replace-one move", Schema((colours,)), base,
                                 pd.DataFrame({"colour": ["red"] * 2 + ["green"] * 3}),
                                 {"epsilon": epsilon, "neighbours": "replace-one"}),
        "unseen category (missing)": Pair("unseen category (missing)", Schema((missing,)), seen,
                                          pd.concat([seen, pd.DataFrame({"colour": ["purple"]})], ignore_index=True), add),
        "unseen category (drop)": Pair("unseen category (drop)", Schema((dropping,)), seen,
                                       pd.concat([seen, pd.DataFrame({"colour": ["purple"]})], ignore_index=True), add),
    }


def nightly_pairs() -> dict[str, Pair]:
    """The CI pairs at ε = 0.5 and ε = 1, and the discrete Gaussian (ε = 1, δ = 1e-5) on two of them."""
    out: dict[str, Pair] = {}
    for eps in (0.5, 1.0):
        for name, p in pairs(eps).items():
            key = f"{name} (ε={eps:g})"
            out[key] = Pair(key, p.schema, p.d, p.d_prime, p.options)
    for name in ("add to empty cell", "replace-one move"):
        p = pairs(1.0)[name]
        key = f"{name} (discrete Gaussian, ε=1, δ=1e-5)"
        out[key] = Pair(key, p.schema, p.d, p.d_prime, {**p.options, "delta": 1e-5, "mechanism": "gaussian"})
    return out


def marginals_pairs(epsilon: float = 1.0) -> dict[str, Pair]:
    """The marginals method (select–measure–reconstruct) on three binary columns: a row added to cells
    no row occupies, and a row moved under replace-one; and a row added to a 500-row table whose model
    cliques are capped at one pair (:func:`factor_pair`), so that a pair outside them is selected and
    measured in a pair-factor round. About 25 ms per release: nightly only."""
    cols = tuple(CategoricalColumn(name=n, categories=c) for n, c in (("a", ("x", "y")), ("b", ("u", "v")),
                                                                       ("c", ("p", "q"))))
    d = pd.DataFrame({"a": ["x", "x", "x", "y", "y"], "b": ["u", "v", "u", "v", "u"], "c": ["p"] * 5})
    added = pd.concat([d, pd.DataFrame({"a": ["y"], "b": ["v"], "c": ["q"]})], ignore_index=True)
    moved = d.assign(c=["p", "p", "p", "p", "q"])
    opts = {"epsilon": epsilon, "method": "marginals"}
    return {
        "marginals: add to empty cells": Pair("marginals: add to empty cells", Schema(cols), d, added,
                                              {**opts, "neighbours": "add-remove"}),
        "marginals: replace-one move": Pair("marginals: replace-one move", Schema(cols), d, moved,
                                            {**opts, "neighbours": "replace-one"}),
        "marginals: pair-factor round": factor_pair(epsilon),
    }


#: Model cliques of at most one pair of binary columns (4 cells, 2 columns) at every signal-to-noise.
FACTOR_PAIR_LIMITS = ((0.0, 4, 2),)


def factor_pair(epsilon: float = 1.0, rows: int = 500) -> Pair:
    """Three binary columns in a chain (a → b → c, each copied with probability 0.8), ``rows`` rows, and
    one row added where the chain is rarest (a = y, b = u, c = q). With cliques capped at one pair
    (:data:`FACTOR_PAIR_LIMITS`) the tree holds two of the three pairs; at ε = 1 and 500 rows a typical
    pair's signal-to-noise is about 16, so the fit runs a pair-factor round on the third pair (the audit
    then covers the factor round's selection and measurement as well as the tree's)."""
    g = np.random.default_rng(20261126)
    a = g.random(rows) < 0.5
    b = np.where(g.random(rows) < 0.8, a, ~a)
    c = np.where(g.random(rows) < 0.8, b, ~b)
    d = pd.DataFrame({"a": np.where(a, "x", "y"), "b": np.where(b, "u", "v"), "c": np.where(c, "p", "q")})
    cols = tuple(CategoricalColumn(name=n, categories=v) for n, v in (("a", ("x", "y")), ("b", ("u", "v")),
                                                                       ("c", ("p", "q"))))
    added = pd.concat([d, pd.DataFrame({"a": ["y"], "b": ["u"], "c": ["q"]})], ignore_index=True)
    return Pair("marginals: pair-factor round", Schema(cols), d, added,
                {"epsilon": epsilon, "method": "marginals", "neighbours": "add-remove"},
                settings=(("dpsynth.marginals.budget", "CLIQUE_LIMITS", FACTOR_PAIR_LIMITS),))


# ---------------------------------------------------------------- planted bugs


Patch = Callable[[Callable[[Any, str, Any], None]], None]
"""A mutant plants itself through ``setattr(obj, name, value)`` (pytest's monkeypatch.setattr)."""


def _scale_epsilon(setattr_: Callable[[Any, str, Any], None]) -> None:
    dl = MECHANISMS.DiscreteLaplace

    def calibrate(cls: type, epsilon: float, neighbours: Any, max_contributions: int = 1) -> Any:
        eps = MECHANISMS.check_epsilon(epsilon)
        l1 = MECHANISMS.histogram_l1_sensitivity(neighbours, max_contributions)
        return cls(epsilon=eps, l1_sensitivity=l1, scale=noise.rational_at_least(Fraction(l1) * Fraction(eps)))

    setattr_(dl, "calibrate", classmethod(calibrate))


def _no_noise_on_empty(setattr_: Callable[[Any, str, Any], None]) -> None:
    dl = MECHANISMS.DiscreteLaplace

    def call(self: Any, counts: np.ndarray, *, rng: np.random.Generator) -> np.ndarray:
        c = np.asarray(counts, dtype=np.int64)
        return c + noise.discrete_laplace(self.scale, c.shape, rng=rng) * (c > 0)

    setattr_(dl, "__call__", call)


def _bins_from_data(setattr_: Callable[[Any, str, Any], None]) -> None:
    real = RELEASE.release

    def release(df: pd.DataFrame, schema: Schema, **kw: Any) -> Any:
        cols = []
        for c in schema.columns:
            if isinstance(c, NumericColumn):
                v = pd.to_numeric(df[c.name], errors="coerce")
                c = NumericColumn(name=c.name, lower=float(v.min()), upper=float(v.max()), bins=c.bins,
                                  missing=c.missing)
            cols.append(c)
        return real(df, Schema(tuple(cols)), **kw)

    setattr_(RELEASE, "release", release)


def _rows_equal_n(setattr_: Callable[[Any, str, Any], None]) -> None:
    real_encode = PIPELINE.encode
    seen: dict[str, int] = {}

    def encode(df: pd.DataFrame, schema: Schema) -> Any:
        out = real_encode(df, schema)
        seen["n"] = len(out.codes)
        return out

    setattr_(PIPELINE, "encode", encode)
    setattr_(RESULTS.NoisyHistogram, "noisy_total", property(lambda self: seen["n"]))
    setattr_(RESULTS.NoisyHistogram, "listed_total", property(lambda self: seen["n"]))


def _replace_one_as_add_remove(setattr_: Callable[[Any, str, Any], None]) -> None:
    setattr_(MECHANISMS, "histogram_l1_sensitivity", lambda neighbours, max_contributions=1: int(max_contributions))


def _categories_from_data(setattr_: Callable[[Any, str, Any], None]) -> None:
    real = RELEASE.release

    def release(df: pd.DataFrame, schema: Schema, **kw: Any) -> Any:
        cols = []
        for c in schema.columns:
            if isinstance(c, CategoricalColumn):
                extra = [v for v in pd.unique(df[c.name].dropna().astype(str)) if v not in c.categories]
                c = CategoricalColumn(name=c.name, categories=(*c.categories, *extra), missing=c.missing,
                                      on_unknown=c.on_unknown)
            cols.append(c)
        return real(df, Schema(tuple(cols)), **kw)

    setattr_(RELEASE, "release", release)


#: name → (plant, the pair that must catch it)
MUTANTS: dict[str, tuple[Patch, str]] = {
    "noise scale ε instead of 1/ε": (_scale_epsilon, "add to empty cell"),
    "no noise on empty cells": (_no_noise_on_empty, "add to empty cell"),
    "bins from data min/max": (_bins_from_data, "extreme value"),
    "synthetic row count = true n": (_rows_equal_n, "add to empty cell"),
    "replace-one calibrated as add/remove": (_replace_one_as_add_remove, "replace-one move"),
    "categories from the data": (_categories_from_data, "unseen category (drop)"),
}


@contextmanager
def _patching() -> Iterator[Callable[[Any, str, Any], None]]:
    """A ``setattr`` whose every change is undone when the block ends."""
    undo: list[tuple[Any, str, Any]] = []

    def setattr_(obj: Any, attr: str, value: Any) -> None:
        undo.append((obj, attr, obj.__dict__[attr] if attr in vars(obj) else getattr(obj, attr)))
        setattr(obj, attr, value)

    try:
        yield setattr_
    finally:
        for obj, attr, value in reversed(undo):
            setattr(obj, attr, value)


@contextmanager
def planted(name: str) -> Iterator[None]:
    """Plant a mutant for the duration of a block (for scripts; tests use monkeypatch)."""
    with _patching() as setattr_:
        MUTANTS[name][0](setattr_)
        yield
