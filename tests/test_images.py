"""Invariant 6 and "a released chapter stands on its own": every figure a notebook shows is a file
in the chapter's own folder (so JupyterLab on course/ and a release folder both show it), drawn by
a script in images/; no figure lies there unshown."""
from grader.authoring.bundle import check_image_links, image_links
from grader.chapters import CHAPTERS, REPO


def test_figures_are_in_the_chapter_folder_and_have_a_script():
    for chapter in CHAPTERS:
        check_image_links(chapter)  # raises for a link outside the folder or to a missing file
        links = image_links(chapter)
        script = REPO / "images" / f"{chapter.name}_figures.py"
        if links:
            assert script.is_file(), f"no script draws the figures of {chapter.notebook_name}"
            assert f'"{chapter.assignment}" / "images"' in script.read_text(), f"{script.name} draws elsewhere"
        shown = {(chapter.chapter_dir / link).resolve() for link in links}
        for png in (chapter.chapter_dir / "images").glob("*"):
            assert png.resolve() in shown, f"{png.relative_to(REPO)} is not shown by the notebook"
