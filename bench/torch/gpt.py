"""nanoGPT's GPT module (Karpathy's model.py, the same module tree and
state_dict keys), written out here for dml's checks: a dml gpt .npz loads
into it with load_state_dict(strict=True), lm_head tied to transformer.wte.
bias=True, dropout 0. Attention is written out (masked softmax), as
nanoGPT's fallback path computes it, so that it runs on PyTorch 1.13 too.

    from gpt import GPT, gpt_from_state
    net = gpt_from_state(state_dict, n_head=4)
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd = n_head, n_embd
        # A plain attribute, not a buffer: not in the state_dict (nanoGPT's
        # "bias" buffer is left out of it too), nor broadcast by DDP.
        self.mask = torch.tril(torch.ones(block_size, block_size, dtype=torch.bool))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size=256, block_size=128, n_layer=4, n_head=4, n_embd=128):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head, block_size) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied, as nanoGPT

    def forward(self, idx):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))

    def loss(self, idx, targets):
        """nanoGPT's: the mean cross-entropy over every position."""
        logits = self(idx)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def gpt_from_state(state, n_head):
    """The GPT whose shapes a dml gpt state_dict (or .npz) has."""
    vocab, n_embd = state["transformer.wte.weight"].shape
    block_size = state["transformer.wpe.weight"].shape[0]
    n_layer = len([k for k in state if k.endswith(".ln_1.weight")])
    return GPT(vocab, block_size, n_layer, n_head, n_embd)


def all_windows(text, seq_len):
    """dml's --data text windows of bytes: window r is bytes r·T … r·T+T
    (T = seq_len), (len(text) − 1) // T of them, int64 (n, T+1)."""
    b = torch.tensor(list(text), dtype=torch.uint8)
    return b.unfold(0, seq_len + 1, seq_len).long()


def windows(text, seq_len, rows):
    """dml's --data text windows 0..rows-1: inputs and targets."""
    w = all_windows(text, seq_len)[:rows]
    return w[:, :-1], w[:, 1:]
