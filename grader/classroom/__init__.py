"""The class: what runs a course on nbgrader, in the trusted process. It uses the trust boundary's pool.

From the top: `regrade` and `grading` (stage each submission, judge it in the pool, record it) drive
the rest; `cluster` judges on Dask instead of the local pool; `intake` finds a class's submissions
(`lms` unpacks an LMS download); `recording` is nbgrader's autograde with the verdict in place of
execution, then feedback and grades.csv; `report` and `export` read the gradebook; `term` adds due
dates and the late policy; `skipping` leaves out the cells no score depends on. At the bottom,
`submissions` (the Submission every step passes along, read defensively) and `locks`.
"""
