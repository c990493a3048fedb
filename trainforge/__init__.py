"""trainforge: a distributed-training platform on AWS, declared with Pulumi.

This top-level package must stay import-free: `trainforge.training` is shipped into pods
that have only torch, and importing it imports this file first.
"""

__version__ = "0.1.0"
