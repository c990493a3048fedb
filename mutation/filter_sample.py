"""A cosmic-ray filter: keep a seeded random sample of the mutants still to run, skip the rest.

Why: some modules' tests build whole plans or start 2-rank jobs, 10 to 30 seconds per mutant,
so all of a module's several hundred mutants take hours on two cores. The kill rate of a
uniform random sample estimates the module's kill rate (docs/rehearsals.md gives the sample
size beside it), and its survivors are handled like any others: killed by a new test or
written down as equivalent. `make mutation` runs every mutant unless SAMPLE is set; the seed
makes a sample repeatable, so a rejudge and a rerun see the same mutants.

Runs on a session database after the other filters, with cosmic-ray's own Python:
`.mutation-venv/bin/python mutation/filter_sample.py SESSION.sqlite --size 150 --seed 0`.
"""

from __future__ import annotations

import random
import sys

from cosmic_ray.tools.filters.filter_app import FilterApp
from cosmic_ray.work_item import WorkerOutcome, WorkResult

OUTPUT = "Filtered: not in the sample"


class SampleFilter(FilterApp):
    def description(self) -> str:
        return __doc__ or ""

    def add_args(self, parser) -> None:  # noqa: ANN001 (cosmic-ray's interface)
        parser.add_argument("--size", type=int, required=True, help="mutants to keep")
        parser.add_argument("--seed", type=int, default=0, help="the sample's random seed")

    def filter(self, work_db, args) -> None:  # noqa: ANN001 (cosmic-ray's interface)
        # ordered by what a mutant is (cosmic-ray's job ids are random per `init`), so that
        # the same seed picks the same mutants of the same module again
        items = sorted(
            work_db.pending_work_items,
            key=lambda i: [(m.start_pos, m.operator_name, m.occurrence) for m in i.mutations],
        )
        pending = [item.job_id for item in items]
        keep = set(random.Random(args.seed).sample(pending, min(args.size, len(pending))))
        skip = [job for job in pending if job not in keep]
        if skip:
            work_db.set_multiple_results(
                skip, WorkResult(output=OUTPUT, worker_outcome=WorkerOutcome.SKIPPED)
            )
        print(f"filter_sample: {len(keep)} of {len(pending)} mutants kept (seed {args.seed})")


if __name__ == "__main__":
    sys.exit(SampleFilter().main())
