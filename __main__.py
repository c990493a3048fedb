"""The trainforge Pulumi program: read the stack config, build the platform, declare jobs, export.

The same file is the component-provider entry point (PulumiPlugin.yaml): the Python runtime
runs it as a plugin with no resource monitor configured, and then it hosts the components.
"""

import pulumi
from pulumi.runtime.settings import get_monitor

if get_monitor() is None:  # run as a plugin (pulumi package add): host the components
    from trainforge.provider import main

    main()
else:
    from trainforge.jobs.declare import check_jobs, declare_jobs
    from trainforge.platform.config import load_config
    from trainforge.platform.training_platform import TrainingPlatform

    config = load_config()
    raw_jobs = pulumi.Config("trainforge").get_object("jobs") or []
    check_jobs(config, raw_jobs)  # every job checked before any resource is declared

    platform = TrainingPlatform("platform", config)
    jobs = declare_jobs(platform.contract, raw_jobs)

    pulumi.export("clusterName", platform.cluster_name)
    pulumi.export("kubeconfig", platform.kubeconfig)
    pulumi.export("nodeRoleName", platform.node_role_name)
    pulumi.export("interruptionQueueName", platform.interruption_queue_name)
    pulumi.export("poolNames", platform.pool_names)
    pulumi.export("jobs", [job.job_name for job in jobs])
