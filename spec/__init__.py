"""spec: what a legal graph is at each stage, the verifier, the z3 bounds proof, and the SPEC levels.

  from spec import type_verify, kernel_spec
  type_verify(ast, kernel_spec)        # raises SpecError naming the first illegal node

The round trip (`eval_pyrender`, `check_roundtrip`) lives in spec.roundtrip; validate_index imports z3 when first used.
"""
from spec.shared_spec import shared_spec, RuleFailure
from spec.tensor_spec import tensor_spec
from spec.kernel_spec import kernel_spec
from spec.program_spec import program_spec
from spec.full_spec import full_spec
from spec.verify import type_verify, SpecError, why_illegal
from spec.validate_index import validate_index, IndexOutOfBounds

SPECS = {"tensor": tensor_spec, "kernel": kernel_spec, "program": program_spec, "full": full_spec,
         "shared": shared_spec}

__all__ = ["shared_spec", "tensor_spec", "kernel_spec", "program_spec", "full_spec", "type_verify", "SpecError",
           "why_illegal", "validate_index", "IndexOutOfBounds", "RuleFailure", "SPECS"]
