"""Grading a class: stage each submission, judge it in the pool, record it (`batch`); judge on a Dask
cluster (`cluster`); nbgrader's autograde with the verdict, feedback and grades.csv (`recording`), a batch's
nbgrader work in a second process (`nbgrader_helper`); the cells no score depends on (`skipping`);
a chapter graded again (`regrade`); feedback regenerated when the gradebook changes (`publish`).

May import: grades, policy, intake and the bottom (locks, ledger, phrasebook, submissions); lti only inside
a function (publish posts the totals to the LMS's gradebook: lti.outbox). Used by: onsubmit, the command
line (grade, autograde, regrade, serve), authoring's demo, and, inside a function, policy.timelimit.
"""
