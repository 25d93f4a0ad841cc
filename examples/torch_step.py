"""A small PyTorch training loop with the habits that starve a GPU: a pageable host batch
copied each step, a model too small to fill the GPU, and `.item()` on the loss for logging.
tools/main.sh profiles it under gpuspy on a GPU machine."""
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
inputs = torch.randn(256, 512)  # pageable host memory
targets = torch.randint(0, 10, (256,))
for step in range(300):
    x, y = inputs.cuda(), targets.cuda()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 100 == 0:
        print(f"step {step} loss {loss.item():.4f}")
print(f"final loss {loss.item():.4f}")
