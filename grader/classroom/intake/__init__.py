"""What comes in: a class's submissions found in the exchange or a folder (`collect`), an LMS download
unpacked (`lms`), copied without following links (`safecopy`), each learner's name checked (`identity`),
a notebook made data before it becomes feedback (`sanitise`), CSV written without formulas (`csvsafe`).

May import: the bottom only (ledger, phrasebook, submissions). One import goes back up, inside a
function: `sanitise` asks grades.written whether a cell is a rubric's box. Used by: every other room.
"""
