"""The graded report names the likely mistake (issue 36): after a submission's last cell, the notebook's own
public check runs on the trusted side against proxies of each exercise that lost points
(grader.boundary.diagnosis), and a known mistake it names joins that exercise's report, in the learner's
language; the hidden inputs stay hidden and the score stays the hidden checks'. A reference or a skeleton
gets no such line, and a learner object that hangs or ends its process while diagnosed keeps its grade."""
import importlib
import multiprocessing
import os

import nbformat
import pytest
import torch

from course.checks import CheckFailed
from grader.authoring import samples
from grader.boundary import diagnosis
from grader.boundary.forbid import in_sandbox
from grader.boundary.proxy import judge_exercise
from grader.boundary.serve import Server
from grader.boundary.specs import exercises
from grader.chapters import CHAPTERS, find_chapter
from grader.classroom.grading.batch import grade_paths
from grader.classroom.grading.recording import checks_of
from grader.classroom.grading.recording import test_outputs as recorded_outputs
from grader.classroom.phrasebook import phrasebook, public_messages
from tests.catalogue import Variant
from tests.helpers import english_left, evaluate_in_child, reference_namespace, run_source, skeleton_namespace
from tests.snapshots import implementation, recipes

SECRET = 0x5EC12E7


def judged_and_diagnosed(chapter, name: str, namespace: dict, timeout: float = 60.0, force: bool = False) -> dict:
    """A test cell's verdict as the pool records it: the hidden checks (grader.boundary.proxy.judge_exercise),
    then the diagnosis after the last cell (grader.boundary.diagnosis.diagnose_all), against a forked child
    that serves `namespace` as grader.boundary.child does (the test cell's frame, then the frames after it).
    `force`: run the public check even where no point was lost (what it would say)."""
    ours, theirs = multiprocessing.Pipe(duplex=True)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            ours.close()
            torch.set_num_threads(1)
            judged: dict = {}
            Server(theirs, namespace, in_sandbox, judged).serve()
            while True:
                Server(theirs, namespace, in_sandbox, judged, again=True).serve()
        finally:
            os._exit(0)
    theirs.close()
    try:
        exercise = exercises(chapter.name)[name]
        cells = {0: judge_exercise(exercise, ours, timeout, SECRET)}
        if force:
            cells[0]["forced"] = diagnosis.diagnose(exercise, diagnosis.public_check(chapter.name, name), ours)
        else:
            diagnosis.diagnose_all(chapter.name, {0: exercise}, cells, ours)
        return cells[0]
    finally:
        ours.close()
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)


def report(chapter, name: str, message: dict, lang: str = "en") -> str:
    """The exercise's report in the graded notebook (grader.classroom.grading.recording), in `lang`."""
    points = exercises(chapter.name)[name].points
    outputs = recorded_outputs(checks_of(chapter)[name], name, points, message, None,
                               phrasebook(lang, chapter.assignment))
    return outputs[0]["text"]


def variant(chapter, label: str) -> Variant:
    return next(v for v in wrong_variants(chapter) if v.label == label)


def wrong_variants(chapter):
    return __import__(f"tests.catalogue.{chapter.name}", fromlist=["WRONG"]).WRONG


def score_of(chapter, name: str, message: dict) -> float:
    """The exercise's score as recorded: the report's partial credit (0 where it shows an error)."""
    points = exercises(chapter.name)[name].points
    outputs = recorded_outputs(checks_of(chapter)[name], name, points, message, None)
    return float(outputs[1]["data"]["text/plain"]) if outputs[1]["output_type"] == "execute_result" else 0.0


# (chapter, exercise, catalogued mistake, words of the message the notebook's check gives for it)
NAMED = [
    ("01", "scaled_dot_product_score", "forgot to scale", "you forgot to divide by sqrt(d)"),
    ("01", "attention_pool", "softmax over queries (dim=-2)", "sum to 1 over the queries"),
    ("02", "softmax", "sums over the last axis whatever dim is", "take both the max and the sum along `dim`"),
    ("02", "scaled_dot_product_attention", "no scale", "you forgot to divide the scores by sqrt(d_k)"),
    ("02", "SelfAttention", "uses W_q for the keys", "the keys were computed with W_q"),
    ("03", "TokenEmbedding", "no sqrt(d_model) scale", "you forgot to multiply by sqrt(d_model)"),
    ("04", "MultiHeadAttention", "forgets W_o", "you forgot the output projection W_o"),
    ("05", "layer_norm", "eps added outside the square root", "eps belongs inside the square root"),
    ("05", "AddNorm", "normalises before adding: norm(x) + sublayer_out", "you normalised x before adding"),
    ("06", "label_smoothed_loss", "averages over the ignored rows too", "you averaged over all N rows"),
    ("07", "gelu", "x**2 in the cubic term", "(you used x**2)"),
    # issue 45: chapter 08's checks named their mistakes with fail(), which the report does not repeat
    ("08", "beam_search", "forgets eos: finished beams are extended like any other", "eos_id ends a sequence"),
    ("08", "train_bpe", "each distinct pair counted once (a set of pairs: every count is 1)",
     "not each distinct pair once"),
    ("08", "generate", "the cache is never restarted: fails once it holds block_size positions",
     "the cache was never restarted"),
    ("08", "next_token_targets", "targets equal to the inputs (no shift)", "your targets are the inputs themselves"),
    ("09", "RMSNorm", "sum of squares instead of the mean", "you used the SUM of squares"),
    # issue 45: checks that named these with a plain fail(), which the graded report does not repeat
    ("09", "repeat_kv", "`.repeat` tiles the heads (0, 1, 0, 1) instead of keeping each head's copies together",
     "the kv heads are tiled"),
    ("09", "sliding_window_mask", "off by one: t - s <= window (window + 1 keys)", "off by one"),
    ("09", "sliding_window_mask", "tril(window) & triu(0): the window reaches into the future",
     "your mask is transposed"),
]


@pytest.mark.parametrize("number,name,label,says", NAMED, ids=[f"{n}-{e}-{label}" for n, e, label, _ in NAMED])
def test_the_report_names_the_catalogued_mistake_in_each_edition(number, name, label, says):
    chapter = find_chapter(number)
    wrong = variant(chapter, label)
    message = judged_and_diagnosed(chapter, name, run_source(wrong.source, reference_namespace(chapter)))
    english = report(chapter, name, message)
    assert f"Likely mistake (from the notebook's own check): {message.get('diagnosis')}" in english, english
    assert says in message["diagnosis"], message["diagnosis"]

    chinese = report(chapter, name, message, "zh")
    translated = public_messages("zh", chapter.assignment).text(message["diagnosis"])
    assert translated != message["diagnosis"], translated
    assert f"可能的错误（笔记本里的公开检查这样说）：{translated}" in chinese, chinese
    assert says not in chinese and english_left(chinese, chapter.assignment) == [], chinese

    # the score is the hidden checks' alone: as judged without any diagnosis, within the catalogue's bounds
    alone = evaluate_in_child(exercises(chapter.name)[name], run_source(wrong.source, reference_namespace(chapter)),
                              secret=SECRET)
    score = score_of(chapter, name, message)
    assert score == score_of(chapter, name, {k: v for k, v in message.items() if k != "diagnosis"}) == alone.score
    assert score < alone.points and (not wrong.zero or score == 0)
    assert wrong.at_most is None or score <= wrong.at_most * alone.points


@pytest.mark.parametrize("number", ["02", "05"])
def test_the_reference_and_the_skeleton_get_no_diagnosis(number):
    chapter = find_chapter(number)
    for make in (reference_namespace, skeleton_namespace):
        for name in exercises(chapter.name):
            message = judged_and_diagnosed(chapter, name, make(chapter), force=True)
            assert "diagnosis" not in message and message["forced"] is None, (make.__name__, name, message)
            assert "Likely mistake" not in report(chapter, name, message), (make.__name__, name)


NO_SHIFT = variant(find_chapter("02"), "no max shift (overflows to nan at 1e4)")
# On the public check's input only (a (2, 3) tensor; the hidden checks use other shapes) the learner's softmax
# misbehaves: each must still get the hidden checks' score, with no diagnosis.
MISBEHAVES = {
    "hangs": "    while True:\n        pass\n",
    "swallows the interruption and hangs": (
        "    while True:\n        try:\n            while True:\n                pass\n"
        "        except BaseException:\n            pass\n"),
    "ends its process": "    import os\n    os._exit(3)\n",
    "raises KeyboardInterrupt": "    raise KeyboardInterrupt\n",
}


@pytest.mark.parametrize("how", MISBEHAVES)
def test_a_learner_object_that_misbehaves_while_diagnosed_keeps_its_grade(how, monkeypatch):
    monkeypatch.setattr(diagnosis, "SECONDS", 1.0)
    monkeypatch.setattr(diagnosis, "GRACE", 1.0)
    chapter = find_chapter("02")
    source = NO_SHIFT.source.replace("def softmax(x, dim=-1):\n",
                                     "def softmax(x, dim=-1):\n    if tuple(x.shape) == (2, 3):\n"
                                     + "".join("    " + line + "\n" for line in MISBEHAVES[how].splitlines()))
    plain = judged_and_diagnosed(chapter, "softmax", run_source(NO_SHIFT.source, reference_namespace(chapter)))
    message = judged_and_diagnosed(chapter, "softmax", run_source(source, reference_namespace(chapter)))
    assert "overflows" in plain["diagnosis"] and "diagnosis" not in message, message
    assert score_of(chapter, "softmax", message) == score_of(chapter, "softmax", plain) > 0


def test_a_public_check_that_raises_anything_else_adds_nothing(monkeypatch):
    chapter, public_check = find_chapter("02"), diagnosis.public_check
    wrong = run_source(variant(chapter, "scales by sqrt(d_v)").source, reference_namespace(chapter))
    alone = evaluate_in_child(exercises(chapter.name)["scaled_dot_product_attention"], wrong, secret=SECRET)
    for error in (ZeroDivisionError, RecursionError, TypeError):
        def broken(obj, error=error):
            obj(torch.ones(2, 4), torch.ones(3, 4), torch.ones(3, 2))
            raise error("the check itself broke")
        monkeypatch.setattr(diagnosis, "public_check", lambda *_: broken)
        message = judged_and_diagnosed(chapter, "scaled_dot_product_attention", wrong)
        assert "diagnosis" not in message
        assert score_of(chapter, "scaled_dot_product_attention", message) == alone.score
    monkeypatch.setattr(diagnosis, "importlib", None)  # the chapter's checks cannot even be imported
    assert public_check("self_attention", "softmax") is None


def test_a_graded_notebook_names_its_mistakes_in_its_own_edition(tmp_path):
    """The whole way: the pool's sandboxed child, the diagnosis after the last cell, nbgrader's record and
    `grader grade --json`'s errors, for an English and a Chinese notebook with the same two mistakes."""
    chapter, paths = find_chapter("02"), []
    for edition in (chapter, chapter.edition("zh")):
        path = tmp_path / edition.lang / chapter.notebook_name
        path.parent.mkdir()
        nbformat.write(samples.partly_wrong(edition), path)
        paths.append(str(path))
    english, chinese = grade_paths(paths, jobs=2, timeout=120)
    assert english["score"] == chinese["score"] < english["max_score"]
    for result, said in ((english, "Likely mistake (from the notebook's own check): "), (chinese, "可能的错误")):
        softmax, attention = result["tests"]["test_softmax"], result["tests"]["test_scaled_dot_product_attention"]
        assert said in softmax["error"] and said in attention["error"], result
        assert result["tests"]["test_SelfAttention"]["error"] is None, result  # full marks: nothing to say
    assert "exp(1e4) overflows" in english["tests"]["test_softmax"]["error"]
    assert "sqrt(d_v)" in english["tests"]["test_scaled_dot_product_attention"]["error"]
    assert "exp(1e4) overflows" not in chinese["tests"]["test_softmax"]["error"]


STORED = [(c.name, e) for c in CHAPTERS for e in recipes(c.name) if e.mistake is not None]


@pytest.mark.parametrize("chapter,entry", [
    pytest.param(c, e) for c, e in STORED], ids=[f"{c}-{e.name}" for c, e in STORED])
def test_each_mistake_a_check_stores_numbers_for_is_a_known_mistake(chapter, entry):
    """What the graded report repeats: the message of a mistake the check stores numbers for, and only that
    (tests/test_snapshots.py: every stored mistake makes its check name it)."""
    check = getattr(importlib.import_module(f"course.checks.{chapter}"), f"check_{entry.exercise}")
    with pytest.raises(CheckFailed) as failure:
        check(implementation(chapter, entry.exercise, entry.mistake))
    assert failure.value.known, str(failure.value)


def test_a_check_that_copies_a_learner_object_cannot_close_the_grading_pipe():
    """copy.deepcopy of a proxy (a check written for real objects may copy a model) copied its session's
    pipe, and the copy closed the trusted side's end when collected: refused instead."""
    import copy
    import gc

    from grader.boundary.proxy import Remote, Session

    ours, theirs = multiprocessing.Pipe()
    remote = Remote(Session(ours, 1.0), 1, {"mro": [], "name": "Model"})
    for copier in (copy.deepcopy, copy.copy):
        with pytest.raises(TypeError):
            copier(remote)
    gc.collect()
    os.fstat(ours.fileno())  # still open
    ours.close()
    theirs.close()


def test_the_likely_mistake_comes_first_and_a_bare_python_error_carries_it(tmp_path):
    # A check that only says what Python raised, beside a mistake the notebook's check names: the report puts
    # the named mistake first and on that check's line, in both editions, and the grading page's folded
    # summary of the cell (Chromium) shows it before any check's tolerance.
    import re
    import shutil
    import subprocess

    from grader.classroom.grading.batch import _cell_error
    from grader.classroom.onsubmit.pages import FOLD_AT, _check, page
    from grader.classroom.policy.visibility import Check

    chapter, name = find_chapter("02"), "scaled_dot_product_attention"
    checks = [c.description for c in exercises(chapter.name)[name].checks]
    raised = "IndexError: tuple index out of range (line 12)"
    far = "the output has wrong values: 12 of 12 values differ, the most by 0.5 at index (0, 1) " \
          "(allowed: 1e-05 + 1e-05 * |expected|)"
    message = {"passed": checks[:1], "failed": [[checks[1], raised], *[[c, far] for c in checks[2:]]],
               "diagnosis": "you forgot to divide the scores by sqrt(d_k)"}
    for lang, likely, named in (("en", "Likely mistake", "you forgot to divide the scores by sqrt(d_k)"),
                                ("zh", "可能的错误", public_messages("zh", chapter.assignment).text(
                                    "you forgot to divide the scores by sqrt(d_k)"))):
        lines = report(chapter, name, message, lang).splitlines()
        assert likely in lines[1], lines  # right under the exercise's score, above every check's line
        carried = next(ln for ln in lines if "IndexError" in ln)
        assert named in carried, carried
        assert sum(named in ln for ln in lines if "1e-05" in ln) == 0, lines  # tolerance lines keep their own words
        if lang == "zh":
            assert english_left("\n".join(lines), chapter.assignment) == [] and "|期望值|" in lines[-1], lines
    outputs = recorded_outputs(checks_of(chapter)[name], name, 4.0, message, None)
    error = _cell_error(outputs)
    assert len(error) > FOLD_AT and error.index("Likely mistake") < error.index("allowed")
    browser = next((b for b in ("chromium", "chromium-browser") if shutil.which(b)), None)
    if browser is None:
        pytest.skip("no Chromium")
    path = tmp_path / "page.html"
    path.write_text(page("grading", _check(Check(name, 1.0, 4.0, error))))
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", path.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    summary = re.search(r"<summary>(.*?)</summary>", dom, re.S).group(1)
    assert "Likely mistake (from the notebook's own check): you forgot to divide the scores" in summary, summary
