"""The shared Formgrader's Jupyter Server (jupyterhub_config.py: this folder is first on its JUPYTER_CONFIG_PATH and
on its PYTHONPATH): Formgrader for the graders and nothing else (shared_formgrader.py says what each setting closes).
"""
import os

from jupyter_core.paths import jupyter_config_path
from jupyter_server.extension.config import ExtensionConfigManager

c = get_config()  # noqa: F821 - provided by Jupyter when it loads this file

# Every server extension the environment enables (JupyterLab, the notebook, terminals, nbgrader's own
# Formgrader...) off; the graders' Formgrader on. `.update`: jupyterhub-singleuser's own extension stays.
found = ExtensionConfigManager(read_config_path=jupyter_config_path()).get_jpserver_extensions()
c.ServerApp.jpserver_extensions.update({**{name: False for name in found}, "shared_formgrader": True})
c.ServerApp.terminals_enabled = False
c.ServerApp.authorizer_class = "shared_formgrader.FormgraderOnly"
c.ServerApp.kernel_manager_class = "shared_formgrader.NoKernels"
c.KernelSpecManager.ensure_native_kernel = False
c.KernelSpecManager.allowed_kernelspecs = {"no-kernel-in-the-shared-formgrader"}  # empty would mean all
c.ServerApp.contents_manager_class = "shared_formgrader.NoContents"
# Formgrader wants the course directory inside the server's root (the contents API has its own, empty).
c.ServerApp.root_dir = os.environ["COURSE_DIRECTORY"]
c.ServerApp.default_url = "/formgrader"
# The hub stops a service with SIGINT, and a server with no one at its terminal would ask "Shut down? (y/[n])",
# hear nothing and run on for the hub's 10 s before SIGTERM: it stops at the first SIGINT instead.
c.ServerApp.answer_yes = True
