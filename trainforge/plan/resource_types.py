"""Pulumi type tokens more than one plan module reads, spelled once (one reader: beside it)."""

EKS_COMPONENT = "eks:index:Cluster"  # the pulumi-eks component (flat inputs)
EKS_CLUSTER = "aws:eks/cluster:Cluster"
EKS_ADDON = "aws:eks/addon:Addon"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
FSX_LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
KMS_KEY = "aws:kms/key:Key"
VPC_ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"
IAM_ROLE = "aws:iam/role:Role"
IAM_ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
IAM_POLICY = "aws:iam/policy:Policy"
S3_BUCKET = "aws:s3/bucket:Bucket"
S3_BUCKET_V2 = "aws:s3/bucketV2:BucketV2"
S3_BUCKETS = (S3_BUCKET, S3_BUCKET_V2)
S3_SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
S3_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
CHART_V4 = "kubernetes:helm.sh/v4:Chart"  # the Trainer's chart (trainforge.platform.trainer)
KUSTOMIZE = "kubernetes:kustomize/v2:Directory"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
