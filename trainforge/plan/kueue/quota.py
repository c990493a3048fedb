"""Kueue's quota arithmetic for one level of cohort: what a ClusterQueue may still take in a
flavor now (`available`), at most (`potential`), and whether that borrows.

Source: pkg/cache/scheduler/resource_node.go (`available`, `potentialAvailable`,
`localQuota`, `accumulateFromChild`) and pkg/scheduler/preemption/classical/
hierarchical_preemption.go (`FindHeightOfLowestSubtreeThatFits`) at release-0.19 c90ed70 (read
2026-11-29; the same functions on main for v0.20). A member's nominal quota is lent to the
cohort except what its `lendingLimit` keeps back (its local quota); the cohort holds its own
nominal quota and what its members lend; a member may take from the cohort what is unused
there, no more than its `borrowingLimit` beyond its nominal quota. The platform has no nested
cohorts, so the cohort is the root and borrowing is one level (height 1).
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

from trainforge.plan.kueue.objects import ClusterQueue

ZERO = Fraction(0)


class Quotas:
    """The cohort tree of a set of ClusterQueues (their `usage` is read live)."""

    def __init__(
        self,
        queues: dict[str, ClusterQueue],
        shared: dict[str, dict[str, dict[str, Fraction]]] | None = None,
    ) -> None:
        self.queues = queues
        self.shared = shared or {}

    def members(self, q: ClusterQueue) -> list[ClusterQueue]:
        if not q.cohort:
            return [q]
        return [m for m in self.queues.values() if m.cohort == q.cohort]

    @staticmethod
    def nominal(q: ClusterQueue, f: str, r: str) -> Fraction:
        return q.nominal.get(f, {}).get(r, ZERO)

    @staticmethod
    def local(q: ClusterQueue, f: str, r: str) -> Fraction:
        """What the member keeps from the cohort: nominal minus its lendingLimit (else 0)."""
        lend = q.lend_limit.get(f, {}).get(r)
        if lend is None:
            return ZERO
        return max(ZERO, Quotas.nominal(q, f, r) - lend)

    def cohort_quota(self, q: ClusterQueue, f: str, r: str) -> Fraction:
        """The cohort's subtree quota: its own and what its members lend."""
        own = self.shared.get(q.cohort or "", {}).get(f, {}).get(r, ZERO)
        lent = sum((self.nominal(m, f, r) - self.local(m, f, r) for m in self.members(q)), ZERO)
        return own + lent

    def cohort_usage(self, q: ClusterQueue, f: str, r: str) -> Fraction:
        return sum((max(ZERO, m.use(f, r) - self.local(m, f, r)) for m in self.members(q)), ZERO)

    def available(self, q: ClusterQueue, f: str, r: str) -> Fraction:
        """What the queue may take now without preempting (ClusterQueueSnapshot.Available)."""
        if not q.cohort:
            return max(ZERO, self.nominal(q, f, r) - q.use(f, r))
        parent = self.cohort_quota(q, f, r) - self.cohort_usage(q, f, r)
        limit = q.borrow_limit.get(f, {}).get(r)
        if limit is not None:
            lq = self.local(q, f, r)
            stored = self.nominal(q, f, r) - lq
            used = max(ZERO, q.use(f, r) - lq)
            parent = min(stored - used + limit, parent)
        local = max(ZERO, self.local(q, f, r) - q.use(f, r))
        return max(ZERO, local + parent)

    def potential(self, q: ClusterQueue, f: str, r: str) -> Fraction:
        """The most the queue could ever hold, all else idle (PotentialAvailable)."""
        if not q.cohort:
            return self.nominal(q, f, r)
        most = self.local(q, f, r) + self.cohort_quota(q, f, r)
        limit = q.borrow_limit.get(f, {}).get(r)
        if limit is not None:
            most = min(self.nominal(q, f, r) + limit, most)
        return most

    def reclaimers(self, q: ClusterQueue, f: str, resources: Iterable[str]) -> list[str]:
        """The other members of the queue's cohort that may take back what it borrows of
        `resources` in flavor `f`: a nominal quota of one of them there, and
        `preemption.reclaimWithinCohort` other than Never (Kueue evicts the borrower when a
        job of theirs needs it back)."""
        wanted = list(resources)
        return [
            m.name
            for m in self.members(q)
            if m is not q
            and any(self.nominal(m, f, r) for r in wanted)
            and m.preemption.get("reclaimWithinCohort", "Never") != "Never"
        ]

    def height(self, q: ClusterQueue, f: str, r: str, val: Fraction) -> tuple[int, bool]:
        """(borrowing level, may reclaim higher up): FindHeightOfLowestSubtreeThatFits for a
        cohort that is the root (no parent to reclaim from); it borrows when holding `val`
        more exceeds its nominal quota (BorrowingWith)."""
        if not q.cohort or q.use(f, r) + val <= self.nominal(q, f, r):
            return 0, bool(q.cohort)
        return 1, False
