"""gpu-launcher: cheapest suitable GPU capacity, preemption recovery, reaping and cost reports."""

__version__ = "0.1.0"
