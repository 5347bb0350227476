"""`python -m grader.website` (`make site`): both editions of the website into site/_build/html/."""
import sys


def main() -> int:
    from grader.website.build import main as build  # lazy: the entry point sits above the layers it runs

    return build()


sys.exit(main())
