"""The plan's instance-type lookups read moto's bundled EC2 tables without importing moto:
its import (with boto3's) belongs to the IAM rehearsal, in the plan's child process."""

from __future__ import annotations

import os
import subprocess
import sys

CODE = """
import sys
from trainforge.plan import mocks
assert mocks.instance_type_result("p5.48xlarge")["efaMaximumInterfaces"] == 32
assert "p5.48xlarge" in mocks._region_offerings("us-east-1")
print(sorted(m for m in ("moto", "boto3", "botocore.session") if m in sys.modules))
"""


def test_the_lookups_read_motos_tables_without_importing_moto(repo_root):
    env = {**os.environ, "PYTHONPATH": str(repo_root)}
    out = subprocess.run(
        [sys.executable, "-c", CODE], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
