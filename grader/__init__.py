"""Instructor tooling: hidden test specs, nbgrader glue and the `grader` command line."""

import sys as _sys

# jsonschema (under nbformat) imports rfc3987_syntax when it is installed, which builds some forty
# grammar parsers at import time (about 4 s here) for an "iri" string format no notebook schema
# uses. Every grader process imports nbformat; mark the optional module absent instead.
_sys.modules.setdefault("rfc3987_syntax", None)
