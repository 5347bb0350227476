"""python -m tests.snapshots [--write] [CHAPTER ...]: compare (or rewrite) the numbers the public checks store."""
from __future__ import annotations

import argparse
import sys

from tests.snapshots import REPO, chapter_names, checks_path, compare, compute, rewrite


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.snapshots", description=__doc__)
    parser.add_argument("chapters", nargs="*", metavar="CHAPTER", help="chapter names (default: every chapter)")
    parser.add_argument("--write", action="store_true", help="rewrite the stored blocks of course/checks/<chapter>.py")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.chapters) - set(chapter_names()))
    if unknown:
        parser.error(f"no chapter {unknown[0]}; chapters: {', '.join(chapter_names())}")
    status = 0
    for chapter in args.chapters or chapter_names():
        path = checks_path(chapter)
        if args.write:
            values = compute(chapter)
            text = rewrite(chapter, values)
            changed = text != path.read_text()
            if changed:
                path.write_text(text)
            print(f"{'wrote' if changed else 'unchanged'}: {path.relative_to(REPO)} ({len(values)} numbers)")
            continue
        count, problems = compare(chapter)
        print(f"{path.relative_to(REPO)}: {count} numbers, {f'{len(problems)} differ' if problems else 'all agree'}")
        for problem in problems:
            print(f"  {problem}")
        status |= bool(problems)
    if status:
        print("rewrite them with: .venv/bin/python -m tests.snapshots --write, "
              "then grader build && grader release --write")
    return status


if __name__ == "__main__":
    sys.exit(main())
