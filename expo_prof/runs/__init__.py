"""Runs and recordings: run/session directories on disk, and which traces belong to one profile window.

* :mod:`expo_prof.runs.layout` — names, directory creation, atomic writes;
* :mod:`expo_prof.runs.manifest` — typed ``manifest.json`` / ``session.json``;
* :mod:`expo_prof.runs.labels` — the run directory or input PATH of each Timeline;
* :mod:`expo_prof.runs.recordings` — Timelines grouped into recordings (one window of one job).
"""
