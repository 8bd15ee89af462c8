"""The saving: what the overlay takes off (or adds to) each step, and the words it is said in.

* ``switchback`` — the estimator over one run's switchback blocks; ``natural`` — the natural experiment;
* ``sequential`` — the confidence sequence that settles a run; ``spread`` — the between-run spread;
* ``recording`` — a recording's savings from its overlay logs; ``arrival`` — how tokens arrive per arm;
* ``words`` — the one verdict sentence, the one CI text, the digits every output prints.

Its JSON structs are in :mod:`expo_prof.analysis.model`, with every struct of the document.
"""
