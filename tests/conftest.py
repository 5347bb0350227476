import json
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

# What a learner in a class installs next to a release folder (guides/learning-in-a-class.md).
THIRD_PARTY = ("torch", "matplotlib", "tqdm", "ipywidgets", "ipykernel")
OURS = ("course", "solutions", "grader")


@pytest.fixture(scope="session", autouse=True)
def built_sources():
    """The nbgrader source folders grader/source*/ are generated, not committed: `make test` builds them
    once before pytest starts (`grader build`); the tests only check, since two workers would build at once."""
    from grader import sources

    stale = sources.stale(sources.editions())
    if stale:
        pytest.fail(f"{len(stale)} nbgrader source folder(s) missing or out of date, e.g. {stale[0].source_dir}: "
                    "run `.venv/bin/grader build` (make test does) before pytest", pytrace=False)


@dataclass
class Standalone:
    python: Path
    kernel: str
    env: dict


@pytest.fixture(scope="session")
def standalone(tmp_path_factory) -> Standalone:
    """A Python and a Jupyter kernel with the project's third-party packages but not its own.

    A throwaway venv whose .pth file adds this environment's site-packages as a plain path: its
    packages import, but the .pth files inside it (the editable install's finder, which makes
    `course`, `solutions` and `grader` importable) never run. Code started in a release folder
    can then import only what the folder carries.
    """
    root = tmp_path_factory.mktemp("standalone")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "third_party.pth").write_text("\n".join(sorted(ours)) + "\n")
    probe = ("import importlib.util as u, json; "
             f"print(json.dumps({{m: u.find_spec(m) is not None for m in {THIRD_PARTY + OURS!r}}}))")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRANSFORMERS_COURSE_GRADING")}
    found = json.loads(subprocess.run([str(python), "-c", probe], cwd=root, env=env, capture_output=True,
                                      text=True, check=True).stdout)
    assert not any(found[m] for m in OURS), f"the standalone Python can import the project: {found}"
    assert all(found[m] for m in THIRD_PARTY), f"the standalone Python lacks a third-party package: {found}"
    kernels = root / "jupyter" / "kernels" / "standalone"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (third-party packages only)", "language": "python",
        # No downloads in tests: the toolkit's probe for optional pretrained weights skips under CI.
        "env": {"MPLBACKEND": "Agg", "CI": os.environ.get("CI") or "1"},
    }))
    env["JUPYTER_PATH"] = os.pathsep.join([str(root / "jupyter"), os.environ.get("JUPYTER_PATH", "")])
    return Standalone(python, "standalone", env)


@pytest.fixture
def scratch_catalogues(tmp_path, monkeypatch):
    """A copy of i18n/ the test may edit, which grader.authoring.i18n reads instead of the repository's."""
    from grader.authoring import i18n

    shutil.copytree(i18n.CATALOGUES, tmp_path / "i18n")
    monkeypatch.setattr(i18n, "CATALOGUES", tmp_path / "i18n")
    return tmp_path / "i18n"
