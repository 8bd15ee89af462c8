"""The step: every step quantity has its one owner here (docs/glossary.md).

* ``windows`` — the **step id** and the **window** each event is assigned by;
* ``facts`` — each step's **own time**, its **cadence**, prefill / decode, batch and q;
* ``means`` — those quantities over a set of steps (the step groups, and the one mean own time);
* ``views`` — which steps each view of a rank counts (a trace's window vs the overlay log's run).
"""
