"""Public checks name the mistake: each catalogued mistake listed here fails its chapter's public check
with a message that names it, and a failed check shows its message alone (no traceback)."""
import importlib
import linecache

import pytest

from course.checks import CheckFailed, fail
from grader.chapters import CHAPTERS
from tests.helpers import PRELUDE, reference_namespace

# (chapter, catalogue label, words the public check's message must hold)
NAMED = [
    ("bert_pretraining", "is_next inverted", "is_next is inverted"),
    ("bert_pretraining", "no residual dropouts: dropout1 and dropout2 never applied", "`layers.0.dropout1` never ran"),
    ("bert_pretraining", "dropout2 skipped on the feed-forward output", "`layers.0.dropout2` never ran"),
    ("decoder_masking", "puts the model in training mode before decoding", "was switched to training mode"),
    ("llama_modern", "computed in float32 and never cast back: bfloat16 in, float32 out", "return x's dtype"),
    ("llama_modern", "calls F.rms_norm", "calls nn.RMSNorm or F.rms_norm"),
    ("llama_modern", "calls repeat_interleave", "calls repeat_interleave"),
    ("llama_modern", "calls F.scaled_dot_product_attention with enable_gqa", "F.scaled_dot_product_attention"),
    ("llama_modern", "RoPE tables kept as plain attributes (they stay behind on .to(device))", "are not buffers"),
    ("llama_modern", "RoPE tables registered as persistent buffers (they land in the state_dict)", "persistent=False"),
    ("llama_modern", "nn.RMSNorm for the two norms", "a LlamaBlock that calls nn.RMSNorm"),
    ("llama_modern", "eps and rope_base not passed on", "gives the output of the default eps"),
    ("llama_modern", "ignores its device argument", "is not on the meta device"),
    ("llama_modern", "routing weights detached: the router never learns", "no gradient reached router.weight"),
    ("gpt_generation", "no dropout on the attention weights (embeddings and sublayer outputs only)",
     "ran on the attention weights 0 times"),
    ("gpt_generation", "no dropout on the sublayer outputs (embeddings and attention weights only)",
     "on (B, T, D) tensors 1 times"),
    ("gpt_generation", "converts to int64 with .long() (an int32 idx comes back int64)", "both keep idx's dtype"),
    ("gpt_generation", "the k-th value as values[:, -1], a (B,) vector: RuntimeError against (B, V)",
     "raised RuntimeError"),
    ("gpt_generation", "the k-th value as values[:, -1:] (right for (B, V) only)", "not filtered row by row"),
    ("gpt_generation", "no cropping: the whole sequence goes to the model", "at most block_size tokens"),
    ("gpt_generation", "the cache is never restarted: fails once it holds block_size positions",
     "the cache was never restarted"),
    ("gpt_generation", "runs with gradients enabled (no torch.no_grad)", "gradients enabled"),
    ("gpt_generation", "switches the model to eval, then back to train at the end (an eval model leaves in train)",
     "a model in eval mode left generate in train mode"),
]


# The public checks these messages were added to: they pass on the reference and on every correct
# alternative in the catalogue.
CHANGED = {
    "bert_pretraining": ("make_nsp_examples", "BertForPretraining"),
    "decoder_masking": ("greedy_decode",),
    "llama_modern": ("RMSNorm", "GroupedQueryAttention", "LlamaBlock", "sliding_window_mask", "MoEFeedForward"),
    "gpt_generation": ("GPT", "next_token_targets", "top_k_filter", "generate"),
}
PASSING = [(c, name) for c, names in CHANGED.items() for name in names]


def chapter_of(name):
    return next(c for c in CHAPTERS if c.name == name)


def as_a_cell(source: str, namespace: dict) -> dict:
    """Run `source` as a notebook cell runs: its text readable by inspect.getsource (the public checks
    read the code of the exercise to name a forbidden library call)."""
    source = PRELUDE + source
    filename = f"<cell {abs(hash(source))}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def variant(chapter_name, label):
    chapter = chapter_of(chapter_name)
    catalogue = importlib.import_module(f"tests.catalogue.{chapter_name}")
    found = [v for v in catalogue.WRONG if v.label == label]
    assert len(found) == 1, f"no catalogue entry {label!r} in {chapter_name}"
    return found[0], as_a_cell(found[0].source, reference_namespace(chapter))


@pytest.mark.parametrize("chapter_name,label,words", NAMED, ids=[f"{c}-{label[:40]}" for c, label, _ in NAMED])
def test_public_check_names_the_mistake(chapter_name, label, words):
    entry, namespace = variant(chapter_name, label)
    checks = importlib.import_module(f"course.checks.{chapter_name}")
    with pytest.raises(CheckFailed) as failure:
        getattr(checks, f"check_{entry.exercise}")(namespace[entry.exercise])
    assert words in str(failure.value), str(failure.value)


@pytest.mark.parametrize("chapter_name,exercise", PASSING, ids=[f"{c}-{e}" for c, e in PASSING])
def test_changed_public_checks_pass_correct_code(chapter_name, exercise):
    chapter = chapter_of(chapter_name)
    check = getattr(importlib.import_module(f"course.checks.{chapter_name}"), f"check_{exercise}")
    catalogue = importlib.import_module(f"tests.catalogue.{chapter_name}")
    check(reference_namespace(chapter)[exercise])
    for v in catalogue.CORRECT:
        if v.exercise == exercise:
            check(as_a_cell(v.source, reference_namespace(chapter))[exercise])


def test_a_failed_check_shows_its_message_alone():
    with pytest.raises(CheckFailed) as failure:
        fail("the output is wrong")
    assert failure.value._render_traceback_() == ["CheckFailed: the output is wrong"]
