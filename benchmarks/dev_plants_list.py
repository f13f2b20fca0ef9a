"""The planted bugs of dev_plants.py, written against pytorch/executorch cff6f4d.

A plant: ``name``, ``kind`` (the kind of bug), ``file`` (relative to the checkout),
``edits`` (exact old text -> new text, each old text occurring once in the file at
HEAD), ``expect`` (what it should be found as) and ``args`` (more ``etops dev``
flags, e.g. ``--max-slowdown``). ``CONTROLS`` are unmodified files (exit 0 expected).
Each edit is a bug a kernel author could make; none is upstream code's behaviour.
"""

P = "kernels/portable/cpu/"

PLANTS = [
    {"name": "abs-inf-above-5", "kind": "wrong value (base has one)", "file": P + "op_abs.cpp",
     "expect": "wrong (float inputs above 5), next to the base's complex64 non-finite finding",
     "edits": [("""        [](const CTYPE val_in) {
            if (val_in < 0) {""", """        [](const CTYPE val_in) {
            if constexpr (std::is_floating_point<CTYPE>::value) {
              if (val_in > 5) {
                return std::numeric_limits<CTYPE>::infinity();
              }
            }
            if (val_in < 0) {""")]},
    {"name": "neg-half-0.99", "kind": "float16/bfloat16 precision", "file": P + "op_neg.cpp",
     "expect": "wrong float16/bfloat16 values (1% off)",
     "edits": [("[](const auto& val_in) { return -val_in; },", """[](const auto& val_in) {
          if constexpr (
              std::is_same_v<CTYPE, executorch::aten::Half> ||
              std::is_same_v<CTYPE, executorch::aten::BFloat16>) {
            return static_cast<CTYPE>(-static_cast<float>(val_in) * 0.99f);
          } else {
            return -val_in;
          }
        },""")]},
    {"name": "sum-half-acc", "kind": "float16/bfloat16 precision", "file": P + "op_sum.cpp",
     "expect": "float16/bfloat16 sums off beyond ATen's error (accumulated in half)",
     "edits": [("""            float,
            CTYPE>;""", """            CTYPE,
            CTYPE>;"""), ("""                float,
                CTYPE_OUT>;""", """                CTYPE_OUT,
                CTYPE_OUT>;""")]},
    {"name": "relu-spin-2d", "kind": "spinning kernel", "file": P + "op_relu.cpp",
     "expect": "a hang on 2-D inputs found (a timeout finding), etops dev not hung",
     "edits": [("""  ET_SWITCH_REALHBF16_TYPES(in.scalar_type(), ctx, "relu.out", CTYPE, [&]() {""",
                """  if (in.dim() == 2) {
    // walk the rows (the increment is missing)
    volatile int64_t row = 0;
    while (row < in.size(0)) {
    }
  }

  ET_SWITCH_REALHBF16_TYPES(in.scalar_type(), ctx, "relu.out", CTYPE, [&]() {""")]},
    {"name": "roll-read-past", "kind": "memory: read past an input", "file": P + "op_roll.cpp",
     "expect": "memory: read past the end of argument 'self'",
     "edits": [("out_data[ix] = in_data[unshift_flat_ix(ix, in, dim_shifts)];",
                "out_data[ix] = in_data[unshift_flat_ix(ix, in, dim_shifts) + 1];")]},
    {"name": "full_like-write-past", "kind": "memory: write past the out", "file": P + "op_full_like.cpp",
     "expect": "memory: write past the end of argument 'out'",
     "edits": [("for (const auto i : c10::irange(out.numel())) {",
                "for (const auto i : c10::irange(out.numel() + 1)) {")]},
    {"name": "flip-read-before", "kind": "memory: read before the start", "file": P + "op_flip.cpp",
     "expect": "memory: read before the start of argument 'self'",
     "edits": [("out_data[ix] = in_data[unflip_flat_ix(ix, in, flip_dim)];",
                "out_data[ix] =\n          in_data[static_cast<int64_t>(unflip_flat_ix(ix, in, flip_dim)) - 1];")]},
    {"name": "sigmoid-null-0d", "kind": "crash: null dereference", "file": P + "op_sigmoid.cpp",
     "expect": "crash (null pointer) on 0-d float inputs",
     "edits": [("""  ET_DEFINE_OPERATOR_NAME(op_name, "sigmoid.out");
""", """  ET_DEFINE_OPERATOR_NAME(op_name, "sigmoid.out");

  // a 0-d float input: one value (the source pointer is never set)
  if (in.dim() == 0 && in.scalar_type() == ScalarType::Float &&
      out.scalar_type() == ScalarType::Float) {
    const float* volatile scalar_src = nullptr;
    out.mutable_data_ptr<float>()[0] = 1.0f / (1.0f + std::exp(-*scalar_src));
    return out;
  }
""")]},
    {"name": "permute-check-rank", "kind": "abort: ET_CHECK on valid input", "file": P + "op_permute_copy.cpp",
     "expect": "abort on inputs of rank 4 and more",
     "edits": [("""  const auto in_type = out.scalar_type();
""", """  const auto in_type = out.scalar_type();
  ET_CHECK_MSG(in.dim() <= 3, "permute_copy: rank %zd", (ssize_t)in.dim());
""")]},
    {"name": "mm-no-dim-order-check", "kind": "layout: reads as contiguous", "file": P + "op_mm.cpp",
     "expect": "wrong with transposed inputs, out included (the base refuses them)",
     "edits": [("""  ET_KERNEL_CHECK(ctx, tensor_is_default_dim_order(in), InvalidArgument, out);
""", "")]},
    {"name": "upsample-nchw-for-nhwc", "kind": "layout: reads as contiguous", "file": P + "op_upsample_nearest2d.cpp",
     "expect": "wrong with channels-last inputs (the base reads them right)",
     "edits": [("""    upsample_nearest2d_kernel_impl_nhwc<CTYPE>(in, scale_h, scale_w, out);""",
                """    upsample_nearest2d_kernel_impl_nchw<CTYPE>(in, scale_h, scale_w, out);""")]},
    {"name": "cumsum-narrow-acc", "kind": "int8/int16 overflow", "file": P + "op_cumsum.cpp",
     "expect": "wrong int8/int16 cumsums once they exceed the input's type",
     "edits": [("""        output_data_base[cur_round_base + idx] =
            load_self(&input_data_base
                          [(cur_round_base + idx) * self.element_size()]) +
            output_data_base[prev_round_base + idx];""",
                """        CTYPE_OUT acc = load_self(&input_data_base
                                      [(cur_round_base + idx) *
                                       self.element_size()]) +
            output_data_base[prev_round_base + idx];
        if constexpr (std::is_integral<CTYPE_OUT>::value) {
          // accumulate in the input's own width
          if (self.scalar_type() == ScalarType::Char) {
            acc = static_cast<int8_t>(acc);
          } else if (self.scalar_type() == ScalarType::Short) {
            acc = static_cast<int16_t>(acc);
          }
        }
        output_data_base[cur_round_base + idx] = acc;""")]},
    {"name": "sum-int-narrow-acc", "kind": "int8/int16 overflow", "file": P + "op_sum.cpp",
     "expect": "wrong int8/int16 sums once they exceed the input's type",
     "edits": [("""                float,
                CTYPE_OUT>;""", """                float,
                std::conditional_t<
                    std::is_same_v<CTYPE_IN, int8_t> ||
                        std::is_same_v<CTYPE_IN, int16_t>,
                    CTYPE_IN,
                    CTYPE_OUT>>;""")]},
    {"name": "where-broadcast-no-cond", "kind": "wrong broadcasting", "file": P + "op_where.cpp",
     "expect": "a refusal or wrong values when cond broadcasts beyond a and b",
     "edits": [("resize_to_broadcast_target_size(a, b, cond, out) == Error::Ok,",
                "resize_to_broadcast_target_size(a, b, out) == Error::Ok,")]},
    {"name": "tril-off-by-one", "kind": "off-by-one loop bound", "file": P + "op_tril.cpp",
     "expect": "wrong: the diagonal left out",
     "edits": [("c10::irange(std::min(num_cols, i + diagonal + 1))", "c10::irange(std::min(num_cols, i + diagonal))")]},
    {"name": "sub-alpha-on-a", "kind": "wrong alpha", "file": P + "op_sub.cpp",
     "expect": "wrong values with alpha != 1",
     "edits": [("return val_a - (decltype(val_b))(val_alpha)*val_b;",
                "return (decltype(val_a))(val_alpha)*val_a - val_b;")]},
    {"name": "div-floor-as-trunc", "kind": "wrong rounding mode", "file": P + "op_div.cpp",
     "expect": "wrong div(rounding_mode='floor') on negative quotients",
     "edits": [("""            // We established above that the mode is either trunc or floor, so
            // it must be floor.
            value = utils::floor_divide(val_a, val_b);""",
                """            // We established above that the mode is either trunc or floor, so
            // it must be floor.
            value = std::trunc(value);""")]},
    {"name": "maximum-drops-nan", "kind": "NaN handling", "file": P + "op_maximum.cpp",
     "expect": "wrong: NaN of a not propagated",
     "edits": [("return utils::max_override(val_a, val_b);", "return val_a > val_b ? val_a : val_b;")]},
    {"name": "hardtanh-no-bfloat16", "kind": "dtype switch (refusal)", "file": P + "op_hardtanh.cpp",
     "expect": "unsupported bfloat16 where the base passed",
     "edits": [('ET_SWITCH_REALHBF16_TYPES(in_type, ctx, "hardtanh.out", CTYPE, [&]() {',
                'ET_SWITCH_REALH_TYPES(in_type, ctx, "hardtanh.out", CTYPE, [&]() {')]},
    {"name": "opt-mul-scalar-int-cast", "kind": "optimized kernel", "file": "kernels/optimized/cpu/op_mul.cpp",
     "expect": "wrong float mul by a one-element tensor (scalar truncated)",
     "edits": [("CTYPE b_casted = static_cast<CTYPE>(b_val);",
                "CTYPE b_casted = static_cast<CTYPE>(static_cast<int64_t>(b_val));")]},
    {"name": "quantize-trunc", "kind": "quantized kernel rounding", "file": "kernels/quantized/cpu/op_quantize.cpp",
     "expect": "wrong quantized values (truncated, not rounded)",
     "edits": [("std::nearbyint(static_cast<float>(inv_scale * value)));",
                "std::trunc(static_cast<float>(inv_scale * value)));")]},
    {"name": "leaky_relu-2x", "kind": "2x slowdown (--max-slowdown 1.5)", "file": P + "op_leaky_relu.cpp",
     "expect": "a slowdown finding", "args": ["--max-slowdown", "1.5"],
     "edits": [("""    apply_unary_map_fn(
        [negative_slope_casted](const CTYPE val_in) {
          if (val_in >= 0) {
            return val_in;
          } else {
            return val_in * negative_slope_casted;
          }
        },
        in.const_data_ptr<CTYPE>(),
        out.mutable_data_ptr<CTYPE>(),
        in.numel());""", """    for (int pass = 0; pass < 2; pass++) {
      apply_unary_map_fn(
          [negative_slope_casted](const CTYPE val_in) {
            if (val_in >= 0) {
              return val_in;
            } else {
              return val_in * negative_slope_casted;
            }
          },
          in.const_data_ptr<CTYPE>(),
          out.mutable_data_ptr<CTYPE>(),
          in.numel());
    }""")]},
]

CONTROLS = [
    {"name": "unmodified op_abs", "kind": "control", "file": P + "op_abs.cpp", "control": True, "edits": []},
    {"name": "unmodified op_tril", "kind": "control", "file": P + "op_tril.cpp", "control": True, "edits": []},
    {"name": "unmodified optimized op_mul", "kind": "control", "file": "kernels/optimized/cpu/op_mul.cpp",
     "control": True, "edits": []},
]
