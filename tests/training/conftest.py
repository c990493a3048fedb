import sys
from pathlib import Path

# tests/training/runtime_helpers.py is imported as `runtime_helpers` by this directory's tests
sys.path.insert(0, str(Path(__file__).resolve().parent))
