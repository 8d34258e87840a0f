"""Helpers shared by backends: compilers (compiler_cpu) and loaders."""
