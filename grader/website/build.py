"""`make site`: both editions of the website into site/_build/html/ (English) and its zh/ folder."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import mathjax

from grader.chapters import CHAPTERS, LANGUAGES, REPO
from grader.website import execute, pages

HTML = REPO / "site" / "_build" / "html"
CONF = Path(__file__).resolve().parent
# MathJax 3 from the django-static-mathjax package (its files, no Django): the combined TeX-to-HTML script and
# what it loads (TeX extensions, the HTML output's fonts, the menu, the accessibility parts), 5 of its 24 MB.
MATHJAX = Path(mathjax.__file__).resolve().parent / "static" / "mathjax"
MATHJAX_PARTS = ("LICENSE", "es5/tex-chtml.js", "es5/input", "es5/output/chtml", "es5/ui", "es5/a11y")
EDITIONS = ("en", *LANGUAGES)


def output_dir(lang: str) -> Path:
    return HTML if lang == "en" else HTML / lang


def sphinx(lang: str, source: Path) -> subprocess.Popen:
    """sphinx-build of one edition, its warnings into site/_build/<lang>-warnings.log."""
    log = REPO / "site" / "_build" / f"{lang}-warnings.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-c", str(CONF), "-w", str(log),
               "-d", str(REPO / "site" / "_build" / f"doctrees-{lang}"), str(source), str(output_dir(lang))]
    return subprocess.Popen(command, cwd=REPO, env=dict(os.environ, COURSE_SITE_LANG=lang))


def copy_mathjax(target: Path) -> None:
    for part in MATHJAX_PARTS:
        source, copy = MATHJAX / part, target / part.removeprefix("es5/")
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, copy)
        else:
            shutil.copy(source, copy)


def build(log=print) -> Path:
    start = time.perf_counter()
    editions = {lang: [c if lang == "en" else c.edition(lang) for c in CHAPTERS] for lang in EDITIONS}
    references = execute.reference_runs([c for chapters in editions.values() for c in chapters], log=log)
    if HTML.exists():
        shutil.rmtree(HTML)  # a page the sources no longer have must not linger
    sources = {}
    for lang, chapters in editions.items():
        sources[lang] = pages.write_edition(chapters, references, lang)
        copy_mathjax(sources[lang] / "_static" / "mathjax")
    # The editions build side by side (2 cores); zh/ lies inside the English output, which Sphinx leaves alone.
    builds = {lang: sphinx(lang, source) for lang, source in sources.items()}
    failed = [lang for lang, proc in builds.items() if proc.wait() != 0]
    if failed:
        raise SystemExit(f"sphinx-build failed for {', '.join(failed)}: see site/_build/*-warnings.log")
    count = sum(1 for _ in HTML.rglob("*.html"))
    log(f"site: {count} pages in {HTML.relative_to(REPO)}/ ({time.perf_counter() - start:.0f} s)")
    return HTML


def main() -> int:
    build()
    return 0
