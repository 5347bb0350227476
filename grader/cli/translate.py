"""`grader translate`: a language's catalogues (i18n/LANG/*.po) in step with the chapters, or checked."""
from __future__ import annotations

import sys

from grader.chapters import Chapter
from grader.cli.common import build_mod, chapters_named

HELP = "bring a language's catalogues (i18n/LANG/*.po) in step with the chapters"


def add_arguments(p) -> None:
    p.add_argument("chapters", nargs="*")
    p.add_argument("--lang", default="zh")
    p.add_argument("--check", action="store_true", help="only list units missing, untranslated or out of date")


def run(args) -> int:
    from grader.authoring import i18n  # lazy: start-up

    bad = []
    # Each chapter's catalogue, the messages the chapters share (i18n/LANG/common.po), then the graded
    # feedback's: each chapter's hidden checks and the shared texts (i18n/LANG/feedback/).
    chapters = chapters_named(args.chapters)
    for chapter in [*chapters, i18n.COMMON, *i18n.feedback_catalogues(chapters)]:
        nb = build_mod().build_source_notebook(chapter) if isinstance(chapter, Chapter) else None
        if args.check:
            bad += i18n.problems(chapter, args.lang, nb)
            continue
        catalogue, counts = i18n.update(chapter, args.lang, nb)
        i18n.save(catalogue, i18n.catalogue_path(chapter, args.lang))
        print(f"{i18n.catalogue_path(chapter, args.lang)}: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    for line in bad:
        print(line)
    if bad:
        print(f"{len(bad)} translation unit(s) to do: edit the catalogues "
              "(guides/maintaining.md: The Chinese edition).", file=sys.stderr)
        return 1
    return 0
