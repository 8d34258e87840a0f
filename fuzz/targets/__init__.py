"""libFuzzer-compatible atheris targets of the three campaign levels (run each file as a script); fuzz/targets/common.py
holds the driver they share."""
