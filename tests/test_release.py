"""A released chapter folder stands on its own and never holds an answer of its own chapter or a
later one; the grader still reaches the whole reference from inside such a folder."""
import re
import shutil
import subprocess
import sys
import textwrap

import nbformat
import pytest

from grader.authoring.bundle import folder_files, notebook_uses, support_files
from grader.authoring.text import read_text_source, write_text
from grader.chapters import CHAPTERS, REPO

REGION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.DOTALL)
LONG_LINE = 25  # a line of an answer at least this long is distinctive enough to look for alone
# Answer text the chapter spells out on purpose (chapter, text): a public check's hint, or a demo
# after the exercise that rebuilds what its docstring already states. Each is a decision for the
# chapter's author; the test shows it here rather than missing it.
SPELLED_OUT_ON_PURPOSE = {
    ("add_and_norm", "return layer_norm(x, self.weight, self.bias, self.eps)"),  # LayerNorm.forward
    # sample_next_token's docstring gives this order; the sampling demo measures the entropy of
    # the distribution it draws from
    ("gpt_generation", "logits = apply_temperature(logits, temperature)"),
    ("gpt_generation", "logits = top_k_filter(logits, top_k)"),
    ("gpt_generation", "logits = top_p_filter(logits, top_p)"),
}


def lines(text):
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def regions(chapter):
    return [lines(r) for r in REGION.findall(chapter.solutions_file.read_text())]


def readable(path):
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        return "\n".join(cell.source for cell in nb.cells)
    try:
        return path.read_text()
    except UnicodeDecodeError:  # a figure
        return ""


def leaks(folder, chapter):
    """Answers of `chapter` or a later one found in `folder`: whole solution regions, and long lines
    of them that no earlier chapter's reference or `course` helper also holds."""
    later = CHAPTERS[CHAPTERS.index(chapter):]
    earlier = "\n".join("\n".join(lines(c.solutions_file.read_text())) for c in CHAPTERS[:CHAPTERS.index(chapter)])
    allowed = set(earlier.splitlines())
    allowed |= {ln for p in (REPO / "course").glob("[a-z]*/*.py") for ln in lines(p.read_text())}
    found = []
    for rel, path in folder_files(folder).items():
        text = lines(readable(path))
        joined, present = "\n".join(text), set(text)
        for owner in later:
            for region in regions(owner):
                whole = "\n".join(region)
                if (owner.name, whole) in SPELLED_OUT_ON_PURPOSE or len(whole) < LONG_LINE or whole in earlier:
                    continue
                if whole in joined:
                    found.append(f"{rel}: a whole answer of chapter {owner.number}: {region[0]!r}")
                for ln in region:
                    on_purpose = (owner.name, ln) in SPELLED_OUT_ON_PURPOSE
                    if len(ln) >= LONG_LINE and ln in present and ln not in allowed and not on_purpose:
                        found.append(f"{rel}: a line of chapter {owner.number}'s answers: {ln!r}")
    return sorted(set(found))


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.assignment for c in CHAPTERS])
def test_release_holds_no_answer_of_this_or_a_later_chapter(chapter):
    assert leaks(chapter.course_dir, chapter) == []


def test_a_planted_answer_is_found(tmp_path):
    chapter, later = CHAPTERS[-2], CHAPTERS[-1]
    folder = tmp_path / chapter.assignment
    shutil.copytree(chapter.course_dir, folder, ignore=shutil.ignore_patterns("__pycache__"))
    assert leaks(folder, chapter) == []
    region = max(REGION.findall(later.solutions_file.read_text()), key=len)  # a distinctive answer
    with (folder / "course" / "toolkit" / "__init__.py").open("a") as f:
        f.write("\ndef planted():\n" + region)
    assert any(f"chapter {later.number}" in leak for leak in leaks(folder, chapter))
    own = [ln for r in regions(chapter) for ln in r if len(ln) >= LONG_LINE][0]
    (folder / "notes.txt").write_text(own + "\n")
    assert any("notes.txt" in leak for leak in leaks(folder, chapter))


def test_release_carries_only_the_imported_pieces():
    # Chapter 06 imports Encoder, LayerNorm and PositionwiseFeedForward from chapter 05: Encoder
    # brings EncoderLayer and layer_norm, but AddNorm, which nothing imported uses, stays out.
    chapter = next(c for c in CHAPTERS if c.name == "decoder_masking")
    files = support_files(chapter)
    carried = files["solutions/add_and_norm.py"].decode()
    for name in ("class Encoder(", "class EncoderLayer(", "def layer_norm(", "class LayerNorm("):
        assert name in carried
    assert "class AddNorm(" not in carried
    assert not any(f"solutions/{c.name}.py" in files for c in CHAPTERS[CHAPTERS.index(chapter):])
    assert set(notebook_uses(chapter).course) >= {"course.checks.decoder_masking", "course.toolkit.decoder_masking"}
    assert "course/checks/self_attention.py" not in files


def test_build_refuses_a_later_chapters_piece(tmp_path, monkeypatch):
    chapter = CHAPTERS[1]
    nb = read_text_source(chapter)
    nb.cells.insert(1, nbformat.v4.new_code_cell(f"from solutions.{CHAPTERS[2].name} import PositionalEncoding"))
    fake = tmp_path / chapter.text_source.name
    fake.write_text(write_text(nb), encoding="utf-8")
    monkeypatch.setattr(type(chapter), "text_source", property(lambda self: fake))
    with pytest.raises(ValueError, match="earlier chapters' pieces only"):
        support_files(chapter)


def test_hidden_tests_reach_the_whole_reference_from_a_release_folder(tmp_path):
    # A release folder whose generated `solutions` lacks what chapter 05's spec imports: the spec
    # must still load (grader.boundary.specs.full_packages), and without that it would not.
    package = tmp_path / "solutions"
    package.mkdir()
    (package / "__init__.py").write_text("# Generated by `grader build`: a stand-in.\n")
    (package / "multi_head_attention.py").write_text("# Generated by `grader build`: nothing here.\n")
    script = textwrap.dedent("""
        import importlib, sys
        sys.path.insert(0, "")
        import solutions.multi_head_attention
        if sys.argv[1] == "runner":
            from grader.boundary.specs import exercises
            assert "LayerNorm" in exercises("add_and_norm")
            assert not hasattr(sys.modules["solutions.multi_head_attention"], "MultiHeadAttention")
        else:
            importlib.import_module("grader.boundary.specs.add_and_norm")
    """)
    with_runner = subprocess.run([sys.executable, "-c", script, "runner"], cwd=tmp_path, capture_output=True, text=True)
    assert with_runner.returncode == 0, with_runner.stderr
    plain = subprocess.run([sys.executable, "-c", script, "plain"], cwd=tmp_path, capture_output=True, text=True)
    assert "ImportError" in plain.stderr, plain.stderr
