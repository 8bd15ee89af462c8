"""The version of expo-prof (the same as pyproject.toml's), in a leaf module.

Every layer stamps it into what it writes; ``expo_prof.__version__`` re-exports it. It lives apart from
the root package because the root's :func:`expo_prof.analyze` imports the pipeline: modules below the
pipeline that took the version from the root would close an import cycle (tools/layering.py).
"""

__version__ = "0.1.0"
