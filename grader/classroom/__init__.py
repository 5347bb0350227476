"""The class: what runs a course on nbgrader, in the trusted process. It uses the trust boundary's pool.

Its rooms, by what a person does, from the top; a room's modules import, when imported, only the rooms
below it (tests/test_layout.py checks it; the two imports inside functions that go back up are named in
their rooms' docstrings):

- onsubmit/    grading on submit: the service, its pages and web server, the one-service lock (`grader serve`)
- grading/     grading a class: stage, judge, record (batch), the Dask cluster, regrades, republished feedback
- lti/         LTI 1.3: launches, rosters and the LMS's gradebook
- similarity/  pairs of learners ranked by how alike their answers are (uses intake/ only)
- grades/      the gradebook's numbers and words: one total, hand grades, written answers, requests, reports,
               exports, the class's mistakes
- policy/      the term's policy: term.toml, due dates, accommodations, [on_submit], admission, visibility,
               time limits
- intake/      what comes in: the exchange and LMS downloads, safe copies, identities, sanitised notebooks, CSV
- and at the bottom, here: `submissions` (the Submission every step passes along, read defensively),
  `locks`, `ledger` (every submission the service saw: intake, policy, grades and grading read it) and
  `phrasebook` (the feedback's language).
"""
