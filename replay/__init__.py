"""Process replay: capture every schedule and kernel a run compiles, then recompile the same inputs with the code
checked out now and say, for each one, what kind of change it is (docs/replay.md).

  python -m replay capture [--db PATH] [--targets NV,AMD] -- <command>
  python -m replay diff [--db PATH] [--against RUN] [--assert-no-change] [--html PATH] [--target T]
                        [--captured-opts | --fresh-opts]
  python -m replay runs [--db PATH]

`CAPTURE_PROCESS_REPLAY=1 <command>` captures too (the `tinygrad.plugins` entry point `replay`, replay/plugin.py).
"""
from replay.db import DB, default_path, SCHEMA_VERSION, RecordError, DBError
from replay.diff import diff, Report, Outcome, KERNEL_CLASSES, SCHEDULE_CLASSES

__all__ = ["DB", "default_path", "SCHEMA_VERSION", "RecordError", "DBError", "diff", "Report", "Outcome",
           "KERNEL_CLASSES", "SCHEDULE_CLASSES"]
