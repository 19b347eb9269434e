"""Hosts, node facts, preflight checks and tools that act on every node of a cluster."""
