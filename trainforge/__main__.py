"""`python -m trainforge ...` is the same as the `trainforge` console script."""

import sys

if __name__ == "__main__":  # first: `python -m` puts the working directory first on sys.path
    from trainforge.training.shadowing import refuse_in_cli

    refuse_in_cli()  # a random.py there would break the imports below with a traceback

from trainforge.cli import run  # noqa: E402

if __name__ == "__main__":
    sys.exit(run())
