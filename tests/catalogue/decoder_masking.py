from tests.catalogue import Variant, do_nothing

# ------------------------------------------------------------------ pieces shared by several variants
_DECODER_INIT = '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = LayerNorm(d_model), LayerNorm(d_model), LayerNorm(d_model)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)
        self.cross_weights = None

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if x.shape[0] != memory.shape[0] or x.shape[2] != memory.shape[2]:
            raise ValueError("x and memory must agree in B and D")
'''

_TRANSFORMER_INIT = '''
class Transformer(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, dropout=0.0, max_len=256, pad_id=0):
        super().__init__()
        if num_layers < 1:
            raise ValueError("num_layers must be at least 1")
        self.pad_id = pad_id
        self.embedding = TokenEmbedding(vocab_size, d_model)
        nn.init.normal_(self.embedding.embedding.weight, std=d_model ** -0.5)
        self.positions = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout)
        self.decoder = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(self, src, tgt):
        return self.decode(tgt, self.encode(src), src)

    def _check(self, tgt, src):
        if tgt.dim() != 2 or src.dim() != 2 or tgt.shape[0] != src.shape[0]:
            raise ValueError("src and tgt must be (B, S) and (B, T) with the same B")
'''

_ENCODE = '''
    def encode(self, src):
        self._check(src, src)
        return self.encoder(self.positions(self.embedding(src)), padding_mask(src, self.pad_id))
'''

_DECODE = '''
    def decode(self, tgt, memory, src):
        self._check(tgt, src)
        tgt_mask = causal_mask(tgt.shape[1], tgt.device) & padding_mask(tgt, self.pad_id)
        x = self.positions(self.embedding(tgt))
        for layer in self.decoder:
            x = layer(x, memory, tgt_mask, padding_mask(src, self.pad_id))
        return x @ self.embedding.embedding.weight.T
'''

_GREEDY_HEAD = '''
def greedy_decode(model, src, max_len, start_id, end_id):
    if src.dim() != 2:
        raise ValueError("src should be (B, S)")
    if max_len < 1:
        raise ValueError("max_len must be at least 1")
'''

_NOAM_CHECK = '''
    if d_model < 1 or warmup_steps < 1:
        raise ValueError("d_model and warmup_steps must be positive")
'''

WRONG = [
    # ---------------------------------------------------------------- masks
    Variant("causal_mask", "transposed: True on and above the diagonal (queries see the future)", '''
def causal_mask(T, device=None):
    if T < 1:
        raise ValueError("T must be at least 1")
    return torch.ones(T, T, dtype=torch.bool, device=device).triu()
'''),
    Variant("causal_mask", "strictly below the diagonal: a token may not attend to itself", '''
def causal_mask(T, device=None):
    if T < 1:
        raise ValueError("T must be at least 1")
    return torch.ones(T, T, dtype=torch.bool, device=device).tril(-1)
'''),
    Variant("causal_mask", "float mask of ones and zeros instead of bool", '''
def causal_mask(T, device=None):
    if T < 1:
        raise ValueError("T must be at least 1")
    return torch.ones(T, T, device=device).tril()
'''),
    Variant("padding_mask", "polarity reversed: True on the padding", '''
def padding_mask(token_ids, pad_id):
    if token_ids.dim() != 2:
        raise ValueError("token_ids should be (B, S)")
    return (token_ids == pad_id)[:, None, None, :]
'''),
    Variant("padding_mask", "shaped (B, 1, S, 1): applied to the queries instead of the keys", '''
def padding_mask(token_ids, pad_id):
    if token_ids.dim() != 2:
        raise ValueError("token_ids should be (B, S)")
    return (token_ids != pad_id)[:, None, :, None]
'''),
    Variant("padding_mask", "pad_id ignored: always compares with 0", '''
def padding_mask(token_ids, pad_id):
    if token_ids.dim() != 2:
        raise ValueError("token_ids should be (B, S)")
    return (token_ids != 0)[:, None, None, :]
'''),
    # ---------------------------------------------------------------- DecoderLayer
    Variant("DecoderLayer", "tgt_mask used in cross-attention", _DECODER_INIT + '''
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)[0]))
        context, w = self.cross_attn(x, memory, memory, tgt_mask)
        self.cross_weights = w.detach()
        x = self.norm2(x + self.dropout2(context))
        return self.norm3(x + self.dropout3(self.ffn(x)))
'''),
    Variant("DecoderLayer", "cross-attention with memory as the query and x as keys and values", _DECODER_INIT + '''
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)[0]))
        context, w = self.cross_attn(memory, x, x)
        self.cross_weights = w.detach()
        x = self.norm2(x + self.dropout2(context))
        return self.norm3(x + self.dropout3(self.ffn(x)))
'''),
    Variant("DecoderLayer", "no residual connection around cross-attention", _DECODER_INIT + '''
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)[0]))
        context, w = self.cross_attn(x, memory, memory, memory_mask)
        self.cross_weights = w.detach()
        x = self.norm2(self.dropout2(context))
        return self.norm3(x + self.dropout3(self.ffn(x)))
'''),
    Variant("DecoderLayer", "Pre-LN order (norm before each sublayer) instead of the paper's Post-LN",
            _DECODER_INIT + '''
        h = self.norm1(x)
        x = x + self.dropout1(self.self_attn(h, h, h, tgt_mask)[0])
        context, w = self.cross_attn(self.norm2(x), memory, memory, memory_mask)
        self.cross_weights = w.detach()
        x = x + self.dropout2(context)
        return x + self.dropout3(self.ffn(self.norm3(x)))
'''),
    Variant("DecoderLayer", "norm2 and norm3 swapped", _DECODER_INIT + '''
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)[0]))
        context, w = self.cross_attn(x, memory, memory, memory_mask)
        self.cross_weights = w.detach()
        x = self.norm3(x + self.dropout2(context))
        return self.norm2(x + self.dropout3(self.ffn(x)))
'''),
    Variant("DecoderLayer", "memory_mask never used", _DECODER_INIT + '''
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)[0]))
        context, w = self.cross_attn(x, memory, memory)
        self.cross_weights = w.detach()
        x = self.norm2(x + self.dropout2(context))
        return self.norm3(x + self.dropout3(self.ffn(x)))
'''),
    Variant("DecoderLayer", "calls F.scaled_dot_product_attention for the cross-attention", _DECODER_INIT + '''
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)[0]))
        a, (B, T, D), S = self.cross_attn, x.shape, memory.shape[1]
        q = a.W_q(x).view(B, T, a.num_heads, -1).transpose(1, 2)
        k = a.W_k(memory).view(B, S, a.num_heads, -1).transpose(1, 2)
        v = a.W_v(memory).view(B, S, a.num_heads, -1).transpose(1, 2)
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=memory_mask)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if memory_mask is not None:
            scores = scores.masked_fill(~memory_mask, float("-inf"))
        self.cross_weights = scores.softmax(-1).detach()
        x = self.norm2(x + self.dropout2(a.W_o(context.transpose(1, 2).reshape(B, T, D))))
        return self.norm3(x + self.dropout3(self.ffn(x)))
'''),
    Variant("DecoderLayer", "dropout1..dropout3 created but never applied", _DECODER_INIT + '''
        x = self.norm1(x + self.self_attn(x, x, x, tgt_mask)[0])
        context, weights = self.cross_attn(x, memory, memory, memory_mask)
        self.cross_weights = weights.detach()
        x = self.norm2(x + context)
        return self.norm3(x + self.ffn(x))
'''),
    Variant("DecoderLayer", "dropout not passed on to the attentions and the feed-forward block", _DECODER_INIT.replace(
        "MultiHeadAttention(d_model, num_heads, dropout)", "MultiHeadAttention(d_model, num_heads)").replace(
        "PositionwiseFeedForward(d_model, d_ff, dropout)", "PositionwiseFeedForward(d_model, d_ff)") + '''
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)[0]))
        context, weights = self.cross_attn(x, memory, memory, memory_mask)
        self.cross_weights = weights.detach()
        x = self.norm2(x + self.dropout2(context))
        return self.norm3(x + self.dropout3(self.ffn(x)))
'''),
    Variant("DecoderLayer", "dropout on the residual sums instead of the sublayer outputs", _DECODER_INIT + '''
        x = self.norm1(self.dropout1(x + self.self_attn(x, x, x, tgt_mask)[0]))
        context, weights = self.cross_attn(x, memory, memory, memory_mask)
        self.cross_weights = weights.detach()
        x = self.norm2(self.dropout2(x + context))
        return self.norm3(self.dropout3(x + self.ffn(x)))
'''),
    # ---------------------------------------------------------------- Transformer
    Variant("Transformer", "table left at nn.Embedding's default N(0, 1) start", _TRANSFORMER_INIT.replace(
        "        nn.init.normal_(self.embedding.embedding.weight, std=d_model ** -0.5)\n", "") + _ENCODE + _DECODE),
    Variant("Transformer", "table started with Xavier (std sqrt(2 / (V + D))) instead of N(0, 1/D)",
            _TRANSFORMER_INIT.replace("nn.init.normal_(self.embedding.embedding.weight, std=d_model ** -0.5)",
                                      "nn.init.xavier_normal_(self.embedding.embedding.weight)") + _ENCODE + _DECODE),
    Variant("Transformer", "dropout not passed to the positions and the encoder", _TRANSFORMER_INIT.replace(
        "PositionalEncoding(d_model, max_len, dropout)", "PositionalEncoding(d_model, max_len)").replace(
        "Encoder(num_layers, d_model, num_heads, d_ff, dropout)", "Encoder(num_layers, d_model, num_heads, d_ff)")
        + _ENCODE + _DECODE),
    Variant("Transformer", "dropout on the embeddings with F.dropout, also in eval mode", _TRANSFORMER_INIT + '''
    def encode(self, src):
        self._check(src, src)
        x = self.positions(F.dropout(self.embedding(src), self.positions.dropout.p))
        return self.encoder(x, padding_mask(src, self.pad_id))
''' + _DECODE),
    Variant("Transformer", "separate output nn.Linear instead of tied weights", _TRANSFORMER_INIT.replace(
        "        self.decoder = nn.ModuleList(",
        "        self.output = nn.Linear(d_model, vocab_size, bias=False)\n        self.decoder = nn.ModuleList(")
        + _ENCODE + '''
    def decode(self, tgt, memory, src):
        self._check(tgt, src)
        tgt_mask = causal_mask(tgt.shape[1], tgt.device) & padding_mask(tgt, self.pad_id)
        x = self.positions(self.embedding(tgt))
        for layer in self.decoder:
            x = layer(x, memory, tgt_mask, padding_mask(src, self.pad_id))
        return self.output(x)
'''),
    Variant("Transformer", "no causal mask in the decoder (only target padding)", _TRANSFORMER_INIT + _ENCODE + '''
    def decode(self, tgt, memory, src):
        self._check(tgt, src)
        x = self.positions(self.embedding(tgt))
        for layer in self.decoder:
            x = layer(x, memory, padding_mask(tgt, self.pad_id), padding_mask(src, self.pad_id))
        return x @ self.embedding.embedding.weight.T
''', at_most=0.34),  # kept 2.54 of 4 before issue 39
    Variant("Transformer", "embeddings looked up without the sqrt(d_model) scale", _TRANSFORMER_INIT + '''
    def encode(self, src):
        self._check(src, src)
        return self.encoder(self.positions(self.embedding.embedding(src)), padding_mask(src, self.pad_id))

    def decode(self, tgt, memory, src):
        self._check(tgt, src)
        tgt_mask = causal_mask(tgt.shape[1], tgt.device) & padding_mask(tgt, self.pad_id)
        x = self.positions(self.embedding.embedding(tgt))
        for layer in self.decoder:
            x = layer(x, memory, tgt_mask, padding_mask(src, self.pad_id))
        return x @ self.embedding.embedding.weight.T
'''),
    Variant("Transformer", "source padding hidden in the encoder but not in cross-attention",
            _TRANSFORMER_INIT + _ENCODE + '''
    def decode(self, tgt, memory, src):
        self._check(tgt, src)
        tgt_mask = causal_mask(tgt.shape[1], tgt.device) & padding_mask(tgt, self.pad_id)
        x = self.positions(self.embedding(tgt))
        for layer in self.decoder:
            x = layer(x, memory, tgt_mask)
        return x @ self.embedding.embedding.weight.T
'''),
    Variant("Transformer", "no padding mask in the encoder", _TRANSFORMER_INIT + '''
    def encode(self, src):
        self._check(src, src)
        return self.encoder(self.positions(self.embedding(src)))

    def decode(self, tgt, memory, src):
        self._check(tgt, src)
        tgt_mask = causal_mask(tgt.shape[1], tgt.device) & padding_mask(tgt, self.pad_id)
        x = self.positions(self.embedding(tgt))
        for layer in self.decoder:
            x = layer(x, memory, tgt_mask, padding_mask(src, self.pad_id))
        return x @ self.embedding.embedding.weight.T
'''),
    # ---------------------------------------------------------------- greedy_decode
    Variant("greedy_decode", "does not stop at end_id: always runs to max_len", _GREEDY_HEAD + '''
    with torch.no_grad():
        memory = model.encode(src)
        out = torch.full((src.shape[0], 1), start_id, dtype=torch.long)
        while out.shape[1] < max_len:
            nxt = model.decode(out, memory, src)[:, -1].argmax(-1)
            out = torch.cat([out, nxt[:, None]], dim=1)
    return out
'''),
    Variant("greedy_decode", "forgets the start token in the output", _GREEDY_HEAD + '''
    with torch.no_grad():
        memory = model.encode(src)
        out = torch.full((src.shape[0], 1), start_id, dtype=torch.long)
        done = torch.zeros(src.shape[0], dtype=torch.bool)
        while out.shape[1] < max_len and not done.all():
            nxt = model.decode(out, memory, src)[:, -1].argmax(-1).masked_fill(done, end_id)
            out = torch.cat([out, nxt[:, None]], dim=1)
            done |= nxt == end_id
    return out[:, 1:]
'''),
    Variant("greedy_decode", "picks the next token from the first position's logits", _GREEDY_HEAD + '''
    with torch.no_grad():
        memory = model.encode(src)
        out = torch.full((src.shape[0], 1), start_id, dtype=torch.long)
        done = torch.zeros(src.shape[0], dtype=torch.bool)
        while out.shape[1] < max_len and not done.all():
            nxt = model.decode(out, memory, src)[:, 0].argmax(-1).masked_fill(done, end_id)
            out = torch.cat([out, nxt[:, None]], dim=1)
            done |= nxt == end_id
    return out
'''),
    Variant("greedy_decode", "finished rows keep generating instead of repeating end_id", _GREEDY_HEAD + '''
    with torch.no_grad():
        memory = model.encode(src)
        out = torch.full((src.shape[0], 1), start_id, dtype=torch.long)
        done = torch.zeros(src.shape[0], dtype=torch.bool)
        while out.shape[1] < max_len and not done.all():
            nxt = model.decode(out, memory, src)[:, -1].argmax(-1)
            out = torch.cat([out, nxt[:, None]], dim=1)
            done |= nxt == end_id
    return out
'''),
    Variant("greedy_decode", "no torch.no_grad: gradients tracked at every step", _GREEDY_HEAD + '''
    memory = model.encode(src)
    out = torch.full((src.shape[0], 1), start_id, dtype=torch.long)
    done = torch.zeros(src.shape[0], dtype=torch.bool)
    while out.shape[1] < max_len and not done.all():
        nxt = model.decode(out, memory, src)[:, -1].argmax(-1).masked_fill(done, end_id)
        out = torch.cat([out, nxt[:, None]], dim=1)
        done |= nxt == end_id
    return out
'''),
    Variant("greedy_decode", "re-encodes the source at every step", _GREEDY_HEAD + '''
    with torch.no_grad():
        out = torch.full((src.shape[0], 1), start_id, dtype=torch.long)
        done = torch.zeros(src.shape[0], dtype=torch.bool)
        while out.shape[1] < max_len and not done.all():
            nxt = model.decode(out, model.encode(src), src)[:, -1].argmax(-1).masked_fill(done, end_id)
            out = torch.cat([out, nxt[:, None]], dim=1)
            done |= nxt == end_id
    return out
'''),
    # ---------------------------------------------------------------- label smoothing
    Variant("label_smoothing_distribution", "smoothing / C on every class (torch's convention)", '''
def label_smoothing_distribution(targets, num_classes, smoothing):
    if num_classes < 2 or not 0 <= smoothing < 1:
        raise ValueError("bad arguments")
    if targets.numel() and (targets.min() < 0 or targets.max() >= num_classes):
        raise ValueError("target out of range")
    return (1 - smoothing) * F.one_hot(targets, num_classes).float() + smoothing / num_classes
'''),
    Variant("label_smoothing_distribution", "adds 1 - smoothing to the target instead of setting it", '''
def label_smoothing_distribution(targets, num_classes, smoothing):
    if num_classes < 2 or not 0 <= smoothing < 1:
        raise ValueError("bad arguments")
    if targets.numel() and (targets.min() < 0 or targets.max() >= num_classes):
        raise ValueError("target out of range")
    q = torch.full((len(targets), num_classes), smoothing / (num_classes - 1))
    q[torch.arange(len(targets)), targets] += 1 - smoothing
    return q
'''),
    Variant("label_smoothing_distribution", "no argument checks", '''
def label_smoothing_distribution(targets, num_classes, smoothing):
    q = torch.full((len(targets), num_classes), smoothing / (num_classes - 1))
    q[torch.arange(len(targets)), targets] = 1 - smoothing
    return q
'''),
    Variant("label_smoothed_loss", "averages over the ignored rows too", '''
def label_smoothed_loss(logits, targets, smoothing, ignore_index=-100):
    if logits.dim() != 2 or targets.shape != logits.shape[:1] or not 0 <= smoothing < 1:
        raise ValueError("bad arguments")
    keep = targets != ignore_index
    q = label_smoothing_distribution(targets.clamp(min=0), logits.shape[1], smoothing)
    kl = (torch.xlogy(q, q) - q * torch.log_softmax(logits, -1)).sum(-1)
    return (kl * keep).sum() / len(targets)
'''),
    Variant("label_smoothed_loss", "cross-entropy with the smoothed target (no entropy term), not the KL", '''
def label_smoothed_loss(logits, targets, smoothing, ignore_index=-100):
    if logits.dim() != 2 or targets.shape != logits.shape[:1] or not 0 <= smoothing < 1:
        raise ValueError("bad arguments")
    keep = targets != ignore_index
    q = label_smoothing_distribution(targets[keep], logits.shape[1], smoothing)
    return -(q * torch.log_softmax(logits[keep], -1)).sum(-1).mean()
'''),
    Variant("label_smoothed_loss", "log of softmax without the max shift (overflows for large logits)", '''
def label_smoothed_loss(logits, targets, smoothing, ignore_index=-100):
    if logits.dim() != 2 or targets.shape != logits.shape[:1] or not 0 <= smoothing < 1:
        raise ValueError("bad arguments")
    keep = targets != ignore_index
    q = label_smoothing_distribution(targets[keep], logits.shape[1], smoothing)
    e = torch.exp(logits[keep])
    log_p = torch.log(e / e.sum(-1, keepdim=True))
    return (torch.xlogy(q, q) - q * log_p).sum(-1).mean()
'''),
    Variant("label_smoothed_loss", "calls F.cross_entropy with label_smoothing", '''
def label_smoothed_loss(logits, targets, smoothing, ignore_index=-100):
    if logits.dim() != 2 or targets.shape != logits.shape[:1] or not 0 <= smoothing < 1:
        raise ValueError("bad arguments")
    C = logits.shape[1]
    keep = targets != ignore_index
    q = label_smoothing_distribution(targets[keep], C, smoothing)
    entropy = -torch.xlogy(q, q).sum(-1).mean()
    ce = F.cross_entropy(logits, targets, ignore_index=ignore_index, label_smoothing=smoothing * C / (C - 1))
    return ce - entropy
'''),
    # ---------------------------------------------------------------- Noam
    Variant("noam_learning_rate", "step 0 does not raise (returns 0)", '''
def noam_learning_rate(step, d_model, warmup_steps, factor=1.0):''' + _NOAM_CHECK + '''
    if step == 0:
        return 0.0
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)
'''),
    Variant("noam_learning_rate", "warm-up branch step * warmup**-0.5 (wrong exponent)", '''
def noam_learning_rate(step, d_model, warmup_steps, factor=1.0):''' + _NOAM_CHECK + '''
    if step < 1:
        raise ValueError("step counts from 1")
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -0.5)
'''),
    Variant("noam_learning_rate", "max instead of min of the two branches", '''
def noam_learning_rate(step, d_model, warmup_steps, factor=1.0):''' + _NOAM_CHECK + '''
    if step < 1:
        raise ValueError("step counts from 1")
    return factor * d_model ** -0.5 * max(step ** -0.5, step * warmup_steps ** -1.5)
'''),
    Variant("noam_learning_rate", "factor applied outside the d_model scale as d_model**0.5", '''
def noam_learning_rate(step, d_model, warmup_steps, factor=1.0):''' + _NOAM_CHECK + '''
    if step < 1:
        raise ValueError("step counts from 1")
    return factor * d_model ** 0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)
'''),
    # ---------------------------------------------------------------- issue 25: holes that kept full marks
    Variant("greedy_decode", "puts the model in training mode before decoding", _GREEDY_HEAD + '''
    model.train()
    with torch.no_grad():
        memory = model.encode(src)
        out = torch.full((src.shape[0], 1), start_id, dtype=torch.long)
        done = torch.zeros(src.shape[0], dtype=torch.bool)
        while out.shape[1] < max_len and not done.all():
            nxt = model.decode(out, memory, src)[:, -1].argmax(-1).masked_fill(done, end_id)
            out = torch.cat([out, nxt[:, None]], dim=1)
            done |= nxt == end_id
    return out
'''),
]

# side rules (ValueError, in place) earned these points before issue 29; now they earn nothing
WRONG += [*do_nothing("causal_mask", "raises ValueError"), *do_nothing("padding_mask", "raises ValueError"),
          *do_nothing("DecoderLayer", "forward raises ValueError"), *do_nothing("greedy_decode", "raises ValueError"),
          *do_nothing("label_smoothing_distribution", "raises ValueError"),
          *do_nothing("label_smoothed_loss", "raises ValueError"),
          *do_nothing("noam_learning_rate", "raises ValueError")]

CORRECT = [
    Variant("causal_mask", "comparison of position indices", '''
def causal_mask(T, device=None):
    if T <= 0:
        raise ValueError(f"need T >= 1, got {T}")
    i = torch.arange(T, device=device)
    return i[None, :] <= i[:, None]
'''),
    Variant("padding_mask", "ne + unsqueeze twice", '''
def padding_mask(token_ids, pad_id):
    if token_ids.ndim != 2:
        raise ValueError("expected (B, S) ids")
    return token_ids.ne(pad_id).unsqueeze(1).unsqueeze(2)
'''),
    Variant("DecoderLayer", "sublayers written with explicit intermediate names", _DECODER_INIT + '''
        self_out, _ = self.self_attn(x, x, x, mask=tgt_mask)
        h1 = self.norm1(x + self.dropout1(self_out))
        cross_out, self.cross_weights = self.cross_attn(query=h1, key=memory, value=memory, mask=memory_mask)
        h2 = self.norm2(h1 + self.dropout2(cross_out))
        return self.norm3(h2 + self.dropout3(self.ffn(h2)))
'''),
    Variant("Transformer", "causal mask only (no target padding), F.linear for the tied output",
            _TRANSFORMER_INIT + _ENCODE + '''
    def decode(self, tgt, memory, src):
        self._check(tgt, src)
        x = self.positions(self.embedding(tgt))
        for layer in self.decoder:
            x = layer(x, memory, tgt_mask=causal_mask(tgt.shape[1]), memory_mask=padding_mask(src, self.pad_id))
        return F.linear(x, self.embedding.embedding.weight)
'''),
    Variant("greedy_decode", "python loop over steps with a list of columns", _GREEDY_HEAD + '''
    with torch.no_grad():
        memory = model.encode(src)
        columns = [torch.full((src.shape[0],), start_id, dtype=torch.long)]
        finished = torch.zeros(src.shape[0], dtype=torch.bool)
        for _ in range(max_len - 1):
            if bool(finished.all()):
                break
            logits = model.decode(torch.stack(columns, dim=1), memory, src)
            token = torch.where(finished, torch.full_like(columns[0], end_id), logits[:, -1, :].argmax(dim=-1))
            columns.append(token)
            finished = finished | token.eq(end_id)
        return torch.stack(columns, dim=1)
'''),
    Variant("greedy_decode", "puts the model in eval mode itself, torch.inference_mode", _GREEDY_HEAD + '''
    model.eval()
    with torch.inference_mode():
        memory = model.encode(src)
        out = torch.full((src.shape[0], 1), start_id, dtype=torch.long, device=src.device)
        finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
        for _ in range(max_len - 1):
            if finished.all():
                break
            logits = model.decode(out, memory, src)
            nxt = torch.where(finished, torch.full_like(finished, end_id, dtype=torch.long), logits[:, -1].argmax(-1))
            out = torch.cat([out, nxt.unsqueeze(1)], dim=1)
            finished = finished | (nxt == end_id)
    return out.clone()
'''),
    Variant("label_smoothing_distribution", "one_hot blend", '''
def label_smoothing_distribution(targets, num_classes, smoothing):
    if num_classes < 2:
        raise ValueError("need at least two classes")
    if smoothing < 0 or smoothing >= 1:
        raise ValueError("smoothing must be in [0, 1)")
    if ((targets < 0) | (targets >= num_classes)).any():
        raise ValueError("targets out of range")
    one_hot = F.one_hot(targets.long(), num_classes).float()
    return one_hot * (1 - smoothing) + (1 - one_hot) * smoothing / (num_classes - 1)
'''),
    Variant("label_smoothed_loss", "weighted sum with a keep mask, logsumexp by hand", '''
def label_smoothed_loss(logits, targets, smoothing, ignore_index=-100):
    if logits.ndim != 2 or targets.ndim != 1 or len(targets) != len(logits):
        raise ValueError("shapes")
    if not (0 <= smoothing < 1):
        raise ValueError("smoothing")
    keep = (targets != ignore_index).float()
    safe = torch.where(targets == ignore_index, torch.zeros_like(targets), targets)
    q = label_smoothing_distribution(safe, logits.shape[1], smoothing)
    m = logits.max(dim=1, keepdim=True).values
    log_p = logits - m - torch.log(torch.exp(logits - m).sum(dim=1, keepdim=True))
    neg_entropy = torch.where(q > 0, q * torch.log(q.clamp_min(1e-30)), torch.zeros_like(q)).sum(1)
    kl = neg_entropy - (q * log_p).sum(1)
    return (kl * keep).sum() / keep.sum()
'''),
    Variant("noam_learning_rate", "two branches with an if", '''
def noam_learning_rate(step, d_model, warmup_steps, factor=1.0):
    if step < 1 or d_model < 1 or warmup_steps < 1:
        raise ValueError("step, d_model and warmup_steps must all be >= 1")
    scale = factor / math.sqrt(d_model)
    if step < warmup_steps:
        return scale * step / warmup_steps ** 1.5
    return scale / math.sqrt(step)
'''),
]

# issue 29: an input changed in place must never write the expected value (the answer for zeros
# is the expected value of a check that computes it from the input after the call)
WRONG += [
    Variant("padding_mask", "fills the input with pad_id in place and returns the answer for that", '''\
_ref_padding_mask = padding_mask

def padding_mask(token_ids, pad_id):
    token_ids.fill_(pad_id)
    return _ref_padding_mask(token_ids, pad_id)
'''),
]
