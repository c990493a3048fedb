"""Every pod/stack rule's fix line is a whole sentence (issue #43: the Docker Hub rule's fix
ended at "...so Docker Hub images are")."""

from __future__ import annotations

import pytest

from trainforge.plan.checks import rules as R

# words a sentence cannot end on: a line that ends here was cut mid-sentence
DANGLING = {"a", "an", "and", "are", "as", "by", "for", "from", "is", "of", "or", "so", "the",
            "to", "with", "be", "in", "on"}  # fmt: skip


@pytest.mark.parametrize("rule", R.RESOURCE_RULES, ids=lambda r: r.id)
def test_each_fix_line_ends_its_sentence(rule):
    last = rule.fix.rstrip(" .)").split()[-1].lower()
    assert last not in DANGLING, f"{rule.id}: fix ends mid-sentence: ...{rule.fix[-60:]!r}"


def test_the_docker_hub_fix_says_what_the_credential_does():
    (rule,) = [r for r in R.RESOURCE_RULES if r.id == "TRAINFORGE_DOCKER_HUB"]
    assert rule.fix.endswith(
        "so Docker Hub images are pulled through the cache's docker-hub rule with that "
        "credential (docs/images.md)"
    )
