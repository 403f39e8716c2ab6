"""Release page: one explicit button spends the budget (ledger first); the release runs on the server to completion
and is kept in the release archive (the Releases page shows it again after a reload or a restart)."""

from __future__ import annotations

import time

import streamlit as st

from dpsynth.artifacts import card_markdown
from dpsynth.errors import DPSynthError
from dpsynth.humanize import blank_missing, cells, number
from dpsynth.plan import ReleaseRequest, make_plan
from dpsynth.release import card_summary_line
from dpsynth.ui_state import AppState, get_state
from dpsynth.verdicts import release_verdict, released_top_shares


def start_release(state: AppState) -> None:
    """Start the release on its own thread (:mod:`dpsynth.jobs`): it runs to completion whatever this page does
    (navigation, reload, a closed tab), and the pipeline keeps it in the release archive once charged."""
    schema, errors = state.schema()
    if schema is None:
        state.release_error = " ".join(errors)
        return
    # A new key for the next button: a second click of this one (double-click) is then ignored.
    state.release_attempt += 1
    state.release_error = None
    state.start_release(schema)


def follow_release(state: AppState) -> None:
    """Show the running release's progress until it ends, then take its result (or its error)."""
    job = state.release_job()
    if job is None:
        return
    bar = st.progress(job.fraction, text=job.message)
    while job.status == "running":
        time.sleep(0.2)
        bar.progress(min(1.0, job.fraction), text=job.message)
    state.finish_release(job)


def release_blocker(state: AppState) -> str | None:
    """Why the button is disabled (budget used up, ε out of range), or None."""
    try:
        return state.release_blocker()
    except DPSynthError as exc:
        return str(exc)


def summary(state: AppState) -> bool:
    """What will be released; False if something is missing."""
    schema, errors = state.schema()
    if schema is None:
        st.error("The schema needs attention: " + " ".join(errors))
        st.page_link("pages/2_schema.py", label="Go to Schema", icon=":material/table_chart:")
        return False
    delta = state.spend_delta()
    # the page shows the plan the release will run (the same object, from public inputs only)
    plan = make_plan(ReleaseRequest(schema=schema, epsilon=state.epsilon, delta=delta, neighbours=state.neighbours,
                                    mechanism=state.mechanism, method=state.method, expected_rows=state.expected_rows,
                                    id_column=state.id_column, max_contributions=state.max_contributions))
    method, why = plan.method, plan.why
    st.markdown(
        f"- **Data**: {state.data_label}\n"
        f"- **Columns**: {', '.join(schema.names)} (a full table of {cells(schema.n_cells)})\n"
        f"- **Privacy**: ε = {number(state.epsilon)}" + (f", δ = {number(delta)}" if delta else " (pure DP)") +
        f", {state.neighbours} neighbours, unit: "
        + (f"a person ({state.id_column!r}, ≤ {state.max_contributions} rows)" if state.id_column else "one row") + "\n"
        f"- **Method**: {method} ({why})"
    )
    if schema.data_derived():
        st.warning(":material/warning: Some bounds or categories were read from the data (" + ", ".join(schema.data_derived()) +
                   "). The release card will say they are NOT private. Fix them on the Schema page first if you"
                   " intend to publish.")
    return True


def show_release(state: AppState) -> None:
    rel = state.release
    card = rel.card
    if state.release_is_stale:
        st.warning(":material/history: **Made with different settings.** This release was made before you changed"
                   " ε, δ, the noise, the method or the schema; it does not reflect the current settings. Press"
                   " **Start a new release** below to release with them (this spends budget again).")
    # from released outputs only: columns collapsed beyond what the release's own tables show, or empty
    verdict = release_verdict(rel.synthetic, released_top_shares(rel))
    kept = f" Kept in the release archive as {rel.archive_id}." if rel.archive_id else ""
    if verdict.ok:
        st.success(f"Released: {card_summary_line(card)}. This spend is recorded in the ledger.{kept}")
    else:
        st.warning(f"Released, but poor: {card_summary_line(card)}. {verdict.message} " + " ".join(verdict.advice)
                   + f" The spend is recorded in the ledger.{kept}")
    for w in card["warnings"]:
        st.warning(w)
    if state.release_messages:
        with st.expander("What happened to your data while encoding (only you see this; not part of the release)"):
            for m in state.release_messages:
                st.write("• " + m)
    st.markdown("#### Downloads")
    st.markdown("- **synthetic.csv**: the synthetic table, same columns as the schema, no real person's row\n"
                "- **histogram.csv** / **marginals.csv**: the noisy counts the synthetic data was drawn from\n"
                "- **card.json** / **card.md**: the release card — ε, δ, whom it protects, the schema, software"
                " versions, date. Publish it with the data.\n"
                "- **everything (.zip)**: all of the above in one file")
    files = state.release_files
    cols = st.columns(len(files) + 1)
    mimes = {"csv": "text/csv", "json": "application/json", "md": "text/markdown"}
    for i, (name, data) in enumerate(files.items()):
        cols[i].download_button(name, data=data, file_name=name, mime=mimes.get(name.rsplit(".", 1)[-1], "text/plain"),
                                key=f"download_{name}")
    cols[-1].download_button("everything (.zip)", data=state.release_zip, file_name="dpsynth_release.zip",
                             mime="application/zip", key="download_zip", type="primary")
    tab_syn, tab_hist, tab_card = st.tabs(["Synthetic data", "Noisy counts", "Release card"])
    with tab_syn:
        st.caption(f"{len(rel.synthetic):,} synthetic rows (first 200 shown; an empty cell is a missing value)."
                   " They are sampled from the noisy counts: no row is a real person's.")
        st.dataframe(blank_missing(rel.synthetic.head(200)), height=300, key="release_synthetic")
    with tab_hist:
        if rel.histogram is not None:
            st.caption("Every cell of the domain with its noisy count (empty cells got noise too; counts can be negative).")
            st.dataframe(rel.histogram.head(1000), height=300, key="release_histogram")
        else:
            if "marginal_frames" not in state.analyses:  # built once: all tables take ~0.2 s on Adult
                state.analyses["marginal_frames"] = rel.marginals
            frames = state.analyses["marginal_frames"]
            st.caption(f"{len(frames)} noisy marginal tables were released (see marginals.csv).")
            if frames:
                st.dataframe(frames[0].head(500), height=300, key="release_marginal0")
    with tab_card:
        st.markdown(card_markdown(card))
    st.divider()
    st.caption("Changing settings or reloading this page shows the same release; it never draws new noise.")
    st.page_link("pages/5_utility.py", label="Next: check how useful it is (Utility) →", icon=":material/bar_chart:")
    if st.button("Start a new release (will spend budget again)", key="new_release"):
        state.clear_release()
        st.rerun()


def main() -> None:
    state = get_state(st.session_state)
    st.title("4 · Release")
    if not state.has_data:
        st.info("Load a dataset first.")
        st.page_link("pages/1_data.py", label="Go to Data", icon=":material/upload_file:")
        return
    follow_release(state)  # a release started earlier (also before leaving this page) is picked up here
    if state.release is not None:
        show_release(state)
        return
    st.markdown("Pressing the button below **spends** ε from this dataset's budget. It is recorded in the privacy"
                " ledger first, then the noise is drawn. It cannot be undone.")
    try:
        ok = summary(state)
    except DPSynthError as exc:
        st.error(str(exc))
        ok = False
    with st.expander("Demonstration mode (not for publication)"):
        demo = st.checkbox("Use reproducible 'demo' noise from a fixed seed", value=state.demo_seed is not None,
                           key="release_demo")
        if demo:
            state.demo_seed = int(st.number_input("seed", min_value=0, value=state.demo_seed or 0, key="release_seed"))
            st.warning("Seeded noise can be reproduced by anyone who knows the seed: such a release is for teaching"
                       " and testing only, and its card says so.")
        else:
            state.demo_seed = None
    if state.release_error:
        st.error(state.release_error)
    blocker = release_blocker(state)
    if blocker:
        st.error(blocker)
    if ok and st.button(f"Release with ε = {state.epsilon:g} (spends budget)", key=f"release_button_{state.release_attempt}",
                        type="primary", disabled=blocker is not None):
        start_release(state)
        st.rerun()


main()
