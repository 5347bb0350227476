"""The term's policy: term.toml (`term`: due dates, extensions, the late policy), one learner's own
policy (`accommodations`), [on_submit] and [requests] (`submitpolicy`), whether a submission joins the
queue (`admission`), what a learner may see (`visibility`), the time limit of a submission (`timelimit`).

May import: intake (identity) and the bottom (locks, ledger, submissions). One import goes back up, inside
a function: `timelimit` measures the reference time with grading.batch.job_cells (grading imports this
room's modules). Used by: grades, grading, onsubmit, the command line (autograde, regrade, serve).
"""
