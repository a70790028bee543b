"""Written as in PyTorch's distributed tutorial: everything comes from the environment."""
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")  # env:// — MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
rank = dist.get_rank()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t, op=dist.ReduceOp.SUM)
print(f"ALLREDUCE rank={rank} world={dist.get_world_size()} local={os.environ['LOCAL_RANK']} sum={t.item():.0f}",
      flush=True)
dist.barrier()
dist.destroy_process_group()
