#!/usr/bin/env python3
"""atheris target: torch_load on the raw bytes of a file.

    python fuzz/targets/load_torch_target.py -max_total_time=60 corpus/ fuzz/targets/seeds/load_torch

libFuzzer flags and corpus directories as libFuzzer takes them (it adds new inputs to the first directory: keep the
seeds apart). What counts as a finding, and this driver's own options: fuzz/targets/load_common.py."""
import os, sys
# NOTE: run as a script, the repository root is not on sys.path (an installed package, as ClusterFuzzLite builds it,
# needs no help)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from fuzz.targets.load_common import main  # noqa: E402

if __name__ == "__main__": main("torch", sys.argv)
