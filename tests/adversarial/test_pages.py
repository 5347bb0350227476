"""Learner content drawn as a page, attacked as a learner would, in a real headless Chromium: the
autograded notebook as Formgrader draws it, the feedback file, and the grading service's routes.

Each script attack adds " PWNED-<name>" to document.title if it runs; a page passes when the title stays
clean after it loaded and every `javascript:` link was clicked. The rubric attacks imitate the grader's
rubric (a homoglyph, one letter changed, a zero-width space, its look copied) or try to hide it with CSS;
the real rubrics must stay visible and on top, and every imitation must say whose it is.
(Chromium: skipped without one unless COURSE_REQUIRE_BROWSER=1, as tests/test_browser.py.)
"""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest

from grader.authoring import samples
from grader.chapters import find_chapter, is_answer_cell
from grader.classroom.grades.written import IMITATION, written
from grader.classroom.grading.batch import autograde_class, job_cells
from grader.classroom.ledger import GRADED, Entry, Ledger
from tests.test_browser import OUTPUT, Page, chromium, serving, wait_for

CHAPTER = find_chapter("02")


def pwn(name: str) -> str:
    return f"document.title+=' PWNED-{name}'"


MARKDOWN_ATTACKS = {  # written answers and cells the learner added
    "md-img": f'My answer. <img src="x" onerror="{pwn("md-img")}">',
    "md-details": f'<details open ontoggle="{pwn("md-details")}"><summary>more</summary>text</details>',
    "md-jslink": f"[read the proof](javascript:void({pwn('md-jslink').replace(' ', '%20')}))",
    "md-iframe": f'<iframe srcdoc="<script>parent.{pwn("md-iframe")}</script>"></iframe>',
    "md-svg": f'<svg>\n<animate onbegin="{pwn("md-svg")}" attributeName="x" dur="1s"></animate>\n</svg>',
    # links markdown itself makes: an entity-encoded scheme, a reference definition, an autolink
    "md-entity": f"[the proof](jav&#x61;script:void({pwn('md-entity').replace(' ', '%20')}))",
    "md-reflink": f"[the proof][1]\n\n[1]: javascript:void({pwn('md-reflink').replace(' ', '%20')})",
    "md-autolink": f"<javascript:void({pwn('md-autolink').replace(' ', '%20')})>",
}
SVG = f'<svg xmlns="http://www.w3.org/2000/svg" onload="{pwn("out-svg")}"><rect width="9" height="9"/></svg>'
OUTPUT_ATTACKS = [  # saved outputs of course cells the grading run leaves out (shown as the learner saved them)
    {"text/html": f'<img src="x" onerror="{pwn("out-html")}"><script>{pwn("out-script")}</script>'},
    {"image/svg+xml": SVG, "text/html": SVG},
    {"application/javascript": f"1</script><script>{pwn('out-js')}</script><script>", "text/plain": "a plot"},
    {"text/markdown": f'<img src="x" onerror="{pwn("out-md")}">'},
    {"text/html": f'<a href="javascript:void({pwn("out-jslink")})">open</a>'},
]
BOX = "border: 4px double #8a4b00; background: #fff6e0"
# TeX that Formgrader's MathJax (loaded online) would draw as a page-covering box with a link
MATHJAX = r"$\href{javascript:void(0)}{\style{position:fixed;top:0;left:0;width:100%;height:100%}{\text{MATHJAX}}}$"
RUBRIC_ATTACKS = {  # each shows FAKE-<name>; the banner is "Rubric for the grader"
    "homoglyph": "> **Rubr\u0456c for the grader** (written_a, 2 points)\n>\n> **Rubric.** FAKE-homoglyph: full marks.",
    "onechar": "> **Rubric f0r the grader** (written_b, 2 points)\n>\n> FAKE-onechar: every answer earns full marks.",
    "zerowidth": "> **Rub\u200bric for the grader**\n>\n> FAKE-zerowidth: full marks for this notebook.",
    "look": f'<div style="{BOX}">\U0001F512 <b>Rubric for the graders</b> FAKE-look: full marks.</div>',
    "cover": '<div style="position:fixed;top:0;left:0;width:100%;height:100%;background:#fff;z-index:99999">'
             "FAKE-cover</div>",
    "hide": "<style>blockquote, div[data-course-rubric], .text_cell_render div { display: none !important; }</style>"
            "FAKE-hide",
}


def attacked_notebook() -> nbformat.NotebookNode:
    nb = samples.reference(CHAPTER)
    answers = [c for c in nb.cells if is_answer_cell(c)]
    answers[0].source, answers[1].source = MARKDOWN_ATTACKS["md-img"], MARKDOWN_ATTACKS["md-details"]
    at = nb.cells.index(answers[0]) + 1
    added = [MARKDOWN_ATTACKS[k] for k in list(MARKDOWN_ATTACKS)[2:]] + list(RUBRIC_ATTACKS.values())
    added.append(MATHJAX)
    nb.cells[at:at] = [nbformat.v4.new_markdown_cell(text) for text in added]
    skipped = [i for i, job in enumerate(job_cells(nb, samples.released(CHAPTER))) if "saved" in job]
    for index, data in zip(skipped, OUTPUT_ATTACKS):
        nb.cells[index].outputs = [nbformat.v4.new_output("display_data", data=data)]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2,
                                                                             "version_minor": 0}}
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("pages")
    (root / "inbox" / "mal").mkdir(parents=True)
    nbformat.write(attacked_notebook(), root / "inbox" / "mal" / CHAPTER.notebook_name)
    autograde_class(root / "inbox", root / "course", jobs=1, timeout=120, chapters=[CHAPTER])
    return root / "course"


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with chromium(tmp_path_factory.mktemp("chromium"), "the pages' attacks", "--allow-file-access-from-files") as page:
        yield page


def open_page(page: Page, url: str) -> None:
    page.send("Page.enable")
    page.send("Page.navigate", url=url)
    wait_for(lambda: page.js("document.readyState") == "complete", 60, f"{url} to load")
    page.js("new Promise(done => setTimeout(done, 1500))")  # handlers, animations and toggles fire by now


def scripts_that_ran(page: Page) -> str:
    """The page's title after it loaded and after each `javascript:` link in it was clicked."""
    loaded = page.js("document.title")
    page.js("[...document.querySelectorAll('a[href]')].filter(a => /^\\s*javascript:/i.test(a.getAttribute('href')))"
            ".forEach(a => a.click()); true")
    page.js("new Promise(done => setTimeout(done, 300))")
    frames = page.js("[...document.querySelectorAll('iframe')].map(f => { try { return f.contentDocument.title }"
                     " catch (e) { return '' } }).join(' ')")
    words = f"{loaded} {page.js('document.title')} {frames}".split()
    return " ".join(sorted({w for w in words if w.startswith("PWNED")}))


def formgrader_html(course: Path) -> str:
    """The autograded notebook as Formgrader's submission view draws it (nbgrader's formgrade template)."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config

    config = Config()
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    resources = {"assignment_id": CHAPTER.assignment, "notebook_id": CHAPTER.name, "submission_id": "x", "index": 0,
                 "total": 1, "base_url": "", "student": "mal", "last_name": "", "first_name": "",
                 "notebook_path": "x"}
    html, _ = HTMLExporter(config=config).from_filename(
        str(course / "autograded" / "mal" / CHAPTER.assignment / CHAPTER.notebook_name), resources=resources)
    return html


SCRIPT_ATTACKS = [*MARKDOWN_ATTACKS, "out-html", "out-script", "out-svg", "out-js", "out-md", "out-jslink"]


@pytest.fixture(scope="module")
def formgrader(graded, browser, tmp_path_factory) -> tuple[str, str]:
    """Formgrader's view of the learner's notebook: the scripts that ran in it, and its address."""
    view = tmp_path_factory.mktemp("formgrader") / "formgrade.html"
    view.write_text(formgrader_html(graded))
    open_page(browser, view.as_uri())
    return scripts_that_ran(browser), view.as_uri()


@pytest.fixture(scope="module")
def feedback(graded, browser) -> str:
    """The learner's feedback file, open in the browser; the scripts that ran in it."""
    open_page(browser, (graded / "feedback" / "mal" / CHAPTER.assignment / f"{CHAPTER.name}.html").as_uri())
    return scripts_that_ran(browser)


@pytest.mark.parametrize("attack", SCRIPT_ATTACKS)
def test_no_learner_script_runs_in_formgrader(formgrader, attack):
    assert f"PWNED-{attack}" not in formgrader[0].split()


@pytest.mark.parametrize("attack", SCRIPT_ATTACKS)
def test_no_learner_script_runs_in_the_feedback(feedback, attack):
    assert f"PWNED-{attack}" not in feedback.split()


def test_the_learner_cells_stay_in_the_feedback_as_text(graded):
    html = (graded / "feedback" / "mal" / CHAPTER.assignment / f"{CHAPTER.name}.html").read_text()
    assert all(f"FAKE-{name}" in html for name in RUBRIC_ATTACKS)
    assert "&lt;details open ontoggle=" in html  # the learner's markup, shown as what they wrote


RUBRICS = """(() => {
  const firsts = %s;
  return firsts.map(first => {
    const cells = [...document.querySelectorAll('.text_cell_render')].filter(c => c.textContent.includes(first));
    const el = cells.pop();
    if (!el) return {first, found: false};
    const item = [...el.querySelectorAll('li, p')].find(e => e.textContent.includes(first)) || el;
    item.scrollIntoView({block: 'center'});
    const r = item.getBoundingClientRect();
    const top = document.elementFromPoint(r.left + 5, r.top + r.height / 2);
    return {first, found: true, height: r.height, onTop: !!top && el.contains(top),
            visible: item.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})};
  });
})()"""
FAKES = """(() => Object.fromEntries([...document.querySelectorAll('.cell')].filter(c => /FAKE-/.test(c.textContent))
  .map(c => [c.textContent.match(/FAKE-(\\w+)/)[1], {labelled: c.innerText.includes(%s),
   box: [...c.querySelectorAll('*')].some(e => getComputedStyle(e).borderTopStyle === 'double')}])))()"""


def test_tex_that_mathjax_would_draw_as_markup_is_shown_as_code(formgrader, browser):
    # MathJax leaves <pre> and <code> alone; offline it does not load, so the test reads where the TeX is
    open_page(browser, formgrader[1])
    places = browser.js("""(() => {
      const found = [], walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
      while (walk.nextNode()) if (walk.currentNode.textContent.includes('\\\\style{position:fixed'))
        found.push(!!walk.currentNode.parentElement.closest('pre, code'));
      return found; })()""")
    assert places and all(places), places


@pytest.fixture(scope="module")
def rubric_view(formgrader, browser) -> tuple[list[dict], dict]:
    """Each real rubric as the page shows it, and each learner cell that tries to pass for one."""
    open_page(browser, formgrader[1])
    firsts = [item.rubric.splitlines()[0].removeprefix("- ")[:40] for item in written(CHAPTER.name).values()]
    browser.screenshot(OUTPUT / "formgrade.png")
    return browser.js(RUBRICS % json.dumps(firsts)), browser.js(FAKES % json.dumps(IMITATION))


@pytest.mark.parametrize("attack", RUBRIC_ATTACKS)
def test_no_learner_cell_imitates_or_hides_the_rubric(rubric_view, attack):
    rubrics, fakes = rubric_view
    assert rubrics and all(r["found"] for r in rubrics), rubrics
    if attack == "hide":
        assert all(r["visible"] and r["height"] > 0 for r in rubrics), rubrics
    elif attack == "cover":
        assert all(r["onTop"] for r in rubrics), f"something covers the rubric: {rubrics}"
    else:  # an imitation: it says whose it is, and cannot draw the rubric's box
        assert fakes[attack]["labelled"] and not fakes[attack]["box"], fakes[attack]


# ---------------------------------------------------------------- the grading service

class Service:
    """What onsubmit_web's pages read of grader.classroom.onsubmit.service.Service."""

    def __init__(self, course_dir: Path, policy: str = ""):
        from grader.classroom.policy.term import PolicyFile

        self.course_dir, self.ledger = course_dir, Ledger(course_dir)
        (course_dir / "term.toml").write_text(policy)
        self.policy = PolicyFile(course_dir)
        self.instructors: set[str] = set()  # the names the service was started with
        self.gradebook: dict = {}  # (student, assignment) -> Total; none: the pages show the ledger's scores

    def term(self):
        return self.policy.current()

    def totals(self) -> dict:
        return self.gradebook


@pytest.fixture
def service(tmp_path, monkeypatch):
    """The service's tornado application on a free port, the hub's login replaced by a fixed learner."""
    from jupyterhub.services.auth import HubOAuth

    from grader.classroom.onsubmit import web as onsubmit_web
    monkeypatch.setattr(onsubmit_web.Page, "get_current_user", lambda self: {"name": "mal"})
    due = (datetime.now(timezone.utc) + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    svc = Service(tmp_path, f'[due]\n"02" = {due}\n[on_submit]\nchapters = ["02"]\nfeedback_before_due = "score"\n')
    # the service's own routes and settings (XSRF cookies), under the prefix "/"
    app = onsubmit_web.application(svc, svc.instructors, set(), HubOAuth(api_token="test", cache_max_age=60), "/")
    with serving(app) as url:
        yield svc, url


def graded_entry(svc: Service, feedback_html: str | None = None, tag: str = "x", **fields) -> Entry:
    fields = {"score": 6.0, "raw_score": 6.0, "max_score": 8.0, **fields}
    entry = Entry(id=f"mal+{CHAPTER.assignment}+2026-11-20 10:00:00.000000 UTC+{tag}", student="mal",
                  assignment=CHAPTER.assignment, submitted_at="2026-11-20T10:00:00+00:00", status=GRADED,
                  feedback="self_attention.html" if feedback_html else None,
                  checks=[{"name": "test_softmax", "score": 0.0, "max_score": 2.0,
                           "error": "FAIL the softmax of a row of equal scores is uniform: you subtracted the mean"}],
                  **fields)
    svc.ledger.entries[entry.id] = entry
    svc.ledger.save()
    if feedback_html:
        kept = svc.course_dir / "on-submit" / "feedback" / entry.key / entry.feedback
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(feedback_html)
    return entry


def test_api_mine_keeps_the_messages_the_policy_hides(service):
    svc, base = service
    graded_entry(svc, tag="before")  # graded before the policy said "score": hidden now, on every view
    graded_entry(svc, tag="under", score_only=True)  # graded under it (the case)
    with urllib.request.urlopen(f"{base}/api/mine", timeout=10) as reply:
        text = reply.read().decode()
    assert "subtracted the mean" not in text and "FAIL" not in text, text
    assert [row["checks"][0]["max_score"] for row in json.loads(text)] == [2.0, 2.0]  # the scores are there
    with urllib.request.urlopen(f"{base}/", timeout=10) as reply:
        assert "subtracted the mean" not in reply.read().decode()


def test_a_feedback_file_that_shows_more_than_the_policy_is_not_served(service):
    svc, base = service
    entry = graded_entry(svc, feedback_html="<p>FAIL: you subtracted the mean</p>")  # graded with the messages
    with pytest.raises(urllib.error.HTTPError, match="404"):
        urllib.request.urlopen(f"{base}/feedback/{entry.key}", timeout=10)


def test_every_route_carries_the_strict_policy(service):
    svc, base = service
    entry = graded_entry(svc, feedback_html="<p>ok</p>", score_only=True)
    for path in ("/", "/api/mine", f"/feedback/{entry.key}", "/class", "/feedback/0000000000000000"):
        try:
            reply = urllib.request.urlopen(f"{base}{path}", timeout=10)
        except urllib.error.HTTPError as error:  # the class page (403), an unknown key (404): headers too
            reply = error
        csp = reply.headers.get("Content-Security-Policy", "")
        # the two pages with forms (regrade requests) may post a form to the service itself, and run no script
        forms = path in ("/", "/class") and reply.status == 200
        sandbox = "sandbox allow-forms allow-same-origin;" if forms else "sandbox;"
        assert csp.startswith(f"{sandbox} default-src 'none'; style-src 'unsafe-inline'; img-src data:"), (path, csp)
        assert "allow-scripts" not in csp and "script-src" not in csp, (path, csp)
        assert reply.headers.get("X-Content-Type-Options") == "nosniff", path


def test_api_mine_reads_the_gradebook_total_and_its_pending_answers(service):
    # the counted attempt shows the one total (a hand grade given since), its unmarked written answers pending
    from grader.classroom.grades.total import AUTOMATIC, PENDING, Part, Total

    svc, base = service
    graded_entry(svc, tag="counted", counted=True)
    graded_entry(svc, tag="earlier", score=4.0, raw_score=4.0, pending=["written_q"])
    svc.gradebook[("mal", CHAPTER.assignment)] = Total(
        "mal", CHAPTER.assignment, auto=6.0, hand=2.0, late_share=0.0, max_score=12.0,
        parts=(Part("test_softmax", AUTOMATIC, 6.0, 8.0), Part("written_p", PENDING, None, 2.0)))
    with urllib.request.urlopen(f"{base}/api/mine", timeout=10) as reply:
        rows = {row["id"].rsplit("+", 1)[1]: row for row in json.loads(reply.read())}
    assert (rows["counted"]["score"], rows["counted"]["max_score"], rows["counted"]["pending"]) == \
        (8.0, 12.0, ["written_p"])
    assert (rows["earlier"]["score"], rows["earlier"]["pending"]) == (4.0, ["written_q"])  # what it was graded at
    with urllib.request.urlopen(f"{base}/", timeout=10) as reply:
        page = reply.read().decode()
    assert "8 / 12 · 1 written answer(s) pending" in page and "4 / 8 · 1 written answer(s) pending" in page
    svc.instructors.add("mal")
    with urllib.request.urlopen(f"{base}/class", timeout=10) as reply:
        assert "8 / 12 · 1 written answer pending" in reply.read().decode()


def test_batch_feedback_is_linked_on_the_class_page_and_served_to_the_instructor_alone(service):
    from grader.classroom.grades.total import AUTOMATIC, Part, Total
    from grader.classroom.onsubmit.pages import batch_key

    svc, base = service
    html = svc.course_dir / "feedback" / "bea" / CHAPTER.assignment / f"{CHAPTER.name}.html"
    html.parent.mkdir(parents=True)
    html.write_text("<p>bea's feedback, graded in batch</p>")
    svc.gradebook[("bea", CHAPTER.assignment)] = Total("bea", CHAPTER.assignment, auto=6.0, hand=0.0,
                                                       late_share=0.0, max_score=8.0,
                                                       parts=(Part("test_softmax", AUTOMATIC, 6.0, 8.0),))
    key = batch_key("bea", CHAPTER.assignment)
    with pytest.raises(urllib.error.HTTPError, match="404"):  # mal, a learner, asks for bea's: nothing there
        urllib.request.urlopen(f"{base}/feedback/{key}", timeout=10)
    svc.instructors.add("mal")
    with urllib.request.urlopen(f"{base}/class", timeout=10) as reply:
        assert f'href="/feedback/{key}"' in reply.read().decode()  # the service's prefix is "/" here
    with urllib.request.urlopen(f"{base}/feedback/{key}", timeout=10) as reply:
        assert "graded in batch" in reply.read().decode()
        assert reply.headers["Content-Security-Policy"].startswith("sandbox; default-src 'none'")
    link = html.with_name("elsewhere.html")  # a link in the feedback folder is not followed
    link.write_text("<p>not this</p>")
    html.unlink()
    html.symlink_to(link)
    with pytest.raises(urllib.error.HTTPError, match="404"):
        urllib.request.urlopen(f"{base}/feedback/{key}", timeout=10)


@pytest.mark.parametrize("attack", ["script", "handler", "svg"])
def test_a_feedback_file_served_by_the_service_runs_no_script(service, browser, attack):
    # defence in depth: even a feedback file that escaped the sanitiser (an older one) runs nothing
    svc, base = service
    html = {"script": f"<script>{pwn('svc-script')}</script>",
            "handler": f'<img src="x" onerror="{pwn("svc-handler")}">',
            "svg": f'<svg onload="{pwn("svc-svg")}"></svg>'}[attack]
    entry = graded_entry(svc, feedback_html=f"<html><head><title>feedback</title></head><body>{html}</body></html>",
                         score_only=True)
    # DevTools cannot evaluate in a page the CSP sandboxes without scripts: read its title and DOM instead
    browser.send("Page.navigate", url=f"{base}/feedback/{entry.key}")
    time.sleep(2)
    root = browser.send("DOM.getDocument", depth=-1)["root"]
    assert "feedback" in browser.send("DOM.getOuterHTML", nodeId=root["nodeId"])["outerHTML"]  # it loaded
    assert browser.send("Target.getTargetInfo")["targetInfo"]["title"] == "feedback"


# ---------------------------------------------------------------- what stays as it was

@pytest.mark.parametrize("edition", ["en", "zh"])
def test_the_chapters_own_cells_and_plots_draw_as_before(edition):
    # the sanitiser changes nothing an honest notebook holds: every chapter's text and a plot's output
    from grader.chapters import CHAPTERS
    from grader.classroom.intake.sanitise import clean_markdown, clean_output

    for chapter in CHAPTERS:
        nb = samples.reference(chapter.edition(edition))
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                assert clean_markdown(cell.source) == cell.source, (chapter.name, cell.source[:80])
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    plot = nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure size 640x480>"},
                                  metadata={"image/png": {"width": 640, "height": 480}})
    assert clean_output(plot) == plot
    table = "<table><thead><tr><th>d_k</th></tr></thead><tbody><tr><td>0.25</td></tr></tbody></table>"
    assert clean_output(nbformat.v4.new_output("display_data", data={"text/html": table}))["data"]["text/html"] == table


def test_learner_view_is_the_one_rule():
    from grader.classroom.policy.visibility import Policy, learner_view

    entry = Entry(id="x", student="mal", assignment=CHAPTER.assignment, submitted_at="2026-11-20T10:00:00+00:00",
                  status=GRADED, score=6.0, max_score=8.0, feedback="f.html",
                  checks=[{"name": "test_softmax", "score": 0.0, "max_score": 2.0, "error": "FAIL why"}])
    due = datetime(2026, 11, 22, tzinfo=timezone.utc)
    before, after = due - timedelta(hours=1), due + timedelta(hours=1)
    assert learner_view(entry, Policy("checks", due), before).checks[0].message == "FAIL why"
    hidden = learner_view(entry, Policy("score", due), before)
    assert not hidden.messages and hidden.checks[0].message is None and not hidden.feedback  # its file shows them
    assert "FAIL why" not in json.dumps(hidden.as_json()) and hidden.as_json()["score"] == 6.0
    assert learner_view(entry, Policy("score", due), after).messages
    entry.score_only = True  # graded under "score": its feedback shows scores only, so it may be linked
    assert learner_view(entry, Policy("checks", None), after).feedback
    assert not learner_view(entry, Policy("checks", None), after).messages  # no due date: always before it


def test_a_feedback_file_runs_no_script_wherever_it_is_opened(browser, tmp_path):
    # defence in depth: a notebook that reached the feedback exporter unsanitised (its own CSP, in the file)
    from grader.classroom.grading.recording import feedback_exporter

    nb = samples.released(CHAPTER)
    nb.cells.append(nbformat.v4.new_markdown_cell(f'<img src="x" onerror="{pwn("file-handler")}">'))
    code = nbformat.v4.new_code_cell("1")
    script = f"<script>{pwn('file-script')}</script>"
    code.outputs = [nbformat.v4.new_output("display_data", data={"text/html": script})]
    nb.cells.append(code)
    exporter = feedback_exporter()(template_name="classic")
    html, _ = exporter.from_notebook_node(nb, {"metadata": {"path": str(tmp_path)}})
    page = tmp_path / "feedback.html"
    page.write_text(html)
    assert "onerror=" in html and "<script>document.title" in html  # the attacks are in the file
    open_page(browser, page.as_uri())
    assert scripts_that_ran(browser) == ""
