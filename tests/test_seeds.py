"""Hidden inputs come from a secret per grading (grader.boundary.spec.hidden_inputs, grader.boundary.seeds): a fresh one
for each autograded submission, the kept one for a regrade, the seeds as written in a kernel."""
import os
import stat

import torch

from grader.boundary import seeds
from grader.boundary.spec import hidden_inputs, mixed, randn, seeded


def test_secret_zero_keeps_the_seeds_as_written():
    assert mixed(201) == 201
    assert torch.equal(randn(3, seed=201), torch.randn(3, generator=torch.Generator().manual_seed(201)))


def test_a_secret_changes_every_input_and_keeps_equal_seeds_equal():
    plain = randn(4, seed=201)
    with hidden_inputs(12345):
        first, again, other = randn(4, seed=201), randn(4, seed=201), randn(4, seed=202)
        state = seeded(201).get_state()
    with hidden_inputs(54321):
        third = randn(4, seed=201)
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert not torch.equal(first, plain) and not torch.equal(first, third)
    assert not torch.equal(state, seeded(201).get_state())  # restored once the exercise is judged
    assert mixed(201) == 201


def test_autograde_draws_fresh_secrets_and_a_regrade_reuses_them(tmp_path):
    first = seeds.draw(tmp_path, "02_self_attention", ["ann", "bob"], reuse=False)
    assert all(v > 0 for v in first.values()) and first["ann"] != first["bob"]
    again = seeds.draw(tmp_path, "02_self_attention", ["ann", "cid"], reuse=True)
    assert again["ann"] == first["ann"] and again["cid"] not in first.values()
    fresh = seeds.draw(tmp_path, "02_self_attention", ["ann"], reuse=False)
    assert fresh["ann"] != first["ann"]
    kept = seeds.load(tmp_path, "02_self_attention")
    assert kept == {"ann": fresh["ann"], "bob": first["bob"], "cid": again["cid"]}
    path = tmp_path / seeds.FOLDER / "02_self_attention.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_damaged_secrets_file_counts_as_none(tmp_path):
    path = tmp_path / seeds.FOLDER / "02_self_attention.json"
    path.parent.mkdir()
    path.write_text('{"ann": "x", "bob": -4, "cid": 7')
    assert seeds.load(tmp_path, "02_self_attention") == {}
    assert seeds.draw(tmp_path, "02_self_attention", ["ann"], reuse=True)["ann"] > 0
