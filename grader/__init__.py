"""Instructor tooling: hidden test specs, nbgrader glue and the `grader` command line."""
