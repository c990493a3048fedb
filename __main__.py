"""The trainforge Pulumi program: read the stack config, build the platform, declare jobs, export."""

import pulumi

from trainforge.platform.config import load_config
from trainforge.platform.training_platform import TrainingPlatform

config = load_config()
platform = TrainingPlatform("platform", config)

# ---- jobs: declared here (the lead wires trainforge.jobs in) ----------------------------------

# ---- outputs ---------------------------------------------------------------------------------
pulumi.export("clusterName", platform.cluster_name)
pulumi.export("kubeconfig", platform.kubeconfig)
pulumi.export("nodeRoleName", platform.node_role_name)
pulumi.export("interruptionQueueName", platform.interruption_queue_name)
pulumi.export("poolNames", platform.pool_names)
