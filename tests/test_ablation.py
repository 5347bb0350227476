"""Chapter 09's ablation (benchmarks/llama_ablation.py) and the data file it wrote into the chapter folder:
the six reverts together are the 2017-style model, the committed JSON is whole and matches the chapter's
configuration, and the script runs."""
import ast
import importlib.util
import json
import re

import pytest
import torch

from grader.chapters import REPO

spec = importlib.util.spec_from_file_location("llama_ablation", REPO / "benchmarks" / "llama_ablation.py")
ablation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ablation)


@pytest.fixture(scope="module")
def chapter():
    return ablation.chapter_setup()


def test_the_six_reverts_together_are_the_2017_model(chapter):
    # With the 2017-style model's weights copied in by name, the LLaMA-style model with all six
    # differences reverted computes the same logits: no seventh difference is left over.
    task = chapter.make_task()
    reverted = ablation.build("+".join(ablation.REVERTS), chapter, task, seed=0)
    original = ablation.build("2017", chapter, task, seed=1)
    rename = {"attn_norm": "norm1", "ffn_norm": "norm2", "attn": "self_attn"}
    state = original.state_dict()
    theirs = {".".join(rename.get(part, part) for part in name.split(".")): name for name in reverted.state_dict()}
    assert set(theirs) == set(state)
    reverted.load_state_dict({theirs[name]: value for name, value in state.items()})
    inputs = task.held_out[:64, :-1]
    with torch.no_grad():
        torch.testing.assert_close(reverted.eval()(inputs), original.eval()(inputs), rtol=1e-5, atol=1e-5)


def test_each_revert_changes_the_llama_model(chapter):
    task = chapter.make_task()
    inputs = task.held_out[:8, :-1]
    with torch.no_grad():
        llama = ablation.build("llama", chapter, task, seed=0)(inputs)
        for key in ablation.REVERTS:
            model = ablation.build(key, chapter, task, seed=0)
            assert model(inputs).shape == llama.shape
            assert not torch.allclose(model(inputs), llama), key


def test_the_committed_ablation_is_whole_and_current(chapter):
    record = json.loads((REPO / "chapters" / "09_llama_modern" / "ablation.json").read_text())
    for key in ("command", "date", "torch", "machine", "steps", "seeds", "variants", "runs", "wall_s", "cpu_s"):
        assert key in record, key
    assert record["command"].startswith(".venv/bin/python benchmarks/llama_ablation.py")
    assert record["steps"] == chapter.STEPS and record["batch"] == chapter.BATCH and record["lr"] == chapter.LR, \
        "the chapter's section 8 changed: rerun benchmarks/llama_ablation.py"
    assert record["task"] == chapter.task_call
    assert record["variants"] == ablation.variants()
    runs = {(r["variant"], r["seed"]): r for r in record["runs"]}
    assert len(runs) == len(record["runs"]) == len(record["variants"]) * len(record["seeds"])
    assert set(runs) == {(v, s) for v in record["variants"] for s in record["seeds"]}
    for run in record["runs"]:
        assert 0.0 <= run["exact_match"] <= 100.0
        assert run["curve"][-1] == [record["steps"], run["exact_match"]]


def test_the_script_runs_one_short_training(chapter, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        ablation.main(["--help"])
    assert exit.value.code == 0
    out = tmp_path / "ablation.json"
    record = ablation.main(["--seeds", "1", "--steps", "1", "--variants", "positions", "--out", str(out)])
    assert json.loads(out.read_text()) == record
    assert [(r["variant"], r["seed"]) for r in record["runs"]] == [("positions", 0)]
    assert "LLaMA, sinusoids" in capsys.readouterr().out


def test_resume_adds_seeds_and_gives_what_a_fresh_run_gives(chapter, tmp_path):
    def results(record):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in record["runs"]]

    resumed, fresh = tmp_path / "resumed.json", tmp_path / "fresh.json"
    first = ablation.main(["--seeds", "1", "--steps", "3", "--variants", "llama,ffn", "--out", str(resumed)])
    both = ablation.main(["--seeds", "2", "--steps", "3", "--variants", "llama,ffn", "--out", str(resumed), "--resume"])
    assert both["runs"][:2] == first["runs"] and [s["runs"] for s in both["sessions"]] == [2, 2]
    assert results(ablation.main(["--seeds", "2", "--steps", "3", "--variants", "llama,ffn", "--out", str(fresh)])) \
        == results(both)
    with pytest.raises(SystemExit):
        ablation.main(["--seeds", "2", "--steps", "4", "--variants", "llama", "--out", str(resumed), "--resume"])


def _ablation_cell_globals():
    # What the ablation cell needs besides ablation.json: the notebook's imports and the learner's two runs
    # (here runs that never reached 90%; the narrative's numbers must not depend on them).
    import math

    import matplotlib
    import matplotlib.pyplot as plt

    from course.toolkit import llama_modern as kit

    matplotlib.use("Agg")
    never = {"eval_steps": [50], "exact_match": [0.0]}
    return {"json": json, "math": math, "torch": torch, "plt": plt, "kit": kit,
            "runs": {"2017-style": never, "LLaMA-style": never}}


def test_every_number_the_narrative_states_is_printed_by_the_notebook(monkeypatch, capsys):
    # Section 8 reads ablation.json in one cell; the markdown cells around it may state only numbers
    # (percentages, "k of n", "n seeds") that this cell prints, so a new ablation.json cannot leave stale text.
    import matplotlib.pyplot as plt
    import nbformat

    folder = REPO / "course" / "09_llama_modern"
    cells = nbformat.read(folder / "llama_modern.ipynb", as_version=4).cells
    (at,) = [i for i, cell in enumerate(cells) if cell.cell_type == "code" and '"ablation.json"' in cell.source]
    monkeypatch.chdir(folder)
    exec(cells[at].source, _ablation_cell_globals())
    plt.close("all")
    printed = capsys.readouterr().out
    stated = [t for cell in (cells[at - 1], cells[at + 1])
              for t in re.findall(r"\d+(?:\.\d+)?%|\d+ of \d+|\d+ seeds", cell.source)]
    assert stated
    assert [t for t in stated if t not in printed] == []


def test_reached_90_at_is_the_first_evaluation_at_90_percent():
    record = json.loads((REPO / "chapters" / "09_llama_modern" / "ablation.json").read_text())
    for run in record["runs"]:
        # The curve keeps 2 decimals: an 89.996% before the first 90% reads 90.0 there.
        reached = run["reached_90_at"] or record["steps"] + 1
        assert all(exact <= 90.0 for step, exact in run["curve"] if step < reached), run["variant"]
        assert run["reached_90_at"] is None or dict(run["curve"])[reached] >= 90.0, run["variant"]
        assert [step for step, _ in run["curve"]] == list(range(record["eval_every"], record["steps"] + 1,
                                                                 record["eval_every"]))


def test_wilson_interval():
    from course.toolkit.llama_modern import wilson_interval

    # Values from Wilson (1927)'s formula, checked against statsmodels' proportion_confint(method="wilson").
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    for bad in ((3, 2), (-1, 2), (0, 0)):
        with pytest.raises(ValueError, match="successes"):
            wilson_interval(*bad)


def test_rank_test():
    from course.toolkit.llama_modern import rank_test

    # Exact two-sided p-values of the Wilcoxon-Mann-Whitney rank sum, counted by hand over the splits:
    # complete separation of 5 and 5 is 2 of C(10, 5) = 252 splits; 2 against 2 is 2 of 6.
    assert rank_test([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(2 / 252)
    assert rank_test([1, 2], [3, 4]) == pytest.approx(1 / 3)
    # Ties share their mean rank: [1, 1] against [1, 2] ranks 2, 2 | 2, 4, and every split is as far from the
    # centre 5 as the real one.
    assert rank_test([1, 1], [1, 2]) == 1.0
    # The sinusoids variant's steps in ablation.json: ties on the 50-step grid, 8 of 252 splits as extreme.
    assert rank_test([300, 250, 250, 250, 250], [400, 300, 350, 300, 300]) == pytest.approx(8 / 252)
    with pytest.raises(ValueError, match="at least one value"):
        rank_test([], [1.0])


def test_pad_counts_display_columns():
    from course.toolkit.llama_modern import display_width, pad

    assert display_width("LLaMA，4 个 kv 头") == 17  # 11 narrow characters, 3 wide ones
    assert display_width(pad("LLaMA，带偏置", 24)) == display_width(pad("LLaMA, biases", 24)) == 24
    assert pad("头", 4, ">") == "  头"


def _zh_catalogue():
    import polib

    return [e for e in polib.pofile(str(REPO / "i18n" / "zh" / "09_llama_modern.po"), wrapwidth=0) if not e.obsolete]


def test_the_chinese_ablation_table_lines_up(monkeypatch, capsys):
    # The Chinese edition prints the table with Chinese labels: every row must take the same display width
    # (a wide character takes two columns), which f"{label:<22}" got wrong.
    import matplotlib.pyplot as plt

    from course.toolkit.llama_modern import display_width

    (cell,) = [e.msgstr for e in _zh_catalogue() if '"ablation.json"' in e.msgid]
    monkeypatch.chdir(REPO / "chapters" / "09_llama_modern")
    exec(cell, _ablation_cell_globals())
    plt.close("all")
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("变体"))
    table = lines[start:start + 9]  # the header and the eight variants
    assert len({display_width(line) for line in table}) == 1, "\n".join(table)


def test_the_chinese_text_names_the_variants_as_the_chinese_table_does():
    # Section 8 lists the six differences by the names the table prints; the Chinese text must use the
    # Chinese table's names (e.g. 4 个 kv 头), not the English ones.
    entries = _zh_catalogue()
    (cell,) = [e.msgstr for e in entries if '"ablation.json"' in e.msgid]
    names = ast.literal_eval(re.search(r"names = (\{.*?\})", cell, re.S).group(1))
    shown = {name.split("，", 1)[-1] for name in names.values()}
    (listing,) = [e.msgstr for e in entries if "**ReLU 4D**" in e.msgid and e.msgid.startswith("**What to read")]
    quoted = re.findall(r"^- \*\*(.+?)\*\*", listing, re.M)
    assert len(quoted) == 6
    assert [q for q in quoted if q not in shown] == []


def test_the_learner_style_pieces_compute_what_the_reference_computes():
    # benchmarks/training_robustness.py trains with tests/learner_style.py as "another learner's code": it
    # must be the same mathematics (only the rounding may differ).
    from solutions import add_and_norm, llama_modern, self_attention
    from tests import learner_style

    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 4, 6, 8).unbind(0)
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    for got, want in zip(learner_style.scaled_dot_product_attention(q, k, v, mask),
                         self_attention.scaled_dot_product_attention(q, k, v, mask)):
        torch.testing.assert_close(got, want)
    x, w, b = torch.randn(5, 8), torch.randn(8), torch.randn(8)
    torch.testing.assert_close(learner_style.layer_norm(x, w, b), add_and_norm.layer_norm(x, w, b))
    cos, sin = llama_modern.rope_frequencies(8, 12)
    torch.testing.assert_close(learner_style.apply_rope(q, cos, sin, 3), llama_modern.apply_rope(q, cos, sin, 3))
    norm = llama_modern.RMSNorm(8)
    want = norm(x)
    with learner_style.patched():
        torch.testing.assert_close(norm(x), want)
        assert llama_modern.apply_rope is learner_style.apply_rope
    assert llama_modern.apply_rope is not learner_style.apply_rope  # put back
