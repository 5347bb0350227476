"""The CJK font of a translated chapter folder, registered with matplotlib on import.

`grader build` puts the font the course ships (a subset with the characters the edition's plots
use, SIL Open Font License) into a translated folder's course/toolkit/fontfiles/; there, plots with
Chinese titles and labels render without tofu boxes or "Glyph missing" warnings. Anywhere else (the
English folders, the repository) the folder is absent and nothing happens.
"""
from pathlib import Path

FOLDER = Path(__file__).with_name("fontfiles")
FAMILY = "Course Sans SC"


def register() -> bool:
    """Add the folder's fonts to matplotlib, first in its font list; False when there are none."""
    files = sorted(FOLDER.glob("*.otf"))
    if not files:
        return False
    import matplotlib
    from matplotlib import font_manager

    for path in files:
        font_manager.fontManager.addfont(str(path))
    # First: a text mixing $math$ and Chinese draws its plain part in the first family alone.
    matplotlib.rcParams["font.family"] = [FAMILY, "DejaVu Sans"]
    return True


register()
