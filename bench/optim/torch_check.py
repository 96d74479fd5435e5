#!/usr/bin/env python3
"""torch_check.py: one and two steps of torch.optim's Adam and AdamW on the
fixed weights and gradients of kernels/optim's TestAdamTorchValues, printed
as Go float32 literals (the test's adamTorchWant, adamWTorchWant).

    /usr/bin/python3 bench/optim/torch_check.py     (Debian's python3-torch)
"""
import torch

def run(cls):
    w = torch.tensor([0.5, -1.25, 2.0, 0.0], dtype=torch.float32, requires_grad=True)
    opt = cls([w], lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
    for g in ([0.1, -0.2, 0.3, 0.05], [-0.3, 0.1, 0.2, 0.4]):
        w.grad = torch.tensor(g, dtype=torch.float32)
        opt.step()
    return w.detach().tolist()

print("torch", torch.__version__)
for name, cls in (("adamTorchWant", torch.optim.Adam), ("adamWTorchWant", torch.optim.AdamW)):
    vals = run(cls)
    print("var %s = []float32{%s}" % (name, ", ".join(repr(float(torch.tensor(v, dtype=torch.float32))) for v in vals)))
