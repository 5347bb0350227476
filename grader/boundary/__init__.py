"""Both sides of the trust boundary: what judges one submission. Nothing here imports the class or authoring.

Trusted side (the grading process): `pool` judges one submission at a time per child (a `unit`: a Job
in, a Verdict out), in children forked from the `forkserver`; at a test cell the exercise's checks run
here, on a `proxy` of each learner object the child holds (`claims` confirms what it claims to be,
`standin_host` answers the stand-ins' calls); `spec` is how the hidden tests in `specs` are written,
`score` turns their checks into points, `seeds` keeps the secret their hidden inputs come from.

Child side (a sandboxed child, forked from the fork server): `child` is its entry point; it confines
itself (`confine`, with `seccomp` and a `memcg`), runs the learner's cells and `serve`s the trusted
side's calls; `standins` stand in for other exercises; `forbid` records forbidden library calls.

Both sides: `wire`, the plain data they exchange (never pickle).

Kernel side (the stock-nbgrader route, no sandbox): `runner` runs an exercise's checks in the
learner's kernel (the hidden-test cells import it as grader.runner), with `kept`; `spec`, `specs`,
`score` and `forbid` serve there too.
"""
