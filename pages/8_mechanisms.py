"""Mechanisms (learning page): Laplace, Gaussian, randomized response and exponential mechanism demos."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import streamlit as st

from dpsynth import plots
from dpsynth.demos import demo_rng, exponential_choice_shares, neighbour_outputs, randomized_response_surveys
from dpsynth.humanize import likelihood_factor, number
from dpsynth.mechanisms import DiscreteGaussian, DiscreteLaplace, analytic_gaussian_sigma
from dpsynth.ui_state import AppState, get_state, show_errors

DRAWS = 20_000


def rng_for(state: AppState, demo: str) -> np.random.Generator:
    """Demo randomness: seeded (so reruns show the same picture), re-drawn on request. Not for releases."""
    return demo_rng(demo, state.analyses.get("demo_draw", 0))


def laplace_demo(state: AppState) -> None:
    st.markdown("**Question**: how many people in the data have diabetes? One person more or less changes the"
                " answer by 1 (the *sensitivity* Δ = 1). The Laplace mechanism adds noise of scale Δ/ε.")
    st.latex(r"M(D) = f(D) + Z,\qquad P(Z = z) \propto e^{-|z|\,\varepsilon/\Delta}")
    c1, c2 = st.columns(2)
    eps = c1.slider("ε", 0.05, 5.0, 1.0, 0.05, key="mech_lap_eps")
    true = int(c2.number_input("True count in D", 0, 10_000, 100, key="mech_lap_count"))
    mech = DiscreteLaplace.calibrate(eps, "add-remove")
    a, b = neighbour_outputs(mech, true, DRAWS, rng=rng_for(state, "laplace"))
    st.plotly_chart(plots.outputs_figure({f"D (count {true})": a, f"D′ = D + one person (count {true + 1})": b},
                                         f"{DRAWS:,} noisy answers on two neighbouring datasets", "released count",
                                         integer=True),
                    key="mech_lap_fig")
    st.success(f"**Guarantee**: ε-DP. For every possible answer, the two bars differ by at most a factor of"
               f" {likelihood_factor(eps)} (e to the power ε); seeing the answer, nobody can tell well whether that one"
               f" person is in. Typical error ±{number(mech.noise_std())}.")


def gaussian_demo(state: AppState) -> None:
    st.markdown("Gaussian noise is scaled to the L2 sensitivity and needs a small δ: the chance that the ε bound"
                " fails. Its tails are lighter, which helps when many numbers are released together.")
    st.latex(r"M(D) = f(D) + Z,\qquad P(Z = z) \propto e^{-z^2/(2\sigma^2)}")
    c1, c2, c3 = st.columns(3)
    eps = c1.slider("ε", 0.05, 5.0, 1.0, 0.05, key="mech_gau_eps")
    delta = float(c2.select_slider("δ", [1e-10, 1e-8, 1e-6, 1e-4], value=1e-6, key="mech_gau_delta",
                                   format_func=lambda d: f"{d:.0e}"))
    true = int(c3.number_input("True count in D", 0, 10_000, 100, key="mech_gau_count"))
    mech = DiscreteGaussian.calibrate(eps, delta, "add-remove")
    a, b = neighbour_outputs(mech, true, DRAWS, rng=rng_for(state, "gaussian"))
    st.plotly_chart(plots.outputs_figure({f"D (count {true})": a, f"D′ (count {true + 1})": b},
                                         f"{DRAWS:,} noisy answers, σ = {math.sqrt(float(mech.sigma2)):.2f}", "released count",
                                         integer=True),
                    key="mech_gau_fig")
    st.success(f"**Guarantee**: (ε, δ)-DP with σ = {math.sqrt(float(mech.sigma2)):.3f}, the smallest that meets the exact"
               " privacy profile of the discrete Gaussian (Canonne, Kamath & Steinke 2020); the continuous Gaussian"
               f" would need σ = {analytic_gaussian_sigma(eps, delta, 1.0):.3f} (Balle & Wang 2018).")


def rr_demo(state: AppState) -> None:
    st.markdown("**Randomized response** (Warner 1965): ask a sensitive yes/no question; each person tells the truth"
                " with probability e^ε/(1+e^ε) and lies otherwise. No single answer can be trusted, yet the share of"
                " 'yes' can be estimated — this is *local* DP: nobody, not even the curator, sees true answers.")
    st.latex(r"P(\text{report truth}) = \frac{e^\varepsilon}{1+e^\varepsilon},\qquad"
             r"\hat p = \frac{\bar y - (1-q)}{2q - 1},\ q = \frac{e^\varepsilon}{1+e^\varepsilon}")
    c1, c2, c3 = st.columns(3)
    eps = c1.slider("ε", 0.1, 5.0, 1.0, 0.1, key="mech_rr_eps")
    share = c2.slider("True share of 'yes'", 0.0, 1.0, 0.3, 0.01, key="mech_rr_share")
    n = int(c3.select_slider("People asked", [100, 1000, 10_000], value=1000, key="mech_rr_n"))
    estimates = randomized_response_surveys(share, n, eps, 300, rng=rng_for(state, "rr"))
    st.plotly_chart(plots.outputs_figure({"estimated share of 'yes'": estimates},
                                         f"300 surveys of {n:,} people (true share {share:.0%})", "estimated share"),
                    key="mech_rr_fig")
    st.success(f"**Guarantee**: ε-local-DP for each person. Spread of the estimate: ±{np.std(estimates):.3f}"
               " — more people or a larger ε make it smaller.")


def em_demo(state: AppState) -> None:
    st.markdown("**Exponential mechanism** (McSherry & Talwar 2007): choose the *best* option privately, e.g. the"
                " most common diagnosis. Each option has a score (here a count, sensitivity 1); better options are"
                " exponentially more likely, but every option keeps a chance.")
    st.latex(r"P(\text{choose } r) \propto \exp\!\Big(\frac{\varepsilon\, u(D, r)}{2\,\Delta u}\Big)")
    eps = st.slider("ε", 0.05, 5.0, 0.5, 0.05, key="mech_em_eps")
    default = pd.DataFrame({"option": ["flu", "asthma", "diabetes", "migraine"], "score": [30, 25, 20, 5]})
    st.caption("Edit the options and their scores, or add rows, and watch the choices change.")
    table = st.data_editor(default, key="mech_em_table", num_rows="dynamic", hide_index=True)
    table = table.dropna()
    if table.empty:
        st.info("Add at least one option.")
        return
    scores = pd.to_numeric(table["score"], errors="coerce").fillna(0).to_numpy(dtype=float)
    shares = exponential_choice_shares(scores, eps, 2000, rng=rng_for(state, "em"))
    st.plotly_chart(plots.choice_figure(table["option"].astype(str).tolist(), scores.tolist(), shares.tolist()),
                    key="mech_em_fig")
    st.success("**Guarantee**: ε-DP. Changing one person changes each score by at most Δu = 1, which changes each"
               f" option's probability by at most a factor of {likelihood_factor(eps)} (e to the power ε).")


def main() -> None:
    state = get_state(st.session_state)
    st.title("How the noise works")
    st.markdown("Four building blocks of differential privacy, with the formula, the guarantee and a live"
                " simulation. Nothing here touches your data or your budget.")
    if st.button("Draw new random numbers", key="mech_redraw"):
        state.analyses["demo_draw"] = state.analyses.get("demo_draw", 0) + 1
    tabs = st.tabs(["Laplace", "Gaussian", "Randomized response", "Exponential mechanism"])
    demos = [laplace_demo, gaussian_demo, rr_demo, em_demo]
    for tab, demo in zip(tabs, demos, strict=True):
        with tab, show_errors():
            demo(state)


main()


# ---------------------------------------------------------------- why noise is needed at all (reconstruction)
def reconstruction_section(state: AppState) -> None:
    """Reconstruction attack demo: recovered share of secret bits against noise size, DP noise marked."""
    from dpsynth.reconstruction import default_sizes, sweep

    st.header("Why noise at all? A reconstruction attack")
    st.markdown(
        "Imagine a small group of people, each with one secret yes/no (say, a diagnosis). Someone may ask many"
        " questions of the form *“how many of these people have it?”* about random halves of the group, and gets"
        " answers that are off by at most **E**. Solving the answers like a system of equations and rounding recovers"
        " the secrets when E is well below √n (n people): the *reconstruction attack* of the Algorithmic Foundations of"
        " Differential Privacy slides (reconstruction attacks; Dinur & Nissim 2003). Noise far above √n leaves the"
        " attacker guessing. The star shows where the noise of our mechanisms at your ε falls."
    )
    c1, c2, c3, c4 = st.columns(4)
    n = int(c1.number_input("People (n)", 50, 1000, 500, 50, key="recon_n"))
    m = int(c2.number_input("Questions asked", 50, 5000, 2000, 50, key="recon_m"))
    bound = float(c3.number_input("Noise size E", 0.0, 10_000.0, 5.0, 1.0, key="recon_e"))
    eps = float(c4.number_input("ε", 0.01, 10.0, 1.0, 0.1, key="recon_eps"))
    per_query = st.radio(
        "How ε is spent", ["ε for all the questions together (each answered at ε / questions)",
                           "ε for each question (all of them together cost questions × ε)"],
        key="recon_accounting", horizontal=True,
    ).startswith("ε for each")
    inputs = (n, m, bound, eps, per_query)
    if st.button("Run the attack", key="recon_run"):
        with show_errors():
            sizes = sorted({*default_sizes(n).round(2).tolist(), bound})
            result = sweep(n, m, sizes, epsilon=eps, accounting="per-query" if per_query else "total",
                           rng=rng_for(state, "reconstruction"))
            state.analyses["reconstruction"] = {"inputs": inputs, "sweep": result}
    done = state.analyses.get("reconstruction")
    if done is None:
        st.info("Choose the numbers and press **Run the attack** (a second or two).")
        return
    result = done["sweep"]
    if done["inputs"] != inputs:
        st.caption("You changed the numbers: press **Run the attack** again to update the picture below.")
    n_, m_, bound_, eps_, per_query_ = done["inputs"]
    chosen = result.at(bound_)
    st.plotly_chart(plots.reconstruction_figure(result, chosen), key="recon_fig")
    spent = (f"each answer at ε = {eps_:g}, so all {m_:,} answers together cost ε = {m_ * eps_:g}" if per_query_
             else f"all {m_:,} answers together at ε = {eps_:g}, each at ε/{m_:,}")
    st.markdown(
        f"With answers off by at most E = {bound_:g}, the attacker recovered **{chosen.recovered:.1%}** of the {n_:,}"
        f" secrets (√n = {result.sqrt_n:.3g}; guessing gets 50%). With the discrete Laplace noise our releases add"
        f" ({spent}: standard deviation {result.dp.noise_std:,.3g} per answer) the attacker recovered"
        f" **{result.dp.recovered:.1%}**."
    )
    st.caption(
        "The star is plotted at the E of bounded noise with the same spread (E = √3 × standard deviation). Spending ε"
        " per question instead of for all of them together is what the attack exploits: privacy loss adds up over"
        " questions (basic composition). Simulated people and secrets only; nothing here touches your data or budget."
    )


reconstruction_section(get_state(st.session_state))
