"""Kernel records are typed (tinygrad/codegen/record.py KernelRecord, with a schema version) and opts have one JSON
form (Opt.to_json / Opt.from_json); `replay diff` still reads the records replay wrote before records named their
schema (schema 1)."""
import json
import pytest
from tinygrad.codegen import get_program
from tinygrad.codegen.opt import Opt, OptOps, UnknownOptError
from tinygrad.codegen.record import KernelRecord, KERNEL_RECORD_SCHEMA, RecordFormatError, record_program
from tinygrad.renderer.cstyle import CRenderer
from tinygrad.uop.pyrender import pyrender, pyrender_list
from tinygrad.helpers import codegen_flags
from replay.db import DB, parse_record, RecordError
from replay.diff import diff
from tests.replay.helpers import programs, kernels

def test_opt_json_round_trips_every_arg_kind():
  for o in (Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.TC, 1, "sm_90.mma.f16"), Opt(OptOps.CUT), Opt(OptOps.PACK, 2)):
    assert Opt.from_json(json.loads(json.dumps(o.to_json()))) == o

@pytest.mark.parametrize("bad,err", [(["NOPE", 0, 1], UnknownOptError), (["UPCAST", 0], ValueError),
                                     (["UPCAST", "0", 4], ValueError), (["UPCAST", 0, [4]], ValueError),
                                     (["UPCAST", True, 4], ValueError), ({"op": "UPCAST"}, ValueError)])
def test_opt_from_json_refuses_what_is_not_an_opt(bad, err):
  with pytest.raises(err): Opt.from_json(bad)
  if err is ValueError:
    with pytest.raises(ValueError) as e: Opt.from_json(bad)
    assert not isinstance(e.value, UnknownOptError)

def _old_body(ast, p) -> dict:
  """A kernel record in schema 1, field for field as replay's capture wrote it before KernelRecord (written out here,
  independently of the code under test)."""
  size = lambda x: x if isinstance(x, int) else pyrender(x)
  return {"ast": pyrender(ast), "renderer": p.renderer, "device": p.device, "flags": [list(f) for f in codegen_flags()],
          "opts": [[o.op.name, o.axis, o.arg] for o in p.applied_opts], "name": p.name, "src": p.src,
          "uops": pyrender_list(list(p.uops)), "global_size": [size(x) for x in p.global_size],
          "local_size": None if p.local_size is None else [size(x) for x in p.local_size], "globals": list(p.globals),
          "ins": list(p.ins), "outs": list(p.outs), "vars": [str(v.arg[0]) for v in p.vars], "chosen": True}

def test_record_writes_the_old_fields_plus_its_schema():
  ast = kernels(programs()[0]())[0]
  p = get_program(ast, CRenderer(2))
  new = record_program(ast, p, chosen=True).to_json()
  assert new.pop("schema") == KERNEL_RECORD_SCHEMA == 2 and new == _old_body(ast, p)
  assert KernelRecord.from_json(json.loads(json.dumps(record_program(ast, p).to_json()))) == record_program(ast, p)

def test_replay_diff_reads_schema_1_records(tmp_path):
  db_path = tmp_path / "old.db"
  db = DB(str(db_path))
  db.add_run("old", "0" * 40, ["pytest"], [])
  ren, n = CRenderer(2), 0
  for prog in programs()[:4]:
    for ast in kernels(prog()):
      n += db.add_record("old", "kernel", _old_body(ast, get_program(ast, ren)))
  db.close()
  rep = diff(str(db_path), progress=None)
  assert n >= 4 and rep.counts("kernel")["unchanged"] == n and rep.all_ok(), rep.summary()
  rid, kind, ihash, text = DB(str(db_path), create=False).rows("old")[0]
  rec = parse_record(rid, kind, ihash, text)
  assert isinstance(rec, KernelRecord) and rec.schema == 1 and rec.chosen is True and rec.compile is None

def test_record_of_a_newer_schema_or_mistyped_field_is_a_bad_record(tmp_path):
  ast = kernels(programs()[0]())[0]
  body = record_program(ast, get_program(ast, CRenderer(2))).to_json()
  with pytest.raises(RecordFormatError, match="schema 3"): KernelRecord.from_json({**body, "schema": 3})
  with pytest.raises(RecordFormatError, match="'src' is a int"): KernelRecord.from_json({**body, "src": 5})
  with pytest.raises(RecordFormatError, match="'uops' is missing"):
    KernelRecord.from_json({k: v for k, v in body.items() if k != "uops"})
  with pytest.raises(RecordError, match="record 7 .*schema 3"):
    from replay.db import input_hash
    b = {**body, "schema": 3}
    parse_record(7, "kernel", input_hash("kernel", b), json.dumps(b))
