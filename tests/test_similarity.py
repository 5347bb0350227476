"""`grader similarity`: what the normaliser undoes, the rarity weighting, the JSON, the HTML page's safety,
the CLI's errors, and the ranking of benchmarks/similarity.py's planted copies (which must not regress)."""
from __future__ import annotations

import importlib.util
import json
import subprocess

import pytest

from grader.chapters import REPO, find_chapter
from grader.classroom.similarity.html import render
from grader.classroom.similarity.normalise import code_text, prose_text
from grader.classroom.similarity.pairs import similarity
from grader.cli import main
from tests.test_browser import require_browser

spec = importlib.util.spec_from_file_location("similarity_benchmark", REPO / "benchmarks" / "similarity.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
CHAPTER = find_chapter("02")
FIXED = frozenset({"softmax", "SelfAttention", "__init__", "forward"})

ORIGINAL = '''
def helper_max(t, d):
    return t.amax(dim=d, keepdim=True)

def softmax(x, dim=-1):
    """Softmax along dim."""
    shifted = x - helper_max(x, dim)  # stable
    parts = []
    for row in shifted.unbind(0):
        if row.numel() > 0:
            parts.append(torch.exp(row) * 2)
    total = sum(p.sum() for p in parts)
    return torch.stack(parts) / total
'''
DISGUISES = {
    "renamed": ORIGINAL.replace("shifted", "centred").replace("parts", "pieces").replace("helper_max", "top")
                       .replace("row", "r"),
    "reordered": "def softmax" + ORIGINAL.split("def softmax")[1] + "\n" + ORIGINAL.split("def softmax")[0],
    "comments and docstrings": ORIGINAL.replace('    """Softmax along dim."""\n', '    # the max trick\n')
                                       .replace("# stable", "# no overflow"),
    "whitespace": ORIGINAL.replace("x - helper_max(x, dim)", "x-helper_max( x,dim )").replace("\n\n", "\n\n\n"),
    "loop as comprehension": ORIGINAL.replace('''    parts = []
    for row in shifted.unbind(0):
        if row.numel() > 0:
            parts.append(torch.exp(row) * 2)''',
        "    parts = [torch.exp(row) * 2 for row in shifted.unbind(0) if row.numel() > 0]"),
    "generator as list": ORIGINAL.replace("sum(p.sum() for p in parts)", "sum([p.sum() for p in parts])"),
}
CLASS_A = '''class SelfAttention(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)
    def forward(self, x):
        return self.proj(x).relu()
'''
CLASS_B = '''class SelfAttention(nn.Module):
    def forward(self, inputs):
        return self.layer(inputs).relu()
    def __init__(self, size):
        super().__init__()
        self.layer = nn.Linear(size, size)
'''


@pytest.mark.parametrize("disguise", sorted(DISGUISES))
def test_each_disguise_leaves_the_fingerprints_as_they_were(disguise):
    original = set(code_text(ORIGINAL, FIXED).prints)
    assert original and set(code_text(DISGUISES[disguise], FIXED).prints) == original


def test_methods_reordered_and_attributes_renamed_change_nothing():
    assert set(code_text(CLASS_A, FIXED).prints) == set(code_text(CLASS_B, FIXED).prints)


def test_different_code_has_different_fingerprints():
    other = "def softmax(x, dim=-1):\n    e = torch.exp(x - x.max())\n    return e / e.sum(dim, keepdim=True)\n"
    assert not set(code_text(ORIGINAL, FIXED).prints) & set(code_text(other, FIXED).prints)


def test_code_that_does_not_parse_is_still_fingerprinted():
    broken = "def softmax(x, dim=-1:\n    e = torch.exp(x - x.max())\n    return e / e.sum(dim, keepdim=True\n" * 2
    assert code_text(broken, FIXED).prints
    assert code_text("def f(:\n\t  x = '''unclosed", FIXED).prints is not None  # tokenizer gives up: words


def test_light_paraphrase_keeps_prose_alike():
    a = "The softmax mixed the future scores into the denominator, so later tokens still change the weights."
    b = "The softmax had already mixed future scores into its denominator, so a later token still changes weights."
    c = "Dividing by the square root of the dimension keeps the variance of the scores near one."
    shared = set(prose_text(a).prints) & set(prose_text(b).prints)
    assert len(shared) >= len(prose_text(a).prints) / 2
    assert not set(prose_text(a).prints) & set(prose_text(c).prints)


SOFTMAX = "def softmax(x, dim=-1):\n    e = torch.exp(x - x.amax(dim, keepdim=True))\n    return e / e.sum(dim, True)\n"
PAIR_ONLY = ("def scaled_dot_product_attention(q, k, v, mask=None):\n    s = torch.einsum('btd,bsd->bts', q, k)\n"
             "    w = softmax(s * q.shape[-1] ** -0.5)\n    return torch.einsum('bts,bsd->btd', w, v), w\n")


def _class(tmp_path, learners):
    bench.write_class(tmp_path, CHAPTER, learners)
    return similarity(tmp_path, CHAPTER)


def test_a_fragment_the_whole_class_writes_scores_low_and_one_a_pair_alone_writes_high(tmp_path):
    learners = {f"l{i}": {"softmax": SOFTMAX} for i in range(6)}
    learners["l0"]["scaled_dot_product_attention"] = learners["l1"]["scaled_dot_product_attention"] = PAIR_ONLY
    result = _class(tmp_path, learners)
    by_pair = {(p.a, p.b): p for p in result.pairs}
    assert by_pair["l0", "l1"].exercises["scaled_dot_product_attention"] == 1.0
    assert all(p.exercises["softmax"] < 0.2 for p in result.pairs)  # identical, but everybody wrote it
    assert (result.pairs[0].a, result.pairs[0].b) == ("l0", "l1")
    assert all(p.score < 0.2 for p in result.pairs[1:])


def test_the_release_skeleton_left_as_it_was_is_no_likeness(tmp_path):
    result = _class(tmp_path, {"a": {}, "b": {}, "c": {"softmax": SOFTMAX}})
    assert all(p.score == 0 for p in result.pairs)


def test_json_lists_every_pair_highest_first(tmp_path, capsys):
    learners = {"a": {"softmax": SOFTMAX, "scaled_dot_product_attention": PAIR_ONLY},
                "b": {"softmax": SOFTMAX, "scaled_dot_product_attention": PAIR_ONLY}, "c": {"softmax": SOFTMAX},
                "d": {}}
    bench.write_class(tmp_path, CHAPTER, learners)
    assert main(["similarity", "02", "--course-dir", str(tmp_path), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["groups"] == [] and found["notes"] == []
    pairs = found["pairs"]
    assert len(pairs) == 6 and [p["score"] for p in pairs] == sorted((p["score"] for p in pairs), reverse=True)
    assert set(pairs[0]) == {"a", "b", "score", "exercises"} and {pairs[0]["a"], pairs[0]["b"]} == {"a", "b"}
    assert set(pairs[0]["exercises"]) == {"softmax", "scaled_dot_product_attention", "SelfAttention",
                                          "written_unscaled_inputs", "written_mask_after_softmax",
                                          "written_bites_with_positions"}
    assert all(0 <= p["score"] <= 1 and all(0 <= s <= 1 for s in p["exercises"].values()) for p in pairs)


def test_a_broken_notebook_is_a_note_not_a_crash(tmp_path, capsys):
    bench.write_class(tmp_path, CHAPTER, {"a": {"softmax": SOFTMAX}, "b": {"softmax": SOFTMAX}})
    broken = tmp_path / "submitted" / "c" / CHAPTER.assignment
    broken.mkdir(parents=True)
    (broken / CHAPTER.notebook_name).write_text('{"cells": [1, {"cell_type": "code"')
    odd = tmp_path / "submitted" / "d\x1b[2Jd" / CHAPTER.assignment  # and a name holding an escape sequence
    odd.mkdir(parents=True)
    (odd / CHAPTER.notebook_name).write_text(json.dumps({"metadata": {}, "nbformat": 4, "nbformat_minor": 5, "cells": [
        {"cell_type": "code", "metadata": [], "source": "x", "outputs": [], "execution_count": None},
        {"cell_type": "code", "metadata": {"nbgrader": {"solution": True, "grade_id": "softmax"}},
         "source": SOFTMAX.replace("):", ":"), "outputs": [], "execution_count": None}]}))
    assert main(["similarity", "02", "--course-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "c: self_attention.ipynb unreadable" in out and "2 learners" in out
    assert "'d\\x1b[2Jd': not a learner name the grader accepts" in out and "\x1b" not in out  # the identity gate


ATTACK = "</pre><script>document.title='PWNED'</script><img src=x onerror=\"document.title='PWNED'\">"
NAME = "x<img src=x onerror=\"document.title='PWNED'\">"


def test_the_page_escapes_every_name_and_answer_and_runs_nothing(tmp_path):
    code = SOFTMAX + f"    # {ATTACK}\n"
    # NAME is refused by the identity gate (grader.classroom.intake.identity): shown, escaped, in a note alone
    result = _class(tmp_path / "course", {NAME: {"softmax": code}, "a": {"softmax": code}, "b": {"softmax": code},
                                          "c": {}})
    page = render(result)
    assert "<script" not in page and "<img" not in page and "&lt;script&gt;" in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "weighed by rarity" in page and "<mark" in page
    browser = require_browser("the similarity page in a browser")
    out = tmp_path / "page.html"
    out.write_text(page)
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          "--disable-component-update", "--no-first-run", "--dump-dom", out.as_uri()],
                         capture_output=True, text=True, timeout=60).stdout
    assert "<title>Similarity: 02_self_attention</title>" in dom and "PWNED</title>" not in dom


@pytest.mark.parametrize(("args", "says"), [
    (["similarity", "99"], "unknown chapter"),
    (["similarity", "02", "--course-dir", "{tmp}/nowhere"], "no such course directory"),
    (["similarity", "02", "--course-dir", "{tmp}"], "no submissions of 02_self_attention"),
])
def test_bad_input_is_a_clear_error(tmp_path, capsys, args, says):
    assert main([a.replace("{tmp}", str(tmp_path)) for a in args]) == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("chapter", ["02", "04"])
def test_every_planted_copy_ranks_above_every_independent_pair(chapter):
    found = bench.ranking(find_chapter(chapter))
    assert found["copies"] >= 2 and found["independent"] >= 15
    assert found["ok"], (found["lowest_copy"], found["highest_independent"])
    assert found["lowest_copy"].score - found["highest_independent"].score > 0.3


def test_the_corpus_has_five_independent_answers_per_exercise():
    for chapter in map(find_chapter, ("02", "04")):
        answers = bench.corpus(chapter)
        authors = [a for a in answers if not a.startswith(bench.COPY)]
        items = {i for a in authors for i in answers[a]}
        assert len(authors) >= 5 and all(all(i in answers[a] for a in authors) for i in items), chapter


# ---------------------------------------------------------------- one learner cannot stop the report

def test_a_huge_answer_is_capped_and_the_learner_named(tmp_path):
    """Attack: an answer cell of distinct constants (under the 20 MB notebook limit)."""
    from grader.classroom.similarity.pairs import MAX_ANSWER

    learners = {"a": {"softmax": SOFTMAX}, "b": {"softmax": SOFTMAX}, "c": {}}
    learners["big"] = {"softmax": bench.huge_answer(0.5), "scaled_dot_product_attention": PAIR_ONLY}
    result = _class(tmp_path, learners)
    assert f"big: softmax is {len(bench.huge_answer(0.5)):,} characters; only its first {MAX_ANSWER:,} compared" \
        in result.notes
    assert sum(map(len, result.learners["big"].texts["softmax"].units)) <= MAX_ANSWER
    assert {(p.a, p.b) for p in result.pairs if p.score > 0.5} == {("a", "b")}  # the class's report as it was


def test_the_pair_sums_grow_with_the_fingerprints_not_learners_times_fingerprints():
    """Attack: one learner with 200,000 distinct fingerprints in a class of 100 (a dense learners x
    fingerprints matrix: 160 MB per copy)."""
    import tracemalloc

    from grader.classroom.similarity.normalise import Text
    from grader.classroom.similarity.pairs import Learner, compare

    learners = {f"l{i:03d}": Learner(f"l{i:03d}", {"softmax": Text([], False, {7: {1}, 8: {1}, i: {1}})})
                for i in range(100)}
    learners["l000"].texts["softmax"].prints.update({10_000 + h: {1} for h in range(200_000)})
    tracemalloc.start()
    pairs, _, _ = compare(learners, {"softmax": "code"})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(pairs) == 4950 and peak < 60_000_000


NESTED = "def softmax(x, dim=-1):\n    return " + "(" * 5000 + "x" + ")" * 5000 + "\n" + "".join(
    " " * i + "if x:\n" for i in range(1, 400)) + " " * 400 + "pass\n"


def test_deeply_nested_code_and_odd_cells_are_compared_or_named_never_a_crash(tmp_path, capsys):
    """Attacks: nesting that exhausts ast's recursion, a grade_id that is a list, cells that are not a list."""
    bench.write_class(tmp_path, CHAPTER, {"a": {"softmax": SOFTMAX}, "b": {"softmax": SOFTMAX},
                                          "deep": {"softmax": NESTED}})
    for name, cells in (("listed", [{"cell_type": "code", "metadata": {"nbgrader": {"solution": True, "grade_id": [1]}},
                                     "source": "x"}]), ("nulled", None)):
        folder = tmp_path / "submitted" / name / CHAPTER.assignment
        folder.mkdir(parents=True)
        (folder / CHAPTER.notebook_name).write_text(json.dumps({"nbformat": 4, "cells": cells}))
    assert main(["similarity", "02", "--course-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "4 learners" in out and "nulled: self_attention.ipynb unreadable (TypeError), left out" in out
    assert "listed: a cell could not be read (TypeError), left out" in out


def test_a_group_that_hands_in_the_same_code_is_shown_as_a_group(tmp_path, capsys):
    """Five learners hand in one author's text word for word among five independent writers: rarity
    weighting scores each of their pairs well below 1, so the group is shown as a group (table, JSON, page)."""
    learners = {k: v for k, v in bench.corpus(CHAPTER).items() if not k.startswith(bench.COPY)}
    members = ["ben"] + [f"g{i}" for i in range(4)]
    learners.update({name: dict(learners["ben"]) for name in members[1:]})
    bench.write_class(tmp_path, CHAPTER, learners)
    result = similarity(tmp_path, CHAPTER)
    assert all(p.score < 0.8 for p in result.pairs)  # what the pairs alone said
    assert [g.members for g in result.groups] == [tuple(sorted(members))] and result.groups[0].share >= 0.8
    assert main(["similarity", "02", "--course-dir", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["groups"][0]["members"] == sorted(members)
    assert main(["similarity", "02", "--course-dir", str(tmp_path)]) == 0
    assert f"share {result.groups[0].share:.2f}: ben, g0, g1, g2, g3 (softmax" in capsys.readouterr().out
    page = render(result)
    assert 'id="groups"' in page and "g3" in page
