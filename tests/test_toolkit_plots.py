"""The toolkit's plots draw what they are given: heatmaps of attention weights and masks
hold the values cell by cell, and the score distributions draw one curve per entry."""
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.collections import QuadMesh

from course.toolkit import add_and_norm, decoder_masking, llama_modern, multi_head_attention, self_attention


def heatmap_values(ax) -> np.ndarray:
    mesh = next(c for c in ax.collections if isinstance(c, QuadMesh))
    return np.ma.filled(mesh.get_array(), np.nan)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_show_attention_is_a_heatmap_of_the_weights():
    weights = torch.softmax(torch.randn(6, 6, generator=torch.Generator().manual_seed(0)), dim=-1)
    weights[0] = float("nan")  # a fully masked row
    ax = self_attention.show_attention(weights, self_attention.SENTENCE)
    np.testing.assert_allclose(heatmap_values(ax).reshape(6, 6), weights.numpy(), rtol=1e-6)
    assert [t.get_text() for t in ax.get_yticklabels()] == self_attention.SENTENCE
    assert len(ax.texts) == 30  # annotated, except the blank NaN row
    with pytest.raises(ValueError):
        self_attention.show_attention(weights[:3], self_attention.SENTENCE)


def test_show_heads_draws_one_heatmap_per_head():
    weights = torch.softmax(torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(1)), dim=-1)
    axes = multi_head_attention.show_heads(weights)
    assert len(axes) == 3
    for h, ax in enumerate(axes):
        np.testing.assert_allclose(heatmap_values(ax).reshape(4, 5), weights[h].numpy(), rtol=1e-6)


def test_show_mask_shows_true_as_dark():
    mask = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    ax = decoder_masking.show_mask(mask, "causal")
    np.testing.assert_array_equal(heatmap_values(ax).reshape(4, 4), mask.float().numpy())


def test_score_distributions_draw_one_curve_per_entry():
    raw = torch.randn(2000, generator=torch.Generator().manual_seed(2)) * 8
    ax = self_attention.plot_score_distributions({"q.k": raw, "q.k / sqrt(d_k)": raw / 8})
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["q.k", "q.k / sqrt(d_k)"]
    spreads = [np.ptp(c.get_paths()[0].vertices[:, 0]) for c in ax.collections]
    assert spreads[0] > 4 * spreads[1]  # the unscaled scores spread far wider


def test_the_chance_line_is_named_clear_of_the_curves():
    # 05: the Post-LN run without warm-up stalls on the chance line; a label inside the axes sat on it
    stalled = [2.3] * 150
    fig = add_and_norm.plot_training({"Post-LN, no warm-up": stalled}, {"no warm-up": [1e-2] * 150},
                                     chance=2.3)
    ax = fig.axes[1]
    (label,) = [t for t in ax.texts if t.get_text().startswith("guessing")]
    renderer = fig.canvas.get_renderer()
    box, plot = label.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert box.x0 >= plot.x1, "the label is drawn inside the axes, on the curves"
    assert box.y0 < ax.transData.transform((0, 2.3))[1] < box.y1, "the label is level with its line"



def test_a_grading_runs_five_steps_are_plotted_smoothed_over_five():
    # 09 trains 5 steps in a grading run (course.toolkit.grading_run): a 20-step smoothing window raised there
    runs = {"LLaMA-style": {"losses": [2.3, 2.0, 1.8, 1.7, 1.6], "eval_steps": [5], "exact_match": [10.0]}}
    line = llama_modern.plot_training_runs(runs).axes[0].lines[0]
    assert list(line.get_xdata()) == [5] and line.get_ydata()[0] == pytest.approx(1.88)
    fig = llama_modern.plot_moe_runs({"MoE": [1.0, 0.9, 0.8]}, {"MoE": torch.full((8,), 0.125)})
    assert list(fig.axes[0].lines[0].get_xdata()) == [3]
    full = llama_modern.plot_training_runs({"LLaMA-style": dict(runs["LLaMA-style"], losses=[1.0] * 600)})
    assert len(full.axes[0].lines[0].get_xdata()) == 581  # a learner's 600 steps: smoothed over 20
