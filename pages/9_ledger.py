"""Ledger page: every spend recorded for every dataset, with totals; exportable as CSV."""

from __future__ import annotations

import dataclasses

import pandas as pd
import streamlit as st

from dpsynth import plots
from dpsynth.accounting import PrivacyBudget
from dpsynth.humanize import budget
from dpsynth.io import to_safe_csv
from dpsynth.ui_state import get_state, show_errors


def main() -> None:
    state = get_state(st.session_state)
    st.title("Privacy ledger")
    st.markdown(
        "Every release and every private estimate is written here **before** its noise is drawn, and a spend"
        " that would exceed a dataset's total budget is refused. Spends on the same data add up"
        f" (sequential composition). Ledger file: `{state.ledger_path}`."
    )
    with show_errors():
        ledger = state.ledger()
        datasets = pd.DataFrame(ledger.datasets())
        spends = pd.DataFrame([dataclasses.asdict(s) for s in ledger.spends()],
                              columns=["spend_id", "dataset_id", "time", "mechanism", "epsilon", "delta", "purpose"])
        if datasets.empty:
            st.info("Nothing has been spent yet.")
            return
        # Other sessions' datasets are shown by fingerprint only: a file name can say whose data it is.
        names = {ds: (label if ds == state.dataset_id else f"dataset {ds[:12]}")
                 for ds, label in zip(datasets["dataset_id"], datasets["label"], strict=True)}
        datasets = datasets.assign(label=datasets["dataset_id"].map(names))
        if state.dataset_id in names:
            st.subheader(f"This dataset: {names[state.dataset_id]}")
            mine = spends[spends["dataset_id"] == state.dataset_id]
            row = datasets[datasets["dataset_id"] == state.dataset_id].iloc[0]
            c1, c2, c3 = st.columns(3)
            c1.metric("total ε", budget(row["total_epsilon"]))
            c2.metric("spent", budget(row["spent_epsilon"]))
            c3.metric("left", budget(row["remaining_epsilon"]))
            st.plotly_chart(plots.budget_figure(mine, float(row["total_epsilon"])), key="ledger_fig")
            with st.expander("Change this dataset's total budget"):
                st.caption("Raising the total is a policy decision; every spend so far still counts against it.")
                new_total = st.number_input("new total ε", min_value=float(row["spent_epsilon"]) or 0.01,
                                            value=float(row["total_epsilon"]), format="%g", key="ledger_new_total")
                if st.button("Set the new total", key="ledger_set_total"):
                    ledger.set_total(state.dataset_id, PrivacyBudget(new_total, float(row["total_delta"])))
                    st.rerun()
        st.subheader("All datasets")
        show = datasets.assign(dataset_id=datasets["dataset_id"].str[:12])
        show = show[["label", "dataset_id", "total_epsilon", "spent_epsilon", "remaining_epsilon", "total_delta",
                     "spent_delta", "created"]].rename(columns={
            "label": "dataset", "dataset_id": "fingerprint", "total_epsilon": "total ε", "spent_epsilon": "spent ε",
            "remaining_epsilon": "ε left", "total_delta": "total δ", "spent_delta": "spent δ", "created": "first seen"})
        st.dataframe(show, hide_index=True, key="ledger_datasets")
        st.subheader("All spends")
        table = spends.assign(dataset=spends["dataset_id"].map(names))
        st.dataframe(table[["time", "dataset", "epsilon", "delta", "mechanism", "purpose"]], hide_index=True,
                     key="ledger_spends")
        st.download_button("Export the ledger (CSV)", data=to_safe_csv(table), file_name="privacy_ledger.csv",
                           mime="text/csv", key="ledger_export")


main()
