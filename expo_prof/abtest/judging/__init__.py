"""The judgement of an A/B comparison: each metric compared, the runs that stand out, the verdict, and why.

The statistics it applies live in :mod:`expo_prof.stats` (one module for compare, switchback and verify);
this package decides with them: :mod:`~expo_prof.abtest.judging.judge` (per metric, and :func:`compare`),
:mod:`~expo_prof.abtest.judging.flags`, :mod:`~expo_prof.abtest.judging.likeness` (which rows are one measure
on both sides), :mod:`~expo_prof.abtest.judging.verdict`, :mod:`~expo_prof.abtest.judging.mechanism`.
"""
