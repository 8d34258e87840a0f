#!/usr/bin/env python3
"""atheris target, symbolic level (fuzz/campaign/levels.py): `python fuzz/targets/symbolic_target.py -runs=1000
corpus/`. libFuzzer flags and corpus directories as libFuzzer takes them; this driver's own options in
fuzz/targets/common.py."""
import os, sys
# NOTE: run as a script, the repository root is not on sys.path (an installed package, as ClusterFuzzLite builds it,
# needs no help)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from fuzz.targets.common import main  # noqa: E402

if __name__ == "__main__": main("symbolic", sys.argv)
