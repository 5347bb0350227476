from tests.catalogue import Variant, do_nothing


def _mutate(source: str, *edits: tuple[str, str]) -> str:
    """The source with each (old, new) replaced once; fails loudly when `old` is not there."""
    for old, new in edits:
        if source.count(old) != 1:
            raise ValueError(f"catalogue edit does not apply exactly once: {old!r}")
        source = source.replace(old, new)
    return source


# A learner's GPT, written differently from the reference: its own attention with F.softmax, a
# helper method, chunk instead of split. It is correct; the mistakes below are edits of it.
_GPT = '''
class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, d_model, dropout=0.0):
        super().__init__()
        if d_model % n_head:
            raise ValueError("d_model must be divisible by n_head")
        self.block_size, self.n_head = block_size, n_head
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(block_size, d_model)
        self.blocks = nn.ModuleList()
        for _ in range(n_layer):
            self.blocks.append(nn.ModuleDict(dict(
                ln_1=LayerNorm(d_model), qkv=nn.Linear(d_model, 3 * d_model), attn_out=nn.Linear(d_model, d_model),
                ln_2=LayerNorm(d_model), mlp_in=nn.Linear(d_model, 4 * d_model),
                mlp_out=nn.Linear(4 * d_model, d_model))))
        self.ln_f = LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def attend(self, block, x, past):
        B, T, D = x.shape
        H = self.n_head
        q, k, v = block.qkv(block.ln_1(x)).chunk(3, dim=-1)
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        S = k.shape[2]
        scores = q @ k.transpose(-2, -1) / math.sqrt(D // H)
        allowed = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = self.drop(F.softmax(scores, dim=-1))
        out = (weights @ v).transpose(1, 2).reshape(B, T, D)
        return block.attn_out(out), (k, v)

    def forward(self, idx, cache=None, use_cache=False):
        if idx.dim() != 2:
            raise ValueError("idx should be (B, T)")
        B, T = idx.shape
        start = 0 if cache is None else cache[0][0].shape[2]
        if start + T > self.block_size:
            raise ValueError("the sequence is longer than block_size")
        pos = torch.arange(start, start + T, device=idx.device)
        x = self.drop(self.token_embedding(idx) + self.position_embedding(pos))
        new_cache = []
        for i, block in enumerate(self.blocks):
            a, kv = self.attend(block, x, None if cache is None else cache[i])
            new_cache.append(kv)
            x = x + self.drop(a)
            x = x + self.drop(block.mlp_out(F.gelu(block.mlp_in(block.ln_2(x)), approximate="tanh")))
        logits = self.ln_f(x) @ self.token_embedding.weight.T
        if use_cache:
            return logits, new_cache
        return logits
'''

_TOP_P_HEAD = '''
def top_p_filter(logits, p):
    if not 0 < p <= 1:
        raise ValueError("p must be in (0, 1]")
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
'''

_SAMPLE_HEAD = '''
def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if logits.dim() != 2:
        raise ValueError("logits should be (B, V)")
    if temperature < 0:
        raise ValueError("temperature must be >= 0")
    if temperature == 0:
        return logits.argmax(dim=-1)
'''

_GENERATE = '''
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None, use_cache=False):
    if idx.dim() != 2:
        raise ValueError("idx should be (B, T0)")
    if max_new_tokens < 0:
        raise ValueError("max_new_tokens must be >= 0")
    bs = model.block_size
    cache = None
    with torch.no_grad():
        for _ in range(max_new_tokens):
            if use_cache and cache is not None and cache_len < bs:
                logits, cache = model(idx[:, -1:], cache=cache, use_cache=True)
                cache_len += 1
            elif use_cache:
                logits, cache = model(idx[:, -bs:], use_cache=True)
                cache_len = min(idx.shape[1], bs)
            else:
                logits = model(idx[:, -bs:])
            nxt = sample_next_token(logits[:, -1], temperature, top_k, top_p, generator)
            idx = torch.cat([idx, nxt[:, None]], dim=1)
    return idx
'''

_BEAM = '''
def beam_search(model, idx, max_new_tokens, beam_width, eos_id=None):
    if idx.dim() != 2 or idx.shape[0] != 1:
        raise ValueError("idx should be (1, T0)")
    if beam_width < 1 or max_new_tokens < 0:
        raise ValueError("bad beam_width or max_new_tokens")
    live, done = [(0.0, idx[0].tolist())], []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            if not live:
                break
            batch = torch.tensor([seq for _, seq in live])[:, -model.block_size:]
            log_probs = torch.log_softmax(model(batch)[:, -1].double(), dim=-1)
            candidates = []
            for (score, seq), row in zip(live, log_probs.tolist()):
                for tok, lp in enumerate(row):
                    if eos_id is not None and tok == eos_id:
                        done.append((score + lp, seq + [tok]))
                    else:
                        candidates.append((score + lp, seq + [tok]))
            candidates.sort(key=lambda c: c[0], reverse=True)
            live = candidates[:beam_width]
    best = max(done + live, key=lambda c: c[0])
    return torch.tensor([best[1]])
'''

_TRAIN_BPE = '''
def train_bpe(text, num_merges):
    if num_merges < 0:
        raise ValueError("num_merges must be >= 0")
    ids = list(text.encode("utf-8"))
    merges = []
    for i in range(num_merges):
        stats = {}
        for pair in zip(ids, ids[1:]):
            stats[pair] = stats.get(pair, 0) + 1
        if not stats:
            break
        best = max(stats, key=stats.get)
        out, j = [], 0
        while j < len(ids):
            if j < len(ids) - 1 and (ids[j], ids[j + 1]) == best:
                out.append(256 + i)
                j += 2
            else:
                out.append(ids[j])
                j += 1
        ids = out
        merges.append(best)
    return merges
'''

_ENCODE = '''
def bpe_encode(text, merges):
    rank = {tuple(p): i for i, p in enumerate(merges)}
    ids = list(text.encode("utf-8"))
    while len(ids) >= 2:
        pair = min(zip(ids, ids[1:]), key=lambda p: rank.get(p, float("inf")))
        if pair not in rank:
            break
        new, out, j = 256 + rank[pair], [], 0
        while j < len(ids):
            if j < len(ids) - 1 and (ids[j], ids[j + 1]) == pair:
                out.append(new)
                j += 2
            else:
                out.append(ids[j])
                j += 1
        ids = out
    return ids
'''

_DECODE = '''
def bpe_decode(ids, merges):
    vocab = {i: bytes([i]) for i in range(256)}
    for i, (a, b) in enumerate(merges):
        vocab[256 + i] = vocab[a] + vocab[b]
    for i in ids:
        if i not in vocab:
            raise ValueError(f"unknown id {i}")
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")
'''

WRONG = [
    # ---------------------------------------------------------------- GPT
    Variant("GPT", "Post-LN blocks (norm after the residual sum) instead of GPT-2's Pre-LN", _mutate(
        _GPT, ("block.qkv(block.ln_1(x))", "block.qkv(x)"),
        ("x = x + self.drop(a)", "x = block.ln_1(x + self.drop(a))"),
        ("x = x + self.drop(block.mlp_out(F.gelu(block.mlp_in(block.ln_2(x)), approximate=\"tanh\")))",
         "x = block.ln_2(x + self.drop(block.mlp_out(F.gelu(block.mlp_in(x), approximate=\"tanh\"))))"))),
    Variant("GPT", "no final LayerNorm before the output layer", _mutate(
        _GPT, ("logits = self.ln_f(x) @", "logits = x @"))),
    Variant("GPT", "GELU with erf (F.gelu's default) instead of GPT-2's tanh form", _mutate(
        _GPT, ("F.gelu(block.mlp_in(block.ln_2(x)), approximate=\"tanh\")", "F.gelu(block.mlp_in(block.ln_2(x)))"))),
    Variant("GPT", "no causal mask: every position sees the future", _mutate(
        _GPT, ("        scores = scores.masked_fill(~allowed, float(\"-inf\"))\n", ""))),
    Variant("GPT", "KV cache without the position offset: new tokens get positions 0, 1, ...", _mutate(
        _GPT, ("pos = torch.arange(start, start + T, device=idx.device)", "pos = torch.arange(T, device=idx.device)"))),
    # issue 39: the mask built from a cache length read off the wrong axis ended in "mask (2, 4) does not
    # broadcast" (the check's GPT has 2 blocks and 2 heads, so len(cache) and axis 1 both give 2)
    Variant("GPT", "cache length read as len(cache) (the number of blocks), the mask built from it", _mutate(
        _GPT, ("start = 0 if cache is None else cache[0][0].shape[2]", "start = 0 if cache is None else len(cache)"),
        ("a, kv = self.attend(block, x, None if cache is None else cache[i])",
         "a, kv = self.attend(block, x, None if cache is None else cache[i], start)"),
        ("def attend(self, block, x, past):", "def attend(self, block, x, past, start=0):"),
        ("        S = k.shape[2]\n", "        S = start + T\n"))),
    Variant("GPT", "causal mask not shifted by the cache length (tril() on a (T, S) mask)", _mutate(
        _GPT, (".tril(S - T)", ".tril()"))),
    Variant("GPT", "scores divided by sqrt(d_model) instead of sqrt(head dim)", _mutate(
        _GPT, ("/ math.sqrt(D // H)", "/ math.sqrt(D)"))),
    Variant("GPT", "F.dropout on the attention weights without training=self.training (drops in eval)", _mutate(
        _GPT, ("weights = self.drop(F.softmax(scores, dim=-1))",
               "weights = F.dropout(F.softmax(scores, dim=-1), self.drop.p)"))),
    Variant("GPT", "a separate output layer instead of the tied token embedding", _mutate(
        _GPT, ("        self.ln_f = LayerNorm(d_model)\n",
               "        self.ln_f = LayerNorm(d_model)\n"
               "        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)\n"),
        ("logits = self.ln_f(x) @ self.token_embedding.weight.T", "logits = self.lm_head(self.ln_f(x))"))),
    Variant("GPT", "the cache passed in is updated in place", _mutate(
        _GPT, ("            new_cache.append(kv)\n",
               "            new_cache.append(kv)\n"
               "            if cache is not None:\n                cache[i] = kv\n"))),
    Variant("GPT", "q, k, v split per head (view (B, T, H, 3*Dh)) instead of side by side", _mutate(
        _GPT, ("q, k, v = block.qkv(block.ln_1(x)).chunk(3, dim=-1)\n"
               "        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))",
               "qkv = block.qkv(block.ln_1(x)).view(B, T, H, 3 * (D // H))\n"
               "        q, k, v = (t.transpose(1, 2) for t in qkv.chunk(3, dim=-1))"))),
    Variant("GPT", "no ValueError beyond block_size (the embedding raises IndexError)", _mutate(
        _GPT, ("        if start + T > self.block_size:\n"
               "            raise ValueError(\"the sequence is longer than block_size\")\n", ""))),
    Variant("GPT", "PyTorch's default initialisation instead of GPT-2's N(0, 0.02^2)", _mutate(
        _GPT, ("        for m in self.modules():\n            if isinstance(m, (nn.Linear, nn.Embedding)):\n"
               "                nn.init.normal_(m.weight, 0.0, 0.02)\n"
               "            if isinstance(m, nn.Linear) and m.bias is not None:\n"
               "                nn.init.zeros_(m.bias)\n", ""))),
    # ---------------------------------------------------------------- next_token_targets
    Variant("next_token_targets", "inputs and targets swapped", '''
def next_token_targets(idx):
    if idx.dim() != 2 or idx.shape[1] < 2:
        raise ValueError("idx should be (B, T) with T >= 2")
    return idx[:, 1:], idx[:, :-1]
'''),
    Variant("next_token_targets", "sliced along the batch axis", '''
def next_token_targets(idx):
    if idx.dim() != 2 or idx.shape[1] < 2:
        raise ValueError("idx should be (B, T) with T >= 2")
    return idx[:-1], idx[1:]
'''),
    Variant("next_token_targets", "no ValueError for a sequence of one token", '''
def next_token_targets(idx):
    return idx[:, :-1], idx[:, 1:]
'''),
    # ---------------------------------------------------------------- apply_temperature
    Variant("apply_temperature", "multiplies by the temperature", '''
def apply_temperature(logits, temperature):
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    return logits * temperature
'''),
    Variant("apply_temperature", "divides in place (changes the caller's logits)", '''
def apply_temperature(logits, temperature):
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    logits /= temperature
    return logits
'''),
    Variant("apply_temperature", "no ValueError for temperature 0", '''
def apply_temperature(logits, temperature):
    return logits / temperature
'''),
    # ---------------------------------------------------------------- top_k_filter
    Variant("top_k_filter", "keeps exactly k indices from topk (ties at the k-th value dropped)", '''
def top_k_filter(logits, k):
    if k < 1:
        raise ValueError("k must be >= 1")
    k = min(k, logits.shape[-1])
    idx = torch.topk(logits, k, dim=-1).indices
    out = torch.full_like(logits, float("-inf"))
    return out.scatter(-1, idx, logits.gather(-1, idx))
'''),
    Variant("top_k_filter", "returns the caller's own logits when k >= V (the docstring says a new tensor)", '''
def top_k_filter(logits, k):
    if k < 1:
        raise ValueError("k must be >= 1")
    if k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))
'''),
    Variant("top_k_filter", "one threshold for the whole batch (broken for batch > 1)", '''
def top_k_filter(logits, k):
    if k < 1:
        raise ValueError("k must be >= 1")
    if k >= logits.shape[-1]:
        return logits.clone()
    kth = torch.topk(logits, k, dim=-1).values.min()
    return logits.masked_fill(logits < kth, float("-inf"))
'''),
    Variant("top_k_filter", "off by one: the (k+1)-th largest as the threshold", '''
def top_k_filter(logits, k):
    if k < 1:
        raise ValueError("k must be >= 1")
    if k >= logits.shape[-1]:
        return logits.clone()
    kth = torch.sort(logits, dim=-1, descending=True).values[..., k:k + 1]
    return logits.masked_fill(logits < kth, float("-inf"))
'''),
    Variant("top_k_filter", "filters in place", '''
def top_k_filter(logits, k):
    if k < 1:
        raise ValueError("k must be >= 1")
    if k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    logits[logits < kth] = float("-inf")
    return logits
'''),
    Variant("top_k_filter", "k > V crashes in torch.topk", '''
def top_k_filter(logits, k):
    if k < 1:
        raise ValueError("k must be >= 1")
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))
'''),
    # ---------------------------------------------------------------- top_p_filter
    Variant("top_p_filter", "inclusive cumulative sum <= p: drops the token that crosses p",
            _TOP_P_HEAD + '''
    keep_sorted = sorted_probs.cumsum(dim=-1) <= p
    keep_sorted[..., 0] = True
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))
'''),
    Variant("top_p_filter", "mass before the token <= p: keeps one too many at the boundary",
            _TOP_P_HEAD + '''
    keep_sorted = sorted_probs.cumsum(dim=-1) - sorted_probs <= p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))
'''),
    Variant("top_p_filter", "the sorted mask applied to the unsorted logits (forgot to scatter back)",
            _TOP_P_HEAD + '''
    keep = sorted_probs.cumsum(dim=-1) - sorted_probs < p
    return logits.masked_fill(~keep, float("-inf"))
'''),
    Variant("top_p_filter", "inclusive cumulative sum < p with no guard: the top token can be dropped",
            _TOP_P_HEAD + '''
    keep_sorted = sorted_probs.cumsum(dim=-1) < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))
'''),
    # ---------------------------------------------------------------- sample_next_token
    Variant("sample_next_token", "temperature applied after the filters (it changes the nucleus)",
            _SAMPLE_HEAD + '''
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    logits = apply_temperature(logits, temperature)
    return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)[:, 0]
'''),
    Variant("sample_next_token", "top-p before top-k (the nucleus measured on the unfiltered distribution)",
            _SAMPLE_HEAD + '''
    logits = apply_temperature(logits, temperature)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)[:, 0]
'''),
    Variant("sample_next_token", "draws from the global RNG (ignores generator)", _SAMPLE_HEAD + '''
    logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return torch.multinomial(torch.softmax(logits, dim=-1), 1)[:, 0]
'''),
    Variant("sample_next_token", "returns (B, 1) instead of (B,)", _SAMPLE_HEAD + '''
    logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
'''),
    Variant("sample_next_token", "softmax over the batch axis", _SAMPLE_HEAD + '''
    logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return torch.multinomial(torch.softmax(logits, dim=0), 1, generator=generator)[:, 0]
'''),
    Variant("sample_next_token", "temperature 0 not treated as greedy (dividing by it raises)", '''
def sample_next_token(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if logits.dim() != 2:
        raise ValueError("logits should be (B, V)")
    logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)[:, 0]
'''),
    # ---------------------------------------------------------------- generate
    Variant("generate", "no cropping: the whole sequence goes to the model", _mutate(
        _GENERATE, ("logits = model(idx[:, -bs:])", "logits = model(idx)"))),
    Variant("generate", "crops the FIRST block_size tokens instead of the last", _mutate(
        _GENERATE, ("logits = model(idx[:, -bs:])", "logits = model(idx[:, :bs])"))),
    Variant("generate", "the cache is never restarted: fails once it holds block_size positions", _mutate(
        _GENERATE, ("cache is not None and cache_len < bs", "cache is not None"))),
    Variant("generate", "slides a full cache (drops its oldest position) instead of restarting it", _mutate(
        _GENERATE, ("""            if use_cache and cache is not None and cache_len < bs:
                logits, cache""", """            if use_cache and cache is not None:
                if cache_len == bs:
                    cache = [(k[:, :, 1:], v[:, :, 1:]) for k, v in cache]
                    cache_len -= 1
                logits, cache"""))),
    Variant("generate", "keeps the prompt's cache: every step gets the same stale cache", _mutate(
        _GENERATE, ("logits, cache = model(idx[:, -1:], cache=cache, use_cache=True)",
                    "logits, _ = model(idx[:, -1:], cache=cache, use_cache=True)"))),
    Variant("generate", "the generator is not passed on (sampling from the global RNG)", _mutate(
        _GENERATE, ("temperature, top_k, top_p, generator)", "temperature, top_k, top_p)"))),
    Variant("generate", "runs with gradients enabled (no torch.no_grad)", _mutate(
        _GENERATE, ("    with torch.no_grad():\n", "    if True:\n"))),
    # issue 39: mistakes that ended in a raw error of the check's model, each named by the public check now
    Variant("generate", "feeds the whole window with the cache, not only the newest token", _mutate(
        _GENERATE, ("logits, cache = model(idx[:, -1:], cache=cache, use_cache=True)",
                    "logits, cache = model(idx[:, -bs:], cache=cache, use_cache=True)"))),
    Variant("generate", "the newest token as idx[:, -1], a (B,) vector without the time axis", _mutate(
        _GENERATE, ("logits, cache = model(idx[:, -1:], cache=cache, use_cache=True)",
                    "logits, cache = model(idx[:, -1], cache=cache, use_cache=True)"))),
    Variant("generate", "the prompt is fed again with the cache (positions counted twice)", _mutate(
        _GENERATE, ("logits, cache = model(idx[:, -1:], cache=cache, use_cache=True)",
                    "logits, cache = model(idx[:, -1:], use_cache=True)"))),
    # ---------------------------------------------------------------- beam_search
    Variant("beam_search", "compares the AVERAGE log-probability per token instead of the total", _mutate(
        _BEAM, ("best = max(done + live, key=lambda c: c[0])",
                "best = max(done + live, key=lambda c: c[0] / (len(c[1]) - idx.shape[1]))"))),
    Variant("beam_search", "forgets eos: finished beams are extended like any other", _mutate(
        _BEAM, ("if eos_id is not None and tok == eos_id:", "if False:"))),
    Variant("beam_search", "scores with raw logits instead of log-probabilities", _mutate(
        _BEAM, ("log_probs = torch.log_softmax(model(batch)[:, -1].double(), dim=-1)",
                "log_probs = model(batch)[:, -1].double()"))),
    Variant("beam_search", "finished beams dropped: only the live beams compete at the end", _mutate(
        _BEAM, ("best = max(done + live, key=lambda c: c[0])",
                "best = max(live or done, key=lambda c: c[0])"))),
    Variant("beam_search", "keeps the first beam_width candidates without sorting them", _mutate(
        _BEAM, ("            candidates.sort(key=lambda c: c[0], reverse=True)\n", ""))),
    Variant("beam_search", "no cropping to block_size", _mutate(
        _BEAM, ("[:, -model.block_size:]", ""))),
    # ---------------------------------------------------------------- train_bpe
    Variant("train_bpe", "merge step advances by one: overlapping occurrences merged ('aaa' -> 2 tokens)", _mutate(
        _TRAIN_BPE, ("                out.append(256 + i)\n                j += 2",
                     "                out.append(256 + i)\n                j += 1"))),
    Variant("train_bpe", "ties broken by the smallest pair of ids instead of first occurrence", _mutate(
        _TRAIN_BPE, ("best = max(stats, key=stats.get)", "best = min(stats, key=lambda p: (-stats[p], p))"))),
    Variant("train_bpe", "ties broken by the largest pair of ids (sorting by (count, pair))", _mutate(
        _TRAIN_BPE, ("best = max(stats, key=stats.get)", "best = max(stats, key=lambda p: (stats[p], p))"))),
    Variant("train_bpe", "pairs counted without overlaps (str.count-style), unlike minbpe", _mutate(
        _TRAIN_BPE, ("            stats[pair] = stats.get(pair, 0) + 1",
                     "            stats[pair] = 0\n        for pair in stats:\n            stats[pair] = "
                     "''.join(map(chr, ids)).count(chr(pair[0]) + chr(pair[1]))"))),
    Variant("train_bpe", "no early stop: max() of an empty count raises once no pair is left", _mutate(
        _TRAIN_BPE, ("        if not stats:\n            break\n", ""))),
    Variant("train_bpe", "code points (ord) instead of UTF-8 bytes", _mutate(
        _TRAIN_BPE, ("ids = list(text.encode(\"utf-8\"))", "ids = [ord(c) for c in text]"))),
    Variant("train_bpe", "no ValueError for a negative num_merges", _mutate(
        _TRAIN_BPE, ("    if num_merges < 0:\n        raise ValueError(\"num_merges must be >= 0\")\n", ""))),
    # ---------------------------------------------------------------- bpe_encode
    Variant("bpe_encode", "merges the most FREQUENT known pair instead of the lowest merge index", '''
def bpe_encode(text, merges):
    rank = {tuple(p): i for i, p in enumerate(merges)}
    ids = list(text.encode("utf-8"))
    while True:
        counts = {}
        for pair in zip(ids, ids[1:]):
            if pair in rank:
                counts[pair] = counts.get(pair, 0) + 1
        if not counts:
            return ids
        pair = max(counts, key=counts.get)
        out, j = [], 0
        while j < len(ids):
            if j < len(ids) - 1 and (ids[j], ids[j + 1]) == pair:
                out.append(256 + rank[pair])
                j += 2
            else:
                out.append(ids[j])
                j += 1
        ids = out
'''),
    Variant("bpe_encode", "greedy left to right on a stack (merges whatever pair it meets first)", '''
def bpe_encode(text, merges):
    rank = {tuple(p): i for i, p in enumerate(merges)}
    out = []
    for b in text.encode("utf-8"):
        cur = b
        while out and (out[-1], cur) in rank:
            cur = 256 + rank[(out.pop(), cur)]
        out.append(cur)
    return out
'''),
    Variant("bpe_encode", "merges applied in reverse order (newest first)", '''
def bpe_encode(text, merges):
    ids = list(text.encode("utf-8"))
    for i in reversed(range(len(merges))):
        a, b = merges[i]
        out, j = [], 0
        while j < len(ids):
            if j < len(ids) - 1 and ids[j] == a and ids[j + 1] == b:
                out.append(256 + i)
                j += 2
            else:
                out.append(ids[j])
                j += 1
        ids = out
    return ids
'''),
    Variant("bpe_encode", "code points (ord) instead of UTF-8 bytes", _mutate(
        _ENCODE, ("ids = list(text.encode(\"utf-8\"))", "ids = [ord(c) for c in text]"))),
    Variant("bpe_encode", "overlapping occurrences merged", _mutate(
        _ENCODE, ("                out.append(new)\n                j += 2",
                  "                out.append(new)\n                j += 1"))),
    # ---------------------------------------------------------------- bpe_decode
    Variant("bpe_decode", "decodes each token on its own, then joins the strings", _mutate(
        _DECODE, ("return b\"\".join(vocab[i] for i in ids).decode(\"utf-8\", errors=\"replace\")",
                  "return \"\".join(vocab[i].decode(\"utf-8\", errors=\"replace\") for i in ids)"))),
    Variant("bpe_decode", "errors='strict' (raises on a cut character)", _mutate(
        _DECODE, ("errors=\"replace\"", "errors=\"strict\""))),
    Variant("bpe_decode", "errors='ignore' (drops a cut character silently)", _mutate(
        _DECODE, ("errors=\"replace\"", "errors=\"ignore\""))),
    Variant("bpe_decode", "a merge expands one level only (bytes([a, b]))", _mutate(
        _DECODE, ("vocab[256 + i] = vocab[a] + vocab[b]", "vocab[256 + i] = bytes([a % 256, b % 256])"))),
    Variant("bpe_decode", "unknown ids raise KeyError instead of ValueError", _mutate(
        _DECODE, ("    for i in ids:\n        if i not in vocab:\n"
                  "            raise ValueError(f\"unknown id {i}\")\n", ""))),
    # ---------------------------------------------------------------- issue 25: holes that kept full marks
    Variant("GPT", "no dropout on the attention weights (embeddings and sublayer outputs only)", _mutate(
        _GPT, ("weights = self.drop(F.softmax(scores, dim=-1))", "weights = F.softmax(scores, dim=-1)"))),
    Variant("GPT", "no dropout on the sublayer outputs (embeddings and attention weights only)", _mutate(
        _GPT, ("x = x + self.drop(a)", "x = x + a"),
        ("x = x + self.drop(block.mlp_out(", "x = x + (block.mlp_out("))),
    Variant("generate", "switches the model to eval, then back to train at the end (an eval model leaves in train)",
            _mutate(_GENERATE, ("    with torch.no_grad():\n", "    model.eval()\n    with torch.no_grad():\n"),
                    ("    return idx\n", "    model.train()\n    return idx\n"))),
    Variant("next_token_targets", "converts to int64 with .long() (an int32 idx comes back int64)", '''
def next_token_targets(idx):
    if idx.dim() != 2 or idx.shape[1] < 2:
        raise ValueError("idx should be (B, T) with T >= 2")
    return idx[:, :-1].long(), idx[:, 1:].long()
'''),
    Variant("top_k_filter", "the k-th value as values[:, -1], a (B,) vector: RuntimeError against (B, V)", '''
def top_k_filter(logits, k):
    if k < 1:
        raise ValueError("k must be >= 1")
    if k >= logits.shape[-1]:
        return logits.clone()
    kth = torch.topk(logits, k, dim=-1).values[:, -1]
    return logits.masked_fill(logits < kth, float("-inf"))
'''),
    Variant("top_k_filter", "the k-th value as values[:, -1:] (right for (B, V) only)", '''
def top_k_filter(logits, k):
    if k < 1:
        raise ValueError("k must be >= 1")
    if k >= logits.shape[-1]:
        return logits.clone()
    kth = torch.topk(logits, k, dim=-1).values[:, -1:]
    return logits.masked_fill(logits < kth, float("-inf"))
'''),
]

# issue 46: mistakes the public checks passed (only the hidden tests failed them), one with full marks, and
# mistakes a check answered with expected and actual values where it could name them
WRONG += [
    Variant("beam_search", "beam search runs with gradients enabled (no torch.no_grad)", _mutate(
        _BEAM, ("    with torch.no_grad():\n", "    if True:\n"))),
    Variant("beam_search", "eos candidates kept live (never set aside); the result cut at its first eos", _mutate(
        _BEAM, ("                    if eos_id is not None and tok == eos_id:\n"
                "                        done.append((score + lp, seq + [tok]))\n"
                "                    else:\n"
                "                        candidates.append((score + lp, seq + [tok]))\n",
                "                    candidates.append((score + lp, seq + [tok]))\n"),
        ("    best = max(done + live, key=lambda c: c[0])\n    return torch.tensor([best[1]])",
         "    best = max(live, key=lambda c: c[0])[1]\n"
         "    if eos_id is not None and eos_id in best[idx.shape[1]:]:\n"
         "        best = best[:best.index(eos_id, idx.shape[1]) + 1]\n"
         "    return torch.tensor([best])"))),
    Variant("apply_temperature", "float64 logits come back float32 (.float())", '''
def apply_temperature(logits, temperature):
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    return logits.float() / temperature
'''),
    Variant("sample_next_token", "temperature applied to the probabilities after the softmax (no effect)",
            _SAMPLE_HEAD + '''
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    probs = apply_temperature(torch.softmax(logits, dim=-1), temperature)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]
'''),
    Variant("GPT", "checks T > block_size but not cached + new tokens (S + T)", _mutate(
        _GPT, ("if start + T > self.block_size:", "if T > self.block_size:"))),
    Variant("GPT", "q, k, v read from qkv in the order k, q, v", _mutate(
        _GPT, ("q, k, v = block.qkv(block.ln_1(x)).chunk(3, dim=-1)",
               "k, q, v = block.qkv(block.ln_1(x)).chunk(3, dim=-1)"))),
    Variant("GPT", "q, k, v read interleaved from qkv (features 0, 3, 6, ... are q)", _mutate(
        _GPT, ("q, k, v = block.qkv(block.ln_1(x)).chunk(3, dim=-1)",
               "q, k, v = block.qkv(block.ln_1(x)).view(B, T, D, 3).unbind(-1)"))),
    Variant("next_token_targets", "targets equal to the inputs (no shift)", '''
def next_token_targets(idx):
    if idx.dim() != 2 or idx.shape[1] < 2:
        raise ValueError("idx should be (B, T) with T >= 2")
    return idx[:, :-1], idx[:, :-1]
'''),
    Variant("train_bpe", "each distinct pair counted once (a set of pairs: every count is 1)", _mutate(
        _TRAIN_BPE, ("            stats[pair] = stats.get(pair, 0) + 1", "            stats[pair] = 1"))),
    Variant("train_bpe", "pairs counted at even positions only (zip(ids[::2], ids[1::2]))", _mutate(
        _TRAIN_BPE, ("        for pair in zip(ids, ids[1:]):", "        for pair in zip(ids[::2], ids[1::2]):"))),
]

# side rules (ValueError, in place) earned these points before issue 29; now they earn nothing
WRONG += [*do_nothing("GPT", "forward returns None", "forward raises ValueError"),
          *do_nothing("next_token_targets", "raises ValueError"),
          *do_nothing("apply_temperature", "raises ValueError"), *do_nothing("sample_next_token", "raises ValueError"),
          *do_nothing("generate", "returns None", "raises ValueError"),
          *do_nothing("beam_search", "raises ValueError"), *do_nothing("train_bpe", "raises ValueError")]

CORRECT = [
    Variant("GPT", "own attention with F.softmax in a helper method, chunk instead of split", _GPT),
    Variant("next_token_targets", "narrow instead of slicing", '''
def next_token_targets(idx):
    if idx.dim() != 2 or idx.size(1) < 2:
        raise ValueError(f"idx must be (B, T) with T >= 2, got {tuple(idx.shape)}")
    T = idx.size(1)
    return idx.narrow(1, 0, T - 1), idx.narrow(1, 1, T - 1)
'''),
    Variant("top_k_filter", "sort-free: torch.kthvalue on the negated logits", '''
def top_k_filter(logits, k):
    if k < 1:
        raise ValueError("k must be >= 1")
    if k >= logits.shape[-1]:
        return logits.clone()
    kth = -torch.kthvalue(-logits, k, dim=-1, keepdim=True).values
    return torch.where(logits < kth, torch.full_like(logits, float("-inf")), logits)
'''),
    Variant("top_p_filter", "ascending sort, drop while the cumulative mass <= 1 - p (Hugging Face's way)", '''
def top_p_filter(logits, p):
    if not 0 < p <= 1:
        raise ValueError("p must be in (0, 1]")
    sorted_logits, order = torch.sort(logits, dim=-1)
    cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    drop = cum <= 1 - p
    drop[..., -1] = False
    drop = drop.scatter(-1, order, drop)
    return logits.masked_fill(drop, float("-inf"))
'''),
    Variant("sample_next_token", "Gumbel-max: argmax of logits plus Gumbel noise", _SAMPLE_HEAD + '''
    logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    u = torch.rand(logits.shape, generator=generator).clamp_(1e-12, 1 - 1e-7)
    return (logits - torch.log(-torch.log(u))).argmax(dim=-1)
'''),
    Variant("sample_next_token", "inverse CDF: cumulative probabilities and searchsorted", _SAMPLE_HEAD + '''
    logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    cdf = torch.softmax(logits.double(), dim=-1).cumsum(dim=-1)
    u = torch.rand(logits.shape[0], 1, generator=generator, dtype=torch.float64) * cdf[:, -1:]
    return torch.searchsorted(cdf, u)[:, 0].clamp_max(logits.shape[-1] - 1)
'''),
    Variant("generate", "a preallocated output tensor and a cache length taken from the window", '''
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None, use_cache=False):
    if idx.ndim != 2:
        raise ValueError("idx must be 2-D")
    if max_new_tokens < 0:
        raise ValueError("max_new_tokens must be non-negative")
    B, T0 = idx.shape
    out = torch.empty(B, T0 + max_new_tokens, dtype=idx.dtype, device=idx.device)
    out[:, :T0] = idx
    cache, window = None, 0
    with torch.no_grad():
        for t in range(T0, T0 + max_new_tokens):
            if not use_cache:
                logits = model(out[:, max(0, t - model.block_size):t])
            elif cache is None or window == model.block_size:
                start = max(0, t - model.block_size)
                logits, cache = model(out[:, start:t], use_cache=True)
                window = t - start
            else:
                logits, cache = model(out[:, t - 1:t], cache=cache, use_cache=True)
                window += 1
            out[:, t] = sample_next_token(logits[:, -1], temperature, top_k, top_p, generator)
    return out
'''),
    Variant("beam_search", "recursive: each call expands the beam by one step", '''
def beam_search(model, idx, max_new_tokens, beam_width, eos_id=None):
    if idx.dim() != 2 or idx.shape[0] != 1:
        raise ValueError("one prompt only: idx must be (1, T0)")
    if beam_width < 1 or max_new_tokens < 0:
        raise ValueError("beam_width >= 1 and max_new_tokens >= 0 required")

    def expand(beams, finished, steps_left):
        if steps_left == 0 or not beams:
            return max(finished + beams, key=lambda b: b[0])
        with torch.no_grad():
            seqs = torch.cat([s for _, s in beams])
            logp = model(seqs[:, -model.block_size:])[:, -1].double().log_softmax(-1)
        nxt = []
        for (score, seq), row in zip(beams, logp):
            for tok in range(row.shape[0]):
                cand = (score + row[tok].item(), torch.cat([seq, torch.tensor([[tok]])], 1))
                (finished if tok == eos_id else nxt).append(cand)
        nxt.sort(key=lambda b: -b[0])
        return expand(nxt[:beam_width], finished, steps_left - 1)

    return expand([(0.0, idx)], [], max_new_tokens)[1]
'''),
    Variant("train_bpe", "code points as ids: Counter and str.replace (both C speed)", '''
from collections import Counter

def train_bpe(text, num_merges):
    if num_merges < 0:
        raise ValueError("num_merges must be >= 0")
    seq = "".join(chr(b) for b in text.encode("utf-8"))
    merges = []
    for i in range(num_merges):
        counts = Counter(zip(seq, seq[1:]))
        if not counts:
            break
        (a, b), _ = counts.most_common(1)[0]
        seq = seq.replace(a + b, chr(256 + i))
        merges.append((ord(a), ord(b)))
    return merges
'''),
    Variant("bpe_encode", "every merge in rank order with str.replace on code points", '''
def bpe_encode(text, merges):
    seq = "".join(chr(b) for b in text.encode("utf-8"))
    for i, (a, b) in enumerate(merges):
        seq = seq.replace(chr(a) + chr(b), chr(256 + i))
    return [ord(c) for c in seq]
'''),
    Variant("bpe_decode", "recursive expansion into a bytearray", '''
def bpe_decode(ids, merges):
    n = 256 + len(merges)
    buf = bytearray()

    def put(i):
        if i < 256:
            buf.append(i)
        else:
            a, b = merges[i - 256]
            put(a)
            put(b)

    for i in ids:
        if not 0 <= i < n:
            raise ValueError(f"id {i} is not in [0, {n})")
        put(i)
    return buf.decode("utf-8", "replace")
'''),
]

# issue 29: an input changed in place must never write the expected value (the answer for zeros
# is the expected value of a check that computes it from the input after the call)
WRONG += [
    Variant("apply_temperature", "zeroes the input in place and returns the answer for that", '''\
_ref_apply_temperature = apply_temperature

def apply_temperature(logits, temperature):
    logits.zero_()
    return _ref_apply_temperature(logits, temperature)
'''),
]
