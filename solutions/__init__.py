"""Reference implementation of the course, one module per chapter.

Solution regions are marked with nbgrader's ``### BEGIN SOLUTION`` / ``### END SOLUTION``
comments: ``grader build`` copies each exercise's source verbatim into the nbgrader source
notebook, and ``nbgrader generate_assignment`` cuts the marked regions out for learners.
"""
