"""Chapter 03: positional encoding (reference implementation)."""
import math

import torch
import torch.nn as nn


def sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The fixed sinusoidal position table of "Attention Is All You Need".

    Args:
        max_len: the number of positions p = 0, 1, ..., max_len - 1 (rows).
        d_model: D, the width of each row; must be even, because sin and cos come in pairs.
    Returns:
        P (max_len, D), float32, interleaved: for pair i = 0 .. D/2 - 1,
        P[p, 2i] = sin(p / 10000**(2i / D)) and P[p, 2i + 1] = cos(p / 10000**(2i / D)).
        Both columns of a pair share one frequency; sin comes first.
    Raises:
        ValueError if d_model is odd, or if max_len or d_model is smaller than 1.
    Build the table with torch operations (no numpy, no copied table).
    """
    ### BEGIN SOLUTION
    if max_len < 1 or d_model < 1:
        raise ValueError(f"max_len and d_model must be positive, got max_len={max_len}, d_model={d_model}")
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even (sin/cos pairs), got {d_model}")
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (D/2,) the even column indices 2i
    inv_freq = 10000.0 ** (-two_i / d_model)  # (D/2,) one frequency per pair
    angle = position * inv_freq  # (max_len, D/2)
    P = torch.empty(max_len, d_model, dtype=torch.float32)
    P[:, 0::2] = torch.sin(angle)  # even columns
    P[:, 1::2] = torch.cos(angle)  # odd columns, same frequency as their left neighbour
    return P
    ### END SOLUTION


def relative_position_matrix(offset: int, d_model: int) -> torch.Tensor:
    """The matrix that moves every row of the sinusoidal table `offset` positions on.

    Args:
        offset: k, the shift (any integer, negative too).
        d_model: D, even.
    Returns:
        M (D, D), float32, block diagonal with D/2 blocks of 2x2 such that
        P[p + k] == M @ P[p] for every position p, where P is the sinusoidal table.
        Block i (rows and columns 2i, 2i+1), with w_i = 10000**(-2i / D) and a = w_i * k, is
            [[ cos a, sin a],
             [-sin a, cos a]].
    Raises:
        ValueError if d_model is odd or smaller than 1.
    Do not build the table P here: M depends on k and D only.
    """
    ### BEGIN SOLUTION
    if d_model < 1 or d_model % 2 != 0:
        raise ValueError(f"d_model must be a positive even number, got {d_model}")
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (D/2,)
    angle = offset * 10000.0 ** (-two_i / d_model)  # (D/2,) how far pair i turns
    cos, sin = torch.cos(angle), torch.sin(angle)
    idx = torch.arange(0, d_model, 2)
    M = torch.zeros(d_model, d_model, dtype=torch.float32)
    # (sin, cos) at p + k = [[cos a, sin a], [-sin a, cos a]] @ (sin, cos) at p  (angle addition)
    M[idx, idx] = cos
    M[idx, idx + 1] = sin
    M[idx + 1, idx] = -sin
    M[idx + 1, idx + 1] = cos
    return M
    ### END SOLUTION


class PositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table to a batch of embeddings, then applies dropout.

    Args:
        d_model: D (even).
        max_len: the longest sequence the module accepts.
        dropout: the dropout probability applied to the sum.
    Attributes:
        pe: the table sinusoidal_positional_encoding(max_len, D), (max_len, D), registered as a
            buffer (saved in the state_dict and moved by .to(), but not a trained parameter).
        dropout: an nn.Dropout.
    forward(x (B, T, D)) -> (B, T, D): token t of each sequence gets row t of pe added (the first T
        rows), then dropout; in training mode the dropout acts on the sum, in eval mode it does nothing.
    Raises ValueError in forward when T > max_len.
    Use your sinusoidal_positional_encoding.
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0):
        super().__init__()
        ### BEGIN SOLUTION
        self.dropout = nn.Dropout(dropout)
        # A buffer: part of the module's state (saved, moved to the GPU) but never trained.
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))  # (max_len, D)
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        B, T, D = x.shape
        if T > self.pe.shape[0]:
            raise ValueError(f"sequence length {T} exceeds max_len={self.pe.shape[0]}")
        return self.dropout(x + self.pe[:T])  # (B, T, D) + (T, D) broadcasts over the batch
        ### END SOLUTION


class TokenEmbedding(nn.Module):
    """Looks token ids up in a learned table and scales the vectors by sqrt(d_model).

    Args:
        vocab_size: V.
        d_model: D.
    Attributes:
        embedding: an nn.Embedding(V, D); its weight (V, D) is the table.
    forward(ids (B, T) integer, int64 or int32) -> (B, T, D) float32: embedding(ids) * sqrt(D).
    Start the table small (std 1/sqrt(D)) where its scale matters: see the narrative.
    """

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        ### BEGIN SOLUTION
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)
        ### END SOLUTION

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        return self.embedding(ids) * math.sqrt(self.d_model)  # (B, T, D)
        ### END SOLUTION


class LearnedPositionalEmbedding(nn.Module):
    """Adds a trained vector per position (BERT, GPT-2) to a batch of embeddings.

    Args:
        max_len: the number of positions that have a row.
        d_model: D.
    Attributes:
        embedding: an nn.Embedding(max_len, D); row p of its weight is E[p], the vector of position p.
    forward(x (B, T, D)) -> (B, T, D): x + E[:T].
    Raises ValueError in forward when T > max_len (there is no row to look up).
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        ### BEGIN SOLUTION
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        B, T, D = x.shape
        if T > self.max_len:
            raise ValueError(f"sequence length {T} exceeds max_len={self.max_len}: no learned row for it")
        positions = torch.arange(T, device=x.device)  # (T,)
        return x + self.embedding(positions)  # (B, T, D) + (T, D)
        ### END SOLUTION
