"""A job's storage beyond the team's FSx claim: further claims of its team, and where it
checkpoints.

Why the team config lists the claims a team's jobs may mount (`trainforge:teams[].claims`,
published as `TeamFacts.claims`): the preview runs before the cluster exists (and the offline
plan never sees one), so it cannot ask the API server which claims a namespace holds; and a
PersistentVolumeClaim is namespaced, so a job naming a claim that is not in its team's
namespace (a typo, or another team's dataset) would sit Pending with "persistentvolumeclaim
not found" while holding its quota. The list is also what a reviewer reads in the PR: which
data a team's jobs can reach.
"""

from __future__ import annotations

from typing import Any

from trainforge.core.contract import JobTarget, TeamFacts
from trainforge.core.errors import JobConfigError
from trainforge.jobs.codeship import CODE_MOUNT, USER_CODE_MOUNT
from trainforge.jobs.spec import JobSpec

# Mounts every pod has besides the volumes a job asks for (see the emitter's pod template).
RESERVED_MOUNTS = ("/dev/shm", "/tmp", CODE_MOUNT, USER_CODE_MOUNT)


def _under(path: str, root: str) -> bool:
    root = root.rstrip("/") + "/"
    return (path.rstrip("/") + "/").startswith(root)


def _overlap(a: str, b: str) -> bool:
    return _under(a, b) or _under(b, a)


def claims_words(team: TeamFacts) -> str:
    """The claims a job of `team` mounts: its FSx claim (on every pod, never in `volumes`),
    then the further ones its config lists. It said "none" for a team with an FSx claim and no
    further ones, as if the team had no storage."""
    words = []
    if team.claim_name:
        words.append(f"{team.claim_name} (its FSx, on every pod at {team.fsx_mount_path})")
    if team.claims:
        words.append(("further: " if words else "") + ", ".join(team.claims))
    elif words:
        words.append("no further ones")
    return "; ".join(words) or "none"


def check_storage(job: JobSpec, target: JobTarget, where: str) -> None:
    """Claims must be the team's; mount paths must not hide the pod's own mounts; a custom
    checkpoint directory must be on a writable volume of the job."""
    team = target.team
    fsx = target.fsx_mount_path
    for i, v in enumerate(job.volumes):
        at = f"{where}.volumes[{i}]"
        if team.claim_name is not None and v.claim == team.claim_name:
            raise JobConfigError(
                f"{at}.claim",
                v.claim,
                f"the team's FSx claim is already mounted at {fsx}; use paths under it",
            )
        if v.claim not in team.claims:
            raise JobConfigError(
                f"{at}.claim",
                v.claim,
                f"not a claim of team {team.name!r} (namespace {team.namespace!r}); its claims "
                f"are: {claims_words(team)}. A platform admin lists further ones under "
                "trainforge:teams[].claims",
            )
        for reserved in (*RESERVED_MOUNTS, fsx):
            if _overlap(v.mount_path, reserved):
                raise JobConfigError(
                    f"{at}.mountPath",
                    v.mount_path,
                    f"overlaps {reserved}, which every pod of the job mounts; choose another path",
                )
    custom = job.checkpoint.directory
    if custom is not None and custom.startswith("/"):
        if _under(custom, fsx):
            return
        for i, v in enumerate(job.volumes):
            if _under(custom, v.mount_path):
                if v.read_only:
                    raise JobConfigError(
                        f"{where}.checkpoint.dir",
                        custom,
                        f"lies on volumes[{i}] ({v.claim}), which is mounted readOnly",
                    )
                return
        mounts = ", ".join([fsx, *(v.mount_path for v in job.volumes)])
        raise JobConfigError(
            f"{where}.checkpoint.dir",
            custom,
            f"must lie on a volume of the job ({mounts}): anywhere else is the pod's read-only "
            "root file system or lost with the pod",
        )


def claim_mounts(job: JobSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumeMounts, volumes) of the job's further claims."""
    mounts: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    for i, v in enumerate(job.volumes):
        name = f"claim-{i}"
        mount: dict[str, Any] = {"name": name, "mountPath": v.mount_path}
        if v.read_only:
            mount["readOnly"] = True
        if v.sub_path:
            mount["subPath"] = v.sub_path
        mounts.append(mount)
        source: dict[str, Any] = {"claimName": v.claim}
        if v.read_only:
            source["readOnly"] = True
        volumes.append({"name": name, "persistentVolumeClaim": source})
    return mounts, volumes
