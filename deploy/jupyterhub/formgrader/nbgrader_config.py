"""nbgrader in the shared Formgrader (read after deploy/jupyterhub/nbgrader_config.py, before the course
directory's own): the exchange's instructor steps refuse, and the loaded config is not shown to graders.
"""
c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file

c.ExchangeFactory.release_assignment = "shared_formgrader.NoReleaseAssignment"
c.ExchangeFactory.collect = "shared_formgrader.NoCollect"
c.ExchangeFactory.release_feedback = "shared_formgrader.NoReleaseFeedback"
c.FormgradeExtension.debug = False  # the Manage Assignments page would list every config value it loaded
