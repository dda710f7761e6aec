"""The PyTorch side of the side-by-side step timing in docs/performance.md.

A pre-LayerNorm decoder of the same shape as symbreak's (fused QKV, no biases, tied output head,
tanh-GELU, dropout), trained with AdamW (decay on matrix weights only) and global-norm clipping
at 1.0, on random tokens from the 14-symbol vocabulary. Prints the median time of a whole
training step (forward, loss, backward, clipping, optimiser) after warm-up, as JSON; with
`--eval-lines N`, also the median time of a forward pass without gradients over N lines of
`--time` tokens, 1,000 rows at a time (what `symbreak bench` times as teacher-forced evaluation).

    python docs/bench/pytorch_step.py --width 128 --heads 4 --rows 64 --time 16
    python docs/bench/pytorch_step.py --width 64 --rows 128 --time 32 --dropout 0 --threads 1
    python docs/bench/pytorch_step.py --width 64 --time 13 --dropout 0 --threads 1 --steps 0 --eval-lines 10000
"""

import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width, heads, dropout):
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.ln_1 = nn.LayerNorm(width, bias=False)
        self.c_attn = nn.Linear(width, 3 * width, bias=False)
        self.attn_proj = nn.Linear(width, width, bias=False)
        self.ln_2 = nn.LayerNorm(width, bias=False)
        self.c_fc = nn.Linear(width, 4 * width, bias=False)
        self.mlp_proj = nn.Linear(4 * width, width, bias=False)
        self.drop = nn.Dropout(dropout)

    def attention(self, x):
        rows, time_, width = x.shape
        q, k, v = self.c_attn(x).split(width, dim=2)
        split = lambda t: t.view(rows, time_, self.heads, width // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(
            split(q), split(k), split(v),
            dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(rows, time_, width)
        return self.drop(self.attn_proj(y))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        hidden = F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")
        return x + self.drop(self.mlp_proj(hidden))


class Decoder(nn.Module):
    def __init__(self, layers, heads, width, block, vocab, dropout):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(block, width)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(width, heads, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width, bias=False)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1])
        x = self.drop(self.wte(tokens) + self.wpe(positions))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--time", type=int, default=16)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="0: PyTorch's default")
    parser.add_argument("--eval-lines", type=int, default=0)
    args = parser.parse_args()

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(1337)
    vocab = 14
    model = Decoder(args.layers, args.heads, args.width, args.time, vocab, args.dropout)
    params = sum(p.numel() for p in model.parameters())
    decayed = [p for p in model.parameters() if p.dim() >= 2 and p is not model.wte.weight
               and p is not model.wpe.weight]
    others = [p for p in model.parameters() if all(p is not d for d in decayed)]
    optim = torch.optim.AdamW([{"params": decayed, "weight_decay": 0.1},
                               {"params": others, "weight_decay": 0.0}],
                              lr=1e-3, betas=(0.9, 0.99), eps=1e-8)
    times = []
    for step in range(args.warmup + args.steps):
        tokens = torch.randint(0, vocab, (args.rows, args.time + 1))
        start = time.perf_counter()
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    report = {
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "layers": args.layers, "heads": args.heads, "width": args.width,
        "rows": args.rows, "time": args.time, "dropout": args.dropout, "params": params,
    }
    if times:
        median = statistics.median(times)
        tokens = args.rows * args.time
        report.update({
            "median_ms": 1e3 * median, "tokens_per_second": tokens / median,
            "gflops": 6 * params * tokens / median / 1e9,
        })
    if args.eval_lines > 0:
        model.eval()
        lines = torch.randint(0, vocab, (args.eval_lines, args.time))
        passes = []
        with torch.no_grad():
            for _ in range(3):
                start = time.perf_counter()
                for batch in lines.split(1000):
                    model(batch).argmax(dim=2)
                passes.append(time.perf_counter() - start)
        report.update({"eval_lines": args.eval_lines, "eval_ms": 1e3 * statistics.median(passes)})
    print(json.dumps(report))


if __name__ == "__main__":
    main()
