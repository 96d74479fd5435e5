#!/usr/bin/env python3
"""PyTorch's GPT step on the GPU, the reference for dml's (issue 33):
nanoGPT's module (bench/torch/gpt.py: 4 layers, 4 heads, 128 wide, 128
tokens, vocabulary 256, head tied), AdamW, batch --batch, eager fp32 and
(where torch.cuda.graphs works) the step captured as one CUDA graph.
Prints ms/step and tokens/s of each, and a RESULT json line.

    python3 bench/gpu/torch_gpt.py [--batch 64] [--steps 50]
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch"))
from gpt import GPT  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=50)
    a = ap.parse_args()
    dev = "cuda"
    net = GPT(256, 128, 4, 4, 128).to(dev)
    for b in net.transformer.h:  # the masks are plain attributes: .to moves none
        b.attn.mask = b.attn.mask.to(dev)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, capturable=True)
    x = torch.randint(0, 256, (a.batch, 128), device=dev)
    y = torch.randint(0, 256, (a.batch, 128), device=dev)

    def step():
        loss = net.loss(x, y)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        return loss

    res = {}
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) / a.steps * 1e3
    res["eager_fp32_ms"] = ms
    print(f"torch {torch.__version__} eager fp32: {ms:.2f} ms/step, {a.batch * 128 / ms * 1e3:,.0f} tokens/s", flush=True)
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        for _ in range(5):
            g.replay()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            g.replay()
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) / a.steps * 1e3
        res["graph_fp32_ms"] = ms
        print(f"torch graph fp32: {ms:.2f} ms/step, {a.batch * 128 / ms * 1e3:,.0f} tokens/s", flush=True)
    except Exception as e:  # noqa: BLE001
        print(f"torch graph: {e}", flush=True)
    print("RESULT " + json.dumps(res))


if __name__ == "__main__":
    main()
