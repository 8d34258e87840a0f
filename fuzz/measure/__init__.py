"""Measuring the fuzzers: guided vs unguided (guidance.py) and the mutation score of planted bugs (mutants.py)."""
