"""Chapter 09's reference is the real thing: Hugging Face's LLaMA and Mixtral layers (small random configs,
no downloads), with their weights copied in by name, compute what the course's pieces compute."""
import pytest
import torch
import torch.nn as nn

transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig, MixtralConfig  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm, LlamaRotaryEmbedding  # noqa: E402
from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock, load_balancing_loss_func  # noqa: E402

from course.toolkit.llama_modern import load_hf_llama_layer, load_hf_mixtral_moe  # noqa: E402
from solutions.llama_modern import (  # noqa: E402
    LlamaBlock,
    MoEFeedForward,
    RMSNorm,
    apply_rope,
    load_balancing_loss,
    rope_frequencies,
)

D, H, HKV, HIDDEN, MAX_LEN, BASE, EPS = 32, 4, 2, 48, 64, 500.0, 1e-5


def seeded(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def randomise(module: nn.Module, seed: int) -> None:
    """Every parameter, norms included, set to seeded values (each by its own name)."""
    with torch.no_grad():
        for i, (name, p) in enumerate(sorted(module.named_parameters())):
            values = seeded(*p.shape, seed=seed + i)
            p.copy_(1.0 + 0.3 * values if "norm" in name else values / p.shape[-1] ** 0.5)


def llama_config():
    return LlamaConfig(hidden_size=D, num_attention_heads=H, num_key_value_heads=HKV, intermediate_size=HIDDEN,
                       max_position_embeddings=MAX_LEN, rms_norm_eps=EPS,
                       rope_parameters={"rope_type": "default", "rope_theta": BASE},
                       attn_implementation="eager")


def causal_additive_mask(B, T):
    blocked = torch.ones(T, T, dtype=torch.bool).triu(1)
    return torch.zeros(B, 1, T, T).masked_fill(blocked, torch.finfo(torch.float32).min)


def test_llama_block_matches_hf_decoder_layer_with_grouped_kv_heads():
    config = llama_config()
    hf_layer = LlamaDecoderLayer(config, layer_idx=0).eval()
    randomise(hf_layer, 100)
    ours = load_hf_llama_layer(LlamaBlock(D, H, HKV, HIDDEN, MAX_LEN, rope_base=BASE, eps=EPS), hf_layer).eval()

    B, T = 3, 11
    x = seeded(B, T, D, seed=1)
    positions = torch.arange(T)[None].expand(B, T)
    cos, sin = LlamaRotaryEmbedding(config)(x, positions)  # (B, T, Dh)
    with torch.no_grad():
        expected = hf_layer(x, attention_mask=causal_additive_mask(B, T), position_ids=positions,
                            position_embeddings=(cos, sin))
        got = ours(x)
    expected = expected[0] if isinstance(expected, tuple) else expected
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_rope_tables_and_rotation_match_hf():
    config = llama_config()
    T = 40
    x = seeded(1, T, D, seed=2)
    hf_cos, hf_sin = LlamaRotaryEmbedding(config)(x, torch.arange(T)[None])
    cos, sin = rope_frequencies(D // H, MAX_LEN, BASE)
    torch.testing.assert_close(cos[:T], hf_cos[0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(sin[:T], hf_sin[0], atol=1e-6, rtol=1e-5)
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    q, k = seeded(2, H, T, D // H, seed=3), seeded(2, HKV, T, D // H, seed=4)
    hf_q, hf_k = apply_rotary_pos_emb(q, k, hf_cos, hf_sin)
    torch.testing.assert_close(apply_rope(q, cos, sin), hf_q, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(apply_rope(k, cos, sin), hf_k, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("scale", [1.0, 1e-3])
def test_rmsnorm_matches_torch_and_hf(scale):
    weight = 1.0 + 0.3 * seeded(D, seed=5)
    x = scale * seeded(4, 7, D, seed=6)
    ours, torch_norm, hf_norm = RMSNorm(D, eps=EPS), nn.RMSNorm(D, eps=EPS), LlamaRMSNorm(D, eps=EPS)
    with torch.no_grad():
        for norm in (ours, torch_norm, hf_norm):
            norm.weight.copy_(weight)
        got = ours(x)
        torch.testing.assert_close(got, torch_norm(x), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(got, hf_norm(x), atol=1e-5, rtol=1e-5)


def mixtral_block(num_experts, top_k, seed):
    config = MixtralConfig(hidden_size=16, intermediate_size=24, num_local_experts=num_experts,
                           num_experts_per_tok=top_k, router_jitter_noise=0.0)
    block = MixtralSparseMoeBlock(config).eval()
    randomise(block, seed)
    with torch.no_grad():  # a sharper router: the top-k choices are never near ties
        block.gate.weight.mul_(3.0)
    return block


@pytest.mark.parametrize("num_experts,top_k", [(8, 2), (4, 1), (6, 3)])
def test_moe_matches_hf_mixtral_sparse_block(num_experts, top_k):
    hf_block = mixtral_block(num_experts, top_k, seed=200 + num_experts)
    ours = load_hf_mixtral_moe(MoEFeedForward(16, 24, num_experts, top_k), hf_block)
    x = seeded(3, 5, 16, seed=7)
    with torch.no_grad():
        expected = hf_block(x)
        expected_logits = hf_block.gate(x)[0]
        got, logits = ours(x)
    torch.testing.assert_close(logits, expected_logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # Mixtral's layout: gate rows first, then up rows, in one (E, 2I, D) tensor.
    torch.testing.assert_close(ours.experts[1].w_up.weight, hf_block.experts.gate_up_proj[1, 24:])


@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_load_balancing_loss_matches_hf(top_k):
    logits = 2.0 * seeded(37, 6, seed=8 + top_k)
    expected = load_balancing_loss_func((logits,), num_experts=6, top_k=top_k)
    torch.testing.assert_close(load_balancing_loss(logits, top_k), expected, atol=1e-6, rtol=1e-5)

