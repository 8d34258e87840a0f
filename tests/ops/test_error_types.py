"""Bad arguments raise what torch raises: for each case torch 2.13 is called first (its exception is the premise) and
ours must be an instance of torch's exception type, so `except RuntimeError` (or IndexError, ValueError, TypeError,
NotImplementedError) written for torch catches ours too. Our classes: ArgumentError (RuntimeError and ValueError),
ShapeMismatchError (an ArgumentError), DTypeError (NotImplementedError and TypeError), UnsupportedError
(NotImplementedError and ValueError)."""
import pytest
import torch
import torch.nn.functional as F
from tinygrad import Tensor, dtypes, nn
from tinygrad.tensor import ArgumentError, DTypeError, ShapeMismatchError, UnsupportedError

def _x(lib): return lib.ones(2, 3)
def _i(lib): return lib.zeros(2, 3, dtype=lib.int32 if lib is torch else dtypes.int32)
def _l(lib): return lib.zeros(2, 3, dtype=torch.int64) if lib is torch else Tensor.zeros(2, 3, dtype=dtypes.int32)
def _f(t): return F if isinstance(t, torch.Tensor) else None

# (id, torch call, our call); each takes the library (torch or Tensor)
CASES = [
  ("clip_without_bounds", lambda L: _x(L).clip(), None),
  ("pad_unknown_mode", lambda L: F.pad(_x(L), (1, 1), mode="foo"), lambda L: _x(L).pad((1, 1), mode="foo")),
  ("bitwise_and_float", lambda L: _x(L) & _x(L), None),
  ("bitwise_or_float", lambda L: _x(L) | _x(L), None),
  ("bitwise_xor_float", lambda L: _x(L) ^ _x(L), None),
  ("bitwise_not_float", lambda L: ~_x(L), None),
  ("lshift_float", lambda L: _x(L) << 1, None),
  ("rshift_float", lambda L: _x(L) >> 1, None),
  ("bad_rounding_mode", lambda L: _x(L).div(_x(L), rounding_mode="bad"), None),
  ("meshgrid_bad_indexing", lambda L: torch.meshgrid(torch.ones(2), torch.ones(3), indexing="ab"),
   lambda L: Tensor.ones(2).meshgrid(Tensor.ones(3), indexing="ab")),
  ("scatter_reduce_bad_mode", lambda L: _x(L).scatter_reduce(0, _l(L), _x(L), reduce="foo"), None),
  ("unfold_negative_step", lambda L: _x(L).unfold(0, 1, -1), None),
  ("unfold_zero_step", lambda L: _x(L).unfold(0, 1, 0), None),
  ("unfold_too_big", lambda L: _x(L).unfold(0, 3, 1), None),
  ("conv2d_kernel_too_big", lambda L: F.conv2d(torch.ones(1, 1, 2, 2), torch.ones(1, 1, 3, 3)),
   lambda L: Tensor.ones(1, 1, 2, 2).conv2d(Tensor.ones(1, 1, 3, 3))),
  ("conv2d_channels", lambda L: F.conv2d(torch.ones(1, 2, 4, 4), torch.ones(1, 1, 3, 3)),
   lambda L: Tensor.ones(1, 2, 4, 4).conv2d(Tensor.ones(1, 1, 3, 3))),
  ("sum_dim_out_of_range", lambda L: _x(L).sum(5), None),
  ("softmax_dim_out_of_range", lambda L: _x(L).softmax(3), None),
  ("transpose_dim_out_of_range", lambda L: _x(L).transpose(0, 3), None),
  ("unsqueeze_dim_out_of_range", lambda L: _x(L).unsqueeze(4), None),
  ("cumsum_dim_out_of_range", lambda L: _x(L).cumsum(3), None),
  ("gather_dim_out_of_range", lambda L: _x(L).gather(4, _l(L)), None),
  ("argmax_empty_axis", lambda L: L.ones(0, 3).argmax(0), None),
  ("max_dim_empty_axis", lambda L: L.ones(0, 3).max(dim=0), None),
  ("cat_0d", lambda L: L.cat([L.ones(()), L.ones(())]), None),
  ("cat_shapes", lambda L: L.cat([L.ones(2, 3), L.ones(3, 2)]), None),
  ("stack_shapes", lambda L: L.stack([L.ones(2), L.ones(3)]), None),
  ("broadcast_add", lambda L: _x(L) + L.ones(4), None),
  ("expand_bad", lambda L: _x(L).expand(4, 4), None),
  ("reshape_bad", lambda L: _x(L).reshape(4), None),
  ("reshape_two_minus_one", lambda L: _x(L).reshape(-1, -1), None),
  ("permute_repeat", lambda L: _x(L).permute(0, 0), None),
  ("flip_repeat", lambda L: _x(L).flip(0, 0), None),
  ("repeat_too_few", lambda L: _x(L).repeat(2), None),
  ("split_sizes", lambda L: _x(L).split([1, 5]), None),
  ("chunk_zero", lambda L: _x(L).chunk(0), None),
  ("matmul_shapes", lambda L: _x(L) @ _x(L), None),
  ("matmul_0d", lambda L: L.ones(()) @ _x(L), None),
  ("bool_of_many", lambda L: bool(_x(L)), None),
  ("float_of_many", lambda L: float(_x(L)), None),
  ("item_of_many", lambda L: _x(L).item(), None),
  ("len_of_0d", lambda L: len(L.ones(())), None),
  ("neg_bool", lambda L: -L.ones(2, dtype=L.bool if L is torch else dtypes.bool), None),
  ("sub_bool", lambda L: L.ones(2, dtype=torch.bool) - L.ones(2, dtype=torch.bool),
   lambda L: Tensor.ones(2, dtype=dtypes.bool) - Tensor.ones(2, dtype=dtypes.bool)),
  ("gelu_bad_approximate", lambda L: F.gelu(_x(L), approximate="foo"), lambda L: _x(L).gelu(approximate="foo")),
  ("arange_zero_step", lambda L: L.arange(0, 5, 0), None),
  ("linspace_negative_steps", lambda L: L.linspace(0, 1, -1), None),
  ("randint_empty_range", lambda L: torch.randint(5, 2, (3,)), lambda L: Tensor.randint(3, low=5, high=2)),
  ("rand_int_dtype", lambda L: torch.rand(3, dtype=torch.int32), lambda L: Tensor.rand(3, dtype=dtypes.int32)),
  ("one_hot_float", lambda L: F.one_hot(_x(L)), lambda L: _x(L).one_hot()),
  ("gather_float_index", lambda L: _x(L).gather(0, _x(L)), None),
  ("masked_select_float_mask", lambda L: _x(L).masked_select(_x(L)), None),
  ("masked_fill_non_scalar", lambda L: _x(L).masked_fill(_x(L) > 0, L.ones(2)), None),
  ("embedding_float_index", lambda L: F.embedding(_x(L), _x(L)), lambda L: _x(L).embedding(_x(L))),
  ("dropout_bad_p", lambda L: F.dropout(_x(L), 2.0), lambda L: _x(L).dropout(2.0)),
  ("cross_entropy_bad_reduction", lambda L: F.cross_entropy(_x(L), torch.zeros(2, dtype=torch.long), reduction="foo"),
   lambda L: _x(L).cross_entropy(Tensor.zeros(2, dtype=dtypes.int32), reduction="foo")),
  ("interpolate_bad_mode", lambda L: F.interpolate(L.ones(1, 1, 4), size=2, mode="foo"),
   lambda L: Tensor.ones(1, 1, 4).interpolate(size=2, mode="foo")),
  ("interpolate_2d_input", lambda L: F.interpolate(_x(L), size=2), lambda L: _x(L).interpolate(size=2)),
  ("interpolate_size_and_scale", lambda L: F.interpolate(L.ones(1, 1, 4), size=2, scale_factor=2.0),
   lambda L: Tensor.ones(1, 1, 4).interpolate(size=2, scale_factor=2.0)),
  ("max_pool_kernel_too_big", lambda L: F.max_pool2d(L.ones(1, 1, 2, 2), 3), lambda L: Tensor.ones(1, 1, 2, 2).max_pool2d(3)),
  ("avg_pool_kernel_too_big", lambda L: F.avg_pool2d(L.ones(1, 1, 2, 2), 3), lambda L: Tensor.ones(1, 1, 2, 2).avg_pool2d(3)),
  ("topk_k_too_big", lambda L: _x(L).topk(5), None),
  ("kthvalue_k_too_big", lambda L: _x(L).kthvalue(5), None),
  ("multinomial_too_many", lambda L: L.ones(3).multinomial(5), None),
  ("repeat_interleave_negative", lambda L: _x(L).repeat_interleave(-1), None),
  ("index_out_of_range", lambda L: _x(L)[5], None),
  ("diag_3d", lambda L: L.ones(2, 2, 2).diag(), None),
  ("trace_3d", lambda L: L.ones(2, 2, 2).trace(), None),
  ("diagonal_same_dims", lambda L: _x(L).diagonal(0, 0, 0), None),
  ("triu_1d", lambda L: L.ones(3).triu(), None),
  ("roll_shifts_dims", lambda L: _x(L).roll((1, 2), (0,)), None),
  ("pad_reflect_too_big", lambda L: F.pad(L.ones(1, 2, 3), (3, 3), mode="reflect"),
   lambda L: Tensor.ones(1, 2, 3).pad((3, 3), mode="reflect")),
  ("pad_circular_too_big", lambda L: F.pad(L.ones(1, 2, 3), (4, 4), mode="circular"),
   lambda L: Tensor.ones(1, 2, 3).pad((4, 4), mode="circular")),
  ("squeeze_dim_out_of_range", lambda L: _x(L).squeeze(3), None),
  ("take_along_dim_float", lambda L: _x(L).take_along_dim(_x(L)), None),
  ("scaled_dot_product_causal_and_mask", lambda L: F.scaled_dot_product_attention(
    torch.ones(1, 2, 4), torch.ones(1, 2, 4), torch.ones(1, 2, 4), attn_mask=torch.ones(2, 2, dtype=torch.bool), is_causal=True),
   lambda L: Tensor.ones(1, 2, 4).scaled_dot_product_attention(Tensor.ones(1, 2, 4), Tensor.ones(1, 2, 4),
                                                               attn_mask=Tensor.ones(2, 2, dtype=dtypes.bool), is_causal=True)),
  ("einsum_operand_count", lambda L: L.einsum("ij,jk->ik", _x(L)), None),
  ("linear_wrong_features", lambda L: torch.nn.Linear(4, 2)(torch.ones(2, 3)), lambda L: nn.Linear(4, 2)(Tensor.ones(2, 3))),
  ("conv_groups", lambda L: torch.nn.Conv2d(3, 4, 3, groups=2), lambda L: nn.Conv2d(3, 4, 3, groups=2)),
  ("layernorm_shape", lambda L: torch.nn.LayerNorm(4)(torch.ones(2, 3)), lambda L: nn.LayerNorm(4)(Tensor.ones(2, 3))),
  ("mha_heads", lambda L: torch.nn.MultiheadAttention(6, 4), lambda L: nn.MultiheadAttention(6, 4)),
  ("softmax_int_dtype", lambda L: _x(L).softmax(-1, dtype=torch.int32), lambda L: _x(L).softmax(-1, dtype=dtypes.int32)),
  ("log_softmax_int_dtype", lambda L: _x(L).log_softmax(0, dtype=torch.int64), lambda L: _x(L).log_softmax(0, dtype="int64")),
  ("slice_step_zero", lambda L: _x(L)[::0], None),
  ("too_many_indices", lambda L: _x(L)[1, 2, 0], None),
  ("flatten_start_after_end", lambda L: L.ones(2, 3, 4).flatten(2, 0), None),
  ("unflatten_bad_sizes", lambda L: L.ones(2, 3, 4).unflatten(1, (2, 2)), None),
  ("permute_wrong_length", lambda L: L.ones(2, 3, 4).permute(0, 1), None),
  ("expand_negative", lambda L: _x(L).expand(2, -2), None),
  ("pad_odd_length", lambda L: F.pad(_x(L), (1, 1, 1)), lambda L: _x(L).pad((1, 1, 1))),
  ("topk_negative_k", lambda L: _x(L).topk(-1), None),
  ("split_negative", lambda L: _x(L).split(-1), None),
  ("gather_index_rank", lambda L: L.ones(2, 3, 4).gather(0, _l(L)), None),
  ("full_negative", lambda L: L.full((-1,), 2.0), None),
  ("eye_negative", lambda L: L.eye(-1), None),
  ("arange_infinite", lambda L: L.arange(0, float("inf")), None),
  ("conv_stride_zero", lambda L: F.conv2d(L.ones(1, 1, 4, 4), L.ones(1, 1, 2, 2), stride=0),
   lambda L: Tensor.ones(1, 1, 4, 4).conv2d(Tensor.ones(1, 1, 2, 2), stride=0)),
  ("avg_pool_padding_too_big", lambda L: F.avg_pool2d(L.ones(1, 1, 4, 4), 2, padding=2),
   lambda L: Tensor.ones(1, 1, 4, 4).avg_pool2d(2, padding=2)),
  ("where_shapes", lambda L: L.where(_x(L) > 0, L.ones(4), 0.0), lambda L: (_x(L) > 0).where(Tensor.ones(4), 0.0)),
  ("interpolate_align_corners_nearest", lambda L: F.interpolate(L.ones(1, 1, 4), size=2, align_corners=True),
   lambda L: Tensor.ones(1, 1, 4).interpolate(size=2, align_corners=True)),
  ("bitcast_size", lambda L: L.ones(3).view(torch.float64), lambda L: Tensor.ones(3).bitcast(dtypes.float64)),
  ("linspace_bool", lambda L: torch.linspace(5, 10, 3, dtype=torch.bool), lambda L: Tensor.linspace(5, 10, 3, dtype="bool")),
  ("nll_weight_shape", lambda L: F.nll_loss(L.ones(2, 3), torch.zeros(2, dtype=torch.long), weight=L.ones(4)),
   lambda L: Tensor.ones(2, 3).nll_loss(Tensor.zeros(2, dtype=dtypes.int32), weight=Tensor.ones(4))),
  ("dropout_module_p", lambda L: torch.nn.Dropout(1.5), lambda L: nn.Dropout(1.5)),
]

@pytest.mark.parametrize("torch_call,tiny_call", [(c[1], c[2] or c[1]) for c in CASES], ids=[c[0] for c in CASES])
def test_error_type_is_torchs(torch_call, tiny_call):
  with pytest.raises(Exception) as ref:
    torch_call(torch)
  with pytest.raises(Exception) as ours:
    tiny_call(Tensor)
  want = ref.type
  assert isinstance(ours.value, want), f"torch raises {want.__name__}, we raise {type(ours.value).__name__}: {ours.value}"
  assert str(ours.value), "the error says what was wrong"

def test_error_classes_are_both_kinds():
  assert issubclass(ArgumentError, RuntimeError) and issubclass(ArgumentError, ValueError)
  assert issubclass(ShapeMismatchError, ArgumentError)
  assert issubclass(DTypeError, NotImplementedError) and issubclass(DTypeError, TypeError)
  assert issubclass(DTypeError, RuntimeError) and issubclass(UnsupportedError, RuntimeError)
  assert issubclass(UnsupportedError, ValueError)
  with pytest.raises(ValueError, match="clamp: give at least one"): Tensor.ones(2).clamp()
  with pytest.raises(TypeError, match="bitwise ops need int or bool"): Tensor.ones(2) & Tensor.ones(2)
