"""Chapter 07: BERT, an encoder pretrained with masked language modelling and next-sentence
prediction (reference implementation)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from solutions.add_and_norm import EncoderLayer, LayerNorm


def gelu(x: torch.Tensor) -> torch.Tensor:
    """The Gaussian error linear unit in its tanh form (the one BERT's and GPT-2's code use).

    Args:
        x: any shape, a floating dtype.
    Returns:
        same shape and dtype (float64 stays float64):
        0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3))).
        Finite for every finite x (use torch.tanh, which saturates to +-1, not a formula with exp).
    The input is not modified. Do not call F.gelu or nn.GELU.
    """
    ### BEGIN SOLUTION
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)
    return 0.5 * x * (1.0 + torch.tanh(inner))
    ### END SOLUTION


def build_pair_input(tokens_a: list[int], tokens_b: list[int] | None, cls_id: int,
                     sep_id: int) -> tuple[list[int], list[int]]:
    """One BERT input: [CLS] a [SEP] b [SEP], with the segment of each token.

    Args:
        tokens_a: the first sentence, a non-empty list of token ids.
        tokens_b: the second sentence (a list of ids, possibly empty), or None for a single sentence.
        cls_id, sep_id: the ids of [CLS] and [SEP].
    Returns:
        (input_ids, segment_ids), two new lists of ints of the same length:
        input_ids = [cls_id] + tokens_a + [sep_id] + tokens_b + [sep_id]
            (just [cls_id] + tokens_a + [sep_id] when tokens_b is None);
        segment_ids = 0 for [CLS], every token of a and the FIRST [SEP]; 1 for every token of b
            and the last [SEP].
    Raises:
        ValueError if tokens_a is empty.
    tokens_a and tokens_b are not modified (build new lists; do not append to them).
    """
    ### BEGIN SOLUTION
    if len(tokens_a) == 0:
        raise ValueError("tokens_a must hold at least one token")
    input_ids = [cls_id, *tokens_a, sep_id]
    segment_ids = [0] * len(input_ids)  # [CLS] a [SEP] all belong to sentence A
    if tokens_b is not None:
        input_ids += [*tokens_b, sep_id]
        segment_ids += [1] * (len(tokens_b) + 1)  # b and the closing [SEP] belong to sentence B
    return input_ids, segment_ids
    ### END SOLUTION


class BertEmbeddings(nn.Module):
    """BERT's input layer: token + segment + position embeddings, summed, then LayerNorm and dropout.

    Args:
        vocab_size: V; d_model: D; max_len: the longest sequence (rows of the position table);
        num_segments: how many segment ids there are (2: sentence A and sentence B);
        dropout: probability of zeroing entries of the output in training mode; in eval mode
            the output is dropout-free.
    Attributes:
        token: nn.Embedding(V, D); segment: nn.Embedding(num_segments, D);
        position: nn.Embedding(max_len, D), a LEARNED table (not the sinusoids of chapter 03);
        norm: LayerNorm(D, eps=1e-12) (BERT's eps, not the 1e-5 default);
        dropout: nn.Dropout(dropout), applied after the norm.
    forward(input_ids (B, T), segment_ids (B, T) or None) -> (B, T, D):
        dropout(norm(token(input_ids) + segment(segment_ids) + position(p))), where p = 0..T-1 is the
        position within each row; segment_ids None means every token is in segment 0.
    Raises:
        ValueError if input_ids is not 2-dimensional, segment_ids has another shape, or T > max_len.
    """

    def __init__(self, vocab_size: int, d_model: int, max_len: int, num_segments: int = 2,
                 dropout: float = 0.0):
        super().__init__()
        ### BEGIN SOLUTION
        self.token = nn.Embedding(vocab_size, d_model)
        self.segment = nn.Embedding(num_segments, d_model)
        self.position = nn.Embedding(max_len, d_model)
        self.norm = LayerNorm(d_model, eps=1e-12)
        self.dropout = nn.Dropout(dropout)
        ### END SOLUTION

    def forward(self, input_ids: torch.Tensor, segment_ids: torch.Tensor | None = None) -> torch.Tensor:
        ### BEGIN SOLUTION
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids should have shape (B, T), got {tuple(input_ids.shape)}")
        B, T = input_ids.shape
        if T > self.position.num_embeddings:
            raise ValueError(f"sequence length {T} exceeds max_len={self.position.num_embeddings}")
        if segment_ids is None:
            segment_ids = torch.zeros_like(input_ids)
        elif segment_ids.shape != input_ids.shape:
            raise ValueError(f"segment_ids {tuple(segment_ids.shape)} must match input_ids {tuple(input_ids.shape)}")
        positions = torch.arange(T, device=input_ids.device)  # (T,) the same for every row
        x = self.token(input_ids) + self.segment(segment_ids) + self.position(positions)  # (B, T, D)
        return self.dropout(self.norm(x))
        ### END SOLUTION


def mask_tokens(input_ids: torch.Tensor, vocab_size: int, mask_id: int, special_ids,
                mlm_probability: float = 0.15,
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masked-language-model corruption: choose tokens to predict, and hide most of them.

    Args:
        input_ids: (B, T) int64 token ids.
        vocab_size: V; mask_id: the id of [MASK].
        special_ids: the ids never chosen ([PAD], [CLS], [SEP], [MASK], ...), any iterable of ints.
        mlm_probability: p in [0, 1], the chance that a non-special token is chosen.
        generator: the source of ALL randomness (None: torch's global generator).
    Returns:
        (masked_ids, labels), both (B, T) int64, new tensors:
        - every non-special token is chosen independently with probability p; special tokens never;
        - a chosen token becomes mask_id with probability 0.8, a random id drawn uniformly from
          [0, vocab_size) (any id, special ones included, as in BERT's own code) with probability
          0.1, and stays unchanged with probability 0.1; tokens not chosen stay unchanged;
        - labels hold the ORIGINAL id at chosen positions (whatever replaced it) and -100 elsewhere.
    Raises:
        ValueError if input_ids is not 2-dimensional or mlm_probability is outside [0, 1].
    The input is not modified. Draw every random number from `generator` (torch.rand, torch.randint
    and torch.bernoulli accept generator=...); never from Python's or NumPy's random.
    """
    ### BEGIN SOLUTION
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids should have shape (B, T), got {tuple(input_ids.shape)}")
    if not 0.0 <= mlm_probability <= 1.0:
        raise ValueError(f"mlm_probability must lie in [0, 1], got {mlm_probability}")
    device = input_ids.device
    special = torch.isin(input_ids, torch.tensor(list(special_ids), dtype=input_ids.dtype, device=device))
    chosen = (torch.rand(input_ids.shape, generator=generator, device=device) < mlm_probability) & ~special
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))  # before any replacement
    # One uniform number per token splits the chosen ones 80 / 10 / 10.
    action = torch.rand(input_ids.shape, generator=generator, device=device)
    random_ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator, device=device)
    masked_ids = input_ids.clone()
    masked_ids[chosen & (action < 0.8)] = mask_id
    replace = chosen & (action >= 0.8) & (action < 0.9)
    masked_ids[replace] = random_ids[replace]
    return masked_ids, labels
    ### END SOLUTION


def make_nsp_examples(documents: list, generator: torch.Generator | None = None) -> list:
    """Sentence pairs for next-sentence prediction: half true continuations, half random sentences.

    Args:
        documents: a list of at least 2 documents; a document is a non-empty list of sentences, a
            sentence a list of token ids.
        generator: the source of ALL randomness (None: torch's global generator).
    Returns:
        a list of (a, b, is_next) triples, one for every sentence a that has a next sentence in its
        document (a document of n sentences gives n - 1 examples), in any order:
        - with probability 1/2, b is the sentence right after a and is_next is True;
        - otherwise b is a random sentence of ANOTHER document (a document drawn uniformly from the
          others, then a sentence drawn uniformly from it) and is_next is False.
        a and b are the sentence lists themselves (or copies); is_next is a Python bool.
    Raises:
        ValueError if there are fewer than 2 documents or a document is empty.
    The documents are not modified. Draw every random number from `generator`.
    """
    ### BEGIN SOLUTION
    if len(documents) < 2:
        raise ValueError(f"need at least 2 documents to draw random sentences from, got {len(documents)}")
    if any(len(doc) == 0 for doc in documents):
        raise ValueError("every document needs at least one sentence")
    examples = []
    for d, doc in enumerate(documents):
        for i in range(len(doc) - 1):
            if torch.rand((), generator=generator).item() < 0.5:
                examples.append((doc[i], doc[i + 1], True))
            else:
                other = int(torch.randint(len(documents) - 1, (), generator=generator))
                other += other >= d  # skip document d itself
                j = int(torch.randint(len(documents[other]), (), generator=generator))
                examples.append((doc[i], documents[other][j], False))
    return examples
    ### END SOLUTION


class BertForPretraining(nn.Module):
    """BERT with its two pretraining heads, laid out so a Hugging Face BertForPreTraining's weights fit.

    Args:
        vocab_size: V; d_model: D; num_heads: H (divides D); num_layers: N >= 1;
        d_ff: the feed-forward hidden size; max_len: rows of the position table;
        num_segments: segment ids (2); dropout: the dropout probability everywhere, in training
            mode; in eval mode the model is dropout-free.
    Attributes (exactly these parameters; the hidden tests load weights by these names):
        embeddings: BertEmbeddings(V, D, max_len, num_segments, dropout).
        layers: nn.ModuleList of N EncoderLayer(D, H, d_ff, dropout) from chapter 05 (parts self_attn,
            ffn.linear1, ffn.linear2, norm1, norm2, dropout1, dropout2), each with norm1 and norm2
            replaced by LayerNorm(D, eps=1e-12).
        mlm_transform: nn.Linear(D, D); mlm_norm: LayerNorm(D, eps=1e-12);
        mlm_bias: nn.Parameter of V zeros, the output bias of the MLM head;
            the MLM head's weight matrix is the token table embeddings.token.weight (tied, no new (V, D) matrix).
        pooler: nn.Linear(D, D); nsp_head: nn.Linear(D, 2).
    encode(input_ids (B, T), segment_ids (B, T), attention_mask=None) -> hidden states (B, T, D):
        x = embeddings(input_ids, segment_ids), then for each layer (Post-LN, GELU feed-forward):
            x = norm1(x + dropout1(self_attn(x, x, x, keys)[0]))
            x = norm2(x + dropout2(ffn.linear2(gelu(ffn.linear1(x)))))
        attention_mask: (B, T) bool or 0/1 numbers, True/1 = a real token, False/0 = padding; None =
        every token is real. keys is that mask as bool of shape (B, 1, 1, T): padded tokens are hidden
        as KEYS from every query. Do not call layer(x, mask): chapter 05's forward uses ReLU.
    forward(input_ids, segment_ids, attention_mask=None) -> (mlm_logits (B, T, V), nsp_logits (B, 2)):
        h = encode(...);
        mlm_logits = mlm_norm(gelu(mlm_transform(h))) @ embeddings.token.weight.T + mlm_bias;
        nsp_logits = nsp_head(tanh(pooler(h[:, 0]))), from the [CLS] position only.
        NSP class 0 means "b follows a" and class 1 "b is random", as in BERT's code.
    In training mode dropout acts at four sites: the embeddings' output (BertEmbeddings' own), the
    attention weights (inside self_attn), and dropout1 and dropout2 on every layer's sublayer outputs,
    as in encode above. Apply each through its nn.Dropout module: the hidden tests swap each for a
    fixed mask.
    Raises:
        ValueError if num_layers < 1, input_ids is not 2-dimensional, or segment_ids or
        attention_mask is not of shape (B, T).
    Use your gelu and BertEmbeddings. Do not call nn.MultiheadAttention, F.multi_head_attention_forward,
    nn.TransformerEncoderLayer or F.scaled_dot_product_attention. __init__ ends with the given
    init_weights() (BERT's initialisation).
    """

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, num_layers: int, d_ff: int,
                 max_len: int = 512, num_segments: int = 2, dropout: float = 0.0):
        super().__init__()
        ### BEGIN SOLUTION
        if num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}")
        self.embeddings = BertEmbeddings(vocab_size, d_model, max_len, num_segments, dropout)
        self.layers = nn.ModuleList()
        for _ in range(num_layers):
            layer = EncoderLayer(d_model, num_heads, d_ff, dropout)
            layer.norm1, layer.norm2 = LayerNorm(d_model, eps=1e-12), LayerNorm(d_model, eps=1e-12)
            self.layers.append(layer)
        self.mlm_transform = nn.Linear(d_model, d_model)
        self.mlm_norm = LayerNorm(d_model, eps=1e-12)
        self.mlm_bias = nn.Parameter(torch.zeros(vocab_size))
        self.pooler = nn.Linear(d_model, d_model)
        self.nsp_head = nn.Linear(d_model, 2)
        ### END SOLUTION
        self.init_weights()

    @torch.no_grad()
    def init_weights(self, linear_std: float = 0.02) -> None:
        """Given: BERT's initialisation. Every nn.Embedding weight ~ N(0, 0.02), every nn.Linear weight
        ~ N(0, linear_std) (BERT uses 0.02 at D = 768; a small model trains faster with about
        1 / sqrt(D)), biases and mlm_bias 0; LayerNorms keep weight 1 and bias 0."""
        for module in self.modules():
            if isinstance(module, nn.Embedding):
                module.weight.normal_(0.0, 0.02)
            elif isinstance(module, nn.Linear):
                module.weight.normal_(0.0, linear_std)
                if module.bias is not None:
                    module.bias.zero_()
        if isinstance(getattr(self, "mlm_bias", None), nn.Parameter):
            self.mlm_bias.zero_()

    def encode(self, input_ids: torch.Tensor, segment_ids: torch.Tensor,
               attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        ### BEGIN SOLUTION
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids should have shape (B, T), got {tuple(input_ids.shape)}")
        B, T = input_ids.shape
        if segment_ids.shape != (B, T):
            raise ValueError(f"segment_ids should have shape {(B, T)}, got {tuple(segment_ids.shape)}")
        if attention_mask is None:
            attention_mask = torch.ones(B, T, dtype=torch.bool, device=input_ids.device)
        if attention_mask.shape != (B, T):
            raise ValueError(f"attention_mask should have shape {(B, T)}, got {tuple(attention_mask.shape)}")
        keys = attention_mask.bool().view(B, 1, 1, T)  # hide padded keys from every query and head
        x = self.embeddings(input_ids, segment_ids)  # (B, T, D)
        for layer in self.layers:
            # Chapter 05's EncoderLayer.forward uses ReLU; BERT's feed-forward uses GELU, so run its parts.
            x = layer.norm1(x + layer.dropout1(layer.self_attn(x, x, x, keys)[0]))
            x = layer.norm2(x + layer.dropout2(layer.ffn.linear2(gelu(layer.ffn.linear1(x)))))
        return x  # (B, T, D)
        ### END SOLUTION

    def forward(self, input_ids: torch.Tensor, segment_ids: torch.Tensor,
                attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        ### BEGIN SOLUTION
        h = self.encode(input_ids, segment_ids, attention_mask)  # (B, T, D)
        transformed = self.mlm_norm(gelu(self.mlm_transform(h)))  # (B, T, D)
        mlm_logits = transformed @ self.embeddings.token.weight.T + self.mlm_bias  # (B, T, V), tied
        pooled = torch.tanh(self.pooler(h[:, 0]))  # (B, D), the [CLS] position
        return mlm_logits, self.nsp_head(pooled)  # (B, T, V), (B, 2)
        ### END SOLUTION


def bert_pretraining_loss(mlm_logits: torch.Tensor, mlm_labels: torch.Tensor, nsp_logits: torch.Tensor,
                          nsp_labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """BERT's pretraining loss: masked-token cross-entropy plus next-sentence cross-entropy.

    Args:
        mlm_logits: (B, T, V); mlm_labels: (B, T) int64, the original id at chosen positions, -100 elsewhere.
        nsp_logits: (B, 2); nsp_labels: (B,) int64, 0 = "b follows a", 1 = "b is random".
    Returns:
        (total, mlm, nsp), three scalar (shape ()) tensors:
        mlm = mean cross-entropy over the positions whose label is not -100 (only those count,
            in the sum and in the mean); nsp = mean cross-entropy over the B pairs; total = mlm + nsp.
    Raises:
        ValueError if mlm_logits is not 3-dimensional, mlm_labels is not (B, T), nsp_logits is not
        (B, 2) or nsp_labels is not (B,).
    F.cross_entropy is allowed (mind its ignore_index and the (N, C) shape it expects). The losses
    must stay finite for large logits (around 1e3): use F.cross_entropy or log_softmax, not the log
    of a softmax.
    """
    ### BEGIN SOLUTION
    if mlm_logits.dim() != 3 or mlm_labels.shape != mlm_logits.shape[:2]:
        raise ValueError(f"mlm_logits should be (B, T, V) and mlm_labels (B, T), got "
                         f"{tuple(mlm_logits.shape)} and {tuple(mlm_labels.shape)}")
    B, T, V = mlm_logits.shape
    if nsp_logits.shape != (B, 2) or nsp_labels.shape != (B,):
        raise ValueError(f"nsp_logits should be ({B}, 2) and nsp_labels ({B},), got "
                         f"{tuple(nsp_logits.shape)} and {tuple(nsp_labels.shape)}")
    mlm = F.cross_entropy(mlm_logits.reshape(B * T, V), mlm_labels.reshape(B * T), ignore_index=-100)
    nsp = F.cross_entropy(nsp_logits, nsp_labels)
    return mlm + nsp, mlm, nsp
    ### END SOLUTION
