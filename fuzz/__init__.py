"""The fuzz harness: generators (fuzz.strategies), oracles and campaigns. CLI: `python -m fuzz <subcommand>`."""
