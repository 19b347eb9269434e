"""Placement: which CPUs each task and thread of a launch may run on, predicted and observed."""
