"""Multi-digit addition as next-token prediction: the task chapters 08 and 09 train on.

A problem a + b with `num_digits`-digit operands is the token sequence
    a (num_digits digits, zero-padded) '+' b (num_digits digits) '=' sum (num_digits + 1 digits, REVERSED)
so every problem has the same length 3 * num_digits + 3 and no padding is needed. The sum is
written least-significant digit first: then each answer digit depends only on digits the model
has already seen and on one carry, which is what a left-to-right model can learn.

Training problems may mix in operand digits set to 0 (`zero_digit_prob`). With uniform digits, an
answer digit (a_i + b_i + carry) mod 10 is independent of every single operand digit, so the
gradient carries no hint of which positions to attend to and training can stall with one answer
digit at chance; where b_i = 0 the answer digit equals a_i, a signal attention can follow.
"""
from __future__ import annotations

import torch

from course import tr

PLUS, EQUALS = 10, 11  # ids 0-9 are the digits themselves
VOCAB = "0123456789+="


class AdditionTask:
    """Addition problems with a fixed held-out set that training batches never contain.

    Attributes:
        vocab_size: 12 (digits, '+', '=').
        seq_len: L = 3 * num_digits + 3 tokens in a whole problem.
        block_size: L - 1, the longest input a model sees (the last token is never an input).
        answer_start: index in the sequence of the first answer digit (2 * num_digits + 2).
        held_out: (N, L) int64, `num_held_out` distinct problems drawn first.
    """

    def __init__(self, num_digits: int = 3, num_held_out: int = 1000, reverse_answer: bool = True,
                 seed: int = 0, zero_digit_prob: float = 0.0):
        if num_digits < 1:
            raise ValueError(tr("num_digits must be at least 1, got {num_digits}", num_digits=num_digits))
        if not 0.0 <= zero_digit_prob < 1.0:
            raise ValueError(tr("zero_digit_prob must be in [0, 1), got {zero_digit_prob}",
                                zero_digit_prob=zero_digit_prob))
        self.num_digits, self.reverse_answer = num_digits, reverse_answer
        self.zero_digit_prob = zero_digit_prob
        self.vocab_size = len(VOCAB)
        self.seq_len = 3 * num_digits + 3
        self.block_size = self.seq_len - 1
        self.answer_start = 2 * num_digits + 2
        self.generator = torch.Generator().manual_seed(seed)
        limit = 10 ** num_digits
        codes = torch.randperm(limit * limit, generator=self.generator)[:num_held_out]  # distinct problems
        self._held_out_codes = codes.sort().values
        self.held_out = self.encode(codes // limit, codes % limit)  # (N, L)

    def _digits(self, n: torch.Tensor, width: int) -> torch.Tensor:
        powers = 10 ** torch.arange(width - 1, -1, -1)  # most significant first
        return (n[:, None] // powers) % 10  # (N, width)

    def encode(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """(N,) operands -> (N, L) token ids of the whole problem, answer included."""
        a, b = torch.as_tensor(a).long().reshape(-1), torch.as_tensor(b).long().reshape(-1)
        N, n = a.shape[0], self.num_digits
        answer = self._digits(a + b, n + 1)
        if self.reverse_answer:
            answer = answer.flip(1)
        plus, equals = torch.full((N, 1), PLUS), torch.full((N, 1), EQUALS)
        return torch.cat([self._digits(a, n), plus, self._digits(b, n), equals, answer], dim=1)

    def _draw_codes(self, n: int) -> torch.Tensor:
        """n problems as codes a * 10**num_digits + b; each operand digit is 0 with zero_digit_prob."""
        limit = 10 ** self.num_digits
        codes = torch.randint(0, limit * limit, (n,), generator=self.generator)
        if self.zero_digit_prob > 0:
            digits = self._digits(torch.cat([codes // limit, codes % limit]), self.num_digits)  # (2n, num_digits)
            zero = torch.rand(digits.shape, generator=self.generator) < self.zero_digit_prob
            powers = 10 ** torch.arange(self.num_digits - 1, -1, -1)
            a, b = (digits.masked_fill(zero, 0) * powers).sum(1).split(n)
            codes = a * limit + b
        return codes

    def sample(self, batch_size: int) -> torch.Tensor:
        """(B, L) fresh training problems, none of them in the held-out set."""
        limit = 10 ** self.num_digits
        codes = self._draw_codes(batch_size)
        clash = torch.isin(codes, self._held_out_codes)
        while clash.any():  # redraw the held-out problems
            codes[clash] = self._draw_codes(int(clash.sum()))
            clash = torch.isin(codes, self._held_out_codes)
        return self.encode(codes // limit, codes % limit)

    def inputs_and_targets(self, seqs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L) problems -> inputs (B, L-1) and targets (B, L-1), with -100 (ignored by
        cross-entropy) wherever the target is part of the question rather than the answer."""
        inputs, targets = seqs[:, :-1], seqs[:, 1:].clone()
        targets[:, : self.answer_start - 1] = -100
        return inputs, targets

    def batch(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """inputs (B, L-1) and targets (B, L-1) of fresh training problems."""
        return self.inputs_and_targets(self.sample(batch_size))

    @torch.no_grad()
    def exact_match(self, logits_fn, seqs: torch.Tensor | None = None) -> torch.Tensor:
        """(N,) bool: problem n is solved when every answer digit is the argmax of the logits.

        `logits_fn(inputs (N, L-1)) -> (N, L-1, V)` is one forward pass of a causal model. With
        a causal model the teacher-forced argmax is right at every answer position exactly when
        greedy generation writes the whole answer correctly, so one pass measures greedy exact match.
        """
        seqs = self.held_out if seqs is None else seqs
        inputs, targets = self.inputs_and_targets(seqs)
        predicted = logits_fn(inputs).argmax(-1).to(targets.device)  # (N, L-1)
        answer = targets != -100
        return ((predicted == targets) | ~answer).all(dim=1)

    def show(self, seq) -> str:
        """A problem as text, e.g. '042+917=9590' (the answer reversed when reverse_answer)."""
        return "".join(VOCAB[int(i)] for i in seq)
