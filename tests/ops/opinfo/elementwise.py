"""OpInfo adapters: see driver.py."""
from __future__ import annotations
from tests.ops.opinfo.driver import Adapter

ADAPTERS: dict[str, Adapter] = {
}
