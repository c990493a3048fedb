"""The reader of what a job's code fetches from the internet (trainforge/jobs/fetches.py).

The notebook is Kubeflow Trainer's own `examples/pytorch/image-classification/mnist.ipynb` at
tag v2.2.1 (commit c505fc7, fetched 2026-11-30), byte for byte: its training function
downloads FashionMNIST (`download=True`) in the pods, which a team namespace cannot.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from trainforge.jobs import fetches as F

NOTEBOOK = ROOT / "tests" / "fixtures" / "kubeflow_sdk" / "trainer_v2.2.1_mnist.ipynb"


def notebook_function() -> str:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    return next(
        src for src in ("".join(c["source"]) for c in cells) if "def train_fashion_mnist" in src
    )


def test_the_notebooks_function_downloads_fashion_mnist_at_its_line():
    src = notebook_function()
    (found,) = F.python_fetches(src, "mnist.py")
    line = int(found.where.rsplit(":", 1)[1])
    assert found.where == "mnist.py:56" and "datasets.FashionMNIST(" in src.splitlines()[line - 1]
    assert found.fetcher == "torchvision.datasets.FashionMNIST(download=True)"
    assert (
        found.error
        == "RuntimeError: Error downloading train-images-idx3-ubyte.gz: Tried <mirror>, got: <URLError>"
    )
    # its second call (download=False, after the barrier) is no download
    assert src.count("download=False") == 1


def test_download_false_or_data_staged_on_fsx_is_no_fetch():
    src = notebook_function()
    assert F.python_fetches(src.replace("download=True", "download=False"), "m.py") == []
    on_fsx = src.replace('"./data"', '"/fsx/research/datasets"')
    assert F.python_fetches(on_fsx, "m.py", staged=("/fsx",)) == []
    # /fsx is only staged where the pod mounts it there: the same code elsewhere downloads
    assert len(F.python_fetches(on_fsx, "m.py", staged=())) == 1
    # the same for a Hugging Face cache there
    hub = (
        "from transformers import AutoModel\nAutoModel.from_pretrained('gpt2', cache_dir='/fsx/hf')"
    )
    assert F.python_fetches(hub, "m.py", staged=("/fsx",)) == []
    assert len(F.python_fetches(hub, "m.py", staged=("/data",))) == 1


@pytest.mark.parametrize(
    ("code", "fetcher"),
    [
        ("from torchvision import datasets\ndatasets.MNIST('d', download=True)",
         "torchvision.datasets.MNIST(download=True)"),
        ("import torchvision.models as m\nm.resnet50(weights='DEFAULT')",
         "torchvision.models.resnet50(weights=...)"),
        ("import torch\ntorch.hub.load('pytorch/vision', 'resnet18')", "torch.hub.load"),
        ("from transformers import AutoModel\nAutoModel.from_pretrained('gpt2')",
         "transformers.AutoModel.from_pretrained('gpt2')"),
        ("from datasets import load_dataset\nload_dataset('imdb')",
         "datasets.load_dataset('imdb')"),
        ("from huggingface_hub import snapshot_download\nsnapshot_download('org/m')",
         "huggingface_hub.snapshot_download"),
        ("import urllib.request\nurllib.request.urlretrieve('https://x.org/a.tgz', 'a')",
         "urllib.request.urlretrieve('https://x.org/a.tgz')"),
        ("import requests\nrequests.get(f'https://api.example.com/{1}')",
         "requests.get('https://api.example.com/')"),
        ("import torch\ntorch.hub.load_state_dict_from_url('https://x.org/w.pth')",
         "torch.hub.load_state_dict_from_url"),
        ("from huggingface_hub import hf_hub_download as get\nget('org/m', 'config.json')",
         "huggingface_hub.hf_hub_download"),
        ("import datasets\ndatasets.load_dataset('parquet', data_files='hf://datasets/o/d/x.parquet')",
         "datasets.load_dataset('parquet')"),
        ("import subprocess\nsubprocess.run(['pip', 'install', 'peft'])", "pip install"),
        ("import os\nos.system('wget https://x.org/data.tar')", "wget https://x.org/data.tar"),
    ],
)  # fmt: skip
def test_each_python_fetcher_once(code: str, fetcher: str):
    (found,) = F.python_fetches(code, "t.py")
    assert (found.where, found.fetcher) == ("t.py:2", fetcher)


@pytest.mark.parametrize(
    "code",
    [
        "from transformers import AutoModel\nAutoModel.from_pretrained('/fsx/models/gpt2')",
        "from transformers import AutoModel\nAutoModel.from_pretrained('gpt2', local_files_only=True)",
        "from transformers import AutoModel\nAutoModel.from_pretrained(name)",  # not literal
        "from datasets import load_dataset\nload_dataset('json', data_files='/fsx/d.jsonl')",
        "import torchvision\ntorchvision.models.resnet50(weights=None)",
        "import requests\nrequests.get(url)",
        "import subprocess\nsubprocess.run(['pip', 'install', '--no-index', 'peft'])",
        "import requests\nrequests.post('http://mlflow.mlflow.svc:5000/api')",  # in the cluster
        "import requests\nrequests.get('http://10.0.3.7/data')",  # in the VPC
        "def broken(:\n",
    ],
)
def test_what_reads_no_internet_is_no_fetch(code: str):
    assert F.python_fetches(code, "t.py") == []


@pytest.mark.parametrize(
    ("script", "where", "fetcher"),
    [
        ("set -e\npip install -r requirements.txt\npython train.py", "c:2", "pip install"),
        ("python3 -m pip install transformers && torchrun t.py", "c:1", "pip install"),
        ("curl -sSfL https://example.com/d.tgz | tar xz", "c:1", "curl https://example.com/d.tgz"),
        ("cd /tmp; wget \\\n  https://x.org/w.bin", "c:1", "wget https://x.org/w.bin"),
        ("git clone https://github.com/o/r.git", "c:1", "git clone https://github.com/o/r.git"),
        ("huggingface-cli download gpt2", "c:1", "huggingface-cli download"),
        ("uv pip install torch", "c:1", "pip install"),
        ("true\nbash -lc 'cat <<EOF > a.txt\nx\nEOF\ncurl -O https://x.org/f'", "c:2",
         "curl https://x.org/f"),
        ("git clone git@github.com:o/r.git", "c:1", "git clone git@github.com:o/r.git"),
        ("python -c 'import requests\nrequests.get(\"http://a.io\")'", "c:1 python -c:2",
         "requests.get('http://a.io')"),
    ],
)  # fmt: skip
def test_each_shell_fetcher_once(script: str, where: str, fetcher: str):
    (found,) = F.shell_fetches(script, "c")
    assert (found.where, found.fetcher) == (where, fetcher)


def test_a_heredoc_of_python_is_read_as_the_file_it_is_written_to():
    """The Kubeflow SDK's way (kubeflow 0.4.1 constants.EXEC_FUNC_SCRIPT): `read -d ''` drops
    the leading newline, so the pod's file starts at the function."""
    script = (
        "\nread -r -d '' SCRIPT << EOM\n\ndef train():\n    from datasets import load_dataset\n"
        '    load_dataset(\'imdb\')\n\ntrain()\n\nEOM\nprintf "%s" "$SCRIPT" > "prog.py"\n'
        'torchrun "prog.py"'
    )
    (found,) = F.shell_fetches(script, "c")
    assert (found.where, found.fetcher) == ("prog.py:3", "datasets.load_dataset('imdb')")
    assert list(F.shell_fetches("pip install --no-index ./wheels/*.whl\ntorchrun t.py", "c")) == []


def test_a_heredoc_is_read_as_the_pod_writes_it_where_the_caller_knows():
    """`written`: the file as the pod's bash writes it (the plan's plan/checks/pod_files.py),
    read instead of the heredoc's text; None (unknown) is not read, nor guessed at."""
    script = (
        "read -r -d '' SCRIPT << EOM\ndef train():\n    x = 1 + \\\n        2\n"
        "    import requests\n    requests.get('https://data.example.org/x')\nEOM\n"
        'printf "%s" "$SCRIPT" > "prog.py"\ntorchrun "prog.py"'
    )
    as_written = [f.where for f in F.shell_fetches(script, "c")]
    pod = "def train():\n    x = 1 +         2\n    import requests\n    requests.get('https://data.example.org/x')"
    as_run = [f.where for f in F.shell_fetches(script, "c", written={"prog.py": pod})]
    assert (as_written, as_run) == (["prog.py:5"], ["prog.py:4"])
    assert list(F.shell_fetches(script, "c", written={"prog.py": None})) == []
    argv = ["bash", "-c", script]
    assert [f.where for f in F.container_fetches(argv, "c", [], {}, (), {"prog.py": pod})] == [
        "prog.py:4"
    ]


def test_a_name_bound_once_to_a_literal_is_read_as_it():
    """`MODEL = "gpt2"; AutoModel.from_pretrained(MODEL)`: a module constant or a local bound
    once in the file is resolved (an f-string's literal head too); before, neither was seen."""
    head = "from transformers import AutoModel\nimport requests\n"
    module = head + 'MODEL = "gpt2"\nAutoModel.from_pretrained(MODEL)\n'
    (found,) = F.python_fetches(module, "t.py")
    assert (found.where, found.fetcher) == (
        "t.py:4",
        "transformers.AutoModel.from_pretrained('gpt2')",
    )
    local = (
        head
        + 'def main():\n    url: str = f"https://data.example.org/{1}"\n    requests.get(url)\n'
    )
    (found,) = F.python_fetches(local, "t.py")
    assert (found.where, found.reaches) == ("t.py:5", "data.example.org")
    # a local path in a constant stays no fetch
    assert F.python_fetches(head + 'M = "/fsx/m"\nAutoModel.from_pretrained(M)\n', "t.py") == []


@pytest.mark.parametrize(
    "code",
    [
        'MODEL = "gpt2"\nif big:\n    MODEL = "/fsx/llama"\nAutoModel.from_pretrained(MODEL)',
        'MODEL = "gpt2"\ndef f(MODEL):\n    AutoModel.from_pretrained(MODEL)',
        'for MODEL in ("gpt2",):\n    AutoModel.from_pretrained(MODEL)',
        'MODEL = "gpt2"\nMODEL += "-xl"\nAutoModel.from_pretrained(MODEL)',
        "MODEL = os.environ['MODEL']\nAutoModel.from_pretrained(MODEL)",
        'BASE = "gpt2"\nMODEL = BASE\nAutoModel.from_pretrained(MODEL)',
    ],
)
def test_a_name_bound_twice_or_to_no_literal_is_not_guessed(code: str):
    src = "import os\nfrom transformers import AutoModel\n" + code + "\n"
    assert F.python_fetches(src, "t.py") == []


def test_s3_urls_are_read_from_the_command_line_its_scripts_and_the_env():
    argv = ["python", "train.py", "--data", "s3://datasets/imagenet", "--out=s3://b/out"]
    argv += ["--checkpoint-s3", "s3://ckpt/vision/checkpoints/a"]
    env = {"TRAINFORGE_CHECKPOINT_S3": "s3://ckpt/vision/x", "DATA": "s3://d/e", "N": "4"}
    assert F.s3_urls(argv, env) == [
        ("command", "s3://datasets/imagenet", "reads"),
        ("command", "s3://b/out", "reads"),
        ("command", "s3://ckpt/vision/checkpoints/a", "checkpoints"),
        ("env TRAINFORGE_CHECKPOINT_S3", "s3://ckpt/vision/x", "checkpoints"),
        ("env DATA", "s3://d/e", "reads"),
    ]
    script = "aws s3 cp s3://x/y /tmp/y && torchrun t.py --checkpoint-s3=s3://c/p\necho 'open"
    assert F.s3_urls(["bash", "-c", script], {}) == [
        ("command", "s3://x/y", "reads"),
        ("command", "s3://c/p", "checkpoints"),
    ]
    # an upload is an upload, as the internet-fetch check's model says (`_aws_s3`)
    script = "aws s3 cp /fsx/out.tar s3://b/o/out.tar; aws --region x s3 ls s3://b/o"
    assert F.s3_urls(["sh", "-c", f"{script}; env A=1 aws s3 sync . s3://b/s"], {}) == [
        ("command", "s3://b/o/out.tar", "uploads"),
        ("command", "s3://b/o", "reads"),
        ("command", "s3://b/s", "uploads"),
    ]
    assert F.s3_urls(["python", "t.py", "--data", "/fsx/s3://x"], {"A": "/fsx"}) == []
