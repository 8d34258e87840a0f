"""The rule ledger: z3 certificates of the rewrite rules (rules.py) and of codegen rewrites (codegen.py), with their
proof kit (proof.py), kept in ledger.json."""
