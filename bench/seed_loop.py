"""The seed's training loop, copied here for the benchmarks (the project never imports shared/).

Origin: the seed document /work/shared/seeds/003_ab067ed91ee29743.txt, the ``train_ddp.py`` of
its "Create the training script" section (read 2026-11-27). Its loop, as written::

    dataloader = DataLoader(dataset, batch_size=32, sampler=sampler, num_workers=2)
    optimizer = optim.Adam(model.parameters(), lr=0.001)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(num_epochs):
        sampler.set_epoch(epoch)
        model.train()
        for batch_idx, (data, target) in enumerate(dataloader):
            data, target = data.to(local_rank), target.to(local_rank)
            optimizer.zero_grad()
            output = model(data)
            loss = criterion(output, target)
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()

kept step for step below. What differs, so that every loop of the bench does identical work:
the model, the data and the batch size are the bench's; the loss is the model's own
cross-entropy (``loss_from_logits``: ``nn.CrossEntropyLoss`` over the GPT's tokens); the
print every 50 batches is left out. The script runs in fp32 (no autocast); ``bf16=True`` adds
the ``torch.autocast`` a user would add, the variant the runtime's bf16 is fairly compared with.
"""

from __future__ import annotations

import time
from typing import Any


def seed_loop(
    model: Any,
    inputs: Any,
    targets: Any,
    *,
    device: Any,
    batch_size: int,
    steps: int,
    warmup: int = 2,
    bf16: bool = False,
    num_workers: int = 2,
) -> float:
    """Seconds for `steps` optimizer steps of the seed's loop after `warmup` untimed ones
    (the steady state, as the runtime's summary reports it). DDP-wrapped here."""
    import torch
    import torch.distributed as dist
    from torch import optim
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    cuda = device.type == "cuda"
    loss_fn = model.loss_from_logits
    model = DDP(model, device_ids=[device.index] if cuda else None)
    dataset = TensorDataset(inputs, targets)
    sampler = DistributedSampler(dataset, shuffle=True)
    dataloader = DataLoader(dataset, batch_size=batch_size, sampler=sampler,
                            num_workers=num_workers)  # fmt: skip
    optimizer = optim.Adam(model.parameters(), lr=0.001)
    amp = torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)
    done, epoch, t0 = 0, 0, 0.0
    epoch_loss = 0.0
    while done < warmup + steps:
        sampler.set_epoch(epoch)
        model.train()
        for data, target in dataloader:
            if done == warmup:
                if cuda:
                    torch.cuda.synchronize()
                dist.barrier()
                t0 = time.perf_counter()
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            with amp:
                output = model(data)
                loss = loss_fn(output, target)
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()
            done += 1
            if done == warmup + steps:
                break
        epoch += 1
    if cuda:
        torch.cuda.synchronize()
    dist.barrier()
    return time.perf_counter() - t0
