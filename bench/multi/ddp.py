"""A small DDP training job for gpuspy's multi-rank checks, one process per GPU:

    torchrun --standalone --nproc-per-node 2 bench/multi/ddp.py --steps 200 [--slow-rank 1 --delay-ms 20] [--batch 8]

Eight bias-free 4096x4096 fp32 layers (512 MiB of gradients). DDP's first step reduces
them in the buckets it built at construction (one, on the H200 run); it then rebuilds them
in gradient order, and each weight (64 MiB, above the 25 MiB cap) becomes its own bucket.
So a rank issues 1 + 8 x (steps - 1) all-reduces; the script prints the count from DDP's
own bucket sizes.
Each step "loads" a batch on the host (the slow rank sleeps --delay-ms first), trains on
it and logs the loss with .item(), as simple training loops do. Rank 0 prints the numbers
gpuspy's report is checked against.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn

LAYERS, WIDTH = 8, 4096

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--slow-rank", type=int, default=1)
parser.add_argument("--delay-ms", type=float, default=0.0)
parser.add_argument("--batch", type=int, default=256)
args = parser.parse_args()

rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
device = torch.device("cuda", local)
torch.cuda.set_device(device)
dist.init_process_group("nccl", device_id=device)
torch.manual_seed(0)
model = nn.Sequential(*[nn.Sequential(nn.Linear(WIDTH, WIDTH, bias=False), nn.ReLU()) for _ in range(LAYERS)]).to(device)
ddp = nn.parallel.DistributedDataParallel(model, device_ids=[local])
opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)


def load_batch(step):
    if rank == args.slow_rank and args.delay_ms:
        time.sleep(args.delay_ms / 1e3)  # a slow input pipeline on this rank only
    g = torch.Generator().manual_seed(rank * 100_000 + step)
    return torch.randn(args.batch, WIDTH, generator=g).pin_memory().to(device, non_blocking=True)


torch.cuda.synchronize()
t0 = time.perf_counter()
ends = []
for step in range(args.steps):
    x = load_batch(step)
    loss = ddp(x).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    last = loss.item()
    ends.append(time.perf_counter())
torch.cuda.synchronize()
elapsed = time.perf_counter() - t0
# The loop's time above its median step, in %: what rare events (a profiler's flushes and
# switches) cost, measured within the process, with far less noise than loop times across
# processes (bench/gpu/paired_summary.py). Without the first step, in which DDP rebuilds
# its buckets.
steps_s = [b - a for a, b in zip(ends, ends[1:])]
median_s = sorted(steps_s)[len(steps_s) // 2] if steps_s else 0
excess_pct = 100 * (sum(steps_s) / (len(steps_s) * median_s) - 1) if median_s else 0.0

info = ddp._get_ddp_logging_data()


def bucket_count(key):
    sizes = str(info.get(key, "")).strip()
    return len(sizes.split(",")) if sizes else None


first = bucket_count("bucket_sizes")
later = bucket_count("rebuilt_bucket_sizes") or first
grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
print(f"rank {rank}: steps {args.steps} loop_s {elapsed:.3f} step_ms {elapsed / args.steps * 1e3:.2f} loss {last:.6f}")
print(f"rank {rank}: excess_pct {excess_pct:.3f}")
if rank == 0:
    print(f"ddp buckets: first step {first} ({info.get('bucket_sizes')}), then {later} ({info.get('rebuilt_bucket_sizes', '-')})")
    print(f"expected all-reduce calls per rank {first + later * (args.steps - 1)} = {first} + {later} x {args.steps - 1} steps")
    print(f"expected all-reduce bytes per rank {grad_bytes * args.steps} = {grad_bytes} gradient bytes x {args.steps} steps")
    print(f"world {dist.get_world_size()} torch {torch.__version__} nccl {'.'.join(map(str, torch.cuda.nccl.version()))}")
dist.destroy_process_group()
