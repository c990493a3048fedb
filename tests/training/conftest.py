import sys
from pathlib import Path

import pytest

# tests/training/runtime_helpers.py is imported as `runtime_helpers` by this directory's tests
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def one_rank_group(tmp_path):
    """A 1-rank gloo group in this process: enough for a check's collectives."""
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1
    )
    yield
    dist.destroy_process_group()
