"""The Sphinx source of one edition of the site, written under site/_src/<lang>/: each chapter as the
learner's notebook (course/, skeletons) with the reference run's outputs on its demo cells only, its
figures and a zip of its release folder; the guides (guides/*.md, guides/<lang>/*.md); the glossary."""
from __future__ import annotations

import re
import shutil
import urllib.parse
import zipfile
from pathlib import Path

import nbformat

from grader.authoring import glossary
from grader.chapters import REPO, Chapter, is_test_cell

SOURCE = REPO / "site" / "_src"
GUIDES = REPO / "guides"
GUIDE_ORDER = ("learning-alone", "learning-in-a-class", "teaching", "beyond-one-machine", "maintaining")
# The zips are copied as they are into the built site (html_extra_path): downloads/NN_name.zip.
EXTRA = "_extra"
# Outputs the site shows: no widget (its state and scripts would come from a CDN), no stderr (warnings).
SHOWN_MIME = ("image/png", "image/svg+xml", "image/jpeg", "text/html", "text/latex", "text/markdown", "text/plain")
MARKDOWN_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
CJK_PUNCTUATION = set("。，、；：！？）」』》”")
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
CHECK_CALL = re.compile(r"^\s*checks\.check_\w+\(", re.MULTILINE)

TEXT = {
    "en": {
        "title": "Transformers from scratch",
        "intro": "Nine chapters that build a Transformer, one exercise at a time. Each chapter below is the "
                 "notebook a learner opens: the exercises as skeletons to fill in, the demonstrations as the "
                 "reference run draws them.",
        "chapters": "Chapters", "guides": "Guides", "glossary_title": "Glossary (中英术语表)",
        "glossary_intro": "The terms of the Chinese edition and the English they translate.",
        "download": "Download this chapter's folder ({name}.zip)",
        "hub": "To work on it, unzip it and open the notebook in JupyterLab (`make lab` does this for the whole "
               "course). On a JupyterHub, upload the unzipped folder with the file browser's Upload button; in a "
               "class graded with nbgrader, fetch the chapter from the Assignments panel instead (Nbgrader ▸ "
               "Assignment List), so that your submission is collected and graded.",
    },
    "zh": {
        "title": "从零实现 Transformer",
        "intro": "九章内容，一个练习接一个练习地搭起 Transformer。下面每一章就是学习者打开的笔记本："
                 "练习是待填写的骨架，演示单元显示参考运行画出的结果。",
        "chapters": "章节", "guides": "指南", "glossary_title": "中英术语表",
        "download": "下载本章文件夹（{name}.zip）",
        "hub": "解压后在 JupyterLab 中打开笔记本即可练习（`make lab` 会打开整门课程）。在 JupyterHub 上，"
               "用文件浏览器的上传按钮上传解压后的文件夹；如果课堂用 nbgrader 批改，请改从 Assignments 面板"
               "（Nbgrader ▸ Assignment List）获取本章，这样提交才会被收取和批改。",
    },
}


def cjk_bold(text: str) -> str:
    """`**要点。**后文`: CommonMark does not close a `**` that follows punctuation and precedes a letter, so the
    page would show the stars (JupyterLab's renderer closes it). The punctuation moves out of the bold."""
    lines = []
    for line in text.split("\n"):
        parts = line.split("**")
        for inside in range(1, len(parts) - 1, 2):
            if parts[inside][-1:] in CJK_PUNCTUATION and parts[inside + 1][:1] not in ("", " "):
                parts[inside], parts[inside + 1] = parts[inside][:-1], parts[inside][-1] + parts[inside + 1]
        lines.append("**".join(parts))
    return "\n".join(lines)


def shows_output(cell) -> bool:
    """A demo cell: code that is not an exercise (solution), not a test, and not an exercise's check."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return (cell.cell_type == "code" and not meta.get("solution") and not is_test_cell(cell)
            and not CHECK_CALL.search(cell.source))


def _shown(output):
    if output.get("output_type") == "stream":
        return output if output.get("name") == "stdout" else None
    if output.get("output_type") in ("display_data", "execute_result"):
        if WIDGET_MIME in output.get("data", {}):  # its text is the widget's first state (a bar at 0%)
            return None
        data = {k: v for k, v in output.get("data", {}).items() if k in SHOWN_MIME}
        if not data:
            return None
        output = nbformat.from_dict({**output, "data": data})
        return output
    return None  # errors: a reference run that failed is not shown


def learner_page(chapter: Chapter, reference: Path, lang: str) -> nbformat.NotebookNode:
    """The release notebook (what the learner opens), with the reference run's outputs on demo cells,
    the chapter's download and how to open it on a hub under its title."""
    nb = nbformat.read(chapter.course_notebook, as_version=4)
    ran = {c.get("id"): c for c in nbformat.read(reference, as_version=4).cells}
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            source_cell = ran.get(cell.get("id"))
            if shows_output(cell) and source_cell is not None and source_cell.source == cell.source:
                cell.outputs = [o for o in map(_shown, source_cell.get("outputs", [])) if o is not None]
        elif cell.cell_type == "markdown":
            cell.source = cjk_bold(cell.source.replace(f"]({glossary.FILE})", "](../glossary.md)"))
    nb.metadata.pop("widgets", None)
    text = TEXT[lang]
    download = (f'<p class="chapter-download"><a href="../downloads/{chapter.assignment}.zip" download>'
                f'{text["download"].format(name=chapter.assignment)}</a></p>\n\n{text["hub"]}')
    first = nb.cells[0] if nb.cells and nb.cells[0].cell_type == "markdown" else None
    if first is not None and first.source.startswith("# "):  # right under the chapter's title
        title, _, rest = first.source.partition("\n")
        first.source = f"{title}\n\n{download}\n\n{rest}"
    else:
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(download))
    return nb


def zip_release(chapter: Chapter, target: Path) -> None:
    """The chapter's release folder as a zip holding NN_name/ (caches and checkpoints left out)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(chapter.course_dir.rglob("*")):
            if path.is_file() and not {"__pycache__", ".ipynb_checkpoints"} & set(path.parts):
                archive.write(path, Path(chapter.assignment) / path.relative_to(chapter.course_dir))


def guides(lang: str) -> list[Path]:
    """The guides of an edition, in the order a reader wants them, then any others by name."""
    folder = GUIDES if lang == "en" else GUIDES / lang
    found = sorted(folder.glob("*.md")) if folder.is_dir() else []
    return sorted(found, key=lambda p: (GUIDE_ORDER.index(p.stem) if p.stem in GUIDE_ORDER else len(GUIDE_ORDER),
                                        p.stem))


def _chapter_page(target: Path, chapters: list[Chapter]) -> str | None:
    """The site's page of a chapter that a guide links by its repository path (course/, chapters/)."""
    for chapter in chapters:
        if target in (chapter.course_dir, chapter.course_notebook, chapter.chapter_dir, chapter.text_source):
            return f"../{chapter.assignment}/{chapter.notebook_name}"
    return None


def guide_text(path: Path, chapters: list[Chapter], images: Path) -> str:
    """A guide as a page of the site: its links to the guides beside it kept, to a chapter made the
    chapter's page, to the README made the home page; its figures copied into `images`; any other
    repository path shown as a path (the site does not carry the repository's files)."""
    path = path.resolve()

    def link(match: re.Match) -> str:
        bang, text, target = match.groups()
        if re.match(r"^[a-z][a-z0-9+.-]*:|^#|^/", target):  # a URL, an anchor on the page, a site path
            return match.group(0)
        file, _, fragment = target.partition("#")
        if not file:
            return match.group(0)
        resolved = (path.parent / urllib.parse.unquote(file)).resolve()
        anchor = f"#{fragment}" if fragment else ""
        if resolved.parent == path.parent and resolved.suffix == ".md" and resolved.is_file():
            return match.group(0)
        if bang and resolved.is_file() and resolved.is_relative_to(REPO):
            images.mkdir(parents=True, exist_ok=True)
            shutil.copy(resolved, images / resolved.name)
            return f"![{text}](images/{resolved.name})"
        page = _chapter_page(resolved, chapters)
        if page is not None:
            return f"[{text}]({page}{anchor})"
        if resolved.name.startswith("README") and resolved.parent == REPO:
            return f"[{text}](../index.md)"  # its sections are the guides now: no anchor to keep
        shown = resolved.relative_to(REPO).as_posix() if resolved.is_relative_to(REPO) else file
        return f"`{shown}`" if text.strip("`") == shown else f"{text} (`{shown}`)"

    return MARKDOWN_LINK.sub(link, path.read_text(encoding="utf-8"))


def glossary_page(lang: str) -> str:
    if lang == "en":
        text = TEXT["en"]
        rows = [f"| {english} | {chinese} |" for english, chinese in glossary.terms("zh")]
        return "\n".join([f"# {text['glossary_title']}", "", text["glossary_intro"], "", "| English | 中文 |",
                          "|---|---|", *rows]) + "\n"
    return glossary.learner_page(lang)


def index_page(chapters: list[Chapter], guide_files: list[Path], lang: str) -> str:
    text = TEXT[lang]
    lines = [f"# {text['title']}", "", text["intro"], "", "```{toctree}", f":caption: {text['chapters']}",
             ":maxdepth: 1", "", *[f"{c.assignment}/{c.name}" for c in chapters], "```", ""]
    if guide_files:
        lines += ["```{toctree}", f":caption: {text['guides']}", ":maxdepth: 1", "",
                  *[f"guides/{p.stem}" for p in guide_files], "```", ""]
    lines += ["```{toctree}", ":maxdepth: 1", "", "glossary", "```", ""]
    return "\n".join(lines)


def write_edition(chapters: list[Chapter], references: dict[Chapter, Path], lang: str) -> Path:
    """site/_src/<lang>/, written afresh; returns it."""
    root = SOURCE / lang
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for chapter in chapters:
        folder = root / chapter.assignment
        folder.mkdir()
        nbformat.write(learner_page(chapter, references[chapter], lang), folder / chapter.notebook_name)
        if (chapter.course_dir / "images").is_dir():
            shutil.copytree(chapter.course_dir / "images", folder / "images")
        zip_release(chapter, root / EXTRA / "downloads" / f"{chapter.assignment}.zip")
    guide_files = guides(lang)
    if guide_files:
        (root / "guides").mkdir()
        for path in guide_files:
            (root / "guides" / path.name).write_text(guide_text(path, chapters, root / "guides" / "images"),
                                                     encoding="utf-8")
    (root / "glossary.md").write_text(glossary_page(lang), encoding="utf-8")
    (root / "index.md").write_text(index_page(chapters, guide_files, lang), encoding="utf-8")
    return root
