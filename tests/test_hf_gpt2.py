"""The reference GPT is the real GPT-2: a small random Hugging Face GPT2LMHeadModel copied into it with
the course's `load_hf_gpt2` gives the same logits (eval mode, batch > 1), and greedy `generate`, with
and without the KV cache, writes the same tokens as transformers' own greedy generation."""
import pytest
import torch

transformers = pytest.importorskip("transformers")

from course.toolkit.gpt_generation import load_hf_gpt2  # noqa: E402
from solutions.gpt_generation import GPT, generate  # noqa: E402


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=97, n_positions=32, n_embd=48, n_layer=3, n_head=4,
                                     resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
                                     bos_token_id=0, eos_token_id=0, pad_token_id=0)
    hf = transformers.GPT2LMHeadModel(config)
    with torch.no_grad():  # GPT-2's own init zeroes biases and keeps norms at 1: randomise every number
        for name, p in hf.named_parameters():
            if "ln_" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.12 if p.dim() == 2 else 0.05)
    hf.eval()
    return hf, load_hf_gpt2(hf, GPT)


def test_logits_equal_within_1e_5(models):
    hf, ours = models
    assert not ours.training
    idx = torch.randint(0, 97, (3, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = hf(idx).logits
        actual = ours(idx)
    assert expected.abs().max() > 0.5  # the comparison is not between near-zero numbers
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=0)


def test_cached_logits_equal_hf(models):
    hf, ours = models
    idx = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = hf(idx).logits
        _, cache = ours(idx[:, :7], use_cache=True)
        tail, _ = ours(idx[:, 7:], cache=cache, use_cache=True)
    torch.testing.assert_close(tail, expected[:, 7:], atol=1e-5, rtol=0)


@pytest.mark.parametrize("use_cache", [False, True])
def test_greedy_generate_equals_transformers(models, use_cache):
    hf, ours = models
    idx = torch.randint(1, 97, (3, 6), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = hf.generate(idx, attention_mask=torch.ones_like(idx), max_new_tokens=20, do_sample=False,
                               eos_token_id=None, pad_token_id=0)
    actual = generate(ours, idx, 20, temperature=0, use_cache=use_cache)
    assert torch.equal(actual, expected)


def test_a_config_the_course_gpt_cannot_express_is_refused():
    config = transformers.GPT2Config(vocab_size=11, n_positions=8, n_embd=8, n_layer=1, n_head=2,
                                     activation_function="relu")
    with pytest.raises(ValueError):
        load_hf_gpt2(transformers.GPT2LMHeadModel(config), GPT)
