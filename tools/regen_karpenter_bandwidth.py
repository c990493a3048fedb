"""Write trainforge/platform/data/karpenter_bandwidth.json from Karpenter's own table.

Why: Karpenter labels an instance type `karpenter.k8s.aws/instance-network-bandwidth` from a
generated map (karpenter-provider-aws pkg/providers/instancetype/zz_generated.bandwidth.go,
`InstanceTypeBandwidthMegabits`); a type not in it gets no label. The stack check reads the
same map. Regenerate when versions.KARPENTER_VERSION moves:

    git -C <provider mirror> show v<version>:pkg/providers/instancetype/zz_generated.bandwidth.go \
        | python tools/regen_karpenter_bandwidth.py v<version> <commit> <date>
"""

from __future__ import annotations

import json
import pathlib
import re
import sys

OUT = (
    pathlib.Path(__file__).resolve().parents[1]
    / "trainforge/platform/data/karpenter_bandwidth.json"
)
ENTRY = re.compile(r'^\s*"([^"]+)":\s*(\d+),\s*$', re.M)


def main(tag: str, commit: str, date: str) -> None:
    table = {t: int(mbps) for t, mbps in ENTRY.findall(sys.stdin.read())}
    data = {
        "about": "karpenter.k8s.aws/instance-network-bandwidth per instance type, megabits",
        "source": f"aws/karpenter-provider-aws {tag} ({commit}) pkg/providers/instancetype/"
        "zz_generated.bandwidth.go InstanceTypeBandwidthMegabits",
        "checked": date,
        "megabits": dict(sorted(table.items())),
    }
    OUT.write_text(json.dumps(data, indent=0) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
