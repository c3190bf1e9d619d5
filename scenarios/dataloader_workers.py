"""A PyTorch DataLoader with worker processes (num_workers > 0): its Dataset's
`__getitem__` runs in the workers, so what it keeps grows their memory, not the caller's
(issue 61). `mode`: "leak" keeps 4 KiB per item in the worker that served it; "cache"
keeps one of 256 entries per worker (1 MiB each at most: bounded, no leak); "none"
keeps nothing. CPU torch is enough; the step is the next batch."""
import torch
from torch.utils.data import DataLoader, Dataset

KEPT = []


class Items(Dataset):
    def __init__(self, mode):
        self.mode = mode
        self.cache = {}

    def __len__(self):
        return 10 ** 9

    def __getitem__(self, i):
        if self.mode == "leak":
            KEPT.append(bytearray(4096))            # kept in the worker, every item
        elif self.mode == "cache":
            self.cache[i % 256] = bytearray(4096)   # bounded: 256 entries a worker
        return torch.zeros(16)


def setup(params):
    loader = DataLoader(Items(params.get("mode", "leak")), batch_size=1,
                        num_workers=int(params.get("workers", 2)), persistent_workers=True)
    return {"batches": iter(loader)}


def step(state):
    next(state["batches"])
