from tests.catalogue import Variant, do_nothing

# ------------------------------------------------------------------ pieces shared by several variants
_EMB_INIT = '''
class BertEmbeddings(nn.Module):
    def __init__(self, vocab_size, d_model, max_len, num_segments=2, dropout=0.0):
        super().__init__()
        self.token = nn.Embedding(vocab_size, d_model)
        self.segment = nn.Embedding(num_segments, d_model)
        self.position = nn.Embedding(max_len, d_model)
        self.norm = LayerNorm(d_model, eps=1e-12)
        self.dropout = nn.Dropout(dropout)

    def _check(self, input_ids, segment_ids):
        if input_ids.dim() != 2 or input_ids.shape[1] > self.position.num_embeddings:
            raise ValueError("input_ids must be (B, T) with T <= max_len")
        if segment_ids is None:
            segment_ids = torch.zeros_like(input_ids)
        if segment_ids.shape != input_ids.shape:
            raise ValueError("segment_ids must match input_ids")
        return segment_ids
'''

_MASK_HEAD = '''
def mask_tokens(input_ids, vocab_size, mask_id, special_ids, mlm_probability=0.15, generator=None):
    if input_ids.dim() != 2:
        raise ValueError("input_ids must be (B, T)")
    if not 0 <= mlm_probability <= 1:
        raise ValueError("mlm_probability must be in [0, 1]")
    special = torch.zeros_like(input_ids, dtype=torch.bool)
    for s in special_ids:
        special |= input_ids == s
'''

_NSP_HEAD = '''
def make_nsp_examples(documents, generator=None):
    if len(documents) < 2 or any(len(d) == 0 for d in documents):
        raise ValueError("need at least 2 non-empty documents")
    def coin():
        return torch.rand((), generator=generator).item() < 0.5
    def below(n):
        return int(torch.randint(n, (), generator=generator))
    examples = []
'''

_BERT_INIT = '''
class BertForPretraining(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, max_len=512, num_segments=2, dropout=0.0):
        super().__init__()
        if num_layers < 1:
            raise ValueError("num_layers must be at least 1")
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

    def _keys(self, input_ids, segment_ids, attention_mask):
        if input_ids.dim() != 2:
            raise ValueError("input_ids must be (B, T)")
        B, T = input_ids.shape
        if segment_ids.shape != (B, T):
            raise ValueError("segment_ids must be (B, T)")
        if attention_mask is None:
            attention_mask = torch.ones(B, T, dtype=torch.bool)
        if attention_mask.shape != (B, T):
            raise ValueError("attention_mask must be (B, T)")
        return attention_mask.bool()[:, None, None, :]
'''

_BERT_ENCODE = '''
    def encode(self, input_ids, segment_ids, attention_mask=None):
        keys = self._keys(input_ids, segment_ids, attention_mask)
        x = self.embeddings(input_ids, segment_ids)
        for layer in self.layers:
            x = layer.norm1(x + layer.dropout1(layer.self_attn(x, x, x, keys)[0]))
            x = layer.norm2(x + layer.dropout2(layer.ffn.linear2(gelu(layer.ffn.linear1(x)))))
        return x
'''

_BERT_FORWARD = '''
    def forward(self, input_ids, segment_ids, attention_mask=None):
        h = self.encode(input_ids, segment_ids, attention_mask)
        t = self.mlm_norm(gelu(self.mlm_transform(h)))
        mlm_logits = t @ self.embeddings.token.weight.T + self.mlm_bias
        return mlm_logits, self.nsp_head(torch.tanh(self.pooler(h[:, 0])))
'''

_LOSS_HEAD = '''
def bert_pretraining_loss(mlm_logits, mlm_labels, nsp_logits, nsp_labels):
    if mlm_logits.dim() != 3 or mlm_labels.shape != mlm_logits.shape[:2]:
        raise ValueError("mlm_logits (B, T, V) and mlm_labels (B, T)")
    B, T, V = mlm_logits.shape
    if nsp_logits.shape != (B, 2) or nsp_labels.shape != (B,):
        raise ValueError("nsp_logits (B, 2) and nsp_labels (B,)")
'''

WRONG = [
    # ---------------------------------------------------------------- gelu
    Variant("gelu", "the exact erf form (what F.gelu does by default), not the tanh form", '''
def gelu(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
'''),
    Variant("gelu", "x**2 in the cubic term", '''
def gelu(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 2)))
'''),
    Variant("gelu", "sqrt(2 * pi) instead of sqrt(2 / pi)", '''
def gelu(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 * math.pi) * (x + 0.044715 * x ** 3)))
'''),
    Variant("gelu", "the sigmoid approximation x * sigmoid(1.702 x)", '''
def gelu(x):
    return x * torch.sigmoid(1.702 * x)
'''),
    Variant("gelu", "tanh written with exp: overflows to nan for large x", '''
def gelu(x):
    z = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
    tanh = (torch.exp(2 * z) - 1) / (torch.exp(2 * z) + 1)
    return 0.5 * x * (1 + tanh)
'''),
    Variant("gelu", "modifies its input in place", '''
def gelu(x):
    inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
    return x.mul_(0.5 * (1 + torch.tanh(inner)))
'''),
    Variant("gelu", "converts the input to float32", '''
def gelu(x):
    x = x.float()
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
'''),
    Variant("gelu", "calls F.gelu(approximate='tanh')", '''
def gelu(x):
    return F.gelu(x, approximate="tanh")
'''),
    # ---------------------------------------------------------------- build_pair_input
    Variant("build_pair_input", "the first [SEP] gets segment 1", '''
def build_pair_input(tokens_a, tokens_b, cls_id, sep_id):
    if not tokens_a:
        raise ValueError("tokens_a is empty")
    ids = [cls_id] + list(tokens_a)
    segments = [0] * len(ids)
    if tokens_b is None:
        return ids + [sep_id], segments + [0]
    ids += [sep_id] + list(tokens_b) + [sep_id]
    return ids, segments + [1] * (len(tokens_b) + 2)
'''),
    Variant("build_pair_input", "the last [SEP] gets segment 0", '''
def build_pair_input(tokens_a, tokens_b, cls_id, sep_id):
    if not tokens_a:
        raise ValueError("tokens_a is empty")
    ids = [cls_id] + list(tokens_a) + [sep_id]
    segments = [0] * len(ids)
    if tokens_b is not None:
        ids += list(tokens_b) + [sep_id]
        segments += [1] * len(tokens_b) + [0]
    return ids, segments
'''),
    Variant("build_pair_input", "appends [SEP] to tokens_a in place", '''
def build_pair_input(tokens_a, tokens_b, cls_id, sep_id):
    if not tokens_a:
        raise ValueError("tokens_a is empty")
    tokens_a.append(sep_id)
    ids = [cls_id] + tokens_a
    segments = [0] * len(ids)
    if tokens_b is not None:
        ids = ids + tokens_b + [sep_id]
        segments += [1] * (len(tokens_b) + 1)
    return ids, segments
'''),
    Variant("build_pair_input", "tokens_b=None still ends with two [SEP]s", '''
def build_pair_input(tokens_a, tokens_b, cls_id, sep_id):
    if not tokens_a:
        raise ValueError("tokens_a is empty")
    b = tokens_b or []
    ids = [cls_id, *tokens_a, sep_id, *b, sep_id]
    return ids, [0] * (len(tokens_a) + 2) + [1] * (len(b) + 1)
'''),
    Variant("build_pair_input", "segments numbered 1 and 2", '''
def build_pair_input(tokens_a, tokens_b, cls_id, sep_id):
    if not tokens_a:
        raise ValueError("tokens_a is empty")
    ids = [cls_id, *tokens_a, sep_id]
    segments = [1] * len(ids)
    if tokens_b is not None:
        ids += [*tokens_b, sep_id]
        segments += [2] * (len(tokens_b) + 1)
    return ids, segments
'''),
    # ---------------------------------------------------------------- BertEmbeddings
    Variant("BertEmbeddings", "LayerNorm eps 1e-5 (chapter 05's default) instead of 1e-12", _EMB_INIT.replace(
        "eps=1e-12", "eps=1e-5") + '''
    def forward(self, input_ids, segment_ids=None):
        segment_ids = self._check(input_ids, segment_ids)
        positions = torch.arange(input_ids.shape[1])
        return self.dropout(self.norm(self.token(input_ids) + self.segment(segment_ids) + self.position(positions)))
'''),
    Variant("BertEmbeddings", "dropout before the LayerNorm", _EMB_INIT + '''
    def forward(self, input_ids, segment_ids=None):
        segment_ids = self._check(input_ids, segment_ids)
        positions = torch.arange(input_ids.shape[1])
        return self.norm(self.dropout(self.token(input_ids) + self.segment(segment_ids) + self.position(positions)))
'''),
    Variant("BertEmbeddings", "no LayerNorm applied", _EMB_INIT + '''
    def forward(self, input_ids, segment_ids=None):
        segment_ids = self._check(input_ids, segment_ids)
        positions = torch.arange(input_ids.shape[1])
        return self.dropout(self.token(input_ids) + self.segment(segment_ids) + self.position(positions))
'''),
    Variant("BertEmbeddings", "positions counted from 1", _EMB_INIT + '''
    def forward(self, input_ids, segment_ids=None):
        segment_ids = self._check(input_ids, segment_ids)
        positions = torch.arange(1, input_ids.shape[1] + 1).clamp(max=self.position.num_embeddings - 1)
        return self.dropout(self.norm(self.token(input_ids) + self.segment(segment_ids) + self.position(positions)))
'''),
    Variant("BertEmbeddings", "the segment embedding is never added", _EMB_INIT + '''
    def forward(self, input_ids, segment_ids=None):
        segment_ids = self._check(input_ids, segment_ids)
        positions = torch.arange(input_ids.shape[1])
        return self.dropout(self.norm(self.token(input_ids) + self.position(positions)))
'''),
    Variant("BertEmbeddings", "no check of T against max_len (nn.Embedding raises IndexError)", '''
class BertEmbeddings(nn.Module):
    def __init__(self, vocab_size, d_model, max_len, num_segments=2, dropout=0.0):
        super().__init__()
        self.token = nn.Embedding(vocab_size, d_model)
        self.segment = nn.Embedding(num_segments, d_model)
        self.position = nn.Embedding(max_len, d_model)
        self.norm = LayerNorm(d_model, eps=1e-12)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input_ids, segment_ids=None):
        if segment_ids is None:
            segment_ids = torch.zeros_like(input_ids)
        positions = torch.arange(input_ids.shape[-1])
        return self.dropout(self.norm(self.token(input_ids) + self.segment(segment_ids) + self.position(positions)))
'''),
    # ---------------------------------------------------------------- mask_tokens
    Variant("mask_tokens", "labels taken after the replacement (they hold [MASK])", _MASK_HEAD + '''
    chosen = (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & ~special
    action = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator)
    masked = input_ids.clone()
    masked[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    masked[swap] = random_ids[swap]
    labels = torch.where(chosen, masked, torch.full_like(masked, -100))
    return masked, labels
'''),
    Variant("mask_tokens", "special tokens can be chosen", _MASK_HEAD + '''
    chosen = torch.rand(input_ids.shape, generator=generator) < mlm_probability
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    action = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator)
    masked = input_ids.clone()
    masked[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    masked[swap] = random_ids[swap]
    return masked, labels
'''),
    Variant("mask_tokens", "random ids drawn from the non-special ids only (the docstring says any id in [0, V))",
            _MASK_HEAD + '''
    chosen = (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & ~special
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    action = torch.rand(input_ids.shape, generator=generator)
    allowed = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)])
    random_ids = allowed[torch.randint(0, len(allowed), input_ids.shape, generator=generator)]
    masked = input_ids.clone()
    masked[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    masked[swap] = random_ids[swap]
    return masked, labels
'''),
    Variant("mask_tokens", "random ids from randint(0, vocab_size - 1): the last id is never drawn", _MASK_HEAD + '''
    chosen = (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & ~special
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    action = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(0, vocab_size - 1, input_ids.shape, generator=generator)
    masked = input_ids.clone()
    masked[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    masked[swap] = random_ids[swap]
    return masked, labels
'''),
    Variant("mask_tokens", "the random branch drawn with p=0.1 among the rest: 2% random instead of 10%",
            _MASK_HEAD + '''
    chosen = torch.bernoulli(torch.full(input_ids.shape, float(mlm_probability)), generator=generator).bool() & ~special
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    to_mask = torch.bernoulli(torch.full(input_ids.shape, 0.8), generator=generator).bool() & chosen
    to_random = torch.bernoulli(torch.full(input_ids.shape, 0.1), generator=generator).bool() & chosen & ~to_mask
    masked = input_ids.clone()
    masked[to_mask] = mask_id
    masked[to_random] = torch.randint(0, vocab_size, input_ids.shape, generator=generator)[to_random]
    return masked, labels
'''),
    Variant("mask_tokens", "every chosen token becomes [MASK] (no 10% random, no 10% unchanged)", _MASK_HEAD + '''
    chosen = (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & ~special
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    return input_ids.masked_fill(chosen, mask_id), labels
'''),
    Variant("mask_tokens", "modifies input_ids in place and returns it", _MASK_HEAD + '''
    chosen = (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & ~special
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    action = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator)
    input_ids[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    input_ids[swap] = random_ids[swap]
    return input_ids, labels
'''),
    Variant("mask_tokens", "labels 0 instead of -100 at positions not chosen", _MASK_HEAD + '''
    chosen = (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & ~special
    labels = torch.where(chosen, input_ids, torch.zeros_like(input_ids))
    action = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator)
    masked = input_ids.clone()
    masked[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    masked[swap] = random_ids[swap]
    return masked, labels
'''),
    Variant("mask_tokens", "labels only where [MASK] was put (not at the random and unchanged 20%)", _MASK_HEAD + '''
    chosen = (torch.rand(input_ids.shape, generator=generator) < mlm_probability) & ~special
    action = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator)
    to_mask = chosen & (action < 0.8)
    labels = torch.where(to_mask, input_ids, torch.full_like(input_ids, -100))
    masked = input_ids.clone()
    masked[to_mask] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    masked[swap] = random_ids[swap]
    return masked, labels
'''),
    Variant("mask_tokens", "torch's global generator instead of `generator`", _MASK_HEAD + '''
    chosen = (torch.rand(input_ids.shape) < mlm_probability) & ~special
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    action = torch.rand(input_ids.shape)
    random_ids = torch.randint(0, vocab_size, input_ids.shape)
    masked = input_ids.clone()
    masked[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    masked[swap] = random_ids[swap]
    return masked, labels
'''),
    Variant("mask_tokens", "exactly round(p * n) tokens chosen per row (not independently)", _MASK_HEAD + '''
    B, T = input_ids.shape
    chosen = torch.zeros_like(special)
    for b in range(B):
        candidates = (~special[b]).nonzero().flatten()
        k = round(mlm_probability * len(candidates))
        order = torch.randperm(len(candidates), generator=generator)
        chosen[b, candidates[order[:k]]] = True
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    action = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator)
    masked = input_ids.clone()
    masked[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    masked[swap] = random_ids[swap]
    return masked, labels
'''),
    # ---------------------------------------------------------------- make_nsp_examples
    Variant("make_nsp_examples", "random sentence drawn from the whole corpus, a's own document included",
            _NSP_HEAD + '''
    everything = [s for doc in documents for s in doc]
    for doc in documents:
        for i in range(len(doc) - 1):
            if coin():
                examples.append((doc[i], doc[i + 1], True))
            else:
                examples.append((doc[i], everything[below(len(everything))], False))
    return examples
'''),
    Variant("make_nsp_examples", "the random sentence comes from a's own document", _NSP_HEAD + '''
    for doc in documents:
        for i in range(len(doc) - 1):
            if coin():
                examples.append((doc[i], doc[i + 1], True))
            else:
                examples.append((doc[i], doc[below(len(doc))], False))
    return examples
'''),
    Variant("make_nsp_examples", "is_next inverted", _NSP_HEAD + '''
    for d, doc in enumerate(documents):
        for i in range(len(doc) - 1):
            if coin():
                examples.append((doc[i], doc[i + 1], False))
            else:
                other = (d + 1 + below(len(documents) - 1)) % len(documents)
                examples.append((doc[i], documents[other][below(len(documents[other]))], True))
    return examples
'''),
    Variant("make_nsp_examples", "the positive b is two sentences ahead", _NSP_HEAD + '''
    for d, doc in enumerate(documents):
        for i in range(len(doc) - 1):
            if coin() and i + 2 < len(doc):
                examples.append((doc[i], doc[i + 2], True))
            else:
                other = (d + 1 + below(len(documents) - 1)) % len(documents)
                examples.append((doc[i], documents[other][below(len(documents[other]))], False))
    return examples
'''),
    Variant("make_nsp_examples", "the random sentence always comes from the next document", _NSP_HEAD + '''
    for d, doc in enumerate(documents):
        for i in range(len(doc) - 1):
            if coin():
                examples.append((doc[i], doc[i + 1], True))
            else:
                other = documents[(d + 1) % len(documents)]
                examples.append((doc[i], other[below(len(other))], False))
    return examples
'''),
    Variant("make_nsp_examples", "the random sentence sits at a's position in the other document", _NSP_HEAD + '''
    for d, doc in enumerate(documents):
        for i in range(len(doc) - 1):
            if coin():
                examples.append((doc[i], doc[i + 1], True))
            else:
                other = documents[(d + 1 + below(len(documents) - 1)) % len(documents)]
                examples.append((doc[i], other[min(i, len(other) - 1)], False))
    return examples
'''),
    Variant("make_nsp_examples", "Python's random module instead of `generator`", '''
import random as _random

def make_nsp_examples(documents, generator=None):
    if len(documents) < 2 or any(len(d) == 0 for d in documents):
        raise ValueError("need at least 2 non-empty documents")
    examples = []
    for d, doc in enumerate(documents):
        for i in range(len(doc) - 1):
            if _random.random() < 0.5:
                examples.append((doc[i], doc[i + 1], True))
            else:
                other = _random.choice([e for j, e in enumerate(documents) if j != d])
                examples.append((doc[i], _random.choice(other), False))
    return examples
'''),
    Variant("make_nsp_examples", "the last sentence is used as a too, wrapping around to the first", _NSP_HEAD + '''
    for d, doc in enumerate(documents):
        for i in range(len(doc)):
            if coin():
                examples.append((doc[i], doc[(i + 1) % len(doc)], True))
            else:
                other = documents[(d + 1 + below(len(documents) - 1)) % len(documents)]
                examples.append((doc[i], other[below(len(other))], False))
    return examples
'''),
    Variant("make_nsp_examples", "is_next returned as a tensor, not a bool", _NSP_HEAD + '''
    for d, doc in enumerate(documents):
        for i in range(len(doc) - 1):
            is_next = torch.rand((), generator=generator) < 0.5
            if is_next:
                examples.append((doc[i], doc[i + 1], is_next))
            else:
                other = documents[(d + 1 + below(len(documents) - 1)) % len(documents)]
                examples.append((doc[i], other[below(len(other))], is_next))
    return examples
'''),
    # ---------------------------------------------------------------- BertForPretraining
    Variant("BertForPretraining", "calls chapter 05's layer(x, mask): ReLU feed-forward", _BERT_INIT + '''
    def encode(self, input_ids, segment_ids, attention_mask=None):
        keys = self._keys(input_ids, segment_ids, attention_mask)
        x = self.embeddings(input_ids, segment_ids)
        for layer in self.layers:
            x = layer(x, keys)
        return x
''' + _BERT_FORWARD),
    Variant("BertForPretraining", "the exact erf GELU in the feed-forward block", _BERT_INIT + _BERT_ENCODE.replace(
        "gelu(layer.ffn.linear1(x))", "F.gelu(layer.ffn.linear1(x))") + _BERT_FORWARD),
    Variant("BertForPretraining", "Pre-LN instead of Post-LN", _BERT_INIT + '''
    def encode(self, input_ids, segment_ids, attention_mask=None):
        keys = self._keys(input_ids, segment_ids, attention_mask)
        x = self.embeddings(input_ids, segment_ids)
        for layer in self.layers:
            h = layer.norm1(x)
            x = x + layer.dropout1(layer.self_attn(h, h, h, keys)[0])
            x = x + layer.dropout2(layer.ffn.linear2(gelu(layer.ffn.linear1(layer.norm2(x)))))
        return x
''' + _BERT_FORWARD),
    Variant("BertForPretraining", "the layers keep chapter 05's LayerNorm eps 1e-5", _BERT_INIT.replace(
        "            layer.norm1, layer.norm2 = LayerNorm(d_model, eps=1e-12), LayerNorm(d_model, eps=1e-12)\n", "")
        + _BERT_ENCODE + _BERT_FORWARD),
    Variant("BertForPretraining", "the MLM transform's LayerNorm with eps 1e-5", _BERT_INIT.replace(
        "self.mlm_norm = LayerNorm(d_model, eps=1e-12)", "self.mlm_norm = LayerNorm(d_model)")
        + _BERT_ENCODE + _BERT_FORWARD),
    Variant("BertForPretraining", "NSP pooled from the mean of the hidden states, not [CLS]", _BERT_INIT + _BERT_ENCODE
            + _BERT_FORWARD.replace("self.pooler(h[:, 0])", "self.pooler(h.mean(1))")),
    Variant("BertForPretraining", "the pooler has no tanh", _BERT_INIT + _BERT_ENCODE
            + _BERT_FORWARD.replace("torch.tanh(self.pooler(h[:, 0]))", "self.pooler(h[:, 0])")),
    Variant("BertForPretraining", "an untied MLM decoder nn.Linear(D, V)", _BERT_INIT.replace(
        "self.mlm_bias = nn.Parameter(torch.zeros(vocab_size))", "self.decoder = nn.Linear(d_model, vocab_size)")
        + _BERT_ENCODE + '''
    def forward(self, input_ids, segment_ids, attention_mask=None):
        h = self.encode(input_ids, segment_ids, attention_mask)
        mlm_logits = self.decoder(self.mlm_norm(gelu(self.mlm_transform(h))))
        return mlm_logits, self.nsp_head(torch.tanh(self.pooler(h[:, 0])))
'''),
    Variant("BertForPretraining", "the decoder bias is never added", _BERT_INIT + _BERT_ENCODE
            + _BERT_FORWARD.replace(" + self.mlm_bias", "")),
    Variant("BertForPretraining", "the MLM head has no transform (logits straight from the hidden states)", _BERT_INIT
            + _BERT_ENCODE + _BERT_FORWARD.replace("self.mlm_norm(gelu(self.mlm_transform(h)))", "h")),
    Variant("BertForPretraining", "the decoder uses a detached copy of the token table", _BERT_INIT + _BERT_ENCODE
            + _BERT_FORWARD.replace("self.embeddings.token.weight.T", "self.embeddings.token.weight.detach().T")),
    Variant("BertForPretraining", "the padding mask hides padded QUERIES (B, 1, T, 1)", _BERT_INIT
            + _BERT_ENCODE.replace("keys = self._keys(input_ids, segment_ids, attention_mask)",
                                   "keys = self._keys(input_ids, segment_ids, attention_mask).transpose(-1, -2)")
            + _BERT_FORWARD),
    Variant("BertForPretraining", "attention_mask is ignored", _BERT_INIT
            + _BERT_ENCODE.replace("self_attn(x, x, x, keys)", "self_attn(x, x, x)") + _BERT_FORWARD),
    Variant("BertForPretraining", "one layer object reused num_layers times", _BERT_INIT.replace(
        "        for _ in range(num_layers):\n            layer = EncoderLayer(d_model, num_heads, d_ff, dropout)\n",
        "        layer = EncoderLayer(d_model, num_heads, d_ff, dropout)\n        for _ in range(num_layers):\n")
        + _BERT_ENCODE + _BERT_FORWARD),
    Variant("BertForPretraining", "no dropout in the layers (dropout=0.0 passed to EncoderLayer)", _BERT_INIT.replace(
        "EncoderLayer(d_model, num_heads, d_ff, dropout)", "EncoderLayer(d_model, num_heads, d_ff)")
        + _BERT_ENCODE + _BERT_FORWARD),
    Variant("BertForPretraining", "segment_ids are not passed to the embeddings", _BERT_INIT
            + _BERT_ENCODE.replace("self.embeddings(input_ids, segment_ids)", "self.embeddings(input_ids)")
            + _BERT_FORWARD),
    # ---------------------------------------------------------------- bert_pretraining_loss
    Variant("bert_pretraining_loss", "MLM loss over every position (the -100 labels clamped to 0)", _LOSS_HEAD + '''
    mlm = F.cross_entropy(mlm_logits.reshape(-1, V), mlm_labels.reshape(-1).clamp(min=0))
    nsp = F.cross_entropy(nsp_logits, nsp_labels)
    return mlm + nsp, mlm, nsp
'''),
    Variant("bert_pretraining_loss", "MLM loss summed over labelled positions but divided by B * T", _LOSS_HEAD + '''
    mlm = F.cross_entropy(mlm_logits.reshape(-1, V), mlm_labels.reshape(-1), reduction="sum") / (B * T)
    nsp = F.cross_entropy(nsp_logits, nsp_labels)
    return mlm + nsp, mlm, nsp
'''),
    Variant("bert_pretraining_loss", "total is the average (mlm + nsp) / 2", _LOSS_HEAD + '''
    mlm = F.cross_entropy(mlm_logits.reshape(-1, V), mlm_labels.reshape(-1))
    nsp = F.cross_entropy(nsp_logits, nsp_labels)
    return (mlm + nsp) / 2, mlm, nsp
'''),
    Variant("bert_pretraining_loss", "binary cross-entropy on the second NSP logit", _LOSS_HEAD + '''
    mlm = F.cross_entropy(mlm_logits.reshape(-1, V), mlm_labels.reshape(-1))
    nsp = F.binary_cross_entropy_with_logits(nsp_logits[:, 1], nsp_labels.float())
    return mlm + nsp, mlm, nsp
'''),
    Variant("bert_pretraining_loss", "NSP labels flipped (1 - labels)", _LOSS_HEAD + '''
    mlm = F.cross_entropy(mlm_logits.reshape(-1, V), mlm_labels.reshape(-1))
    nsp = F.cross_entropy(nsp_logits, 1 - nsp_labels)
    return mlm + nsp, mlm, nsp
'''),
    Variant("bert_pretraining_loss", "log of softmax written by hand: inf for large logits", _LOSS_HEAD + '''
    keep = mlm_labels != -100
    p = torch.exp(mlm_logits[keep]) / torch.exp(mlm_logits[keep]).sum(-1, keepdim=True)
    mlm = -torch.log(p.gather(1, mlm_labels[keep][:, None])).mean()
    q = torch.exp(nsp_logits) / torch.exp(nsp_logits).sum(-1, keepdim=True)
    nsp = -torch.log(q.gather(1, nsp_labels[:, None])).mean()
    return mlm + nsp, mlm, nsp
'''),
    Variant("bert_pretraining_loss", "no shape checks: a 2-D mlm_logits or a short nsp_labels passes silently", '''
def bert_pretraining_loss(mlm_logits, mlm_labels, nsp_logits, nsp_labels):
    V = mlm_logits.shape[-1]
    mlm = F.cross_entropy(mlm_logits.reshape(-1, V), mlm_labels.reshape(-1))
    nsp = F.cross_entropy(nsp_logits[:len(nsp_labels)], nsp_labels)
    return mlm + nsp, mlm, nsp
'''),
    # ---------------------------------------------------------------- issue 25: holes that kept full marks
    Variant("make_nsp_examples", "the random sentence drawn uniformly over every sentence of the other documents "
            "(long documents favoured)", _NSP_HEAD + '''
    for d, doc in enumerate(documents):
        others = [s for e, other in enumerate(documents) if e != d for s in other]
        for i in range(len(doc) - 1):
            if coin():
                examples.append((doc[i], doc[i + 1], True))
            else:
                examples.append((doc[i], others[below(len(others))], False))
    return examples
'''),
    Variant("BertForPretraining", "no residual dropouts: dropout1 and dropout2 never applied", _BERT_INIT
            + _BERT_ENCODE.replace("layer.dropout1(layer.self_attn(x, x, x, keys)[0])",
                                   "layer.self_attn(x, x, x, keys)[0]")
            .replace("layer.dropout2(layer.ffn.linear2(gelu(layer.ffn.linear1(x))))",
                     "layer.ffn.linear2(gelu(layer.ffn.linear1(x)))")
            + _BERT_FORWARD),
    Variant("BertForPretraining", "dropout2 skipped on the feed-forward output", _BERT_INIT
            + _BERT_ENCODE.replace("layer.dropout2(layer.ffn.linear2(gelu(layer.ffn.linear1(x))))",
                                   "layer.ffn.linear2(gelu(layer.ffn.linear1(x)))")
            + _BERT_FORWARD),
]

# side rules (ValueError, in place) earned these points before issue 29; now they earn nothing
WRONG += [*do_nothing("build_pair_input", "raises ValueError"),
          *do_nothing("BertEmbeddings", "forward raises ValueError"), *do_nothing("mask_tokens", "raises ValueError"),
          *do_nothing("make_nsp_examples", "raises ValueError"),
          *do_nothing("bert_pretraining_loss", "raises ValueError")]

CORRECT = [
    Variant("gelu", "sigmoid(2z) instead of (1 + tanh(z)) / 2, constants written out", '''
def gelu(x):
    z = 0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3))
    return x * torch.sigmoid(2.0 * z)
'''),
    Variant("build_pair_input", "segments from the lengths, tuples turned into lists", '''
def build_pair_input(tokens_a, tokens_b, cls_id, sep_id):
    if len(tokens_a) == 0:
        raise ValueError("a BERT input needs a first sentence")
    first = [cls_id] + list(tokens_a) + [sep_id]
    second = [] if tokens_b is None else list(tokens_b) + [sep_id]
    return first + second, [0 for _ in first] + [1 for _ in second]
'''),
    Variant("BertEmbeddings", "nn.LayerNorm(eps=1e-12), a position-id buffer, dropout module named the same", '''
class BertEmbeddings(nn.Module):
    def __init__(self, vocab_size, d_model, max_len, num_segments=2, dropout=0.0):
        super().__init__()
        self.position = nn.Embedding(max_len, d_model)
        self.segment = nn.Embedding(num_segments, d_model)
        self.token = nn.Embedding(vocab_size, d_model)
        self.norm = nn.LayerNorm(d_model, eps=1e-12)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("position_ids", torch.arange(max_len)[None, :], persistent=False)

    def forward(self, input_ids, segment_ids=None):
        if input_ids.ndim != 2:
            raise ValueError("input_ids must be 2-D")
        T = input_ids.size(1)
        if T > self.position_ids.size(1):
            raise ValueError("too long")
        if segment_ids is not None and segment_ids.shape != input_ids.shape:
            raise ValueError("segment_ids must have the shape of input_ids")
        if segment_ids is None:
            segment_ids = input_ids.new_zeros(input_ids.shape)
        x = self.position(self.position_ids[:, :T]) + self.token(input_ids) + self.segment(segment_ids)
        return self.dropout(self.norm(x))
'''),
    Variant("mask_tokens", "Hugging Face's collator order: bernoulli matrices, 0.8 then 0.5 of the rest", '''
def mask_tokens(input_ids, vocab_size, mask_id, special_ids, mlm_probability=0.15, generator=None):
    if input_ids.ndim != 2 or not (0.0 <= mlm_probability <= 1.0):
        raise ValueError("input_ids must be (B, T) and mlm_probability in [0, 1]")
    labels = input_ids.clone()
    probability = torch.full(labels.shape, float(mlm_probability))
    special = torch.isin(labels, torch.tensor(sorted(special_ids)))
    probability.masked_fill_(special, 0.0)
    chosen = torch.bernoulli(probability, generator=generator).bool()
    labels[~chosen] = -100
    inputs = input_ids.clone()
    replaced = torch.bernoulli(torch.full(labels.shape, 0.8), generator=generator).bool() & chosen
    inputs[replaced] = mask_id
    randomised = torch.bernoulli(torch.full(labels.shape, 0.5), generator=generator).bool() & chosen & ~replaced
    words = torch.randint(vocab_size, labels.shape, dtype=torch.long, generator=generator)
    inputs[randomised] = words[randomised]
    return inputs, labels
'''),
    Variant("make_nsp_examples", "rejection sampling for the other document, examples built document by document", '''
def make_nsp_examples(documents, generator=None):
    if len(documents) < 2:
        raise ValueError("at least two documents")
    if not all(documents_i for documents_i in documents):
        raise ValueError("empty document")
    out = []
    for d, doc in enumerate(documents):
        for a, b in zip(doc[:-1], doc[1:]):
            if float(torch.rand(1, generator=generator)) >= 0.5:
                out.append((list(a), list(b), True))
                continue
            other = d
            while other == d:
                other = int(torch.randint(0, len(documents), (1,), generator=generator))
            sentences = documents[other]
            pick = int(torch.randint(0, len(sentences), (1,), generator=generator))
            out.append((list(a), list(sentences[pick]), False))
    return out
'''),
    Variant("BertForPretraining",
            "nn.LayerNorm(eps=1e-12) everywhere, F.linear for the tied decoder, a 0/1 mask turned bool", '''
class BertForPretraining(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, max_len=512, num_segments=2, dropout=0.0):
        super().__init__()
        if num_layers <= 0:
            raise ValueError("need at least one layer")
        self.embeddings = BertEmbeddings(vocab_size, d_model, max_len, num_segments, dropout)
        layers = []
        for _ in range(num_layers):
            layer = EncoderLayer(d_model, num_heads, d_ff, dropout)
            layer.norm1 = nn.LayerNorm(d_model, eps=1e-12)
            layer.norm2 = nn.LayerNorm(d_model, eps=1e-12)
            layers.append(layer)
        self.layers = nn.ModuleList(layers)
        self.pooler = nn.Linear(d_model, d_model)
        self.nsp_head = nn.Linear(d_model, 2)
        self.mlm_transform = nn.Linear(d_model, d_model)
        self.mlm_norm = nn.LayerNorm(d_model, eps=1e-12)
        self.mlm_bias = nn.Parameter(torch.zeros(vocab_size))

    def encode(self, input_ids, segment_ids, attention_mask=None):
        if input_ids.ndim != 2 or segment_ids.shape != input_ids.shape:
            raise ValueError("input_ids and segment_ids must both be (B, T)")
        if attention_mask is not None and attention_mask.shape != input_ids.shape:
            raise ValueError("attention_mask must be (B, T)")
        keys = None if attention_mask is None else (attention_mask != 0).unsqueeze(1).unsqueeze(2)
        hidden = self.embeddings(input_ids, segment_ids)
        for layer in self.layers:
            attended, _ = layer.self_attn(hidden, hidden, hidden, mask=keys)
            hidden = layer.norm1(hidden + layer.dropout1(attended))
            fed = layer.ffn.linear2(gelu(layer.ffn.linear1(hidden)))
            hidden = layer.norm2(hidden + layer.dropout2(fed))
        return hidden

    def forward(self, input_ids, segment_ids, attention_mask=None):
        hidden = self.encode(input_ids, segment_ids, attention_mask)
        scores = F.linear(self.mlm_norm(gelu(self.mlm_transform(hidden))), self.embeddings.token.weight, self.mlm_bias)
        cls = hidden[:, 0, :]
        return scores, self.nsp_head(self.pooler(cls).tanh())
'''),
    Variant("bert_pretraining_loss", "(B, V, T) layout for cross_entropy, log_softmax + gather for NSP", '''
def bert_pretraining_loss(mlm_logits, mlm_labels, nsp_logits, nsp_labels):
    if mlm_logits.ndim != 3 or tuple(mlm_labels.shape) != tuple(mlm_logits.shape[:2]):
        raise ValueError("bad MLM shapes")
    if nsp_logits.ndim != 2 or nsp_logits.shape[1] != 2 or tuple(nsp_labels.shape) != (mlm_logits.shape[0],) \\
            or nsp_logits.shape[0] != mlm_logits.shape[0]:
        raise ValueError("bad NSP shapes")
    mlm = F.cross_entropy(mlm_logits.transpose(1, 2), mlm_labels)
    nsp = -torch.log_softmax(nsp_logits, dim=-1).gather(1, nsp_labels[:, None]).mean()
    return mlm + nsp, mlm, nsp
'''),
]

# issue 29: an input changed in place must never write the expected value (the answer for zeros
# is the expected value of a check that computes it from the input after the call)
WRONG += [
    Variant("gelu", "zeroes the input in place and returns the answer for that", '''\
_ref_gelu = gelu

def gelu(x):
    x.zero_()
    return _ref_gelu(x)
'''),
]
