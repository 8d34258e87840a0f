#!/usr/bin/env python3
"""atheris target, chat templates: `python fuzz/targets/chat_template_target.py -max_total_time=60 -rss_limit_mb=2048
-timeout=10 corpus/`. Each input is a GGUF file's `tokenizer.chat_template` (UTF-8, undecodable bytes replaced),
rendered by the LLM app's sandbox (tinygrad.apps.tokenizer.render_template) with a two-message chat. Anything but a
TokenizerError is a finding (libFuzzer writes the input as crash-<sha1>), and so is any file opened for writing,
process started or library loaded while it renders (the audit hook of the checkpoint targets, which also refuses it);
memory and time are capped by libFuzzer's -rss_limit_mb and -timeout. The seeds (written to the first corpus directory
when it is empty) are real template shapes, so mutations start from jinja syntax."""
import os, sys
# NOTE: run as a script, the repository root is not on sys.path
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from fuzz.targets.load_common import Audit, audited

SEEDS = {
  "llama3": "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
            "{{ m['content'] | trim }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}"
            "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}",
  "chatml": "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}"
            "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
  "checks": "{% if messages[0]['role'] != 'system' %}{{ raise_exception('no system') }}{% endif %}"
            "{{ messages | tojson }}{{ strftime_now('%Y') }}{% set n = messages | length %}{{ 'x' * n }}",
}
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi \u00e9\U0001f600"}]
AUDIT = Audit()

def test_one_input(data: bytes) -> None:
  from tinygrad.apps import tokenizer
  text = data.decode("utf-8", "replace")
  def render() -> None: tokenizer.render_template(text, messages=MESSAGES, add_generation_prompt=True, bos_token="<s>")
  audited(AUDIT, "a chat template", render, tokenizer.TokenizerError)

def main(argv: list[str]) -> None:
  import atheris
  dirs = [a for a in argv[1:] if not a.startswith("-")]
  if dirs and os.path.isdir(dirs[0]) and not os.listdir(dirs[0]):
    for name, text in SEEDS.items():
      with open(os.path.join(dirs[0], f"{name}.jinja"), "w") as f: f.write(text)
  with atheris.instrument_imports():
    import jinja2, tinygrad.apps.tokenizer  # noqa: F401
  # NOTE: the hook is installed once (they cannot be removed) and only acts while a template renders
  sys.addaudithook(AUDIT)
  atheris.Setup(argv, test_one_input)
  atheris.Fuzz()

if __name__ == "__main__": main(sys.argv)
