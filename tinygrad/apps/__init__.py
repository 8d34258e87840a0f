"""Applications built on tinygrad: the LLM app (llm.py, tokenizer.py, serve.py; docs/llm.md)."""
