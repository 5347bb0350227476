"""Sphinx's configuration of both editions (`sphinx-build -c grader/website`): the edition comes from
COURSE_SITE_LANG. Everything a page loads is in the build: MathJax 3 from the django-static-mathjax
package (copied into _static/mathjax by grader.website.build), no CDN, no widget scripts."""
from __future__ import annotations

import os
from pathlib import Path

from grader.website.pages import EXTRA, SOURCE, TEXT

lang = os.environ.get("COURSE_SITE_LANG", "en")
if lang not in TEXT:
    raise ValueError(f"COURSE_SITE_LANG={lang!r}: the editions are {', '.join(TEXT)}")

project = TEXT[lang]["title"]
language = "zh_CN" if lang == "zh" else "en"
extensions = ["myst_nb", "grader.website.switch"]
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
nb_execution_mode = "off"  # the outputs are the reference run's (grader.website.execute)
nb_ipywidgets_js = {}  # require.js and the widget manager would come from a CDN
nb_merge_streams = True
exclude_patterns = ["_build", EXTRA, "**/.ipynb_checkpoints"]
# Relative paths here would be read from this folder, not the edition's source.
html_extra_path = [str(SOURCE / lang / EXTRA)]
html_static_path = [str(SOURCE / lang / "_static")]
html_copy_source = False  # the notebooks are on the page; the zip is the download
html_theme = "sphinx_book_theme"
html_title = project
html_theme_options = {"show_toc_level": 2, "use_download_button": False, "use_fullscreen_button": False}
html_context = {"default_mode": "light"}  # else the theme logs "invalid theme mode" as a console error
html_favicon = str(Path(__file__).with_name("favicon.svg"))  # else the browser asks for /favicon.ico

mathjax_path = "mathjax/tex-chtml.js"  # MathJax 3, copied into _static by grader.website.build

if lang == "zh":
    from sphinx.search import languages
    from sphinx.search.zh import SearchChinese

    class _Chinese(SearchChinese):
        # Sphinx 9 ships english-stemmer.js for Chinese but names `ChineseStemmer` in language_data.js, an
        # error on every page; the Latin words are stemmed as English anyway. Chinese words: jieba.
        language_name = "English"

    languages["zh"] = _Chinese

suppress_warnings = ["myst.header", "misc.highlighting_failure"]
