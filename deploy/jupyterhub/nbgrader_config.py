"""nbgrader for the course on JupyterHub: the course id, the exchange, the instructor's course directory.

jupyterhub_config.py puts this folder on every server's Jupyter config path, so the Assignments
panel, `nbgrader release_assignment|collect|release_feedback` and `nbgrader fetch_feedback` all read
it. `grader release|autograde --course-dir` write the course directory's own nbgrader_config.py
(root, gradebook, the code stub), which nbgrader reads after this file.
"""
import os

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file

# The course id `grader` gives every course directory (grader/coursedir.py).
c.CourseDirectory.course_id = "transformers-from-scratch"
# A learner's Validate runs every public check: without this it stops at nothing and says
# "Success! Your notebook passes all the tests" though a check failed.
c.Validator.validate_all = True
# Stock autograde (the instructor's Formgrader button, `nbgrader autograde`) would run a learner's code in the
# instructor's kernel, outside the sandbox: it refuses and names `grader autograde` (as each course directory does).
c.Autograde.autograde_preprocessors = ["grader.classroom.grading.recording.SandboxOnly"]
c.Exchange.root = os.environ.get("COURSE_EXCHANGE_ROOT", "/srv/nbgrader/exchange")
if os.environ.get("COURSE_DIRECTORY"):  # the instructor's server only
    c.CourseDirectory.root = os.environ["COURSE_DIRECTORY"]
elif os.environ.get("JUPYTERHUB_USER"):
    # A learner's server: submit, list and fetch_feedback as the hub user. nbgrader would otherwise take
    # the unix user's name, which under the simple spawner is the hub's own user for every learner.
    c.CourseDirectory.student_id = os.environ["JUPYTERHUB_USER"]
