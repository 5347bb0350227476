"""The language switch: a link at the top of each page to the same page in the other edition (its home
page where that edition has no such page). The English site is site/_build/html/, the Chinese one its
zh/ folder, so the link's path is known from the page's name alone."""
from __future__ import annotations

import html
import os

from grader.website.pages import SOURCE

LABEL = {"en": "English", "zh": "中文"}


def counterpart_url(pagename: str, lang: str, exists) -> str:
    """The relative URL from `pagename` (a page of edition `lang`) to its page in the other edition."""
    other = "zh" if lang == "en" else "en"
    target = pagename if exists(other, pagename) else "index"
    up = "../" * (pagename.count("/") + (1 if lang == "zh" else 0))
    return f"{up}{'zh/' if other == 'zh' else ''}{target}.html"


def _exists(lang: str, pagename: str) -> bool:
    root = SOURCE / lang
    return any((root / f"{pagename}{suffix}").is_file() for suffix in (".md", ".ipynb"))


def _add_switch(app, pagename, templatename, context, doctree):
    if "body" not in context:
        return
    lang = os.environ.get("COURSE_SITE_LANG", "en")
    other = "zh" if lang == "en" else "en"
    url = html.escape(counterpart_url(pagename, lang, _exists))
    context["body"] = (f'<p class="lang-switch"><a href="{url}" hreflang="{other}" lang="{other}">'
                       f'{LABEL[other]}</a></p>\n' + context["body"])


def setup(app):
    app.connect("html-page-context", _add_switch)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
