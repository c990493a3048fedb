"""`python -m trainforge ...` is the same as the `trainforge` console script."""

import sys

from trainforge.cli import run

if __name__ == "__main__":
    sys.exit(run())
