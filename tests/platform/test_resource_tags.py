"""Every tagged resource the dev stack declares is within what platform/tags.py counts: the
limit on `trainforge:tags` is only right if no resource adds a key the builders miss."""

from __future__ import annotations

from tests.conftest import run_stack
from trainforge.platform.tags import AWS_TAG_LIMIT, _counted, karpenter_node_tags

NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
USER = {f"cost-{i}": "x" for i in range(40)}  # the most dev accepts (tests/stack)


def tag_sets(resource) -> list[dict]:
    """The tags a resource puts on AWS objects: its own, its launch template's, and for an
    EC2NodeClass the node Karpenter launches from it (Karpenter's keys added)."""
    inputs = resource.inputs
    found = [inputs["tags"]] if isinstance(inputs.get("tags"), dict) else []
    found += [s["tags"] for s in inputs.get("tagSpecifications") or [] if s.get("tags")]
    if resource.type == NODECLASS:
        cluster, pool = inputs["spec"]["tags"]["karpenter.sh/discovery"], resource.name
        found.append(karpenter_node_tags(inputs["spec"]["tags"], cluster, pool))
    return found


def test_no_declared_resource_carries_more_tags_than_aws_allows_at_the_accepted_limit():
    mocks = run_stack("dev", {"trainforge:tags": USER})
    counts = {(r.type, r.name): _counted(tags) for r in mocks.resources for tags in tag_sets(r)}
    assert counts, "no tagged resource seen"
    assert max(counts.values()) == AWS_TAG_LIMIT, sorted(counts.items(), key=lambda kv: -kv[1])
