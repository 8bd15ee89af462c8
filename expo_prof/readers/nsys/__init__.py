"""The Nsight Systems reader: its SQLite export's tables (:mod:`.tables`, metadata in :mod:`.meta`), and
``.nsys-rep`` reports exported to SQLite first (:mod:`.report`)."""
