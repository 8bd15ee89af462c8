"""``expo-prof verify``: does the overlay change what the model says? (docs/verify.md)

``spec`` (the request set and budget) → ``collect`` (send it to one server
through :mod:`expo_prof.serving.client`, keep every answer) → ``checks`` and
``chi2`` (pure functions over both sides) → ``run`` (orchestration through record's launch machinery, the verdict,
``verify.json``) → ``tables`` (the terminal) / ``html_section`` (the report page), for people.
"""
