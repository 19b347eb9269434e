"""clusterbench: measure, tune and compare the performance of HPC systems."""

__version__ = "0.1.0"
