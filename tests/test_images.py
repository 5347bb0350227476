"""Invariant 6: every figure a notebook shows is in images/ and drawn by a script there."""
import re

from grader.chapters import CHAPTERS, REPO

LINK = re.compile(r"\]\((\.\./\.\./images/[^)\s]+)\)")


def test_figures_exist_and_have_a_script():
    for chapter in CHAPTERS:
        for link in LINK.findall(chapter.course_notebook.read_text()):
            path = (chapter.course_dir / link).resolve()
            assert path.is_file(), f"{chapter.notebook_name} shows {link}, which does not exist"
            folder = path.relative_to(REPO / "images").parts[0]
            assert (REPO / "images" / f"{folder}_figures.py").is_file(), f"no script draws {link}"
