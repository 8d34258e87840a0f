"""The chat-template atheris target (fuzz/targets/chat_template_target.py): hostile templates are TokenizerErrors, not
findings; a renderer that writes a file is a finding; the target runs under libFuzzer and finds nothing in a short run
from its seeds."""
import os, subprocess, sys
import pytest
from fuzz.targets import chat_template_target as target
from fuzz.targets.load_common import LoaderFinding

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

@pytest.mark.parametrize("text", [*target.SEEDS.values(), "{{ 1/0 }}", "{{ 'a' * 10 ** 10 }}", "{% for %}", "\xff{{",
                                  "{{ ''.__class__.__mro__ }}", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"])
def test_hostile_templates_are_not_findings(text):
  target.test_one_input(text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text)

def test_a_renderer_that_writes_a_file_is_a_finding(monkeypatch, tmp_path):
  import sys as _sys
  _sys.addaudithook(target.AUDIT)
  def writes(*a, **k):
    with open(tmp_path / "x", "w") as f: f.write("x")
    return ""
  monkeypatch.setattr("tinygrad.apps.tokenizer.render_template", writes)
  with pytest.raises(LoaderFinding, match="no file may make it do"): target.test_one_input(b"{{ 1 }}")
  assert not (tmp_path / "x").exists()

def test_the_target_runs_under_libfuzzer(tmp_path):
  res = subprocess.run([sys.executable, "fuzz/targets/chat_template_target.py", "-max_total_time=5", "-timeout=10",
                        "-rss_limit_mb=2048", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": REPO})
  assert res.returncode == 0 and "Done" in res.stderr, res.stderr[-3000:]
  assert sorted(os.listdir(tmp_path))[:3] and any(n.endswith(".jinja") for n in os.listdir(tmp_path))
