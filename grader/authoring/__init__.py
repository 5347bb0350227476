"""Authoring: what builds the course. `build` makes the nbgrader source notebooks and checks the release,
`bundle` what each chapter folder carries, `corpus` the data files a chapter writes itself; `samples`
are made-up learners, `demo` grades them end to end, `execute` runs a source notebook (make bench).
"""
