"""Tenants: who may use the cluster, with which tokens, within which quotas."""
