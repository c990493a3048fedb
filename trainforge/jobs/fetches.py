"""What a job's code fetches from the internet: a static reader of well-known fetchers.

Why: a team namespace's NetworkPolicies let pods reach no address outside the VPC's AWS
endpoints and S3 (docs/teams.md, "Network"), so code that downloads a data set, a model or a
package at start fails at its first step. The plan reads the code it sees (the function the
Kubeflow SDK sends, a job's shipped script, a container's command line) with this one reader
and says so before the job runs (`plan/checks/fetches.py`).

Python is read with `ast` (names resolved through the file's imports, function-local ones
too); shell with `shlex`, a command at a time. Only what the code says literally counts, or a
name the file binds exactly once, to a literal (`MODEL = "gpt2"`, module-level or local); any
other variable is not guessed at, so a finding is never a guess.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import ipaddress
import posixpath
import re
import shlex
import textwrap
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal
from urllib.parse import urlsplit

from trainforge.jobs import shell_argv
from trainforge.training.contract import CHECKPOINT_S3

# huggingface/datasets src/datasets/packaged_modules/__init__.py `_PACKAGED_DATASETS_MODULES`
# (main, read 2026-11-30): builders that read the `data_files` they are given, not the Hub.
HF_PACKAGED = frozenset(
    {"csv", "json", "pandas", "parquet", "arrow", "text", "imagefolder", "audiofolder",
     "videofolder", "pdffolder", "niftifolder", "webdataset", "xml", "hdf5", "eval", "lance"}
)  # fmt: skip
HUB = "the Hugging Face Hub (huggingface.co)"
RULE = "TRAINFORGE_INTERNET_FETCH"  # the plan's finding (plan/checks/fetches.py)
# torchvision 0.22.1 (the Trainer notebook's pin) and 0.29.1, datasets/mnist.py `download`,
# which FashionMNIST and KMNIST inherit: run here with no network (`unshare --net`,
# 2026-11-30), FashionMNIST(download=True) raised this, then "Tried <mirror>, got:" and the
# mirror's URLError, for its first file
MNIST_FAMILY = frozenset({"MNIST", "FashionMNIST", "KMNIST"})
MNIST_ERROR = (
    "RuntimeError: Error downloading train-images-idx3-ubyte.gz: Tried <mirror>, got: <URLError>"
)
_HTTP = ("get", "post", "put", "patch", "delete", "head", "request", "options")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
# a heredoc's file (as the script names it) -> its text as the pod writes it (None: unknown)
WrittenTexts = Mapping[str, str | None] | None
_SAVED_TO = re.compile(r"""printf\s+["']%s["']\s+["']?\$(\w+)["']?\s*>\s*["']?([^\s"']+)""")


@dataclass(frozen=True)
class Fetch:
    """One recognised transfer: where (file:line), the fetcher, what it reaches, and whether
    it sends the pod's data out (an upload) rather than fetching something in."""

    where: str
    fetcher: str  # e.g. "torchvision.datasets.FashionMNIST(download=True)"
    reaches: str  # e.g. "the data set's mirrors on the internet", a URL's host
    error: str = ""  # the library's own error when the download fails, where it has one
    upload: bool = False  # curl -T, wget --post-file, aws s3 cp LOCAL s3://... (_upload)
    bucket: str = ""  # the S3 bucket a URL names (s3_bucket), "" for any other host

    @property
    def verb(self) -> str:
        """ "uploads to" or "downloads from": what the plan, import and run-local print."""
        return "uploads to" if self.upload else "downloads from"

    def describe(self) -> str:
        """`where: fetcher uploads to|downloads from what`, the one line every reader prints."""
        return f"{self.where}: {self.fetcher} {self.verb} {self.reaches}"


# S3's hostnames (S3 User Guide, "Virtual hosting of buckets" and "Path-style requests"):
# BUCKET.s3.REGION.amazonaws.com, BUCKET.s3-REGION.amazonaws.com, BUCKET.s3.amazonaws.com
# (us-east-1's legacy global name), and the path-style s3[.-]REGION.amazonaws.com/BUCKET
_S3_HOST = re.compile(r"^(?:(?P<bucket>.+)\.)?s3(?:[.-](?P<region>[a-z0-9-]+))?\.amazonaws\.com$")


def s3_target(url: str) -> tuple[str, str] | None:
    """(bucket, region: "" for the global name) an S3 URL names (`s3://BUCKET/...`, a
    virtual-hosted or a path-style HTTPS URL), else None. `s3://`'s region is the caller's:
    "" too."""
    if url.startswith("s3://"):
        bucket = url[5:].split("/", 1)[0]
        return (bucket, "") if bucket else None
    parts = urlsplit(url)
    m = _S3_HOST.match(parts.hostname or "") if parts.scheme in ("http", "https") else None
    if not m:
        return None
    region = m["region"] or ""
    if region in ("external-1", "accelerate"):  # not a region: no bucket in region here
        return None
    bucket = m["bucket"] or parts.path.lstrip("/").split("/", 1)[0]
    return (bucket, region) if bucket else None


def in_region_s3(f: Fetch, region: str) -> bool:
    """Whether `f` reaches S3 of `region`, which the team policies open and the VPC's S3
    gateway endpoint's policy then judges (`s3://` URLs: the SDK's region, the stack's; the
    global name is us-east-1's)."""
    if not f.bucket:
        return False
    url = f.reaches if "://" in f.reaches else f"https://{f.reaches}/{f.bucket}"
    target = s3_target(url) or (f.bucket, "")
    return target[1] == region or (
        not target[1] and (f.reaches.startswith("s3://") or region == "us-east-1")
    )


def local_path(text: str) -> bool:
    """A file system path (FSx, an emptyDir, the image), not a Hub id or a URL."""
    return text.startswith(("/", "./", "../", "~", "file:")) or text in (".", "..")


def url_host(text: str) -> str | None:
    """The internet host a URL names, else None: not a URL, or a host inside the cluster or
    the VPC (no dot, `.svc`, `.local`, `.internal`, a private or loopback address)."""
    if text.startswith("git@"):
        host: str | None = text[4:].split(":", 1)[0]
    else:
        parts = urlsplit(text)
        if parts.scheme == "hf":  # hf://datasets/..., hf://org/model: the Hub
            return "huggingface.co"
        host = parts.hostname if parts.scheme in ("http", "https", "git") else None
    if not host or "." not in host or host.endswith((".svc", ".local", ".internal")):
        return None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    return None if (address.is_private or address.is_loopback) else host


# --- Python ------------------------------------------------------------------------------------


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted module path, from every import in the file (function-local too)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str:
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value, aliases)}.{node.attr}"
    if isinstance(node, ast.Call):
        return _dotted(node.func, aliases) + "()"
    return "?"


Consts = dict[str, ast.AST]
_NONE: Consts = {}


def _text(node: ast.AST | None, consts: Consts = _NONE) -> str | None:
    """A literal string, or an f-string's leading literal part (enough for a URL's host), or
    a name of `consts` (`_constants`) holding one."""
    if isinstance(node, ast.Name) and node.id in consts:
        return _text(consts[node.id])
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        return _text(node.values[0])
    return None


def _constants(tree: ast.AST) -> Consts:
    """Names the file binds exactly once, by `NAME = <literal>`: their literal. Every other
    binding (an argument, a loop or `with` target, +=, an import, a def, `global`) counts, so a
    name bound twice anywhere in the file, in any scope, is not resolved."""
    seen: defaultdict[str, list[ast.AST | None]] = defaultdict(list)

    def bind(target: ast.AST | None, value: ast.AST | None = None) -> None:
        if isinstance(target, ast.Name):
            seen[target.id].append(value)
        elif isinstance(target, ast.Tuple | ast.List):
            for e in target.elts:
                bind(e)
        elif isinstance(target, ast.Starred):
            bind(target.value)

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                bind(t, node.value)
        elif isinstance(node, ast.AnnAssign):
            bind(node.target, node.value)
        elif isinstance(
            node, ast.AugAssign | ast.For | ast.AsyncFor | ast.comprehension | ast.NamedExpr
        ):
            bind(node.target)
        elif isinstance(node, ast.withitem):
            bind(node.optional_vars)
        elif isinstance(node, ast.Delete):
            for t in node.targets:
                bind(t)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            seen[node.name].append(None)
        elif isinstance(node, ast.arg):
            seen[node.arg].append(None)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for a in node.names:
                seen[(a.asname or a.name).split(".")[0]].append(None)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            for name in node.names:
                seen[name].append(None)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            seen[node.name].append(None)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            seen[node.rest].append(None)
    return {
        name: values[0]
        for name, values in seen.items()
        if len(values) == 1 and values[0] is not None and _text(values[0]) is not None
    }


def _kw(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is(node: ast.AST | None, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _arg(call: ast.Call, name: str) -> ast.AST | None:
    return call.args[0] if call.args else _kw(call, name)


def staged_path(root: str | None, staged: tuple[str, ...]) -> bool:
    """Whether `root` is on one of the `staged` mount paths."""
    return root is not None and any(
        root == s or root.startswith(s.rstrip("/") + "/") for s in staged
    )


def _call(
    call: ast.Call, name: str, staged: tuple[str, ...], consts: Consts = _NONE
) -> tuple[Any, ...] | None:
    """(fetcher, what it reaches[, error, upload, bucket]: Fetch's fields) when `call` (dotted `name`) downloads, else None; `consts`:
    the file's names that hold a literal (`_constants`)."""
    short = name.rsplit(".", 1)[-1]

    def text(node: ast.AST | None) -> str | None:
        return _text(node, consts)

    # a Hub cache on a volume that outlives the pod may hold it (as torchvision's root may):
    # not counted, as local_files_only=True is not
    cache = text(_kw(call, "cache_dir"))
    offline = _is(_kw(call, "local_files_only"), True) or staged_path(cache, staged)
    # download=True fetches only what `root` lacks (torchvision/datasets/mnist.py `download`
    # returns at `_check_exists()`): data staged on a volume that outlives the pod is read
    root = text(_arg(call, "root"))
    if (
        name.startswith("torchvision.datasets.")
        and _is(_kw(call, "download"), True)
        and not staged_path(root, staged)
    ):
        error = MNIST_ERROR if short in MNIST_FAMILY else ""
        return f"{name}(download=True)", "the data set's mirrors on the internet", error
    if name.startswith("torchvision.models.") and (
        _is(_kw(call, "pretrained"), True)
        or (_kw(call, "weights") is not None and not _is(_kw(call, "weights"), None))
    ):
        return f"{name}(weights=...)", "download.pytorch.org"
    if name in ("torch.hub.load_state_dict_from_url", "torch.hub.download_url_to_file"):
        return name, "the URL it is given"
    if name == "torch.hub.load" and text(_kw(call, "source")) != "local":
        return name, "github.com (the repository it names)"
    if short == "from_pretrained" and not offline:
        model = text(_arg(call, "pretrained_model_name_or_path"))
        if model is not None and not local_path(model):
            return f"{name}({model!r})", HUB
    if name == "datasets.load_dataset" and not offline:
        path = text(_arg(call, "path"))
        files = [text(n) for n in ast.walk(_kw(call, "data_files") or ast.Pass())]
        remote = [f for f in files if f and url_host(f)]
        if path is not None and not local_path(path) and (path not in HF_PACKAGED or remote):
            return f"{name}({path!r})", HUB if not remote else str(url_host(remote[0]))
    if name in ("huggingface_hub.snapshot_download", "huggingface_hub.hf_hub_download"):
        return (name, HUB) if not offline else None
    if name in ("urllib.request.urlopen", "urllib.request.urlretrieve") or (
        name.startswith("requests.") and short in _HTTP
    ):
        url = text(_arg(call, "url"))
        host = url_host(url) if url else None
        # a body sent (requests' data/json/files, urlopen's data): the pod's data goes out
        sent = short in ("post", "put", "patch") or any(
            _kw(call, k) is not None for k in ("data", "json", "files")
        )
        bucket = (s3_target(url) or ("", ""))[0] if url else ""
        return (f"{name}({url!r})", host, "", sent, bucket) if host else None
    if name in ("os.system",) or (
        name.startswith("subprocess.")
        and short in ("run", "call", "check_call", "check_output", "Popen")
    ):
        return _subprocess(call, consts)
    return None


def _subprocess(call: ast.Call, consts: Consts = _NONE) -> tuple[Any, ...] | None:
    """A literal command (a string or a list of strings) that runs a fetching command."""
    node = _arg(call, "args")
    if isinstance(node, ast.List | ast.Tuple):
        words = [_text(e, consts) for e in node.elts]
        if any(w is None for w in words):
            return None
        script = shlex.join(w for w in words if w is not None)
    else:
        script = _text(node, consts) or ""
    found = next(shell_fetches(script, "-"), None)
    return (
        (found.fetcher, found.reaches, found.error, found.upload, found.bucket) if found else None
    )


def python_fetches(
    source: str, where: str, first_line: int = 1, staged: tuple[str, ...] = ()
) -> list[Fetch]:
    """Every recognised download in Python `source`, each at `where:line` (line numbers from
    `first_line`); `staged`: mount paths of volumes that outlive a pod (FSx), where data may
    already be. A file that does not parse is not read (Python itself refuses it)."""
    return [
        Fetch(f"{where}:{first_line + line - 1}", *found)
        for line, found in _python_fetches(source, staged)
    ]


@functools.lru_cache(maxsize=4096)
def _python_fetches(
    source: str, staged: tuple[str, ...]
) -> tuple[tuple[int, tuple[Any, ...]], ...]:
    """python_fetches' (line, what it reaches), once per file text and staged paths, wherever
    it is mounted: every container of every pod of a plan mounts the same runtime files from
    its ConfigMaps, at per-team paths (prod: 291 reads of ~20 files)."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except (SyntaxError, ValueError):
        return ()
    aliases, consts = _aliases(tree), _constants(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            found = _call(node, _dotted(node.func, aliases), staged, consts)
            if found:
                out.append((node.lineno, found))
    return tuple(sorted(out, key=lambda f: f[0]))


# --- shell -------------------------------------------------------------------------------------


def _pip_installs(words: list[str]) -> bool:
    """`pip install ...` that asks a package index (no --no-index, not only local paths)."""
    if "install" not in words or "--no-index" in words:
        return False
    rest = words[words.index("install") + 1 :]
    named = [w for w in rest if not w.startswith("-")]
    return not named or not all(local_path(w) or w.endswith((".whl", ".tar.gz")) for w in named)


def command_fetches(
    words: list[str], where: str, staged: tuple[str, ...] = (), written: WrittenTexts = None
) -> list[Fetch]:
    """A command's words (a container's command and args, or one shell command); `written`:
    see shell_fetches."""
    words = shell_argv.program(words)
    if not words:
        return []
    prog = posixpath.basename(words[0])
    urls = [w for w in words[1:] if url_host(w)]
    script = shell_argv.shell_script(words)
    if script is not None:
        if re.search(r":\d+$", where):  # a script in a script's line: named by that line
            found = shell_fetches(script, where, staged, written)
            return [replace(f, where=where) for f in found]
        return list(shell_fetches(script, where, staged, written))
    if re.match(r"^python(3(\.\d+)?)?$", prog) and "-c" in words[1:-1]:
        return python_fetches(words[words.index("-c") + 1], f"{where} python -c", 1, staged)
    if re.match(r"^python(3(\.\d+)?)?$", prog) and words[1:3] == ["-m", "pip"]:
        words, prog = words[2:], "pip"
    if prog in ("uv",) and words[1:2] == ["pip"]:
        words, prog = words[1:], "pip"
    if re.match(r"^pip3?(\.\d+)?$", prog) and _pip_installs(words):
        return [Fetch(where, "pip install", "a package index (pypi.org unless --index-url)")]
    if prog in ("wget", "curl") and urls:
        up = _upload(prog, words[1:])
        fetcher = f"{prog} {up + ' ' if up else ''}{urls[0]}"
        bucket = (s3_target(urls[0]) or ("", ""))[0]
        return [Fetch(where, fetcher, str(url_host(urls[0])), upload=bool(up), bucket=bucket)]
    if prog == "aws" and words[1:2] == ["s3"] and len(words) > 2:
        return _aws_s3(words[2:], where)
    if prog == "git" and "clone" in words and urls:
        return [Fetch(where, f"git clone {urls[0]}", str(url_host(urls[0])))]
    if prog in ("huggingface-cli", "hf") and "download" in words:
        return [Fetch(where, f"{prog} download", HUB)]
    return []


# curl's and wget's options that send a local file or data (curl(1): -T/--upload-file,
# -d/--data* and -F/--form with @FILE; wget(1): --post-file, --body-file, --post-data,
# --body-data), longest first so `--data-binary` is read before `--data`
_CURL_SENDS = ("--upload-file", "--data-binary", "--data-urlencode", "--data-raw", "--data",
               "--form", "--json", "-T", "-d", "-F")  # fmt: skip
_WGET_SENDS = ("--post-file", "--body-file", "--post-data", "--body-data")


def _upload(prog: str, args: list[str]) -> str:
    """The option by which `curl`/`wget` `args` send data out (`-T`, `--post-file`...), else
    ""; a bare `-X PUT`/`--method=PUT` with no body sends nothing of the pod's."""
    sends = _CURL_SENDS if prog == "curl" else _WGET_SENDS
    for a in args:
        for opt in sends:
            if a == opt or a.startswith(opt + "=") or (len(opt) == 2 and a.startswith(opt)):
                return opt
    return ""


def _aws_s3(args: list[str], where: str) -> list[Fetch]:
    """`aws s3 cp|mv|sync SRC DST` (an upload when DST is `s3://` and SRC is local or `-`,
    stdin) and `aws s3 ls|rm|...` (a read): a Fetch naming the bucket."""
    op, rest = args[0], [a for a in args[1:] if not a.startswith("-")]
    urls = [a for a in rest if a.startswith("s3://")]
    if not urls:
        return []
    upload = op in ("cp", "mv", "sync") and len(rest) >= 2 and not rest[0].startswith("s3://")
    url = urls[-1] if upload else urls[0]
    bucket = url[5:].split("/", 1)[0]
    fetcher = f"aws s3 {op} {rest[0]}" if upload else f"aws s3 {op}"
    return [Fetch(where, fetcher, url, upload=upload, bucket=bucket)]


def _commands(line: str) -> Iterator[list[str]]:
    """A logical shell line's commands (split at ;, &&, ||, |, parentheses)."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|()")
    lex.whitespace_split = True
    words: list[str] = []
    for tok in lex:
        if tok and set(tok) <= set(";&|()"):
            yield words
            words = []
        else:
            words.append(tok)
    yield words


def _heredoc(
    lines: list[str], i: int, m: re.Match[str], script: str, where: str
) -> tuple[int, str, str]:
    """The heredoc `m` opens on line `i` of `script`: (its closing line's index, the file the
    script saves its text to (`printf "%s" "$VAR" > FILE`, the SDK's), else `where heredoc
    <<WORD`, its text as that file holds it)."""
    end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == m[2]), len(lines))
    # `read -d ''` drops the leading newlines: the file's line 1 is the first text
    body = "\n".join(lines[i + 1 : end])
    body = body.lstrip("\n") if re.search(r"\bread\b", lines[i]) else body
    var = re.search(r"(\w+)\s*<<", lines[i])
    saved = dict(_SAVED_TO.findall(script))
    return end, saved.get(var[1] if var else "", f"{where} heredoc <<{m[2]}"), body


def heredoc_files(script: str, where: str) -> list[tuple[str, str]]:
    """(file, text) of each heredoc of a shell script: the Kubeflow SDK ships its function so
    (`read -r -d '' SCRIPT << EOM`, then `printf "%s" "$SCRIPT" > FILE`, kubeflow 0.4.1
    trainer/constants/constants.py EXEC_FUNC_SCRIPT)."""
    lines, out, i = script.split("\n"), [], 0
    while i < len(lines):
        m = _HEREDOC.search(lines[i])
        if m:
            end, name, body = _heredoc(lines, i, m, script, where)
            out.append((name, body))
            i = end
        i += 1
    return out


def shell_fetches(
    script: str, where: str, staged: tuple[str, ...] = (), written: WrittenTexts = None
) -> Iterator[Fetch]:
    """Every recognised download in a shell script. A heredoc whose text is Python (the
    Kubeflow SDK's way of shipping a function) is read as Python, named by the file the
    script then writes it to (`printf "%s" "$SCRIPT" > "file.py"`); `written`: that file's
    text as the pod's bash writes it, by its name (None: unknown, not read), where the
    caller computed it (the plan: `plan/checks/pod_files.py`)."""
    lines = script.split("\n")
    i, pending, start = 0, "", 0
    while i < len(lines):
        line, lineno = lines[i], i + 1
        m = _HEREDOC.search(line)
        if m:
            end, name, body = _heredoc(lines, i, m, script, where)
            text = written.get(name, body) if written is not None else body
            if text is not None:
                yield from python_fetches(text, name, 1, staged)
            line, i = line[: m.start()], end
        pending, start = (pending + "\n" + line, start) if pending else (line, lineno)
        i += 1
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        try:
            commands = list(_commands(pending))
        except ValueError:  # an open quote: the command goes on on the next line
            continue
        for words in commands:
            yield from command_fetches(words, f"{where}:{start}", staged)
        pending = ""


# --- a container -------------------------------------------------------------------------------

# huggingface_hub src/huggingface_hub/constants.py (main, read 2026-11-30): HF_HUB_OFFLINE =
# _is_true(HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE), true for 1/ON/YES/TRUE: no Hub request
HF_OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
TRUE = {"1", "ON", "YES", "TRUE"}
# the Hub cache's directory (huggingface_hub constants: HF_HUB_CACHE, else HF_HOME/hub): on a
# volume that outlives the pod, it may hold what the code asks for, so it is not counted
HF_CACHES = ("HF_HOME", "HF_HUB_CACHE")


def container_fetches(
    argv: list[str],
    where: str,
    files: list[tuple[str, str]],
    env: dict[str, str],
    staged: tuple[str, ...],
    written: WrittenTexts = None,
) -> list[Fetch]:
    """What one container fetches: its command line (`argv`, named `where`) and the Python
    `files` ((path, text)) it is given, less Hub calls its `env` keeps offline or in a cache
    on a volume that outlives the pod (`staged`). The plan's reading of a container, and
    `trainforge import`'s and run-local's of a job (`jobs.local.job_fetches`). `written`:
    see shell_fetches."""
    found = command_fetches(argv, where, staged, written)
    for path, text in files:
        if text not in _runtime_texts():
            found += python_fetches(text, path, staged=staged)
    offline = any(env.get(k, "").upper() in TRUE for k in HF_OFFLINE) or any(
        staged_path(env.get(k), staged) for k in HF_CACHES
    )
    return [f for f in found if not (offline and f.reaches == HUB)]


@functools.cache
def _runtime_texts() -> frozenset[str]:
    """The bundled runtime's Python files (jobs/codeship.collect), which every pod of a plan
    mounts from its ConfigMaps (prod: 59 files, 2.9 of its 19.6 s under cProfile): they
    download nothing (tests/jobs/test_local.py::test_the_shipped_runtime_downloads_nothing,
    which reads each with this reader), so a mounted copy is not read again."""
    from trainforge.jobs import codeship  # noqa: PLC0415 - only where a container has files

    try:
        return frozenset(t for p, t in codeship.collect().files if p.endswith(".py"))
    except (OSError, ValueError):  # an install without the runtime: read every file
        return frozenset()


# what a job does with an S3 URL it names (`s3_urls`)
S3Use = Literal["checkpoints", "uploads", "reads"]


def s3_urls(argv: list[str], env: Mapping[str, str]) -> list[tuple[str, str, S3Use]]:
    """(where, URL, use) for each `s3://` URL a container names literally: a word of its
    command line or of a script's commands in it (`sh -c`), or an env value. Use:
    "checkpoints" for the runtime's `--checkpoint-s3` (training/config.py) and CHECKPOINT_S3
    (training/contract.py), where it uploads checkpoints; "uploads" for the S3 URL a command
    sends the pod's data to, as the one model of uploads says it (`_aws_s3`, the internet-fetch
    check's: `aws s3 cp|mv|sync LOCAL s3://...`); "reads" for every other URL."""
    out: list[tuple[str, str, S3Use]] = []

    def scan(words: list[str]) -> None:
        program = shell_argv.program(words)
        sent = (
            {f.reaches for f in _aws_s3(program[2:], "") if f.upload}
            if len(program) > 2 and posixpath.basename(program[0]) == "aws" and program[1] == "s3"
            else set()
        )
        for i, w in enumerate(words):
            flag, _, value = w.partition("=") if w.startswith("--") else ("", "", w)
            if value.startswith("s3://"):
                checkpoint = "--checkpoint-s3" in (flag, words[i - 1] if i else "")
                use: S3Use = (
                    "checkpoints" if checkpoint else "uploads" if value in sent else "reads"
                )
                out.append(("command", value, use))
            elif " " in w or "\n" in w:  # a script: its commands' words
                for line in w.split("\n"):
                    with contextlib.suppress(ValueError):  # an open quote: not read
                        for words_ in list(_commands(line)):
                            scan(words_)

    scan(argv)
    out += [
        (f"env {k}", v, "checkpoints" if k == CHECKPOINT_S3 else "reads")
        for k, v in env.items()
        if v.startswith("s3://")
    ]
    return out


def outside_aws(found: list[Fetch], region: str) -> list[Fetch]:
    """`found` less what reaches AWS API hosts of `region` (the VPC's endpoints), which the
    team policies open. S3 of `region` is kept (`in_region_s3`): the policies open its
    ranges, for every bucket, and which buckets answer is the S3 endpoint's policy's say
    (the plan: `plan/checks/s3_reach.py`)."""
    return [
        f
        for f in found
        if in_region_s3(f, region)
        or not (f.reaches.endswith(f".{region}.amazonaws.com") or f.reaches.startswith("s3://"))
    ]


def without_stack(found: list[Fetch]) -> list[Fetch]:
    """What run-local says is blocked when it has no stack to read: `found` less S3 requests,
    which the team policies let out (S3's ranges) and which only the stack's S3 endpoint
    policy judges, by the bucket's account (`plan/checks/s3_reach.py`): unknown here."""
    return [f for f in found if not f.bucket]


def cluster_note(what: str, f: Fetch, namespace: str | None = None, s3: str | None = None) -> str:
    """run-local's line for one transfer of the code it runs: it may work on this machine,
    not in the pods. `namespace`: the stack's namespace whose policies the plan read as
    closed; None (no stack): the platform's team policies (platform/teams.py
    `network_policies`: default-deny, egress to DNS, the VPC's endpoints, S3, the Pod Identity
    agent), which no stack key opens (docs/teams.md, Network). `s3`: for a request to a
    bucket, what the stack's S3 endpoint does with it (the plan's `fetches.s3_refusal`)."""
    if s3:
        cluster = f"bucket {f.bucket} is not the stack's, and {s3}"
    elif namespace:
        cluster = f"namespace {namespace}'s NetworkPolicies block it"
    else:
        cluster = "a team namespace's NetworkPolicies block it (no stack key opens internet egress)"
    return (
        f"run-local: {what}: note: {f.describe()}; it may work "
        f"here, but on the cluster {cluster}, so the call fails there ({RULE}; docs/teams.md, "
        "Network)"
    )
