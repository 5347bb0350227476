"""Chapter 09's ablation (benchmarks/llama_ablation.py) and the data file it wrote into the chapter folder:
the six reverts together are the 2017-style model, the committed JSON is whole and matches the chapter's
configuration, and the script runs."""
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


def test_every_number_the_narrative_states_is_printed_by_the_notebook(monkeypatch, capsys):
    # Section 8 reads ablation.json in one cell; the markdown cells around it may state only numbers
    # (percentages, "k of n", "n seeds") that this cell prints, so a new ablation.json cannot leave stale text.
    import matplotlib
    import matplotlib.pyplot as plt
    import nbformat

    matplotlib.use("Agg")
    folder = REPO / "course" / "09_llama_modern"
    cells = nbformat.read(folder / "llama_modern.ipynb", as_version=4).cells
    (at,) = [i for i, cell in enumerate(cells) if cell.cell_type == "code" and '"ablation.json"' in cell.source]
    monkeypatch.chdir(folder)
    exec(cells[at].source, {"json": json, "torch": torch, "plt": plt})
    plt.close("all")
    printed = capsys.readouterr().out
    stated = [t for cell in (cells[at - 1], cells[at + 1])
              for t in re.findall(r"\d+(?:\.\d+)?%|\d+ of \d+|\d+ seeds", cell.source)]
    assert stated
    assert [t for t in stated if t not in printed] == []
