"""Authoring: what builds the course (the nbgrader source notebooks, the release, sample learners)."""
