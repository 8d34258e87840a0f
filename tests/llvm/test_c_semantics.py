"""The tests that pin the C backend's semantics (NaN-correct MAX, truncating division, exact bfloat16/fp8 rounding,
casts against numpy, masked loads, THREAD axes, ...), run unchanged on the LLVM path: tests/llvm/conftest.py's
`run_kernel` compiles through LLVM IR instead of C. Only tests that read C source text are left out."""
from tests.codegen.test_dtypes_c import (test_float_to_bfloat16_rounds_like_dtype_py, test_float_to_fp8_rounds_like_dtype_py,
  test_fp8_to_float_every_code, test_bfloat16_to_float_and_half, test_half_casts_and_arithmetic,
  test_bfloat16_arithmetic_goes_through_float, test_native_casts_match_numpy, test_bitcast_float_int,
  test_int_division_truncates_like_c, test_max_where_comparisons, test_transcendentals_native,
  test_threefry_matches_reference, test_transcendental_polynomials_match_numpy)
from tests.codegen.test_codegen_c import (test_elementwise_add_matches_numpy, test_reduce_rows_matches_numpy,
  test_max_reduce_propagates_nan, test_two_sibling_reduces_in_one_kernel, test_masked_load_pad_reads_zero,
  test_multi_store_kernel, test_thread_opt_runs_on_core_ids, test_upcast_and_unroll_matmul, test_scalar_store_without_ranges)

__all__ = [n for n in dir() if n.startswith("test_")]
