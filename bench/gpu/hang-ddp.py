"""A DDP job in which one rank stops inside a step, for gpuspy's hang watchdog (issue 17):

    torchrun --standalone --nproc-per-node 2 bench/gpu/hang-ddp.py --steps 40 --hang-step 20 --hang-rank 1 --hang-s 30

Eight bias-free 4096x4096 fp32 layers, as bench/multi/ddp.py. At --hang-step, rank
--hang-rank sleeps --hang-s seconds between its forward and backward passes: outside any
driver or NCCL call, so its own watchdog sees nothing. The other rank's backward issues
that step's all-reduces (NCCL enqueues and returns) and its `.item()` then waits for their
kernels, which wait for the sleeping rank: a call in flight for the whole sleep. The job
then finishes normally.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn

LAYERS, WIDTH = 8, 4096

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--hang-step", type=int, default=20)
parser.add_argument("--hang-rank", type=int, default=1)
parser.add_argument("--hang-s", type=float, default=30.0)
args = parser.parse_args()

rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
device = torch.device("cuda", local)
torch.cuda.set_device(device)
dist.init_process_group("nccl", device_id=device)
torch.manual_seed(0)
model = nn.Sequential(*[nn.Sequential(nn.Linear(WIDTH, WIDTH, bias=False), nn.ReLU()) for _ in range(LAYERS)]).to(device)
ddp = nn.parallel.DistributedDataParallel(model, device_ids=[local])
opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)

for step in range(args.steps):
    x = torch.randn(256, WIDTH, device=device)
    loss = ddp(x).square().mean()
    if step == args.hang_step and rank == args.hang_rank:
        print(f"rank {rank}: sleeping {args.hang_s} s inside step {step}", flush=True)
        time.sleep(args.hang_s)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    last = loss.item()
print(f"rank {rank}: steps {args.steps} loss {last:.6f}", flush=True)
dist.destroy_process_group()
