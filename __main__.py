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
    from trainforge.jobs.declare import declare_jobs
    from trainforge.plan.core import known_rule_ids
    from trainforge.platform.budgets import stack_budgets
    from trainforge.platform.stack_check import check_stack, engine_config
    from trainforge.platform.training_platform import TrainingPlatform
    from trainforge.stack.base import StackError

    try:
        # every area (platform, pools, services, teams, jobs, policy) checked in one run, and
        # every job against the platform contract, before any resource is declared
        stack = check_stack(engine_config(), known_rules=known_rule_ids(), lookups=True)
        stack.raise_errors()
    except StackError as e:
        # pulumi.RunError: the Python language host logs its message alone, not the traceback
        # it prints for any other exception (pulumi-language-python-exec).
        raise pulumi.RunError(str(e)) from e
    config, raw_jobs = stack.platform, stack.raw_jobs

    platform = TrainingPlatform("platform", config)
    jobs = declare_jobs(platform.contract, raw_jobs)
    budgets = stack_budgets(config, stack.caps)

    pulumi.export("clusterName", platform.cluster_name)
    pulumi.export("kubeconfig", platform.kubeconfig)
    pulumi.export("nodeRoleName", platform.node_role_name)
    pulumi.export("interruptionQueueName", platform.interruption_queue_name)
    pulumi.export("poolNames", platform.pool_names)
    pulumi.export("jobs", [job.job_name for job in jobs])
    if platform.fleet is not None:  # what the fleet's other stacks read (platform/fleet.py)
        for key, value in platform.fleet.outputs(jobs).items():
            pulumi.export(key, value)
