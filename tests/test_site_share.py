"""The website's reference runs share a slow statement between the editions (grader.website.share): real
kernels run a small training notebook, then its translation (the same code, its strings in Chinese). The
translation's run puts the recorded training in place instead of training, and prints what it would have
printed, in Chinese, with the recorded run's numbers; a changed training, or a statement that prints,
runs again."""
from __future__ import annotations

import re
from datetime import datetime

import nbformat
import pytest

from grader.website.execute import execute_shared

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def notebook(key: str, label: str, steps: int = 40) -> nbformat.NotebookNode:
    cells = [
        f"import time\nimport torch\ntorch.manual_seed(0)\nmodel = torch.nn.Linear(4, 1)\nhistory = {{{key!r}: []}}",
        # the training: slow enough to be shared (min_seconds below), and it prints nothing
        f"start = time.perf_counter()\nfor step in range({steps}):\n"
        f"    loss = model(torch.randn(8, 4)).pow(2).mean()  # {label}\n    model.zero_grad()\n    loss.backward()\n"
        f"    with torch.no_grad():\n        for p in model.parameters():\n            p -= 0.01 * p.grad\n"
        f"    history[{key!r}].append(loss.item())\n    time.sleep(0.02)\n"
        f"print(f\"{label} {steps}: {{time.perf_counter() - start:.2f}} s\")",
        f"print({label!r}, list(history), history[{key!r}][-1], model.weight.sum().item(), torch.rand(1).item())",
        f"for step in range(3):\n    time.sleep(0.3)\n    print({label!r}, step)",  # slow, but it prints
    ]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])


def run(nb, folder, name: str) -> tuple[nbformat.NotebookNode, str]:
    log = folder / f"{name}.log"
    ran = execute_shared(nb, folder, "library", log, shared=folder / "shared", timeout=120, min_seconds=0.5)
    return ran, log.read_text(encoding="utf-8") if log.exists() else ""


def printed(cell) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def seconds(cell) -> float:
    timing = cell.metadata["execution"]
    start, end = (datetime.fromisoformat(timing[k].replace("Z", "+00:00"))
                  for k in ("iopub.execute_input", "shell.execute_reply"))
    return (end - start).total_seconds()


@pytest.fixture(scope="module")
def english(tmp_path_factory):
    folder = tmp_path_factory.mktemp("share")
    ran, log = run(notebook("loss", "trained"), folder, "en")
    assert "cell 1 statement 1: recorded" in log, log
    assert "cell 3 statement 0: ran, not shared: it prints" in log, log
    return folder, ran


def test_the_translation_puts_the_recorded_training_in_place_and_prints_in_its_language(english):
    folder, en = english
    zh, log = run(notebook("损失", "训练了"), folder, "zh")
    assert "cell 1 statement 1: replayed" in log, log
    assert seconds(zh.cells[1]) < seconds(en.cells[1]) / 2  # it did not train
    for en_cell, zh_cell in zip(en.cells[1:3], zh.cells[1:3]):
        # the same numbers, the training's seconds included (the clock moved on by the recorded time)
        assert NUMBER.findall(printed(zh_cell)) == NUMBER.findall(printed(en_cell)), printed(zh_cell)
    assert printed(zh.cells[1]).startswith("训练了 40: ")
    assert printed(zh.cells[2]).startswith("训练了 ['损失'] ")  # the loss history under the translation's key
    assert printed(zh.cells[3]) == "训练了 0\n训练了 1\n训练了 2\n"  # what prints is run, in Chinese


def test_a_changed_training_trains_again(english):
    folder, en = english
    zh, log = run(notebook("损失", "训练了", steps=41), folder, "zh-changed")
    assert "replayed" not in log, log
    assert "cell 1 statement 1: recorded" in log
    assert printed(zh.cells[2]).split()[2:4] != printed(en.cells[2]).split()[2:4]  # 41 steps: other weights
