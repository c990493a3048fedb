"""Kueue's flavor assignment: which ResourceFlavor each resource of a workload gets (Fit,
Preempt, NoFit; borrowing or not). Each function names the one it follows in pkg/scheduler/
flavorassigner/flavorassigner.go and tas_flavorassigner.go at release-0.19 c90ed70 (read
2026-11-29; v0.19.2 has all of it; main at ff69552 2026-08-22 changes only bookkeeping). Not
modelled: partial admission, reclaimable pods, the last-tried flavor across cycles, pod-set
groups, fair sharing, nested cohorts. Reasons are Kueue's text (`words`), as its tests want them
(tests/plan/fixtures/kueue_flavorassigner.yaml).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from trainforge.core import taints as T
from trainforge.core.quantity import counted
from trainforge.plan.kueue import words as W
from trainforge.plan.kueue.objects import TRY_NEXT, ClusterQueue, Flavor
from trainforge.plan.kueue.quota import Quotas

FIT, PREEMPT, NO_FIT = "Fit", "Preempt", "NoFit"
# preemption possibilities the oracle answers (pkg/scheduler/preemption/common)
NO_CANDIDATES, POSSIBLE, RECLAIM = "NoCandidates", "Preempt", "Reclaim"
# granular preemption modes, worst first (flavorassigner.go preemptionMode)
_NO_FIT, _NO_CANDIDATES, _PREEMPT, _RECLAIM, _FIT = range(5)
_FROM_ORACLE = {NO_CANDIDATES: _NO_CANDIDATES, POSSIBLE: _PREEMPT, RECLAIM: _RECLAIM}
_MODE = {_NO_FIT: NO_FIT, _NO_CANDIDATES: PREEMPT, _PREEMPT: PREEMPT, _RECLAIM: PREEMPT, _FIT: FIT}
_BIG = 1 << 30

# (queue, flavor, resource, quantity) -> (possibility, borrowing level after preempting)
Oracle = Callable[[ClusterQueue, str, str, Fraction], tuple[str, int]]


@dataclass(frozen=True)
class PodSet:
    name: str
    count: int
    requests: Mapping[str, Fraction]  # per pod
    node_selector: Mapping[str, str] = field(default_factory=dict)
    # required nodeSelectorTerms (ORed), each a list of matchExpressions
    affinity: tuple[tuple[Mapping[str, Any], ...], ...] = ()
    tolerations: tuple[Mapping[str, Any], ...] = ()
    topology: bool = False  # asks for topology-aware scheduling
    # ValidateResources (core.pods `requests_over_limits`): (field, resources over their limit)
    over_limits: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # ValidateLimitRange (`outside_limit_range`): (field, resources, detail)
    outside_limit_range: tuple[tuple[str, tuple[str, ...], str], ...] = ()

    def total(self) -> dict[str, Fraction]:
        return {r: counted(r, v) * self.count for r, v in self.requests.items() if v}


@dataclass(frozen=True)
class Choice:
    """One resource's flavor, mode (Fit/Preempt) and borrowing level (0: none)."""

    flavor: str
    mode: str
    borrow: int = 0


@dataclass
class Assignment:
    """Every pod set's choices up to the first that gets none (Kueue stops there)."""

    podsets: dict[str, dict[str, Choice]]  # pod set -> resource -> choice (empty: NoFit)
    reasons: list[str]  # every flavor's reasons: the pod sets' attempts and Status
    # pod set -> its Status reasons: a failing resource group's alone, else each group's whose
    # best flavor needs preemption (a Fit group returns no Status)
    status: dict[str, list[str]] = field(default_factory=dict)

    @property
    def message(self) -> str:
        """Kueue's QuotaReserved message."""
        return W.message(self.status)

    @property
    def mode(self) -> str:
        """Assignment.RepresentativeMode (no pod set: NoFit) over PodSetAssignment's
        (flavorassigner.go:386, release-0.19 c90ed70): Fit without Status reasons, whatever
        its flavors, else NoFit without flavors, else its worst resource's mode."""
        if not self.podsets:
            return NO_FIT
        modes = {
            c.mode for ps, per in self.podsets.items() if self.status.get(ps) for c in per.values()
        }
        if any(self.status.get(ps) and not per for ps, per in self.podsets.items()):
            return NO_FIT
        return PREEMPT if PREEMPT in modes else FIT

    @property
    def borrowing(self) -> int:
        return max((c.borrow for per in self.podsets.values() for c in per.values()), default=0)

    @property
    def flavor(self) -> str | None:
        """The one flavor every resource got (else None)."""
        names = {c.flavor for per in self.podsets.values() for c in per.values()}
        return next(iter(names)) if len(names) == 1 and self.mode != NO_FIT else None


def _preferred(a: tuple[int, int], b: tuple[int, int], preference: str | None) -> bool:
    """isPreferred: whether granular mode a (preemption mode, borrowing level) beats b."""
    if a[0] == _NO_FIT:
        return False
    if b[0] == _NO_FIT:
        return True
    if (a[0] == _NO_CANDIDATES) != (b[0] == _NO_CANDIDATES):
        return a[0] != _NO_CANDIDATES
    if preference == "PreemptionOverBorrowing":
        if a[1] != b[1]:
            return a[1] < b[1]
        return a[0] > b[0]
    if a[0] != b[0]:
        return a[0] > b[0]
    return a[1] < b[1]


def _try_next(mode: tuple[int, int], q: ClusterQueue) -> bool:
    """shouldTryNextFlavor."""
    if mode[0] in (_NO_FIT, _NO_CANDIDATES):
        return True
    if mode[0] in (_PREEMPT, _RECLAIM) and q.fungibility.when_can_preempt == TRY_NEXT:
        return True
    return mode[1] != 0 and q.fungibility.when_can_borrow == TRY_NEXT


def selector_matches(ps: PodSet, flavor: Flavor) -> bool:
    """flavorSelector + RequiredNodeAffinity.Match on the flavor's nodeLabels, the pod's
    selector and terms cut to the flavor's label keys; the kept terms matched by
    `core.taints.node_selector_terms` (an invalid requirement selects nothing)."""
    labels = flavor.labels
    if any(k in labels and labels[k] != v for k, v in ps.node_selector.items()):
        return False
    terms = []
    for term in ps.affinity:
        kept = [e for e in term if e.get("key") in labels]
        if not kept:
            return True  # an emptied term matches any flavor (terms are ORed)
        terms.append(kept)
    if not terms:
        return True
    return T.node_selector_terms([{"matchExpressions": t} for t in terms], labels)


def requests_of(q: ClusterQueue, ps: PodSet) -> dict[str, Fraction]:
    """A pod set's requests in all, its pod count too where `q` has quota on `pods`."""
    requests = ps.total()
    if q.group_of("pods") is not None:
        requests.setdefault("pods", Fraction(ps.count))
    return requests


def only_tas(q: ClusterQueue, flavors: Mapping[str, Flavor]) -> bool:
    """Every flavor is topology-aware (then every pod set asks for TAS)."""
    return all((fl := flavors.get(f)) is not None and fl.topology is not None for f in q.flavors)


def flavor_fits_podset(ps: PodSet, flavor: Flavor | None, all_tas: bool, name: str) -> str | None:
    """None, or why flavor `name` (`flavor` None: it does not exist) is skipped for the pod
    set, in Kueue's words (checkFlavorForPodSets)."""
    if flavor is None:
        return W.not_found(name)
    wants_tas = ps.topology or all_tas
    if wants_tas and not all_tas and flavor.topology is None:
        return W.no_tas(flavor.name)
    if not wants_tas and flavor.topology is not None:
        return W.only_tas(flavor.name)
    taint = T.untolerated(flavor.taints, [*ps.tolerations, *flavor.tolerations], T.schedules)
    if taint is not None:
        return W.untolerated(taint, flavor.name)
    if not selector_matches(ps, flavor):
        return W.no_affinity(flavor.name)
    return None


class Assigner:
    def __init__(
        self, quotas: Quotas, flavors: Mapping[str, Flavor], oracle: Oracle | None = None
    ) -> None:
        self.quotas = quotas
        self.flavors = flavors
        self.oracle = oracle or (lambda *_: (NO_CANDIDATES, 0))  # idle: nothing to preempt

    def _fits_quota(
        self, q: ClusterQueue, f: str, r: str, assumed: Fraction, request: Fraction
    ) -> tuple[int, int, str]:
        """fitsResourceQuota: (preemption mode, borrowing level, reason)."""
        qs = self.quotas
        val, most = assumed + request, qs.potential(q, f, r)
        if val > most:
            return _NO_FIT, 0, W.over_capacity(r, f, assumed, request, most)
        borrow, may_reclaim = qs.height(q, f, r, val)
        if val <= qs.available(q, f, r):
            return _FIT, borrow, ""
        reason = W.short(r, f, val - qs.available(q, f, r))
        bwc = (q.preemption.get("borrowWithinCohort") or {}).get("policy", "Never")
        if qs.nominal(q, f, r) >= val or may_reclaim or bwc != "Never":
            possibility, after = self.oracle(q, f, r, val)
            return _FROM_ORACLE[possibility], after, reason
        return _NO_FIT, borrow, reason

    def _group(
        self,
        q: ClusterQueue,
        ps: PodSet,
        flavors: list[str],
        requests: dict[str, Fraction],
        assumed: dict[tuple[str, str], Fraction],
        reasons: list[str],
    ) -> tuple[dict[str, Choice] | None, bool]:
        """findFlavorForPodSets for one resource group: (choices, whether the best flavor
        fits without preemption: then Kueue returns no Status)."""
        all_tas = only_tas(q, self.flavors)
        best: dict[str, Choice] | None = None
        best_mode = (_NO_FIT, _BIG)
        for f in flavors:
            why = flavor_fits_podset(ps, self.flavors.get(f), all_tas, f)
            if why:
                reasons.append(why)
                continue
            rep = (_FIT, 0)
            choices: dict[str, Choice] = {}
            for r, val in requests.items():
                # every resource is checked and worded: Kueue's ForEach callback returns, the
                # loop goes on
                mode, borrow, why = self._fits_quota(q, f, r, assumed.get((f, r), Fraction(0)), val)
                if why:
                    reasons.append(why)
                if _preferred(rep, (mode, borrow), q.fungibility.preference):
                    rep = (mode, borrow)
                if rep[0] != _NO_FIT:
                    choices[r] = Choice(f, _MODE[mode], borrow)
            if not _try_next(rep, q):
                return choices, rep[0] == _FIT
            if _preferred(rep, best_mode, q.fungibility.preference):
                best, best_mode = choices, rep
        return best, best_mode[0] == _FIT

    def assign(self, q: ClusterQueue, podsets: list[PodSet]) -> Assignment:
        """Every pod set's flavors in ClusterQueue `q` at its current usage."""
        out = Assignment({}, [])
        assumed: dict[tuple[str, str], Fraction] = {}
        for ps in podsets:
            requests = requests_of(q, ps)
            chosen: dict[str, Choice] = {}
            ok, mine, status = True, [], []
            for r in requests:
                if r in chosen:
                    continue
                group = q.group_of(r)
                if group is None:
                    ok, mine = False, [W.unavailable(r)]
                    break
                covered = {x: v for x, v in requests.items() if x in group[0]}
                tried: list[str] = []
                got, fit = self._group(q, ps, group[1], covered, assumed, tried)
                if got is None or len(got) < len(covered):
                    # assignFlavors: the pod set's status is the failing resource's alone
                    ok, mine = False, tried
                    break
                mine += tried
                status += [] if fit else tried
                chosen.update(got)
            out.reasons += mine
            out.podsets[ps.name] = chosen if ok else {}
            said = status if ok else mine
            if said:
                out.status[ps.name] = said
            if not ok:
                # assignFlavors returns here: later pod sets are neither tried nor named
                # (flavorassigner.go:846-850, release-0.19 c90ed70)
                break
            for r, c in chosen.items():
                assumed[(c.flavor, r)] = assumed.get((c.flavor, r), Fraction(0)) + requests[r]
        return out
