"""`make site`: the course as a static website, built offline (Sphinx with myst-nb).

`execute` runs each chapter's reference notebook once (cached by content), `pages` writes the Sphinx
source of each edition (the learners' notebooks with the reference run's demo outputs, the guides, the
glossary, the chapters' zips), `build` runs Sphinx for each edition into site/_build/html/ (English) and
site/_build/html/zh/ (Chinese).
"""
