"""Stack config for the platform services (FSx, checkpoints, operator, plugins, monitoring,
Kueue, teams, job backends): validated through the stack model (trainforge/stack/services.py).

Why: every mistake a user can make in `Pulumi.<stack>.yaml` for these services must be
reported at preview, all at once, with the key path, the bad value and what is valid, before
any resource is declared. `parse_services_config` therefore never raises: it appends one line
per problem to `errors` (the caller, platform/config.py, raises with everyone's lines).
"""

from __future__ import annotations

from typing import Any

from trainforge.stack.base import NS, Problems, own_keys, problem_lines, validate
from trainforge.stack.jobs import PRIORITY_VALUES
from trainforge.stack.services import (
    AlertsConfig,
    CheckpointConfig,
    DevicePluginsConfig,
    FsxConfig,
    KueueConfig,
    MlflowConfig,
    MonitoringConfig,
    PoolQuota,
    ReceiverConfig,
    ServiceKeys,
    TeamConfig,
    TeamQuotaConfig,
    TrainingOperatorConfig,
    default_team_id,
    services_context,
    team_list_problems,
    valid_fsx_capacity,
)

# The parsed services config is the area's model itself.
ServicesConfig = ServiceKeys

PRIORITIES = PRIORITY_VALUES  # the job key `priority` -> its WorkloadPriorityClass's value

__all__ = [
    "PRIORITIES",
    "AlertsConfig",
    "CheckpointConfig",
    "DevicePluginsConfig",
    "FsxConfig",
    "KueueConfig",
    "MlflowConfig",
    "MonitoringConfig",
    "PoolQuota",
    "ReceiverConfig",
    "ServicesConfig",
    "TeamConfig",
    "TeamQuotaConfig",
    "TrainingOperatorConfig",
    "default_team_id",
    "parse_services_config",
    "valid_fsx_capacity",
]


def parse_services_config(
    raw: dict[str, Any], errors: list[str], gpu_of: dict[str, bool] | None = None
) -> ServicesConfig:
    """The services' keys of the whole `trainforge:` mapping; one line per problem appended
    to `errors` (the defaults are returned then). Other areas' keys are ignored, except the
    names the services' rules refer to (node pools, stack jobs' backends). `gpu_of`: whether
    each pool whose instance types were looked up has GPUs (per-pool quota gpus need one)."""
    raw = raw if isinstance(raw, dict) else {}
    own = {k: v for k, v in own_keys(ServiceKeys, raw).items() if v is not None}
    context = {**services_context(raw), "gpu_of": gpu_of or {}}
    config = validate(ServiceKeys, own, f"{NS}:", errors, context)
    if config is not None:
        return config
    teams = own.get("teams")
    if isinstance(teams, list):
        # The rules across teams run once every team is valid: apply them to those that are.
        valid = [validate(TeamConfig, t, "", [], context) for t in teams]
        if None in valid:
            errors.extend(problem_lines(f"{NS}:teams", Problems(team_list_problems(valid))))
    return ServicesConfig()
