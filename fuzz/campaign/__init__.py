"""Campaign machinery: the parent (run.py), its workers, the levels and backends they check, findings, reduction,
reports."""
