"""Generators: choosers, index expressions, kernel ASTs, tensor programs, rule-directed pattern trees (public face:
fuzz.strategies)."""
