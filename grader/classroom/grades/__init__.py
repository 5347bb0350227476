"""The gradebook's numbers and words: the course's one total (`total`), hand grades kept across regrades
(`handgrades`), written answers and their rubrics (`written`), regrade requests (`requests`), the class
report (`report`), LMS and CSV exports (`export`), the class's most frequent mistakes (`mistakes`).

May import: policy, intake and the bottom (locks, ledger, phrasebook); `total` reads term.toml inside a
function (policy.term; keeps the class at six levels). Used by: grading, onsubmit, lti, the command line
(requests, report, export), authoring's build; inside a function, intake.sanitise (goes back up:
`written`'s rubric box, which the sanitiser keeps out of feedback, is written's to define).
"""
