"""The released marginal model: its noisy measurements, the network fitted to them, sampling.

Everything in a :class:`MarginalModel` is a release artifact or post-processing of one
(sampling it again, with any number of rows, spends no budget); :meth:`MarginalModel.to_dict`
is the ``model.json`` of a release and :meth:`MarginalModel.from_dict` reads it back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpsynth.errors import InputError
from dpsynth.marginals.pair_factors import PairFactor, apply_factors
from dpsynth.randomness import systematic_points

FORMAT = "dpsynth.marginals/1"


@dataclass(frozen=True, eq=False)
class Step:
    """One factor of the Bayesian network: ``P(new | parents)`` as a (parent cells × new cells) table."""

    new: tuple[int, ...]
    parents: tuple[int, ...]
    cpt: np.ndarray

    @property
    def probs(self) -> np.ndarray:
        """``cpt`` with each row scaled to sum to 1 (released tables are rounded, so their rows sum to 1
        only to within cells × 5e-8); what sampling draws from."""
        total = self.cpt.sum(axis=1, keepdims=True)
        return self.cpt / np.where(total > 0, total, 1.0)


@dataclass(frozen=True, eq=False)
class MarginalModel:
    """A fitted model: the released noisy measurements and the network reconstructed from them.

    Everything here is a release artifact or post-processing of one: sampling it again, with any
    number of rows, spends no budget.
    """

    sizes: tuple[int, ...]
    steps: tuple[Step, ...]
    noisy_total: float
    measurements: list[tuple[tuple[int, ...], np.ndarray]]
    noise: list[dict[str, Any]]
    stages: list[dict[str, Any]]
    params: dict[str, Any] = field(default_factory=dict)
    #: Pair factors on top of the tree, applied in order after the tree's draws (:mod:`~dpsynth.marginals.pair_factors`).
    factors: tuple[PairFactor, ...] = ()

    # -- sampling ----------------------------------------------------------------------------

    def sample(self, n_rows: int, *, rng: np.random.Generator) -> np.ndarray:
        """``n_rows`` synthetic rows of cell codes (int64, rows × columns); post-processing.

        Ancestral sampling with *systematic* draws inside each parent configuration: for each
        factor, the g rows sharing a parent configuration get the points (σ_j + U)/g of that
        configuration's CDF (one uniform U per configuration, σ a permutation of 0 … g − 1), so
        the count of every (parents, value) cell is within one of its expectation g·P — the
        controlled rounding Private-PGM's sampler does — and the rows' clique marginals follow the
        model without the multinomial sampling error of i.i.d. draws. The rows of a configuration
        are ordered by the columns drawn before outside the parents (randomly relabelled,
        :meth:`_strata`) and σ spreads any run of them over the CDF
        (:func:`dpsynth.randomness.systematic_points`), so the new column's counts within each of
        those strata also come near their expectation; a random cyclic offset keeps each row's
        value at the law P(new | parents) and independent of the columns outside the factor, as
        the model says. Paired releases (`benchmarks/bench_paired.py --against 1afe05b`): Adult
        2-/3-way TVD −0.0000 / −0.0002 at ε = 1 and −0.0001 / −0.0003 at ε = 10 (6 seeds);
        Titanic −0.0002 / −0.0006 at ε = 1 and −0.0003 / −0.0007 at ε = 10 (20 seeds).
        O(rows·log rows) per factor.
        """
        n = int(n_rows)
        if n < 0:
            raise InputError(f"The number of rows to sample must be ≥ 0, got {n_rows!r}.")
        d = len(self.sizes)
        # column-major while sampling: each factor reads and writes whole columns
        out = np.zeros((n, d), dtype=np.int64, order="F")
        if n == 0:
            return np.ascontiguousarray(out)
        drawn: list[int] = []
        for step in self.steps:
            configs, k = step.cpt.shape
            if step.parents:
                pidx = np.ravel_multi_index(tuple(out[:, p] for p in step.parents),
                                            tuple(self.sizes[p] for p in step.parents))
            else:
                pidx = np.zeros(n, dtype=np.int64)
            order, sp, u = systematic_points(pidx, configs, rng=rng, strata=self._strata(out, step, drawn, rng))
            drawn.extend(step.new)
            # rows scaled to sum to 1 (the released tables are rounded), so the last cell does not
            # take what the rounding left
            cdf = np.cumsum(step.probs, axis=1)
            cdf[:, -1] = 1.0
            # Row p's CDF lives in [p, p+1]; stacking keeps the whole key array sorted.
            keys = (cdf + np.arange(configs, dtype=np.float64)[:, None]).ravel()
            pos = np.searchsorted(keys, sp + u, side="right") - sp * k
            pos = np.clip(pos, 0, k - 1)
            new_vals = np.unravel_index(pos, tuple(self.sizes[c] for c in step.new))
            for c, v in zip(step.new, new_vals, strict=True):
                out[order, c] = v
        out = np.ascontiguousarray(out)
        if self.factors:
            apply_factors(self.steps, self.sizes, self.factors, out, rng)
        return out

    def _strata(self, out: np.ndarray, step: Step, drawn: list[int], rng: np.random.Generator) -> np.ndarray | None:
        """Strata for a factor's systematic draws: the columns drawn so far outside its parents, in
        random order while the product of their sizes stays within 2^20, each relabelled by a
        random permutation, combined into one code per row (None if there are none).

        Public sizes fix what is drawn from ``rng``; the relabelling keeps any value from always
        coming first (:func:`dpsynth.randomness.systematic_uniforms`).
        """
        others = [c for c in drawn if c not in step.parents]
        code = np.zeros(len(out), dtype=np.int64)
        span = 1
        used = 0
        for c in rng.permutation(np.array(others, dtype=np.int64)):
            size = self.sizes[int(c)]
            if span * size > 1 << 20:
                break
            code = code * size + rng.permutation(size)[out[:, int(c)]]
            span *= size
            used += 1
        return code if used else None

    def joint(self, max_cells: int = 2_000_000) -> np.ndarray:
        """The law of the sampled rows over the full domain (small domains only; for checks and tests):
        the tree's joint, then each pair factor's coupling step exactly
        (:func:`dpsynth.marginals.pair_factors.coupled_values`: a row keeps its value with probability
        min(1, p/q), otherwise takes one from (p − q)⁺)."""
        total = math.prod(self.sizes)
        if total > max_cells:
            raise InputError(f"The full domain has {total:,} cells; joint() is for domains ≤ {max_cells:,}.")
        d = len(self.sizes)
        p = np.ones(self.sizes, dtype=np.float64)
        for step in self.steps:
            shape = [1] * d
            cols = list(step.parents) + list(step.new)
            for c in cols:
                shape[c] = self.sizes[c]
            table = step.probs.reshape([self.sizes[c] for c in cols])
            order = np.argsort(cols)
            table = np.transpose(table, order).reshape(shape)
            p = p * table
        if not self.factors:
            return p
        log_tree = np.log(np.maximum(p, 1e-300))

        def grid(cols: tuple[int, ...], table: np.ndarray) -> np.ndarray:
            """A table over ``cols`` (row-major, in that order) as an array that broadcasts over the domain."""
            t = table.reshape([self.sizes[c] for c in cols])
            order = sorted(range(len(cols)), key=lambda i: cols[i])
            shape = [1] * d
            for c in cols:
                shape[c] = self.sizes[c]
            return np.transpose(t, order).reshape(shape)

        def weight(f: PairFactor) -> np.ndarray:
            w = grid((f.given, f.col), f.log_phi)
            for cols, lam in f.kept:
                w = w + grid(cols + (f.col,), lam)
            return w

        def softmax(x: np.ndarray, axis: int) -> np.ndarray:
            z = np.exp(x - x.max(axis=axis, keepdims=True))
            return z / z.sum(axis=axis, keepdims=True)

        logq = log_tree
        for f in self.factors:
            c = f.col
            w = weight(f)
            # the factors before f that do not involve c are constant along c: they cancel below
            q = softmax(logq, c)
            pk = softmax(logq + w, c)
            logq = logq + w
            rest = p.sum(axis=c, keepdims=True)
            r = np.divide(p, rest, out=np.zeros_like(p), where=rest > 0)
            keep = np.where(q > 0, np.minimum(1.0, pk / np.where(q > 0, q, 1.0)), 1.0)
            res = np.maximum(pk - q, 0.0)
            tot = res.sum(axis=c, keepdims=True)
            leave = (r * (1.0 - keep)).sum(axis=c, keepdims=True)
            moved = np.divide(res, tot, out=np.zeros_like(res), where=tot > 0)
            p = rest * np.where(tot > 0, r * keep + leave * moved, r)
        return p

    def clique_marginals(self) -> list[tuple[tuple[int, ...], np.ndarray]]:
        """Exact joint of each step's columns (parents + new, sorted), in step order.

        Each step's parents lie in an earlier step's columns (the junction-tree property), so
        P(parents ∪ new) = P(parents) · P(new | parents) follows recursively from the root.
        """
        out: list[tuple[tuple[int, ...], np.ndarray]] = []
        for step in self.steps:
            cols = step.parents + step.new
            table = step.probs.reshape([self.sizes[c] for c in cols])
            if step.parents:
                src, p = next((c, m) for c, m in out if set(step.parents) <= set(c))
                drop = tuple(k for k, c in enumerate(src) if c not in step.parents)
                ps = p.sum(axis=drop) if drop else p
                kept = [c for c in src if c in step.parents]
                ps = np.transpose(ps, [kept.index(c) for c in step.parents])
                table = table * ps.reshape(ps.shape + (1,) * len(step.new))
            order = sorted(cols)
            out.append((tuple(order), np.transpose(table, [cols.index(c) for c in order])))
        return out

    def marginal(self, cols: Sequence[int]) -> np.ndarray:
        """The model's exact marginal on ``cols`` (in that order): from a clique that holds them
        all, by propagation along the clique tree for a pair, otherwise from :meth:`joint`
        (small domains only). With pair factors, from :meth:`joint` on a small domain; on a larger
        one this is the tree's law, which the factors move (on their pairs above all)."""
        cols = tuple(int(c) for c in cols)
        if self.factors and math.prod(self.sizes) <= 2_000_000:
            p = self.joint()
            m = p.sum(axis=tuple(i for i in range(len(self.sizes)) if i not in cols))
            kept = sorted(cols)
            return np.transpose(m, [kept.index(c) for c in cols])
        cms = self.clique_marginals()
        for cl, p in cms:
            if set(cols) <= set(cl):
                drop = tuple(k for k, c in enumerate(cl) if c not in cols)
                m = p.sum(axis=drop) if drop else p
                kept = [c for c in cl if c in cols]
                return np.transpose(m, [kept.index(c) for c in cols])
        if len(cols) == 2:
            return self._pair_marginal(cols[0], cols[1], cms)
        p = self.joint()
        other = tuple(i for i in range(len(self.sizes)) if i not in cols)
        m = p.sum(axis=other)
        kept = sorted(cols)
        return np.transpose(m, [kept.index(c) for c in cols])

    def _pair_marginal(self, a: int, b: int, cms: list[tuple[tuple[int, ...], np.ndarray]]) -> np.ndarray:
        """P(a, b) for columns in different cliques: carry P(a, clique) along the tree path,
        using P(next clique | separator) at each hop (exact by the junction-tree property)."""
        parent = []
        for i, step in enumerate(self.steps):
            parent.append(next((j for j in range(i) if set(step.parents) <= set(cms[j][0])), -1)
                          if step.parents else -1)
        ia = next(i for i, (cl, _) in enumerate(cms) if a in cl)
        ib = next(i for i, (cl, _) in enumerate(cms) if b in cl)

        def chain(i: int) -> list[int]:
            out = [i]
            while parent[out[-1]] >= 0:
                out.append(parent[out[-1]])
            return out

        up_a, up_b = chain(ia), chain(ib)
        if up_a[-1] != up_b[-1]:  # different trees of the forest: independent
            pa, pb = self.marginal((a,)), self.marginal((b,))
            return np.outer(pa, pb)
        common = next(i for i in up_a if i in set(up_b))
        path = up_a[: up_a.index(common) + 1] + list(reversed(up_b[: up_b.index(common)]))
        cl, p = cms[path[0]]
        sa = self.sizes[a]
        f = np.zeros((sa,) + p.shape)
        idx = [slice(None)] * p.ndim
        for v in range(sa):  # f[v, c] = P(c) · [c_a = v]
            idx[cl.index(a)] = v
            f[(v, *idx)] = p[tuple(idx)]
            idx[cl.index(a)] = slice(None)
        for j in path[1:]:
            nxt, q = cms[j]
            sep = [c for c in cl if c in nxt]
            g = f.sum(axis=tuple(1 + k for k, c in enumerate(cl) if c not in sep))
            q_sep = q.sum(axis=tuple(k for k, c in enumerate(nxt) if c not in sep))
            shape = [self.sizes[c] if c in sep else 1 for c in nxt]
            cond = q / np.where(q_sep > 0, q_sep, 1.0).reshape(shape)
            f = g.reshape([sa] + shape) * cond[None]
            cl = nxt
        m = f.sum(axis=tuple(1 + k for k, c in enumerate(cl) if c != b))
        return m

    # -- release card -------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """Release-card entry: stages, their budget shares and guarantees, how they compose."""
        p = self.params
        pure = p.get("delta", 0.0) == 0.0
        return {
            "method": "marginals (select–measure–reconstruct, AIM-lite on a junction tree)",
            "guarantee": (
                f"({p.get('epsilon')}, 0)-DP (pure)" if pure
                else f"({p.get('epsilon')}, {p.get('delta')})-DP via {p.get('rho_spent'):.6g}-zCDP"
            ),
            "neighbours": p.get("neighbours"),
            "max_contributions": p.get("max_contributions"),
            "accounting": p.get("accounting"),
            "composition": (
                "Adaptive basic composition: the ε of all stages add up." if pure else
                "zCDP: the ρ of all stages add up (Bun & Steinke 2016, Lemma 2.3); the total ρ is"
                " converted to (ε, δ) with Canonne, Kamath & Steinke 2020, Corollary 13."
            ),
            "stages": self.stages,
            "selected_marginals": [list(c) for c, _ in self.measurements if len(c) > 1],
            "model_cliques": self.params.get("cliques", []),
            # Rounds, measured sizes and clique limits the budget bought (public values only).
            "capacity": self.params.get("capacity"),
            "noisy_total": self.noisy_total,
            "post_processing": [
                "noisy total = inverse-variance mean of the measured tables' sums",
                "junction-tree model fitted to all measurements (mirror descent, Private-PGM style)",
                "ancestral sampling, systematic inverse-CDF draws per clique and parent configuration (counts within one of the model's)",
            ] + ([
                f"{len(self.factors)} pair factor{'s' if len(self.factors) != 1 else ''} (measured pairs no clique holds)"
                " fitted by iterative proportional fitting, each redrawing one column of the sampled rows through a"
                " maximal coupling and keeping the other tables the model holds with it (Deming & Stephan 1940;"
                " Thorisson 2000)",
            ] if self.factors else []),
            "pair_factors": [[int(f.given), int(f.col)] for f in self.factors],
            "floating_point": "selection probabilities use floating point (Ilvento 2020); counts use exact integer noise",
        }

    # -- JSON ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form; :meth:`from_dict` restores a model that samples identically."""
        return {
            "format": FORMAT,
            "sizes": list(self.sizes),
            "noisy_total": float(self.noisy_total),
            "steps": [
                {"new": list(s.new), "parents": list(s.parents), "cpt": s.cpt.tolist()} for s in self.steps
            ],
            "measurements": [
                {"cols": list(c), "shape": list(y.shape), "noisy_counts": y.ravel().tolist(), **nz}
                for (c, y), nz in zip(self.measurements, self.noise, strict=True)
            ],
            "stages": self.stages,
            "params": self.params,
            **({"factors": [f.to_dict() for f in self.factors]} if self.factors else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MarginalModel:
        """Rebuild from :meth:`to_dict` output; a malformed document is an :class:`InputError`."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InputError(f"Not a marginal model document (expected format {FORMAT!r}).")
        try:
            sizes = tuple(int(s) for s in data["sizes"])
            steps = []
            for s in data["steps"]:
                new, parents = tuple(int(c) for c in s["new"]), tuple(int(c) for c in s["parents"])
                cpt = np.asarray(s["cpt"], dtype=np.float64)
                rows = math.prod(sizes[c] for c in parents)
                cells = math.prod(sizes[c] for c in new)
                if cpt.shape != (rows, cells) or np.any(cpt < 0):
                    raise InputError(f"Model step for columns {list(new)} has a malformed table.")
                steps.append(Step(new=new, parents=parents, cpt=cpt))
            meas, noise = [], []
            for m in data["measurements"]:
                cols = tuple(int(c) for c in m["cols"])
                y = np.asarray(m["noisy_counts"], dtype=np.int64).reshape([int(s) for s in m["shape"]])
                meas.append((cols, y))
                noise.append({k: v for k, v in m.items() if k not in {"cols", "shape", "noisy_counts"}})
            covered = sorted(c for s in steps for c in s.new)
            if covered != list(range(len(sizes))):
                raise InputError("The model's steps do not cover every column exactly once.")
            factors = tuple(PairFactor.from_dict(f, sizes) for f in data.get("factors", []))
            return cls(sizes=sizes, steps=tuple(steps), noisy_total=float(data["noisy_total"]),
                       measurements=meas, noise=noise, stages=list(data["stages"]),
                       params=dict(data.get("params", {})), factors=factors)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InputError):
                raise
            raise InputError(f"Malformed marginal model document: {exc}.") from None

