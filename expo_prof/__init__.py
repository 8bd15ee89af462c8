"""expo-prof: the offline half.

Reads overlay event logs and profiler traces (torch / Kineto, torch_npu,
msprof), measures how much exponential-sampling time hides under the forward
pass, and reports it. Importing this package never imports torch or vllm.
"""

__version__ = "0.1.0"
