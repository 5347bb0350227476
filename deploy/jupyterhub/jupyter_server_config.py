"""Every single-user server of the class (jupyterhub_config.py puts this folder on its Jupyter config path).

A terminal is a login shell, and a login shell's /etc/profile resets PATH: the environment the hub
gave the server (COURSE_BIN: where grader, nbgrader and jupyter are) is lost and the guides' commands
are not found. So a terminal runs the user's login shell (profile and all) and then puts COURSE_BIN
first again before it hands over to an interactive shell.
"""
import os

c = get_config()  # noqa: F821 - provided by Jupyter when it loads this file

if os.environ.get("COURSE_BIN"):
    shell = os.environ.get("SHELL") or "/bin/sh"
    c.ServerApp.terminado_settings = {"shell_command": [
        shell, "-l", "-c", 'PATH="$COURSE_BIN:$PATH"; export PATH; exec "$0"', shell]}
