"""Privacy page: ε (and δ), neighbours and unit of protection, budget, accuracy preview without data."""

from __future__ import annotations

import streamlit as st

from dpsynth.accounting import PrivacyBudget
from dpsynth.errors import DPSynthError
from dpsynth.prediction import cell_count_words, noise_sentence, predict_utility
from dpsynth.ui_state import REFERENCE_DEPLOYMENTS, AppState, epsilon_guidance, get_state, show_errors
from dpsynth.verdicts import utility_verdict

NEIGHBOUR_TEXT = {
    "add-remove": "**Add or remove one person** (recommended): the release looks almost the same whether or not"
                  " any one person is in the data — even the number of rows is protected.",
    "replace-one": "**Replace one person** by someone else: protects what each person's row says, but treats the"
                   " number of rows as public (use only if that number is already published).",
}


def epsilon_section(state: AppState) -> None:
    st.subheader("How much privacy: ε (epsilon)")
    c1, c2 = st.columns([1, 2])
    with c1:
        state.epsilon = st.number_input("ε for this release", min_value=0.01, max_value=50.0, value=float(state.epsilon),
                                        step=0.1, format="%g", key="privacy_epsilon",
                                        help="Smaller ε = more noise = more privacy.")
        mech = st.radio("Noise", ["laplace", "gaussian"], index=["laplace", "gaussian"].index(state.mechanism),
                        key="privacy_mechanism",
                        format_func=lambda m: {"laplace": "Laplace (pure ε-DP, δ = 0)",
                                               "gaussian": "Gaussian (needs a small δ)"}[m],
                        help="Gaussian noise has lighter tails (fewer large errors) at the cost of a tiny chance δ"
                             " that the ε guarantee does not hold.")
        state.mechanism = mech
        if mech == "gaussian":
            state.delta = st.number_input("δ", min_value=1e-12, max_value=1e-3, value=float(state.delta or 1e-6),
                                          format="%.0e", key="privacy_delta",
                                          help="Keep δ far below 1 / (number of people), e.g. 1e-6 or smaller.")
    with c2:
        st.info(epsilon_guidance(state.epsilon))
        st.markdown("**For comparison, real deployments (approximate, as published):**")
        st.markdown("| deployment | ε | what it covers |\n|---|---|---|\n" + "\n".join(
            f"| {r['deployment']} | {r['epsilon']} | {r['note']} |" for r in REFERENCE_DEPLOYMENTS))
        st.caption("These values protect different things (a day of activity, a whole census) and are not directly"
                   " comparable; they show the range used in practice.")


def protection_section(state: AppState) -> None:
    st.subheader("Whom it protects: neighbouring datasets and unit of protection")
    rel = st.radio("Two datasets count as 'neighbours' when they differ by…", ["add-remove", "replace-one"],
                   index=["add-remove", "replace-one"].index(state.neighbours), key="privacy_neighbours",
                   format_func=lambda r: {"add-remove": "adding or removing one person",
                                          "replace-one": "replacing one person"}[r])
    state.neighbours = rel
    st.markdown(NEIGHBOUR_TEXT[rel])
    cols = list(map(str, state.data.columns)) if state.has_data else []
    options = ["(each row is a different person)", *cols]
    current = state.id_column if state.id_column in cols else options[0]
    pick = st.selectbox("Unit of protection", options, index=options.index(current), key="privacy_id_column",
                        help="If one person can have several rows (e.g. several hospital visits), pick the column"
                             " that identifies the person.")
    if pick == options[0]:
        state.id_column, state.max_contributions = None, 1
        st.caption("Each row is protected. If one person has several rows, pick their ID column instead.")
    else:
        state.id_column = pick
        state.max_contributions = int(st.number_input("At most this many rows per person are kept (chosen at random)",
                                                      min_value=1, max_value=100, value=max(1, state.max_contributions),
                                                      key="privacy_max_rows"))
        st.caption(f"Everything a person contributes (up to {state.max_contributions} rows sharing a value of"
                   f" {pick!r}) is protected; the noise grows with this number.")
        schema, _ = state.schema()
        if schema is not None and pick in schema.names:
            st.warning(f"{pick!r} identifies people: untick it on the Schema page, it cannot be part of the release.")


def budget_section(state: AppState) -> None:
    st.subheader("Total budget for this dataset")
    st.markdown("Every release of the same data adds up (sequential composition). The ledger records each spend and"
                " refuses one that would take the dataset past its total.")
    with show_errors():
        ledger = state.ledger()
        total = ledger.total(state.dataset_id) if state.dataset_id else None
        spent = ledger.spent(state.dataset_id) if state.dataset_id else PrivacyBudget(0.0)
        if total is None:
            t1, t2 = st.columns(2)
            state.total_epsilon = t1.number_input("Total ε this dataset may ever spend", min_value=0.01, max_value=100.0,
                                                  value=float(state.total_epsilon), format="%g", key="privacy_total")
            state.total_delta = t2.number_input("Total δ this dataset may ever spend", min_value=0.0, max_value=1e-3,
                                                value=float(state.total_delta), format="%.1e", key="privacy_total_delta",
                                                help="Gaussian noise and private estimates spend δ; 0 allows Laplace only.")
            st.caption("This dataset is not in the ledger yet; the total is recorded with the first spend.")
            total = state.budget()
        c1, c2, c3, c4 = st.columns(4)
        c1.metric("total ε", f"{total.epsilon:g}")
        c2.metric("spent so far", f"{spent.epsilon:g}")
        left = total - spent
        c3.metric("ε left", f"{left.epsilon:g}")
        c4.metric("δ left", f"{left.delta:.2g}", help=f"of a total δ = {total.delta:.2g}; Gaussian noise and private"
                  " estimates spend δ, Laplace noise spends none")
        if state.epsilon > left.epsilon + 1e-9:
            st.error(f"ε = {state.epsilon:g} is more than the ε left ({left.epsilon:g}); the release would be refused."
                     " Choose a smaller ε, or raise the total (with a reason) on the Ledger page.")
        if state.spend_delta() > left.delta + 1e-15:
            st.error(f"δ = {state.spend_delta():g} is more than the δ left ({left.delta:.2g}); the release would be"
                     " refused. Choose Laplace noise (δ = 0) or a smaller δ, or raise the total δ (with a reason) on"
                     " the Ledger page.")


def preview_section(state: AppState) -> None:
    st.subheader("What this costs in accuracy (computed without looking at your data)")
    schema, errors = state.schema()
    if schema is None:
        st.warning("Fix the schema first: " + " ".join(errors))
        return
    hint = st.number_input("Rough number of rows (a public guess, not read from the file; 0 = don't know)", min_value=0,
                           value=int(state.expected_rows or 0), step=1000, key="privacy_rows_hint",
                           help="The exact number of rows is itself private; a round public figure is enough.")
    state.expected_rows = int(hint) or None
    with show_errors():
        state.method = st.radio("Release method", ["auto", "histogram", "marginals"],
                                index=["auto", "histogram", "marginals"].index(state.method), key="privacy_method",
                                horizontal=True,
                                format_func=lambda m: {"auto": "let dpsynth choose", "histogram": "full histogram",
                                                       "marginals": "marginals (for many columns)"}[m])
        pred = predict_utility(schema, state.epsilon, state.spend_delta(), state.neighbours,
                               max_contributions=state.max_contributions, mechanism=state.mechanism,
                               method=state.method, expected_rows=state.expected_rows)
        st.caption(f"Method for this release: **{pred.method}** — {pred.why}.")
        c1, c2, c3 = st.columns(3)
        c1.metric("each column's shares off by about", f"{pred.one_way_tvd:.1%}",
                  help="Expected total-variation distance between a real and a synthetic column: the share of rows"
                       " that would have to change category for the two to match.")
        c2.metric("each pair of columns off by about", f"{pred.two_way_tvd:.1%}")
        c3.metric("cells in the full histogram", cell_count_words(schema.n_cells))
        st.markdown(noise_sentence(pred))
        verdict = utility_verdict(pred, schema)
        if verdict.ok:
            st.success(verdict.message)
        else:
            st.error(verdict.message)
            st.markdown("**What would help:**\n" + "\n".join(f"- {a}" for a in verdict.advice))
        st.caption("Computed from the schema, ε and the rough number of rows only — the data is not read. Expected"
                   " values: a real release varies around them.")


def main() -> None:
    state = get_state(st.session_state)
    st.title("3 · Privacy level")
    st.markdown("Differential privacy adds carefully sized random noise so that the release barely depends on any"
                " one person. **ε** measures that dependence: the smaller, the more private and the noisier.")
    epsilon_section(state)
    protection_section(state)
    if not state.has_data:
        st.info("Load a dataset (Data page) to see its budget and the accuracy preview.")
        return
    try:
        budget_section(state)
        preview_section(state)
    except DPSynthError as exc:
        st.error(str(exc))
    st.page_link("pages/4_release.py", label="Next: make the release →", icon=":material/rocket_launch:")


main()
