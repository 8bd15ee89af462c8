"""expo-prof overlay: the in-engine half.

Runs inside vLLM processes (loaded through the ``vllm.general_plugins`` entry
point ``expo_prof`` -> :func:`overlay.plugin.register`). Importing this package
has no side effects and imports neither torch nor vllm; those are imported
lazily when the plugin actually applies. It never imports rich, plotly or click.

The only thing shared with the offline tool (``expo_prof``) is
:mod:`overlay.contract`: environment variable names and the event-log schema
version. Everything else crosses through the event-log file format
(docs/event-log.md).
"""
