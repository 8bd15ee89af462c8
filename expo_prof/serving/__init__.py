"""Launching, talking to and loading a vLLM OpenAI-compatible server.

* :mod:`expo_prof.serving.launch` — start a server subprocess, wait until it is ready, stop its
  whole process tree (:class:`~expo_prof.serving.launch.VllmServer`, ``free_port``, ``vllm_argv``);
* :mod:`expo_prof.serving.client` — the one HTTP client of such a server (readiness, models,
  completions, ``/tokenize``, the profiler window) with one timeout and error policy;
* :mod:`expo_prof.serving.load` — the built-in load generator (``vllm bench serve`` semantics);
* :mod:`expo_prof.serving.tinymodel` — the offline random-weight tiny Llama the demo and tests serve.

No torch and no vLLM in this process: vLLM only has to exist in the Python that runs the server.
"""
