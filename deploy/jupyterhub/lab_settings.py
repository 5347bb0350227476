"""The learners' JupyterLab leads to the grading page: an item in its Help menu, as a JupyterLab settings
override (`overrides.json` in an app settings directory), written by setup-class.sh into the learners'
environment (`<env>/share/jupyter/lab/settings`) and by jupyterhub_config.py for the try-out hub.

    python deploy/jupyterhub/lab_settings.py SETTINGS_DIR [URL]

URL defaults to the grading page's address on this hub: on the hub's origin, or on the service's own
when COURSE_HUB_SUBDOMAIN_HOST gives every server and service an origin of its own.

Standard library only: setup-class.sh runs it with any Python before the course's environment is open.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

GRADING_URL = "/services/grading/"  # the hub's prefix of the service named "grading" (jupyterhub_config.py)
# One JupyterLab serves both editions: the item names itself in both languages.
TEXT = "Grading page · 批改页面"
PLUGIN = "@jupyterlab/mainmenu-extension:plugin"


def grading_url(subdomain_host: str = "") -> str:
    """Where the grading page is: under the hub's origin, or (JupyterHub's subdomain_host) on the service's own
    origin, <name>--service.<hub's host>, as JupyterHub names a service's subdomain."""
    if not subdomain_host:
        return GRADING_URL
    scheme, _, host = subdomain_host.rstrip("/").partition("://")
    if not host or "/" in host or scheme not in ("http", "https"):
        raise ValueError(f"COURSE_HUB_SUBDOMAIN_HOST {subdomain_host!r}: an http(s) address, host and port only")
    return f"{scheme}://grading--service.{host}{GRADING_URL}"


def overrides(url: str = GRADING_URL) -> dict:
    """The override: Help menu → the grading page, in a new browser tab (the page refuses to be framed:
    its Content-Security-Policy has frame-ancestors 'none', and help:open frames a page otherwise)."""
    if not url.startswith(("/", "https://", "http://")) or any(c in url for c in "\"'<> \n"):
        raise ValueError(f"grading page URL {url!r}: a path starting with / or an http(s) address")
    item = {"command": "help:open", "args": {"url": url, "text": TEXT, "newBrowserTab": True}, "rank": 0}
    return {PLUGIN: {"menus": [{"id": "jp-mainmenu-help", "items": [item]}]}}


def write(settings_dir: str | Path, url: str = GRADING_URL) -> Path:
    """`settings_dir`/overrides.json with the item (made with its folder; the other plugins' overrides kept)."""
    path = Path(settings_dir) / "overrides.json"
    found = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    if not isinstance(found, dict):
        raise ValueError(f"{path}: not a JSON object of plugin settings")
    found.setdefault(PLUGIN, {}).update(overrides(url)[PLUGIN])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(found, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.split("\n\n")[1].strip())
    print(write(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else
                grading_url(os.environ.get("COURSE_HUB_SUBDOMAIN_HOST", ""))))
