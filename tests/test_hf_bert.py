"""The reference BertForPretraining is the production BERT: a small random Hugging Face
`BertForPreTraining`, its weights copied in with the course's `load_hf_bert`, gives the same MLM and
NSP logits (eval mode, a batch with padding). `transformers` is a test-only oracle (dev extra); no
weights are downloaded."""
import math
import zlib

import pytest
import torch

transformers = pytest.importorskip("transformers")

from course.toolkit.bert_pretraining import hf_bert_name_map, load_hf_bert  # noqa: E402
from solutions.bert_pretraining import BertForPretraining  # noqa: E402

V, D, H, N, FF, MAX_LEN = 37, 32, 4, 2, 48, 24


def hf_model(attn_implementation: str):
    config = transformers.BertConfig(
        vocab_size=V, hidden_size=D, num_hidden_layers=N, num_attention_heads=H, intermediate_size=FF,
        max_position_embeddings=MAX_LEN, type_vocab_size=2, hidden_act="gelu_new", layer_norm_eps=1e-12,
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    config._attn_implementation = attn_implementation
    torch.manual_seed(0)
    model = transformers.BertForPreTraining(config)
    # Larger random values than BERT's N(0, 0.02) initialisation, so that every part shows in the logits.
    with torch.no_grad():
        for name, p in model.named_parameters():
            g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
            noise = torch.randn(p.shape, generator=g)
            if "LayerNorm.weight" in name:
                p.copy_(1 + 0.2 * noise)
            elif p.dim() == 1:
                p.copy_(0.1 * noise)
            else:
                p.copy_(noise / math.sqrt(p.shape[-1]))
    return model.eval()


def batch():
    g = torch.Generator().manual_seed(7)
    lengths = torch.tensor([12, 9, 5])
    T = int(lengths.max())
    ids = torch.randint(4, V, (3, T), generator=g)
    ids[:, 0] = 1  # [CLS]
    sep = torch.tensor([5, 4, 2])
    ids[torch.arange(3), sep] = 2  # the first [SEP]
    ids[torch.arange(3), lengths - 1] = 2  # the last [SEP]
    real = torch.arange(T)[None, :] < lengths[:, None]
    ids = ids.masked_fill(~real, 0)
    segments = ((torch.arange(T)[None, :] > sep[:, None]) & real).long()
    return ids, segments, real


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_logits_equal_hugging_face(attn_implementation):
    hf = hf_model(attn_implementation)
    ours = BertForPretraining(V, D, H, N, FF, max_len=MAX_LEN, dropout=0.1)
    load_hf_bert(ours, hf).eval()
    ids, segments, real = batch()
    assert not real.all() and ids.shape[0] > 1
    with torch.no_grad():
        expected = hf(input_ids=ids, token_type_ids=segments, attention_mask=real.long())
        mlm_logits, nsp_logits = ours(ids, segments, real)
    torch.testing.assert_close(mlm_logits[real], expected.prediction_logits[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(nsp_logits, expected.seq_relationship_logits, atol=1e-5, rtol=1e-5)
    # The padded row gives what the same row gives alone, in both models.
    with torch.no_grad():
        alone = ours(ids[2:, :5], segments[2:, :5])
    torch.testing.assert_close(alone[0][0], mlm_logits[2, :5], atol=1e-5, rtol=1e-5)


def test_every_parameter_is_copied_and_the_decoder_is_tied():
    hf = hf_model("eager")
    ours = BertForPretraining(V, D, H, N, FF, max_len=MAX_LEN)
    load_hf_bert(ours, hf.state_dict())  # a state dict works as well as the model
    state = hf.state_dict()
    for name, theirs in hf_bert_name_map(N).items():
        torch.testing.assert_close(dict(ours.named_parameters())[name], state[theirs], atol=0, rtol=0)
    torch.testing.assert_close(state["cls.predictions.decoder.weight"], ours.embeddings.token.weight, atol=0, rtol=0)
    assert set(hf_bert_name_map(N)) == {n for n, _ in ours.named_parameters()}


def test_a_model_of_another_size_is_rejected():
    hf = hf_model("eager")
    with pytest.raises(ValueError, match="shape"):
        load_hf_bert(BertForPretraining(V + 1, D, H, N, FF, max_len=MAX_LEN), hf)
    with pytest.raises(ValueError):
        load_hf_bert(BertForPretraining(V, D, H, N + 1, FF, max_len=MAX_LEN), hf)
