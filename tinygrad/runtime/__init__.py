"""Backends: `ops_<name>.py` defines `<NAME>Device(Compiled)`; `support/` holds compilers and loaders they share."""
