"""Throughput of dpsynth's exact integer noise against OpenDP's samplers, measured in one process.

For each scale (default 1 and 10) it times

- ``dpsynth.noise.discrete_laplace`` with a fresh :func:`~dpsynth.noise.secure_rng` (ChaCha20),
- OpenDP 0.16's discrete Laplace: ``dp.m.make_laplace`` on an int64 vector (its own CSPRNG),
- ``dpsynth.noise.discrete_gaussian`` (σ = scale) and OpenDP's ``dp.m.make_gaussian`` on int64,

and prints samples/s and the ratio ours / OpenDP. The machine is shared, so the two samplers are
run alternately, each rate is the best of several repetitions, and rates are given in CPU time
(``time.process_time``: time this process actually ran; both samplers are single-threaded) as well
as in wall time. Only the ratios are meant to be read.

    python benchmarks/bench_noise.py                 # ours 2·10^6 draws, OpenDP 10^5 per repetition
    python benchmarks/bench_noise.py --ours 4000000 --opendp 200000 --reps 5 --scales 1 10 3.3
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import opendp.prelude as dp  # noqa: E402

from dpsynth import noise  # noqa: E402

dp.enable_features("contrib")


def _ours(sampler, n: int) -> None:
    """One release-style call: a fresh secure generator, then n draws."""
    sampler(n, rng=noise.secure_rng())


def _timed(fn) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one call."""
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ours", type=int, default=2_000_000, help="draws per repetition for dpsynth")
    ap.add_argument("--opendp", type=int, default=100_000, help="draws per repetition for OpenDP")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--scales", type=float, nargs="+", default=[1.0, 10.0])
    a = ap.parse_args(argv)

    zeros = [0] * a.opendp
    vec = dp.vector_domain(dp.atom_domain(T=dp.i64))
    print(f"draws per repetition: dpsynth {a.ours:,}, OpenDP {a.opendp:,}; best of {a.reps}, run alternately")
    print(f"{'sampler':<18}{'scale':>6}{'dpsynth /s (cpu)':>18}{'OpenDP /s (cpu)':>17}{'ratio cpu':>11}{'ratio wall':>12}")
    lap_ratios = []
    for scale in a.scales:
        lap = dp.m.make_laplace(vec, dp.l1_distance(T=dp.i64), scale=scale)
        gau = dp.m.make_gaussian(vec, dp.l2_distance(T=dp.i64), scale=scale)
        cases = [
            ("discrete Laplace", partial(noise.discrete_laplace, scale), partial(lap, zeros)),
            ("discrete Gaussian", partial(noise.discrete_gaussian, scale * scale), partial(gau, zeros)),
        ]
        for name, sampler, theirs in cases:
            ours = partial(_ours, sampler, a.ours)
            ours(), theirs()  # warm-up (tables, imports)
            best = {"ours": [float("inf")] * 2, "theirs": [float("inf")] * 2}
            for _ in range(a.reps):
                for key, fn in (("ours", ours), ("theirs", theirs)):
                    best[key] = [min(x, y) for x, y in zip(best[key], _timed(fn), strict=True)]
            r_ours = [a.ours / x for x in best["ours"]]
            r_theirs = [a.opendp / x for x in best["theirs"]]
            ratio_cpu, ratio_wall = r_ours[0] / r_theirs[0], r_ours[1] / r_theirs[1]
            if name == "discrete Laplace":
                lap_ratios.append(ratio_cpu)
            print(f"{name:<18}{scale:>6g}{r_ours[0]:>18,.0f}{r_theirs[0]:>17,.0f}{ratio_cpu:>10.0f}x{ratio_wall:>11.0f}x")
    print(f"smallest discrete Laplace ratio (cpu): {min(lap_ratios):.0f}x (target ≥ 100x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
