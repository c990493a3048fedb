"""Kueue's quota arithmetic for one level of cohort (the platform nests none, so the cohort is
the root and borrowing is height 1): pkg/cache/scheduler/resource_node.go (`available`,
`potentialAvailable`, `localQuota`, `accumulateFromChild`) and pkg/scheduler/preemption/
classical/hierarchical_preemption.go (`FindHeightOfLowestSubtreeThatFits`) at release-0.19
c90ed70 (read 2026-11-29; the same on main for v0.20). A member lends its nominal quota to the
cohort but what its `lendingLimit` keeps back (its local quota), and may take what is unused
there up to its `borrowingLimit` beyond its nominal quota.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

from trainforge.plan.kueue.objects import ClusterQueue

ZERO = Fraction(0)


class Quotas:
    """The cohort tree of a set of ClusterQueues (their `usage` read live)."""

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
        """Nominal minus its lendingLimit (no limit: 0)."""
        lend = q.lend_limit.get(f, {}).get(r)
        if lend is None:
            return ZERO
        return max(ZERO, Quotas.nominal(q, f, r) - lend)

    def cohort_quota(self, q: ClusterQueue, f: str, r: str) -> Fraction:
        """Its own and what its members lend."""
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
        """All else idle (PotentialAvailable)."""
        if not q.cohort:
            return self.nominal(q, f, r)
        most = self.local(q, f, r) + self.cohort_quota(q, f, r)
        limit = q.borrow_limit.get(f, {}).get(r)
        if limit is not None:
            most = min(self.nominal(q, f, r) + limit, most)
        return most

    def reclaimers(self, q: ClusterQueue, f: str, resources: Iterable[str]) -> list[str]:
        """The other members with nominal quota of `resources` in `f` and reclaimWithinCohort
        other than Never: they may evict what `q` borrows there."""
        wanted = list(resources)
        return [
            m.name
            for m in self.members(q)
            if m is not q
            and any(self.nominal(m, f, r) for r in wanted)
            and m.preemption.get("reclaimWithinCohort", "Never") != "Never"
        ]

    def height(self, q: ClusterQueue, f: str, r: str, val: Fraction) -> tuple[int, bool]:
        """(borrowing level, may reclaim higher up): FindHeightOfLowestSubtreeThatFits under a
        root cohort; it borrows when `val` more exceeds its nominal quota (BorrowingWith)."""
        if not q.cohort or q.use(f, r) + val <= self.nominal(q, f, r):
            return 0, bool(q.cohort)
        return 1, False
