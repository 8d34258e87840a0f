"""Oracles and references: the numpy and semantics-table executors, the ULP budget, differential runs, the z3 symbolic
oracle."""
