#!/usr/bin/env python3
"""torch_check.py: one and two steps of torch.optim's Adam and AdamW on the
fixed weights and gradients of kernels/optim's TestAdamTorchValues, printed
as Go float32 literals (the test's adamTorchWant, adamWTorchWant), and two
steps of LARS written in torch tensor ops (TestLARSTorchValues'
larsTorchWant, larsTorchVelocity).

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

# LARS (You, Gitman, Ginsburg 2017, Algorithm 1; torch has none): per
# tensor, g' = g + wd·w, trust = η·‖w‖/(‖g‖ + wd·‖w‖) (1 where ‖w‖ or ‖g‖
# is 0), v = mu·v + lr·trust·g', w -= v. The norms and the trust ratio in
# float64 (Python floats), the element-wise step in float32 tensors: the
# values of kernels/optim's TestLARSTorchValues (a weight of 4 and a bias
# of 3 that starts at 0, two steps).
def lars(lr=0.5, mu=0.9, wd=0.01, eta=0.02):
    ws = [torch.tensor([0.5, -1.25, 2.0, 0.0], dtype=torch.float32),
          torch.tensor([0.0, 0.0, 0.0], dtype=torch.float32)]
    vs = [torch.zeros_like(w) for w in ws]
    grads = ([[0.1, -0.2, 0.3, 0.05], [0.2, -0.1, 0.0]],
             [[-0.3, 0.1, 0.2, 0.4], [0.05, 0.3, -0.2]])
    for gs in grads:
        for w, v, g in zip(ws, vs, gs):
            g = torch.tensor(g, dtype=torch.float32)
            nw = w.double().norm().item()
            ng = g.double().norm().item()
            trust = eta * nw / (ng + wd * nw) if nw > 0 and ng > 0 else 1.0
            rate = torch.tensor(lr * trust, dtype=torch.float32)
            gp = g + torch.tensor(wd, dtype=torch.float32) * w
            v.copy_(torch.tensor(mu, dtype=torch.float32) * v + rate * gp)
            w.sub_(v)
    return torch.cat(ws).tolist(), torch.cat(vs).tolist()

lw, lv = lars()
for name, vals in (("larsTorchWant", lw), ("larsTorchVelocity", lv)):
    print("var %s = []float32{%s}" % (name, ", ".join(repr(float(torch.tensor(v, dtype=torch.float32))) for v in vals)))
