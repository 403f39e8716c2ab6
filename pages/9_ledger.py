"""Ledger page: the spends and budget changes of the datasets this session may see, with totals; exportable as CSV."""

from __future__ import annotations

import dataclasses

import pandas as pd
import streamlit as st

from dpsynth import plots
from dpsynth.accounting import PrivacyBudget
from dpsynth.humanize import budget
from dpsynth.io import to_safe_csv
from dpsynth.ui_state import AppState, get_state, show_errors
from dpsynth.visibility import is_admin, viewer_from, visible_rows

SPEND_COLUMNS = ["spend_id", "dataset_id", "time", "mechanism", "epsilon", "delta", "purpose", "release_id"]
EVENT_COLUMNS = ["event_id", "dataset_id", "time", "old_epsilon", "old_delta", "new_epsilon", "new_delta", "reason"]


def viewer() -> tuple[str | None, list[str]]:
    """(the signed-in email, or None when no login is configured; the deployment's admin emails)."""
    return viewer_from(st.secrets, st.user)


def budget_change_form(state: AppState, ledger, row: pd.Series) -> None:  # noqa: ANN001 - a Ledger
    with st.expander("Change this dataset's total budget"):
        st.caption("Raising the total is a policy decision, recorded with your reason; every spend so far still"
                   " counts against it, and a total below what is spent is refused.")
        with st.form("ledger_budget_form"):
            c1, c2 = st.columns(2)
            new_eps = c1.number_input("new total ε", min_value=0.0, value=float(row["total_epsilon"]), format="%g",
                                      key="ledger_new_total")
            new_delta = c2.number_input("new total δ", min_value=0.0, max_value=1.0, value=float(row["total_delta"]),
                                        format="%.1e", key="ledger_new_delta")
            reason = st.text_input("Why (required; kept in the ledger)", key="ledger_reason")
            if st.form_submit_button("Set the new total"):
                if not reason.strip():
                    st.error("Say why the total changes: the reason is kept in the ledger with the change.")
                else:
                    with show_errors():
                        ledger.set_total(state.dataset_id, PrivacyBudget(new_eps, new_delta), reason=reason)
                        st.rerun()


def main() -> None:
    state = get_state(st.session_state)
    st.title("Privacy ledger")
    st.markdown(
        "Every release and every private estimate is written here **before** its noise is drawn, and a spend"
        " that would exceed a dataset's total budget is refused. Spends on the same data add up"
        f" (sequential composition). Ledger file: `{state.ledger_path}`."
    )
    user, admins = viewer()
    loaded = [*state.loaded_datasets, state.dataset_id]
    with show_errors():
        ledger = state.ledger()
        datasets = pd.DataFrame(visible_rows(user, admins, loaded, ledger.datasets()))
        spends = pd.DataFrame([dataclasses.asdict(s) for s in visible_rows(user, admins, loaded, ledger.spends())],
                              columns=SPEND_COLUMNS)
        events = pd.DataFrame([dataclasses.asdict(e) for e in visible_rows(user, admins, loaded, ledger.budget_events())],
                              columns=EVENT_COLUMNS)
        if user is not None and not is_admin(user, admins):
            st.caption("You see the datasets you have loaded in this session; an administrator sees all of them.")
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
            c1, c2, c3, c4 = st.columns(4)
            c1.metric("total ε", budget(row["total_epsilon"]))
            c2.metric("spent ε", budget(row["spent_epsilon"]))
            c3.metric("ε left", budget(row["remaining_epsilon"]))
            c4.metric("δ left", f"{row['remaining_delta']:.2g}", help=f"of a total δ = {row['total_delta']:.2g}")
            st.plotly_chart(plots.budget_figure(mine, float(row["total_epsilon"])), key="ledger_fig")
            budget_change_form(state, ledger, row)
        st.subheader("Datasets")
        show = datasets.assign(dataset_id=datasets["dataset_id"].str[:12])
        show = show[["label", "dataset_id", "total_epsilon", "spent_epsilon", "remaining_epsilon", "total_delta",
                     "spent_delta", "remaining_delta", "created"]].rename(columns={
            "label": "dataset", "dataset_id": "fingerprint", "total_epsilon": "total ε", "spent_epsilon": "spent ε",
            "remaining_epsilon": "ε left", "total_delta": "total δ", "spent_delta": "spent δ",
            "remaining_delta": "δ left", "created": "first seen"})
        st.dataframe(show, hide_index=True, key="ledger_datasets")
        st.subheader("Budget changes")
        changes = events.assign(dataset=events["dataset_id"].map(names))
        st.dataframe(changes[["time", "dataset", "old_epsilon", "new_epsilon", "old_delta", "new_delta", "reason"]]
                     .rename(columns={"old_epsilon": "old total ε", "new_epsilon": "new total ε",
                                      "old_delta": "old total δ", "new_delta": "new total δ"}),
                     hide_index=True, key="ledger_events")
        st.subheader("Spends")
        table = spends.assign(dataset=spends["dataset_id"].map(names))
        st.dataframe(table[["time", "dataset", "epsilon", "delta", "mechanism", "purpose"]], hide_index=True,
                     key="ledger_spends")
        export = pd.concat([table.assign(kind="spend"), changes.assign(kind="budget change")], ignore_index=True)
        export = export.sort_values("time", kind="stable")[
            ["time", "kind", "dataset", "dataset_id", "epsilon", "delta", "mechanism", "purpose", "release_id",
             "old_epsilon", "old_delta", "new_epsilon", "new_delta", "reason"]]
        st.download_button("Export the ledger (CSV)", data=to_safe_csv(export), file_name="privacy_ledger.csv",
                           mime="text/csv", key="ledger_export")


main()
