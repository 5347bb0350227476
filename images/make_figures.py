"""Draw every figure the chapter narratives show: `python images/make_figures.py`.

Each chapter has its own script `images/<chapter>_figures.py` with a `main()` that writes PNGs
into the chapter's authored folder, `chapters/NN_<chapter>/images/`, and each translation's into
`i18n/<lang>/figures/NN_<chapter>/` (grader.authoring.figures); `grader build` carries them into
the nbgrader source folders and the release into `course/NN_<chapter>/images/` (`course/<lang>/...`).
"""
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    for script in sorted(HERE.glob("*_figures.py")):
        if script.resolve() == Path(__file__).resolve():
            continue  # this file's name ends in _figures.py too
        spec = importlib.util.spec_from_file_location(script.stem, script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.main()
        print(f"drew {script.stem.removesuffix('_figures')}")


if __name__ == "__main__":
    sys.exit(main())
