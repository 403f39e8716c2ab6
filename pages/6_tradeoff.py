"""Trade-off explorer: error versus ε and versus number of bins, from repeated simulated releases."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dpsynth import plots
from dpsynth.noise import secure_rng
from dpsynth.prediction import predict_utility, prediction_curve
from dpsynth.schema import NumericColumn
from dpsynth.ui_state import AppState, get_state, show_errors
from dpsynth.utility import bins_curve, tradeoff_curves

EPSILONS = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
BINS = [2, 3, 5, 8, 10, 16, 25, 40, 64, 100]


def expected_section(state: AppState, schema) -> None:  # noqa: ANN001 - Schema
    st.subheader("Expected error of your release versus ε (the data is not read)")
    with show_errors():
        curve = pd.DataFrame(prediction_curve(
            schema, EPSILONS, state.spend_delta(), state.neighbours, max_contributions=state.max_contributions,
            mechanism=state.mechanism, method=state.method, expected_rows=state.expected_rows))
        shown = curve.rename(columns={"one_way_tvd": "one column", "two_way_tvd": "two columns"})
        st.line_chart(shown.set_index("epsilon")[["one column", "two columns"]], x_label="ε",
                      y_label="share of rows off")
        now = predict_utility(schema, state.epsilon, state.spend_delta(), state.neighbours,
                              max_contributions=state.max_contributions, mechanism=state.mechanism,
                              method=state.method, expected_rows=state.expected_rows)
        st.markdown(f"At your ε = {state.epsilon:g}: " + now.summary())
        methods = sorted(set(curve["method"]))
        st.caption("Computed from the schema, the settings of the Privacy page and the rough number of rows only,"
                   f" for the method each ε would use ({', '.join(methods)}). The error falls with ε until the"
                   " sampling of the synthetic rows and (for the marginals method) the model's own simplifications"
                   " set a floor that no ε removes.")


def eps_curve(state: AppState, schema, col: str, reps: int) -> None:  # noqa: ANN001 - Schema
    st.subheader("Error versus ε")
    eps = st.multiselect("Values of ε to try", EPSILONS, default=[0.05, 0.1, 0.5, 1.0, 2.0, 4.0], key="trade_eps")
    if st.button("Run the simulation", key="trade_run_eps", disabled=not eps):
        bar = st.progress(0.0, text="Simulating releases")
        with show_errors():
            state.analyses["tradeoff"] = (col, tradeoff_curves(
                state.data, schema, col, sorted(eps), reps, rng=secure_rng(),
                progress=lambda f, msg: bar.progress(f, text=f"Simulating releases at {msg}")))
        bar.empty()
    if "tradeoff" in state.analyses:
        shown_col, curves = state.analyses["tradeoff"]
        st.plotly_chart(plots.tradeoff_figure(curves, shown_col), key="trade_eps_fig")
        st.caption("Left: root-mean-square error of two private estimates of the mean. Right: how far each column's"
                   " counts are from the real ones when measured alone with the full ε (total-variation distance),"
                   " averaged over columns: a best case, since a release shares ε between its tables.")


def bins_section(state: AppState, schema, col: str, reps: int) -> None:  # noqa: ANN001 - Schema
    st.subheader("Error versus number of bins")
    eps = st.select_slider("ε", EPSILONS, value=1.0, key="trade_bins_eps")
    bins = st.multiselect("Numbers of bins to try", BINS, default=[2, 5, 10, 25, 64], key="trade_bins")
    if st.button("Run the simulation", key="trade_run_bins", disabled=not bins):
        bar = st.progress(0.0, text="Simulating releases")
        with show_errors():
            state.analyses["bins"] = (col, eps, bins_curve(
                state.data, schema.column(col), sorted(bins), eps, reps, rng=secure_rng(),
                progress=lambda f, msg: bar.progress(f, text=f"Simulating releases with {msg}")))
        bar.empty()
    if "bins" in state.analyses:
        shown_col, shown_eps, curve = state.analyses["bins"]
        st.plotly_chart(plots.bins_figure(curve, shown_col, shown_eps), key="trade_bins_fig")
        st.caption("Few bins: values are rounded to coarse midpoints (bias). Many bins: more noisy counts add up"
                   " (variance). The best number sits in between.")


def main() -> None:
    state = get_state(st.session_state)
    st.title("Trade-off explorer: privacy versus accuracy")
    st.markdown("Before spending budget, see how much accuracy each choice buys. Every point below is the average"
                " error of many *simulated* releases: the noise a real release would add, drawn again and again on"
                " your data. Pick a numeric column to follow, then run the simulations.")
    if not state.has_data:
        st.info("Load a dataset first.")
        return
    schema, errors = state.schema()
    if schema is None:
        st.error("Fix the schema first: " + " ".join(errors))
        return
    expected_section(state, schema)
    numeric = [c.name for c in schema.columns if isinstance(c, NumericColumn)]
    if not numeric:
        st.info("The trade-off curves need at least one numeric column in the schema.")
        return
    st.warning(":material/lock: **For your eyes only — no budget is spent, nothing is released.** The simulations run on your real"
               " data. Choosing ε or bins by looking at them leaks a little about the data; with a similar public"
               " dataset you can explore without that concern.")
    c1, c2 = st.columns(2)
    col = c1.selectbox("Column whose mean we follow", numeric, key="trade_column")
    reps = int(c2.select_slider("Simulated releases per point", [50, 100, 200, 500], value=100, key="trade_reps"))
    eps_curve(state, schema, col, reps)
    bins_section(state, schema, col, reps)


main()
