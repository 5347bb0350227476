"""`make site` as a reader sees it: the site is built once (grader.website; the reference runs come from
site/_cache/ when their inputs have not changed), then every built page is opened in headless Chromium,
served from 127.0.0.1 with every other host unreachable (no CDN can stand in): no console error, every
image loaded, the maths typeset by the bundled MathJax, every internal link resolving to a built file,
each page's language switch leading to the same page of the other edition, the Chinese pages Chinese.
Without the browser those tests skip (fail under COURSE_REQUIRE_BROWSER=1); the page checks that read
the built files run anyway: no line of the reference code, the hidden tests or the model answers is on
any page, and no exercise, check or test cell shows an output.
The cold build runs all 18 reference notebooks (minutes on 2 cores, which test_notebooks.py already runs
under nbval): every test of the built site is `integration` (`make test-integration`); the checks that need
no build (the leak check can fail, the switch link, CJK bold) stay in `make test`.
"""
from __future__ import annotations

import ast
import functools
import http.server
import re
import subprocess
import threading
import urllib.parse
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup

from grader.chapters import CHAPTERS, LANGUAGES
from grader.website import build, pages
from tests.test_browser import OUTPUT, Page, require_browser, wait_for

SCREENSHOTS = ("index.html", f"{CHAPTERS[0].assignment}/{CHAPTERS[0].name}.html")  # into test-output/browser/
SEARCHES = (("search.html", "softmax"), ("zh/search.html", "注意力"))  # each finds chapter pages
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
LATIN_WORD = re.compile(r"[A-Za-z]+")  # a CJK character is about a word: compared with words, not letters


@pytest.fixture(scope="module")
def site() -> Path:
    return build.build(log=print)


def edition_of(html: Path, root: Path) -> str:
    parts = html.relative_to(root).parts
    return parts[0] if parts[0] in LANGUAGES else "en"


def built_pages(root: Path) -> list[Path]:
    """The site's pages: not the theme's template fragments in _static/."""
    return sorted(p for p in root.rglob("*.html") if not any(d.startswith("_") for d in p.relative_to(root).parts))


def page_text(path: Path) -> str:
    """What a page says, whitespace collapsed (code keeps its tokens; markup and scripts gone)."""
    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    for tag in soup(["script", "style"]):
        tag.decompose()
    return " ".join(soup.get_text("").split())  # "": highlighted code is split into spans, not words


def squeeze(text: str) -> str:
    return " ".join(text.split())


def solution_lines(path: Path) -> list[str]:
    """The lines of every function body in a solutions module (docstrings left out)."""
    source = path.read_text(encoding="utf-8").splitlines()
    found = []
    for node in ast.walk(ast.parse("\n".join(source))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            if body:
                found += source[body[0].lineno - 1:node.end_lineno]
    return found


@functools.cache
def secrets(lang: str) -> list[str]:
    """Texts the site must never show: each line of the reference code (solutions/*.py bodies) and of the
    reference notebooks (hidden tests, model answers) that the learners' notebooks do not contain. Short
    lines are left out: `return x` says nothing and could be anywhere."""
    learner, reference = [], []
    for chapter in CHAPTERS:
        chapter = chapter if lang == "en" else chapter.edition(lang)
        learner += [c.source for c in nbformat.read(chapter.course_notebook, as_version=4).cells]
        reference += [line for c in nbformat.read(chapter.source_notebook, as_version=4).cells
                      for line in c.source.splitlines()]
        reference += solution_lines(chapter.solutions_file)
    seen = squeeze(" ".join(learner))
    return sorted({squeeze(line) for line in reference
                   if len(squeeze(line)) >= 16 and squeeze(line) not in seen})


def leaks(text: str, lang: str) -> list[str]:
    return [line for line in secrets(lang) if line in text]


def test_the_leak_check_finds_the_reference_notebook():
    """The check below can fail: the reference notebook's text holds solution code and hidden tests."""
    chapter = CHAPTERS[0]
    text = squeeze("\n".join(c.source for c in nbformat.read(chapter.source_notebook, as_version=4).cells))
    found = leaks(text, "en")
    assert any("run_checks(" in line for line in found), found
    assert any(line in squeeze("\n".join(solution_lines(chapter.solutions_file))) for line in found), found


@pytest.mark.integration
def test_no_page_shows_reference_code_hidden_tests_or_model_answers(site):
    shown = {}
    for path in built_pages(site):
        found = leaks(page_text(path), edition_of(path, site))
        if found:
            shown[str(path.relative_to(site))] = found[:3]
    assert not shown, shown


@pytest.mark.integration
def test_exercise_check_and_test_cells_show_no_output_and_demos_show_the_reference_run(site):
    for lang in ("en", *LANGUAGES):
        images = 0
        for chapter in CHAPTERS:
            nb = nbformat.read(pages.SOURCE / lang / chapter.assignment / chapter.notebook_name, as_version=4)
            code = [c for c in nb.cells if c.cell_type == "code"]
            quiet = [c for c in code if not pages.shows_output(c)]
            assert quiet and all(not c.outputs for c in quiet), chapter.assignment
            exercises = [c for c in code if c.metadata.get("nbgrader", {}).get("solution")]
            assert exercises and all("NotImplementedError" in c.source for c in exercises), chapter.assignment
            images += sum("image/png" in o.get("data", {}) for c in code for o in c.outputs)
        assert images >= len(CHAPTERS), f"{lang}: only {images} plots from the reference runs"


TRAINING = re.compile(r"tqdm\(|train_addition\(")  # a training cell: its progress bar, or the toolkit's loop
NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")


def training_numbers(page: Path) -> list[list[str]]:
    """The numbers each training cell of a page prints (sorted: a translation may reorder a sentence)."""
    cells = nbformat.read(page, as_version=4).cells
    return [sorted(NUMBER.findall("".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")))
            for cell in cells if cell.cell_type == "code" and TRAINING.search(cell.source)]


@pytest.mark.integration
def test_the_chinese_pages_print_the_english_pages_training_numbers(site):
    """The translation's reference run puts the English run's trainings in place (grader.website.share):
    the same numbers, the seconds and tokens per second included, which two runs of their own never repeat."""
    compared = 0
    for chapter in CHAPTERS:
        numbers = {lang: training_numbers(pages.SOURCE / lang / chapter.assignment / chapter.notebook_name)
                   for lang in ("en", *LANGUAGES)}
        for lang in LANGUAGES:
            assert numbers[lang] == numbers["en"], (chapter.assignment, lang)
        compared += sum(1 for cell in numbers["en"] if cell)
    assert compared >= 6, compared  # 05-09 train (06-09 print their seconds)


@pytest.mark.integration
def test_each_chapter_links_its_release_zip(site):
    import zipfile

    for lang in ("en", *LANGUAGES):
        for chapter in CHAPTERS:
            chapter = chapter if lang == "en" else chapter.edition(lang)
            archive = build.output_dir(lang) / "downloads" / f"{chapter.assignment}.zip"
            names = zipfile.ZipFile(archive).namelist()
            assert f"{chapter.assignment}/{chapter.notebook_name}" in names
            assert not any("__pycache__" in n for n in names)
            page = build.output_dir(lang) / chapter.assignment / f"{chapter.name}.html"
            assert f'href="../downloads/{chapter.assignment}.zip"' in page.read_text(encoding="utf-8")


class Recording(Page):
    """A tab that keeps the events the protocol sends between replies (console errors, requests)."""

    def __init__(self, debug_port: int):
        self.events: list[dict] = []
        super().__init__(debug_port)

    def on_event(self, message: dict) -> None:
        self.events.append(message)


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


# What each page reports once it has loaded and MathJax has typeset it.
INSPECT = """(async () => {
  const math = document.querySelectorAll('.math').length;
  if (math) {  // MathJax 3: its startup promise settles once the page is typeset
    const start = Date.now();
    while (!(window.MathJax && MathJax.startup && MathJax.startup.promise) && Date.now() - start < 30000)
      await new Promise(done => setTimeout(done, 100));
    if (window.MathJax && MathJax.startup) await MathJax.startup.promise;
  }
  const article = document.querySelector('article') || document.body;
  const prose = article.cloneNode(true);
  prose.querySelectorAll('pre, code, .math, script, .cell_output')
    .forEach(e => e.remove());
  return {
    math, typeset: [...document.querySelectorAll('.math')].filter(e => e.querySelector('mjx-container mjx-math'))
      .length,
    untypeset: [...document.querySelectorAll('.math')].filter(e => /\\\\[(\\[]/.test(e.textContent)).length,
    images: [...document.images].map(i => ({src: i.currentSrc, width: i.naturalWidth})),
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    lang: document.documentElement.lang, prose: prose.textContent,
    switch: (document.querySelector('.lang-switch a') || {}).href || null,
  };
})()"""


@pytest.fixture(scope="module")
def visits(site, tmp_path_factory):
    executable = require_browser("the site's pages in a browser")
    return visit(executable, site, built_pages(site), tmp_path_factory.mktemp("site-browser"))


def visit(executable: str, site: Path, paths: list[Path], home: Path) -> tuple[str, dict, dict]:
    """The pages as Chromium drew them: the server's URL, {path relative to the site: what INSPECT found,
    the console errors, the requests to another host}, and {search page and query: the results' titles}."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    chrome = subprocess.Popen(
        [executable, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", f"--user-data-dir={home}",
         "--remote-debugging-port=0", "--remote-allow-origins=*", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    found = {}
    try:
        active = home / "DevToolsActivePort"
        wait_for(lambda: chrome.poll() is None and active.exists() and active.read_text().strip(), 60,
                 "the browser to start")
        page = Recording(int(active.read_text().split()[0]))
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.send(f"{domain}.enable")
        for path in paths:
            relative = path.relative_to(site).as_posix()
            page.events.clear()
            page.send("Page.navigate", url=base + relative)
            wait_for(lambda: page.js("document.readyState") == "complete", 60, f"{relative} to load")
            facts = page.js(INSPECT)
            page.js("new Promise(done => setTimeout(done, 300))")  # late errors of deferred scripts
            facts["errors"] = [e["params"] for e in page.events
                               if e["method"] == "Runtime.exceptionThrown"
                               or (e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] == "error")
                               or (e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
            facts["elsewhere"] = [e["params"]["request"]["url"] for e in page.events
                                  if e["method"] == "Network.requestWillBeSent"
                                  and not e["params"]["request"]["url"].startswith((base, "data:", "blob:"))]
            found[relative] = facts
            if relative.removeprefix("zh/") in SCREENSHOTS:
                page.screenshot(OUTPUT / relative.replace("/", "-").replace(".html", ".png"))
        searches = {}
        for where, query in SEARCHES:
            page.send("Page.navigate", url=f"{base}{where}?q={urllib.parse.quote(query)}")
            try:
                searches[where, query] = wait_for(lambda: page.js(
                    "[...document.querySelectorAll('#search-results li a')].map(a => a.textContent)"), 30,
                    f"{where} to find {query!r}")
            except AssertionError:
                searches[where, query] = []  # the search test says so; the page tests still run
        page.ws.close()
    finally:
        server.shutdown()
        chrome.terminate()
        try:
            chrome.wait(timeout=20)
        except subprocess.TimeoutExpired:
            chrome.kill()
    return base, found, searches


@pytest.mark.integration
def test_every_page_loads_without_a_console_error_or_a_request_elsewhere(visits):
    _, found, _ = visits
    assert len(found) >= 2 * (len(CHAPTERS) + 3)  # two editions: chapters, index, glossary, search at least
    bad = {page: facts["errors"][:2] for page, facts in found.items() if facts["errors"]}
    assert not bad, bad
    elsewhere = {page: facts["elsewhere"] for page, facts in found.items() if facts["elsewhere"]}
    assert not elsewhere, elsewhere


@pytest.mark.integration
def test_every_image_loads(visits):
    _, found, _ = visits
    broken = {page: [i["src"] for i in facts["images"] if not i["width"]] for page, facts in found.items()}
    broken = {page: sources for page, sources in broken.items() if sources}
    assert not broken, broken
    chapter = found[f"{CHAPTERS[0].assignment}/{CHAPTERS[0].name}.html"]
    assert len(chapter["images"]) >= 3, chapter["images"]  # the figures and the reference run's plots


@pytest.mark.integration
def test_the_maths_is_typeset_offline(visits):
    _, found, _ = visits
    for lang in ("en", *LANGUAGES):
        for chapter in CHAPTERS[:2]:
            name = f"{'' if lang == 'en' else lang + '/'}{chapter.assignment}/{chapter.name}.html"
            facts = found[name]
            assert facts["math"] > 5 and facts["typeset"] >= facts["math"], (name, facts["math"], facts["typeset"])
    untypeset = {page: facts["untypeset"] for page, facts in found.items() if facts["math"] and facts["untypeset"]}
    assert not untypeset, untypeset


@pytest.mark.integration
def test_every_internal_link_resolves_to_a_built_file(site, visits):
    base, found, _ = visits
    missing = set()
    for page, facts in found.items():
        for link in facts["links"]:
            if not link.startswith(base):
                continue
            target = site / urllib.parse.unquote(urllib.parse.urlsplit(link).path.removeprefix(
                urllib.parse.urlsplit(base).path))
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                missing.add((page, link))
    assert not missing, sorted(missing)[:10]


@pytest.mark.integration
def test_the_language_switch_leads_to_the_same_page(visits):
    base, found, _ = visits
    switched = 0
    for page, facts in found.items():
        if page.split("/")[-1] in ("genindex.html", "search.html"):
            continue
        lang = page.split("/")[0] if page.split("/")[0] in LANGUAGES else "en"
        counterpart = page.removeprefix(f"{lang}/") if lang != "en" else f"{LANGUAGES[0]}/{page}"
        assert facts["switch"], f"{page}: no language switch"
        if counterpart in found:
            assert facts["switch"] == base + counterpart, (page, facts["switch"])
            switched += 1
    assert switched >= 2 * (len(CHAPTERS) + 2)


@pytest.mark.integration
def test_the_chinese_pages_are_chinese(visits):
    _, found, _ = visits
    for page, facts in found.items():
        if page.split("/")[0] not in LANGUAGES or page.split("/")[-1] in ("genindex.html", "search.html"):
            continue
        cjk, latin = len(CJK.findall(facts["prose"])), len(LATIN_WORD.findall(facts["prose"]))
        assert facts["lang"].startswith("zh"), (page, facts["lang"])
        assert cjk > 2 * latin, f"{page}: {cjk} CJK characters, {latin} Latin words"


def test_the_switch_link_is_relative_to_the_page():
    from grader.website.switch import counterpart_url

    def both(lang, page):
        return True

    assert counterpart_url("01_a/a", "en", both) == "../zh/01_a/a.html"
    assert counterpart_url("index", "en", both) == "zh/index.html"
    assert counterpart_url("01_a/a", "zh", both) == "../../01_a/a.html"
    assert counterpart_url("guides/extra", "zh", lambda lang, page: False) == "../../index.html"


@pytest.mark.integration
def test_search_finds_the_chapters_in_both_languages(visits):
    _, _, searches = visits
    for (where, query), titles in searches.items():
        assert len(titles) >= 3, (where, query, titles)


@pytest.mark.integration
def test_no_markdown_is_left_unrendered(visits):
    _, found, _ = visits
    stars = {page: facts["prose"][max(0, facts["prose"].find("**") - 30):][:60] for page, facts in found.items()
             if "**" in facts["prose"]}
    assert not stars, stars


def test_cjk_bold_closes_after_chinese_punctuation():
    assert pages.cjk_bold("**如何完成练习。**把每个") == "**如何完成练习**。把每个"
    assert pages.cjk_bold("**带宽**（b） x ** 2") == "**带宽**（b） x ** 2"


def test_a_progress_bar_widget_is_not_shown():
    """tqdm's bar is a widget: its text is the bar's first state (0%), and the editions' runs, one of which
    puts the other's training in place (grader.website.share), draw it differently or not at all."""
    bar = nbformat.from_dict({"output_type": "display_data", "metadata": {}, "data": {
        "application/vnd.jupyter.widget-view+json": {"model_id": "0", "version_major": 2, "version_minor": 0},
        "text/plain": "pretraining:   0%|          | 0/700 [00:00<?, ?it/s]"}})
    table = nbformat.from_dict({"output_type": "display_data", "metadata": {}, "data": {"text/plain": "a table"}})
    assert pages._shown(bar) is None
    assert pages._shown(table) == table
