"""The guides (guides/*.md, guides/zh/*.md) and the two READMEs that lead to them: every relative link and
picture resolves, each English guide has its Chinese page, the READMEs stay a front page, and every
pointer the code prints or says ("guides/teaching.md: One total") names a section that exists."""
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GUIDES = REPO / "guides"
PAGES = [REPO / "README.md", REPO / "README.zh.md", *sorted(GUIDES.glob("*.md")), *sorted(GUIDES.glob("zh/*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
# Where the code points a reader: "guides/<page>.md: <Section>" up to ")", ";", a quote or the line's end.
POINTER = re.compile(r"guides/([a-z/-]+\.md): ([A-Z][^;)\"'\n]*)")
POINTING = ["grader", "deploy", "tests", "benchmarks", "course/__init__.py", "course/checks", "course/toolkit",
            "Makefile", "pyproject.toml", ".ci"]


def slug(heading: str) -> str:
    """The anchor GitHub and MyST (myst_heading_anchors) give a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(m) for m in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # a code block's brackets are code
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.is_file():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {dest.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_link_and_picture_resolves(page):
    assert broken_links(page) == [], f"{page.relative_to(REPO)}: {broken_links(page)}"


def test_a_broken_link_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Here\n\n[ok](#here) [gone](missing.md) ![pic](images/none.png) [no](#elsewhere)\n"
                    "```\n[code](is-not-a-link.md)\n```\n")
    assert broken_links(page) == ["missing.md: no such file", "images/none.png: no such file",
                                  "#elsewhere: no heading with that anchor in page.md"]


def test_each_guide_has_its_chinese_page():
    english = {p.name for p in GUIDES.glob("*.md")}
    chinese = {p.name for p in GUIDES.glob("zh/*.md")}
    assert english and english == chinese, f"only English: {english - chinese}; only Chinese: {chinese - english}"


def test_each_readme_is_a_front_page_that_leads_to_every_guide():
    for readme, folder in ((REPO / "README.md", "guides/"), (REPO / "README.zh.md", "guides/zh/")):
        assert len(readme.read_text().splitlines()) <= 80, f"{readme.name}: the manuals belong in guides/"
        linked = {(readme.parent / target.partition("#")[0]).resolve() for target in links(readme)}
        for guide in (REPO / folder).glob("*.md"):
            assert guide.resolve() in linked, f"{readme.name} does not link {folder}{guide.name}"


def code_files() -> list[Path]:
    """The files that may point a reader somewhere, generated copies (grader/source*/) left out."""
    found = []
    for root in POINTING:
        if (REPO / root).is_file():
            found.append(REPO / root)
            continue
        for folder, subfolders, names in os.walk(REPO / root):
            subfolders[:] = [d for d in subfolders if not d.startswith(("source", "__pycache__"))]
            found += [Path(folder, n) for n in names if Path(n).suffix in (".py", ".sh", ".toml", "")]
    return found


def pointers() -> list[tuple[str, str, str]]:
    return [(str(path.relative_to(REPO)), page, section.strip()) for path in code_files()
            for page, section in POINTER.findall(path.read_text(errors="replace"))]


def section_exists(page: Path, section: str) -> bool:
    """A heading, or a paragraph's or list item's bold lead-in ("**One total.**")."""
    text = page.read_text()
    return slug(section) in anchors(page) or re.search(rf"\*\*{re.escape(section)}[.:]\*\*", text) is not None


def test_every_pointer_in_the_code_names_a_section_of_a_guide():
    seen = pointers()
    assert len(seen) >= 10, "the pointers this test reads were not found: has their form changed?"
    wrong = [f"{where}: guides/{page}: {section}" for where, page, section in seen
             if not (GUIDES / page).is_file() or not section_exists(GUIDES / page, section)]
    assert wrong == [], "pointers to sections that do not exist:\n" + "\n".join(wrong)


def test_no_pointer_is_left_to_a_readme_section():
    # The README is a front page now: a pointer to one of its old sections would send a reader nowhere.
    old = re.compile(r"README[:,] \"?[A-Z]")
    left = [str(path.relative_to(REPO)) for path in code_files() if old.search(path.read_text(errors="replace"))]
    assert left == [], f"point to the guide instead: {left}"
