"""Offline plan: run the Pulumi program under mocks, rebuild its Kubernetes objects, validate
them and run the checks (`checks/`), with no Pulumi CLI, credentials or network
(docs/architecture.md, "The offline plan: engine and checks"). Submodules import lazily.
"""
