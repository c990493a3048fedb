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
    from trainforge.core.errors import JobConfigError
    from trainforge.jobs.declare import check_jobs, declare_jobs
    from trainforge.platform.config import ConfigError, decode_value, load_config
    from trainforge.platform.published import contract_from_config
    from trainforge.platform.training_platform import TrainingPlatform

    try:
        config = load_config()
        # decoded like every other key: a value that is not JSON reaches the parser as a string
        raw_jobs = decode_value(pulumi.Config("trainforge").get("jobs")) or []
        # every job checked before any resource is declared
        check_jobs(contract_from_config(config), raw_jobs)
    except (ConfigError, JobConfigError) as e:
        # pulumi.RunError: the Python language host logs its message alone, not the traceback
        # it prints for any other exception (pulumi-language-python-exec).
        raise pulumi.RunError(str(e)) from e

    platform = TrainingPlatform("platform", config)
    jobs = declare_jobs(platform.contract, raw_jobs)

    pulumi.export("clusterName", platform.cluster_name)
    pulumi.export("kubeconfig", platform.kubeconfig)
    pulumi.export("nodeRoleName", platform.node_role_name)
    pulumi.export("interruptionQueueName", platform.interruption_queue_name)
    pulumi.export("poolNames", platform.pool_names)
    pulumi.export("jobs", [job.job_name for job in jobs])
