"""Chapter 07 helpers: the generated corpus, batching, Hugging Face weight loading and plots.

Nothing here is an answer to an exercise: functions that need an exercise take YOUR function or
class as an argument, and every plot takes tensors you computed.

The corpus ("a tiny world of four topics")
------------------------------------------
A document has a topic (river, money, kitchen or football) and a main character (a name with
its pronoun). Its first sentence introduces them, every later sentence is drawn from a small
grammar, always with words of the document's topic:

    first    -> NAME went to the PLACE .
    sentence -> PRON VERB the NOUN .
              | PRON VERB the ADJ NOUN in the PLACE .
              | the NOUN was ADJ .
              | then NAME VERB a NOUN with POSS NOUN .
              | BANK                                    (river and money documents only)
    BANK     -> PRON sat on the bank near the NOUN .      river: the words around "bank" say which bank
              | PRON went to the bank for a NOUN .        money: the words around "bank" say which bank
              | the bank was ADJ .                        either topic: only the ADJ, AFTER "bank", says which

A document has 4 to 7 sentences. Each later sentence of a river or money document is a BANK
sentence with probability 0.3 (its two forms equally likely); otherwise the four other rules are
equally likely. NAME, PRON (she/he) and POSS (her/his) are the document's character throughout;
PLACE, NOUN, VERB and ADJ are drawn uniformly from the topic's own word lists. "bank" is the one
word that two topics share, with two meanings.
"""
from __future__ import annotations

import random

import matplotlib.pyplot as plt
import torch

from course import tr

SPECIALS = ["[PAD]", "[CLS]", "[SEP]", "[MASK]"]
PAD, CLS, SEP, MASK = 0, 1, 2, 3
NEXT, RANDOM = 0, 1  # NSP classes, as in BERT's code: 0 = "b follows a", 1 = "b is random"

TOPICS = {
    "river": {
        "PLACE": ["river", "lake", "forest", "valley"],
        "NOUN": ["boat", "fish", "duck", "reed", "stone", "frog", "net", "tent"],
        "VERB": ["caught", "watched", "rowed", "fed", "painted", "followed"],
        "ADJ": ["muddy", "green", "quiet", "cold"],
    },
    "money": {
        "PLACE": ["city", "office", "market", "town"],
        "NOUN": ["loan", "coin", "account", "cheque", "salary", "debt", "card", "budget"],
        "VERB": ["paid", "saved", "counted", "borrowed", "signed", "checked"],
        "ADJ": ["rich", "late", "large", "safe"],
    },
    "kitchen": {
        "PLACE": ["kitchen", "cafe", "bakery", "canteen"],
        "NOUN": ["soup", "bread", "onion", "pan", "spoon", "cake", "pepper", "kettle"],
        "VERB": ["cooked", "sliced", "baked", "stirred", "tasted", "washed"],
        "ADJ": ["hot", "sweet", "fresh", "salty"],
    },
    "football": {
        "PLACE": ["stadium", "pitch", "field", "club"],
        "NOUN": ["ball", "goal", "coach", "team", "whistle", "boot", "match", "referee"],
        "VERB": ["kicked", "scored", "passed", "won", "missed", "trained"],
        "ADJ": ["fast", "tired", "loud", "tall"],
    },
}
TOPIC_NAMES = list(TOPICS)
BANK_TOPICS = ("river", "money")
NAMES = {"anna": "she", "ben": "he", "clara": "she", "david": "he", "emma": "she", "felix": "he",
         "grace": "she", "henry": "he"}
POSSESSIVE = {"she": "her", "he": "his"}
FUNCTION_WORDS = ["the", "a", "to", "went", "in", "was", "then", "with", "sat", "on", "near", "for",
                  "bank", "she", "he", "her", "his", "."]

# Sentence kinds (what the grammar rule was), kept with each sentence for the experiments.
INTRO, SIMPLE, PLACE_SENTENCE, DESCRIBE, THEN = "intro", "simple", "place", "describe", "then"
BANK_RIVER, BANK_MONEY, BANK_DESCRIBED = "bank-river", "bank-money", "bank-described"
BANK_KINDS = (BANK_RIVER, BANK_MONEY, BANK_DESCRIBED)


def _vocabulary() -> list[str]:
    words = list(SPECIALS) + FUNCTION_WORDS + list(NAMES)
    for topic in TOPICS.values():
        for kind in ("PLACE", "NOUN", "VERB", "ADJ"):
            words += topic[kind]
    if len(set(words)) != len(words):
        raise AssertionError("a word appears twice in the vocabulary")
    return words


VOCAB = _vocabulary()
WORD_TO_ID = {w: i for i, w in enumerate(VOCAB)}
VOCAB_SIZE = len(VOCAB)
SPECIAL_IDS = (PAD, CLS, SEP, MASK)
BANK = WORD_TO_ID["bank"]


def encode(text: str) -> list[int]:
    """Words separated by spaces -> ids (every word must be in the vocabulary)."""
    return [WORD_TO_ID[w] for w in text.split()]


def decode(ids) -> str:
    """Ids -> words separated by spaces (padding left out)."""
    return " ".join(VOCAB[int(i)] for i in ids if int(i) != PAD)


class Corpus:
    """Documents of the tiny world, generated from a seed (see the module docstring for the grammar).

    Attributes:
        documents: list of documents; a document is a list of sentences, a sentence a list of ids.
        topics: the topic name of each document; kinds: for each document, each sentence's rule.
    """

    def __init__(self, num_documents: int, min_sentences: int = 4, max_sentences: int = 7, seed: int = 0):
        rng = random.Random(seed)
        self.documents, self.topics, self.kinds = [], [], []
        for _ in range(num_documents):
            topic = rng.choice(TOPIC_NAMES)
            name = rng.choice(list(NAMES))
            n = rng.randint(min_sentences, max_sentences)
            sentences = [(INTRO, self.sentence(INTRO, topic, name, rng))]
            for _ in range(n - 1):
                kind = self.draw_kind(topic, rng)
                sentences.append((kind, self.sentence(kind, topic, name, rng)))
            self.documents.append([encode(s) for _, s in sentences])
            self.kinds.append([k for k, _ in sentences])
            self.topics.append(topic)

    @staticmethod
    def draw_kind(topic: str, rng: random.Random) -> str:
        if topic in BANK_TOPICS and rng.random() < 0.3:
            local = BANK_RIVER if topic == "river" else BANK_MONEY
            return rng.choice([local, BANK_DESCRIBED])
        return rng.choice([SIMPLE, PLACE_SENTENCE, DESCRIBE, THEN])

    @staticmethod
    def sentence(kind: str, topic: str, name: str, rng: random.Random, words: dict | None = None) -> str:
        words = TOPICS[topic] if words is None else words
        pron = NAMES[name]

        def pick(slot: str) -> str:
            return rng.choice(words[slot])

        if kind == INTRO:
            return f"{name} went to the {pick('PLACE')} ."
        if kind == SIMPLE:
            return f"{pron} {pick('VERB')} the {pick('NOUN')} ."
        if kind == PLACE_SENTENCE:
            return f"{pron} {pick('VERB')} the {pick('ADJ')} {pick('NOUN')} in the {pick('PLACE')} ."
        if kind == DESCRIBE:
            return f"the {pick('NOUN')} was {pick('ADJ')} ."
        if kind == THEN:
            return f"then {name} {pick('VERB')} a {pick('NOUN')} with {POSSESSIVE[pron]} {pick('NOUN')} ."
        if kind == BANK_RIVER:
            return f"{pron} sat on the bank near the {pick('NOUN')} ."
        if kind == BANK_MONEY:
            return f"{pron} went to the bank for a {pick('NOUN')} ."
        if kind == BANK_DESCRIBED:
            return f"the bank was {pick('ADJ')} ."
        raise ValueError(f"unknown sentence kind {kind!r}")

    def topic_sentences(self, per_topic: int, half: int, seed: int) -> tuple[list[list[int]], torch.Tensor]:
        """Single sentences of the four topics for the few-label task (no introductions, no "bank"):
        (sentences, labels (N,) topic index). Each sentence uses only one HALF of every topic word list
        (half 0: the words at even positions, half 1: at odd positions), so sentences of half 0 and
        half 1 share no topic word at all."""
        rng = random.Random(seed)
        sentences, labels = [], []
        for _ in range(per_topic):
            for label, topic in enumerate(TOPIC_NAMES):
                words = {slot: TOPICS[topic][slot][half::2] for slot in ("PLACE", "NOUN", "VERB", "ADJ")}
                kind = rng.choice([SIMPLE, PLACE_SENTENCE, DESCRIBE, THEN])
                sentences.append(encode(self.sentence(kind, topic, rng.choice(list(NAMES)), rng, words)))
                labels.append(label)
        order = rng.sample(range(len(labels)), len(labels))
        return [sentences[i] for i in order], torch.tensor([labels[i] for i in order])

    def bank_occurrences(self):
        """Every "bank" sentence: (sentence, sense, late), sense 0 = river bank, 1 = money bank;
        late = only a word AFTER "bank" says which (the "the bank was ADJ ." sentences)."""
        out = []
        for doc, kinds, topic in zip(self.documents, self.kinds, self.topics):
            for sentence, kind in zip(doc, kinds):
                if kind in BANK_KINDS:
                    out.append((sentence, BANK_TOPICS.index(topic), kind == BANK_DESCRIBED))
        return out


def is_introduction(sentence) -> bool:
    """Whether a sentence is a document's first one, "NAME went to the PLACE ." (no other rule starts
    with a name followed by "went")."""
    ids = [int(i) for i in sentence]
    return len(ids) > 1 and VOCAB[ids[0]] in NAMES and VOCAB[ids[1]] == "went"


def pad_batch(rows: list[list[int]], pad_value: int = PAD) -> torch.Tensor:
    """Lists of different lengths -> (B, T) int64, padded on the right."""
    T = max(len(r) for r in rows)
    return torch.tensor([r + [pad_value] * (T - len(r)) for r in rows], dtype=torch.long)


def pair_batch(pairs, build_pair_input) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(a, b) sentence pairs (b may be None) -> input_ids, segment_ids, attention_mask, each (B, T).

    Uses YOUR build_pair_input for every row; attention_mask is True on real tokens."""
    built = [build_pair_input(a, b, CLS, SEP) for a, b in pairs]
    input_ids = pad_batch([ids for ids, _ in built])
    segment_ids = pad_batch([seg for _, seg in built], pad_value=0)
    return input_ids, segment_ids, input_ids != PAD


def nsp_batches(documents, batch_size: int, make_nsp_examples, build_pair_input, generator: torch.Generator):
    """Endless pretraining batches (input_ids, segment_ids, attention_mask, nsp_labels), each (B, T) or (B,).

    Every pass over the corpus draws fresh sentence pairs with YOUR make_nsp_examples and shuffles them;
    rows are built with YOUR build_pair_input. nsp_labels use BERT's classes: NEXT = 0, RANDOM = 1."""
    while True:
        examples = make_nsp_examples(documents, generator)
        order = torch.randperm(len(examples), generator=generator).tolist()
        for start in range(0, len(order) - batch_size + 1, batch_size):
            chunk = [examples[i] for i in order[start:start + batch_size]]
            yield nsp_batch(chunk, build_pair_input)


def nsp_batch(examples, build_pair_input):
    """(a, b, is_next) triples -> input_ids, segment_ids, attention_mask, nsp_labels."""
    input_ids, segment_ids, attention_mask = pair_batch([(a, b) for a, b, _ in examples], build_pair_input)
    nsp_labels = torch.tensor([NEXT if is_next else RANDOM for _, _, is_next in examples])
    return input_ids, segment_ids, attention_mask, nsp_labels


def most_frequent_baseline(labels: torch.Tensor, corpus_ids: torch.Tensor) -> tuple[str, float]:
    """The accuracy of always predicting the token most frequent in `corpus_ids` (specials left out),
    on the labelled positions of `labels` (-100 elsewhere)."""
    counts = torch.bincount(corpus_ids.reshape(-1), minlength=VOCAB_SIZE).clone()
    counts[list(SPECIAL_IDS)] = 0
    best = int(counts.argmax())
    targets = labels[labels != -100]
    return VOCAB[best], (targets == best).float().mean().item()


@torch.no_grad()
def layer_states(model, input_ids, segment_ids, attention_mask) -> list[torch.Tensor]:
    """The vectors after the embeddings and after each encoder layer, [(B, T, D), ...], of one
    model.encode call. They are read with forward hooks on model.embeddings and on each layer's
    norm2 (the last module a BERT layer runs), so any BertForPretraining with the documented parts works."""
    states = []
    modules = [model.embeddings] + [layer.norm2 for layer in model.layers]
    hooks = [m.register_forward_hook(lambda module, inputs, output: states.append(output)) for m in modules]
    try:
        model.encode(input_ids, segment_ids, attention_mask)
    finally:
        for hook in hooks:
            hook.remove()
    return states


# ---------------------------------------------------------------- loading real BERT weights

def hf_bert_name_map(num_layers: int) -> dict[str, str]:
    """course parameter name -> Hugging Face BertForPreTraining state-dict key."""
    names = {
        "embeddings.token.weight": "bert.embeddings.word_embeddings.weight",
        "embeddings.segment.weight": "bert.embeddings.token_type_embeddings.weight",
        "embeddings.position.weight": "bert.embeddings.position_embeddings.weight",
        "mlm_bias": "cls.predictions.bias",
    }
    pairs = {"embeddings.norm": "bert.embeddings.LayerNorm",
             "mlm_transform": "cls.predictions.transform.dense",
             "mlm_norm": "cls.predictions.transform.LayerNorm",
             "pooler": "bert.pooler.dense",
             "nsp_head": "cls.seq_relationship"}
    for i in range(num_layers):
        hf = f"bert.encoder.layer.{i}."
        pairs.update({
            f"layers.{i}.self_attn.W_q": hf + "attention.self.query",
            f"layers.{i}.self_attn.W_k": hf + "attention.self.key",
            f"layers.{i}.self_attn.W_v": hf + "attention.self.value",
            f"layers.{i}.self_attn.W_o": hf + "attention.output.dense",
            f"layers.{i}.norm1": hf + "attention.output.LayerNorm",
            f"layers.{i}.ffn.linear1": hf + "intermediate.dense",
            f"layers.{i}.ffn.linear2": hf + "output.dense",
            f"layers.{i}.norm2": hf + "output.LayerNorm",
        })
    for ours, theirs in pairs.items():
        names[f"{ours}.weight"] = f"{theirs}.weight"
        names[f"{ours}.bias"] = f"{theirs}.bias"
    return names


def load_hf_bert(model: torch.nn.Module, hf_state) -> torch.nn.Module:
    """Copy the weights of a Hugging Face `BertForPreTraining` (the model or its state dict) into a
    course BertForPretraining, by name; returns the model.

    The MLM decoder of Hugging Face's model is tied to the word embeddings, so the course model's
    tied token table carries it. Raises ValueError when a parameter has no counterpart or a shape
    differs (for example a model built with another vocab_size, d_model or num_layers)."""
    state = hf_state.state_dict() if hasattr(hf_state, "state_dict") else dict(hf_state)
    ours = dict(model.named_parameters())
    num_layers = len(getattr(model, "layers", []))
    names = hf_bert_name_map(num_layers)
    missing = sorted(set(ours) - set(names))
    if missing:
        raise ValueError(tr("the model has parameters with no Hugging Face counterpart: {names} (see "
                            "BertForPretraining's docstring for the names)", names=missing[:4]))
    absent = sorted(set(names) - set(ours))
    if absent:
        raise ValueError(tr("the model lacks parameters {names}", names=absent[:4]))
    with torch.no_grad():
        for name, param in ours.items():
            source = state.get(names[name])
            if source is None:
                raise ValueError(tr("the Hugging Face state dict has no {name!r}", name=names[name]))
            if tuple(source.shape) != tuple(param.shape):
                raise ValueError(tr("{name} has shape {shape}, but {theirs} has {their_shape}", name=name,
                                    shape=tuple(param.shape), theirs=names[name], their_shape=tuple(source.shape)))
            param.copy_(source)
    return model


def bert_base_fill_in(model_class, texts: list[str], pairs: list[tuple[str, str]]) -> None:
    """Optional: download bert-base-uncased, load it into YOUR model class and fill in [MASK]s.

    Needs `transformers` and the network; the notebook calls it only when
    course.toolkit.pretrained_unavailable("bert-base-uncased") returns None."""
    from transformers import BertForPreTraining as HFBertForPreTraining
    from transformers import BertTokenizerFast

    tokenizer = BertTokenizerFast.from_pretrained("bert-base-uncased")
    hf = HFBertForPreTraining.from_pretrained("bert-base-uncased")
    cfg = hf.config
    model = model_class(cfg.vocab_size, cfg.hidden_size, cfg.num_attention_heads, cfg.num_hidden_layers,
                        cfg.intermediate_size, max_len=cfg.max_position_embeddings,
                        num_segments=cfg.type_vocab_size)
    load_hf_bert(model, hf).eval()
    print(tr("bert-base-uncased in your BertForPretraining: {count:,} parameters",
             count=sum(p.numel() for p in model.parameters())))
    with torch.no_grad():
        for text in texts:
            enc = tokenizer(text, return_tensors="pt")
            mlm_logits, _ = model(enc["input_ids"], enc["token_type_ids"], enc["attention_mask"])
            filled = []
            for pos in (enc["input_ids"][0] == tokenizer.mask_token_id).nonzero().flatten().tolist():
                top = mlm_logits[0, pos].softmax(-1).topk(3)
                filled.append(" / ".join(f"{tokenizer.decode([i])} {p:.2f}" for p, i in zip(top.values, top.indices)))
            print(f"{text}\n    [MASK] -> {' | '.join(filled)}")
        for a, b in pairs:
            enc = tokenizer(a, b, return_tensors="pt")
            _, nsp_logits = model(enc["input_ids"], enc["token_type_ids"], enc["attention_mask"])
            print(tr("P(b follows a) = {p:.3f}   a: {a}   b: {b}", p=nsp_logits.softmax(-1)[0, NEXT].item(), a=a, b=b))


# ---------------------------------------------------------------- plots

def plot_gelu(xs: torch.Tensor, curves: dict[str, torch.Tensor], difference: torch.Tensor):
    """Left: activation curves; right: |tanh form - erf form|."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    for name, ys in curves.items():
        axes[0].plot(xs, ys.detach(), lw=1.8, label=name)
    axes[0].axhline(0, color="0.8", lw=0.8)
    axes[0].set_xlabel("x")
    axes[0].legend(fontsize=9)
    axes[0].set_title(tr("activations"))
    axes[1].plot(xs, difference.detach(), color="tab:red", lw=1.5)
    axes[1].set_xlabel("x")
    axes[1].set_title(tr("|your gelu (tanh form) - exact erf form|"))
    fig.tight_layout()
    return fig


def plot_training(history: dict[str, list[float]], every: int):
    """Loss curves of pretraining; history maps a name to its values logged every `every` steps."""
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for name, values in history.items():
        ax.plot([every * (i + 1) for i in range(len(values))], values, lw=1.5, label=name)
    ax.set_xlabel(tr("step"))
    ax.set_ylabel(tr("loss"))
    ax.legend(fontsize=9)
    ax.set_title(tr("BERT pretraining on the generated corpus"))
    fig.tight_layout()
    return fig


def plot_attention_heads(weights: torch.Tensor, tokens: list[str], title: str):
    """weights (H, T, T) of one layer for one input: one heat map per head."""
    weights = weights.detach().cpu()
    H, T, _ = weights.shape
    fig, axes = plt.subplots(1, H, figsize=(3.3 * H, 3.6))
    axes = [axes] if H == 1 else axes
    for h, ax in enumerate(axes):
        ax.imshow(weights[h], cmap="Reds", vmin=0, vmax=weights[h].max().item())
        ax.set_xticks(range(T), tokens, rotation=90, fontsize=7)
        ax.set_yticks(range(T), tokens, fontsize=7)
        ax.set_title(tr("head {h}", h=h), fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def project_2d(vectors: torch.Tensor) -> torch.Tensor:
    """(N, D) -> (N, 2): the first two principal components (PCA by SVD of the centred vectors)."""
    centred = vectors - vectors.mean(0)
    _, _, Vh = torch.linalg.svd(centred, full_matrices=False)
    return centred @ Vh[:2].T


def plot_senses(points: torch.Tensor, senses: torch.Tensor, ambiguous: torch.Tensor, title: str, ax=None):
    """2-D points coloured by sense (river / money); hollow markers: only the word after "bank" tells."""
    if ax is None:
        _, ax = plt.subplots(figsize=(4.6, 4.2))
    points = points.detach().cpu()
    for sense, (name, color) in enumerate(((tr("river bank"), "tab:blue"), (tr("money bank"), "tab:orange"))):
        for amb, face in ((False, color), (True, "none")):
            keep = (senses == sense) & (ambiguous == amb)
            label = tr("{name} (the bank was ADJ .)", name=name) if amb else name
            ax.scatter(points[keep, 0], points[keep, 1], s=16, facecolors=face, edgecolors=color, lw=0.8,
                       label=label)
    ax.set_title(title, fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


def nearest_centroid_accuracy(train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor,
                              test_y: torch.Tensor) -> float:
    """Classify each test vector by the closest class mean of the training vectors (Euclidean)."""
    classes = train_y.unique()
    centroids = torch.stack([train_x[train_y == c].mean(0) for c in classes])  # (C, D)
    predicted = classes[torch.cdist(test_x, centroids).argmin(1)]
    return (predicted == test_y).float().mean().item()


def bar_accuracies(results: dict[str, float], chance: float, title: str):
    fig, ax = plt.subplots(figsize=(6.4, 3.0))
    names = list(results)
    ax.barh(names, [100 * results[n] for n in names], color=["tab:green", "tab:blue", "tab:gray"][:len(names)])
    for i, n in enumerate(names):
        ax.text(100 * results[n] + 1, i, f"{100 * results[n]:.1f}%", va="center", fontsize=9)
    ax.axvline(100 * chance, color="0.5", ls="--", lw=1)
    ax.text(100 * chance + 0.5, -0.55, tr("chance"), color="0.4", fontsize=8)
    ax.set_xlim(0, 110)
    ax.set_xlabel(tr("test accuracy (%)"))
    ax.set_title(title, fontsize=10)
    ax.invert_yaxis()
    fig.tight_layout()
    return fig

