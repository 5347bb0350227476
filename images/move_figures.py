"""Move a chapter's narrative figures into its own folder, so that its release carries them.

    python images/move_figures.py            # every chapter course/NN_<name>/
    python images/move_figures.py NAME ...   # only these chapters

For each chapter whose figures still live in `images/<name>/` and are linked from the notebook as
`../../images/<name>/x.png`, it moves the PNGs to `course/NN_<name>/images/` (with `git mv`
inside a git checkout), rewrites those links to `images/x.png`, and points the drawing script
`images/<name>_figures.py` at the new folder. Running it again changes nothing. Afterwards:
`grader build && grader release --write`.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT_LINE = re.compile(r"^OUT = .*$", re.MULTILINE)


def move(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", str(src)], cwd=REPO,
                             capture_output=True).returncode == 0
    if tracked:
        subprocess.run(["git", "mv", str(src), str(dst)], cwd=REPO, check=True)
    else:
        shutil.move(src, dst)


def move_chapter(folder: Path) -> list[str]:
    number, name = folder.name.split("_", 1)
    done = []
    old = REPO / "images" / name
    for png in sorted(old.glob("*")) if old.is_dir() else []:
        move(png, folder / "images" / png.name)
        done.append(f"moved {png.relative_to(REPO)} -> {(folder / 'images' / png.name).relative_to(REPO)}")
    if old.is_dir() and not any(old.iterdir()):
        old.rmdir()
    notebook = folder / f"{name}.ipynb"
    text = notebook.read_text()
    if f"../../images/{name}/" in text:
        notebook.write_text(text.replace(f"../../images/{name}/", "images/"))
        done.append(f"rewrote the figure links of {notebook.relative_to(REPO)}")
    script = REPO / "images" / f"{name}_figures.py"
    if script.is_file():
        source = script.read_text()
        wanted = f'OUT = Path(__file__).resolve().parents[1] / "course" / "{folder.name}" / "images"'
        fixed = OUT_LINE.sub(wanted, source, count=1).replace(f"images/{name}/", f"course/{folder.name}/images/")
        if OUT_LINE.search(source) is None:
            done.append(f"NOTE: {script.relative_to(REPO)} has no `OUT = ...` line; point it at {folder}/images")
        elif fixed != source:
            script.write_text(fixed)
            done.append(f"pointed {script.relative_to(REPO)} at course/{folder.name}/images/")
    return done


def main(argv: list[str]) -> int:
    folders = sorted(p for p in (REPO / "course").glob("[0-9][0-9]_*") if p.is_dir())
    if argv:
        folders = [f for f in folders if f.name.split("_", 1)[1] in argv or f.name in argv]
    for folder in folders:
        for line in move_chapter(folder):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
