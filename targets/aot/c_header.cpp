#include "c_header.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include <fmt/format.h>

#include "ropegen/spec_io.h"

namespace ropegen::targets::aot {
namespace {

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

const char* element_doc(DType t) {
  switch (t) {
    case DType::F32: return "float (IEEE binary32)";
    case DType::F16: return "uint16_t holding IEEE binary16 bit patterns";
    case DType::BF16: return "uint16_t holding bfloat16 bit patterns";
  }
  return "?";
}

const char* halide_type_code(const Halide::Type& t) {
  if (t.is_bfloat()) return "halide_type_bfloat";
  if (t.is_float()) return "halide_type_float";
  if (t.is_uint()) return "halide_type_uint";
  return "halide_type_int";
}

std::string positions_doc(const RopeSpec& spec) {
  if (spec.positions == PositionsMode::Explicit) {
    const char* tokens = spec.layout == Layout::THD ? "[T]" : spec.layout == Layout::SBHD ? "[S, B]" : "[B, S]";
    return fmt::format("explicit ids (int32 or int64), shaped {} or [{}] shared by the batch", tokens,
                       spec.layout == Layout::THD ? "T" : "S");
  }
  if (spec.layout == Layout::THD)
    return "implicit: token t is at offset + (t - the start of its sequence in cu_seqlens)";
  return "implicit: token s of every sequence is at offset + s";
}

// The (d, h, s, b) extents and strides of a tensor given in layout order
// (runtime/tensor_view.cpp's logical_tensor). thd is one sequence of T: B = 1.
std::string logical_mapping(Layout l) {
  int order[4] = {3, 2, 1, 0};  // layout position of d, h, s, b
  switch (l) {
    case Layout::BSHD: break;
    case Layout::BHSD: order[1] = 1, order[2] = 2; break;
    case Layout::SBHD: order[2] = 0, order[3] = 1; break;
    case Layout::THD: order[0] = 2, order[1] = 1, order[2] = 0, order[3] = -1; break;
  }
  std::string out;
  for (int i = 0; i < 4; ++i) {
    if (order[i] < 0) out += fmt::format("  ext[{}] = 1; str[{}] = 0;\n", i, i);
    else out += fmt::format("  ext[{0}] = shape[{1}]; str[{0}] = strides[{1}];\n", i, order[i]);
  }
  return out;
}

// The positions view (runtime/tensor_view.cpp's logical_positions): rank 1
// is [S] shared by the batch (stride 0), rank 2 the layout's token dims.
std::string positions_mapping(Layout l) {
  if (l == Layout::THD) return "  if (rank != 1) return @P@_ROPE_ERR_POSITIONS;\n";
  if (l == Layout::SBHD)
    return "  if (rank == 2) {\n"
           "    if (shape[0] != tokens || shape[1] != batch) return @P@_ROPE_ERR_POSITIONS;\n"
           "    @N@_rope_dim_(&v->dim[0], tokens, batch);\n"
           "    @N@_rope_dim_(&v->dim[1], batch, 1);\n"
           "    return @P@_ROPE_OK;\n"
           "  }\n";
  return "  if (rank == 2) {\n"
         "    if (shape[0] != batch || shape[1] != tokens) return @P@_ROPE_ERR_POSITIONS;\n"
         "    @N@_rope_dim_(&v->dim[0], tokens, 1);\n"
         "    @N@_rope_dim_(&v->dim[1], batch, tokens);\n"
         "    return @P@_ROPE_OK;\n"
         "  }\n";
}

// The C expression passing one Halide argument, by the names the lowering gives them.
// Halide may make an output buffer's name unique with a `$n` tail.
std::string argument_expression(const Halide::Argument& a) {
  const std::string base = a.name.substr(0, a.name.find('$'));
  static const std::pair<const char*, const char*> known[] = {
      {"q", "&vq.buf"},           {"k", "&vk.buf"},       {"positions", "&vpos.buf"}, {"cu_seqlens", "&vcu.buf"},
      {"offset", "offset"},       {"seq_len", "seq_len"}, {"out_q", "&voq.buf"},      {"out_k", "&vok.buf"},
      {"pass_in", "&vin.buf"},    {"pass_out", "&vout.buf"},
  };
  for (const auto& [name, expression] : known)
    if (base == name) return expression;
  throw std::logic_error("rope-gen's C header does not know the kernel argument `" + a.name + "`");
}

std::string call(const CompiledEntry& e) {
  std::string args;
  for (const auto& a : e.arguments) args += (args.empty() ? "" : ", ") + argument_expression(a);
  return fmt::format("{}({})", e.entry.name, args);
}

const CompiledEntry* find(const LibraryDescription& lib, bool with_k, bool int64, bool backward) {
  for (const auto& e : lib.entries)
    if (e.entry.kind == EntryPoint::Kind::Rope && e.entry.variant.with_k == with_k &&
        e.entry.variant.backward == backward &&
        (!e.entry.explicit_positions || (e.entry.variant.position_type == IdType::Int64) == int64))
      return &e;
  throw std::logic_error("rope-gen: an AOT library without its rope entry points");
}

bool uses(const LibraryDescription& lib, const std::string& argument) {
  for (const auto& e : lib.entries)
    for (const auto& a : e.arguments)
      if (a.name == argument) return true;
  return false;
}

std::string kernel_calls(const LibraryDescription& lib, bool backward) {
  const bool explicit_positions = lib.spec.positions == PositionsMode::Explicit;
  auto entry = [&](bool with_k, bool int64) { return call(*find(lib, with_k, int64, backward)); };
  if (!explicit_positions) return fmt::format("  err = k ? {} : {};\n", entry(true, false), entry(false, false));
  return fmt::format("  if (k) err = positions_are_int64 ? {} : {};\n  else err = positions_are_int64 ? {} : {};\n",
                     entry(true, true), entry(true, false), entry(false, true), entry(false, false));
}

const char* kPrologue = R"C(/* @N@.h: the RoPE library of spec `@N@` (spec hash @HASH@), generated by
 * rope-gen with Halide @HALIDE@. Do not edit: regenerate with `rope-gen build`.
 *
 * Files: this header, HalideRuntime.h, @ENTRY_HEADERS@ (Halide's
 * declarations of the entry points, included below) and lib@N@.a, which
 * holds every entry point for @TARGET_COUNT@ target(s), picked at run time
 * (see manifest.json), and the Halide runtime. No Halide installation is
 * needed. Plain C99 or C++:
 *     cc -std=c99 app.c -I DIR DIR/lib@N@.a -lpthread -ldl -lm
 *
 * The spec:
 *   tensors   q and k are @SHAPE@ (layout @LAYOUT@), D = head_dim = @D@;
 *             elements are @ELEMENT@
 *   rotated   dims [@OFF@, @END@) of every head, @PAIRING@@OTHER_DIMS@
 *   positions @POSITIONS_DOC@
 */
#ifndef ROPEGEN_@P@_H
#define ROPEGEN_@P@_H

#include <stddef.h>
#include <stdint.h>

#include "HalideRuntime.h"
@INCLUDES@
#define @P@_HEAD_DIM @D@
#define @P@_ROTARY_DIM @R@
#define @P@_ROTARY_OFFSET @OFF@
#define @P@_TENSOR_RANK @RANK@ /* q and k: @SHAPE@ */
#define @P@_ELEMENT_BYTES @ELEMENT_BYTES@
#define @P@_EXPLICIT_POSITIONS @EXPLICIT@
#define @P@_SPEC_HASH "@HASH@"

/* Return codes of @N@_rope(). 0 is success; a positive code is a call this
 * header rejected before running anything; a negative code is a
 * halide_error_code_t from a kernel (Halide's runtime prints why on stderr). */
#define @P@_ROPE_OK 0
#define @P@_ROPE_ERR_NULL_POINTER 1 /* a required pointer is NULL, or k without out_k */
#define @P@_ROPE_ERR_SHAPE 2        /* wrong rank or head_dim, k unlike q, an extent < 1 or >= 2^31 */
#define @P@_ROPE_ERR_STRIDES 3      /* the head dim is not contiguous, or a stride >= 2^31 */
#define @P@_ROPE_ERR_POSITIONS 4    /* positions missing, unexpected, misshaped, or offset < 0 */
#define @P@_ROPE_ERR_CU_SEQLENS 5   /* cu_seqlens not 0 .. T non-decreasing, or not thd */
#define @P@_ROPE_ERR_IN_PLACE 6     /* in place, on a spec that writes pairs elsewhere than it reads them */

static inline const char *@N@_rope_error_string(int code) {
  switch (code) {
    case @P@_ROPE_OK: return "ok";
    case @P@_ROPE_ERR_NULL_POINTER: return "a required pointer is NULL (or k is given without out_k)";
    case @P@_ROPE_ERR_SHAPE: return "q or k has the wrong shape for the spec (rank, head_dim, k unlike q, or an extent out of range)";
    case @P@_ROPE_ERR_STRIDES: return "the head dim must be contiguous (last stride 1) and every stride below 2^31";
    case @P@_ROPE_ERR_POSITIONS: return "positions are missing, unexpected or misshaped for the spec, or offset < 0";
    case @P@_ROPE_ERR_CU_SEQLENS: return "cu_seqlens must be num_sequences + 1 non-decreasing starts from 0 to T (thd only)";
    case @P@_ROPE_ERR_IN_PLACE: return "this spec's output pairing differs from its input pairing: it cannot run in place";
    default: return code < 0 ? "a kernel failed (Halide error code; details on stderr)" : "unknown error";
  }
}

/* Everything below up to @N@_rope() is how that call builds its views. */
typedef struct @N@_rope_view_ {
  halide_buffer_t buf;
  halide_dimension_t dim[5];
} @N@_rope_view_;

static inline void @N@_rope_dim_(halide_dimension_t *d, int64_t extent, int64_t stride) {
  d->min = 0;
  d->extent = (int32_t)extent;
  d->stride = (int32_t)stride;
  d->flags = 0;
}

static inline void @N@_rope_init_(@N@_rope_view_ *v, const void *host, halide_type_code_t code, int bits, int dims) {
  v->buf.device = 0;
  v->buf.device_interface = NULL;
  v->buf.host = (uint8_t *)(uintptr_t)host; /* the kernels never write their inputs */
  v->buf.flags = 0;
  v->buf.type.code = code;
  v->buf.type.bits = (uint8_t)bits;
  v->buf.type.lanes = 1;
  v->buf.dimensions = dims;
  v->buf.dim = v->dim;
  v->buf.padding = NULL;
}

/* A tensor's (d, h, s, b) extents and strides, checked for the kernels. */
static inline int @N@_rope_logical_(const int64_t *shape, const int64_t *strides, int64_t ext[4], int64_t str[4]) {
  int i;
@LOGICAL@  for (i = 0; i < 4; ++i) {
    if (ext[i] < 1 || ext[i] > INT32_MAX) return @P@_ROPE_ERR_SHAPE;
    if (str[i] < -INT32_MAX || str[i] > INT32_MAX) return @P@_ROPE_ERR_STRIDES;
  }
  if (ext[0] != @P@_HEAD_DIM) return @P@_ROPE_ERR_SHAPE;
  if (str[0] != 1) return @P@_ROPE_ERR_STRIDES;
  return @P@_ROPE_OK;
}

static inline void @N@_rope_tensor_view_(@N@_rope_view_ *v, const void *data, const int64_t ext[4], const int64_t str[4]) {
  int i;
  @N@_rope_init_(v, data, @TYPE_CODE@, @TYPE_BITS@, 4);
  for (i = 0; i < 4; ++i) @N@_rope_dim_(&v->dim[i], ext[i], str[i]);
}

/* Dims [first, first + count) of each head, as (d, h, s, b). */
static inline void @N@_rope_range_view_(@N@_rope_view_ *v, const void *data, const int64_t ext[4], const int64_t str[4],
                                        int first, int count) {
  @N@_rope_tensor_view_(v, (const uint8_t *)data + (size_t)first * @ELEMENT_BYTES@, ext, str);
  @N@_rope_dim_(&v->dim[0], count, 1);
}

/* The kernels' output: the rotary dims as pairs, based at rotary_offset, by
 * the pairing written (forward: output pairing; backward: pairing): half
 * (r, m, h, s, b) with m's stride R/2; interleaved (m, r, h, s, b) with r's
 * stride 2. */
static inline void @N@_rope_rotary_view_(@N@_rope_view_ *v, void *data, const int64_t ext[4], const int64_t str[4],
                                         int interleaved) {
  int i;
  @N@_rope_init_(v, (uint8_t *)data + (size_t)@P@_ROTARY_OFFSET * @ELEMENT_BYTES@, @TYPE_CODE@, @TYPE_BITS@, 5);
  if (interleaved) {
    @N@_rope_dim_(&v->dim[0], 2, 1);
    @N@_rope_dim_(&v->dim[1], @P@_ROTARY_DIM / 2, 2);
  } else {
    @N@_rope_dim_(&v->dim[0], @P@_ROTARY_DIM / 2, 1);
    @N@_rope_dim_(&v->dim[1], 2, @P@_ROTARY_DIM / 2);
  }
  for (i = 1; i < 4; ++i) @N@_rope_dim_(&v->dim[i + 1], ext[i], str[i]);
}

/* Position ids seen as (s, b): rank 1 is [tokens] shared by the batch. */
static inline int @N@_rope_positions_view_(@N@_rope_view_ *v, const void *ids, int is_int64, const int64_t *shape,
                                           int rank, int64_t tokens, int64_t batch) {
  @N@_rope_init_(v, ids, halide_type_int, is_int64 ? 64 : 32, 2);
  if (rank == 1) {
    if (shape[0] != tokens) return @P@_ROPE_ERR_POSITIONS;
    @N@_rope_dim_(&v->dim[0], tokens, 1);
    @N@_rope_dim_(&v->dim[1], batch, 0);
    return @P@_ROPE_OK;
  }
@POSITIONS_MAPPING@  return @P@_ROPE_ERR_POSITIONS;
}

/* Rotates q (and k) by the spec's RoPE. Returns @P@_ROPE_OK (0) or an error
 * code (above; @N@_rope_error_string() says which).
 *
 *   q, out_q     q's elements and where the rotated q goes. out_q has q's
 *                shape and strides; out_q == q rotates in place where the
 *                spec allows it (any other overlap is undefined).
 *   q_shape      @RANK@ extents in layout order, @SHAPE@; the last is @D@.
 *   q_strides    @RANK@ strides in elements, same order. The last must be 1
 *                (each head contiguous); the others are free, so q may be a
 *                view into a larger (e.g. fused qkv) buffer.
 *   k, out_k, k_shape, k_strides
 *                the same for k, which may differ from q in its number of
 *                heads only. k == NULL (with out_k == NULL) rotates q alone.
 *   positions    @POSITIONS_ARG_DOC@
 *   positions_are_int64, positions_shape, positions_rank
 *                the ids' width (0: int32, 1: int64), and their dims
 *                (rank 1 or 2); dense, row-major.
 *   cu_seqlens   thd only: num_sequences + 1 sequence starts, 0 .. T,
 *                non-decreasing; NULL means one sequence of all T tokens.
 *                Must be NULL for other layouts.
 *   offset       implicit positions: the position of the first token (e.g.
 *                tokens already in the KV cache); >= 0. Ignored when explicit.
 *   seq_len      the run-time sequence length (dynamic NTK, LongRoPE per call,
 *                xPos; HF: max position id + 1); <= 0 derives it that way.
 *                @SEQ_LEN_DOC@
 *
 * @N@_rope_backward() takes the same arguments for training: q and k are
 * the upstream gradients dL/d(out_q), dL/d(out_k); out_q and out_k receive
 * dL/dq, dL/dk (the rotation by -angle, same scales; dims outside the
 * rotary range pass the gradient unchanged).
 *
 * Ownership: nothing is kept or freed; every pointer is the caller's and
 * only needs to stay valid during the call. The call allocates nothing on
 * the heap itself; Halide's runtime runs the work on its thread pool
 * (HL_NUM_THREADS sets its size). Calls on different tensors may run
 * concurrently.
 */
)C";

const char* kRopeFunction = R"C(@DECLARATION@ {
  int64_t qe[4], qs[4], ke[4], ks[4];
  int err;
  @N@_rope_view_ vq, voq, vk, vok;
@LOCALS@  (void)positions; (void)positions_are_int64; (void)positions_shape; (void)positions_rank;
  (void)cu_seqlens; (void)num_sequences; (void)offset; (void)seq_len;

  if (!q || !out_q || !q_shape || !q_strides || !k != !out_k || (k && (!k_shape || !k_strides)))
    return @P@_ROPE_ERR_NULL_POINTER;
  if ((err = @N@_rope_logical_(q_shape, q_strides, qe, qs)) != 0) return err;
  if (k) {
    if ((err = @N@_rope_logical_(k_shape, k_strides, ke, ks)) != 0) return err;
    if (ke[2] != qe[2] || ke[3] != qe[3]) return @P@_ROPE_ERR_SHAPE;
  }
@PREPARE@@IN_PLACE@
  @N@_rope_tensor_view_(&vq, q, qe, qs);
  @N@_rope_rotary_view_(&voq, out_q, qe, qs, @OUT_INTERLEAVED@);
  if (k) {
    @N@_rope_tensor_view_(&vk, k, ke, ks);
    @N@_rope_rotary_view_(&vok, out_k, ke, ks, @OUT_INTERLEAVED@);
  }
@CALLS@  if (err != 0) return err;
@PASS_THROUGH@  return @P@_ROPE_OK;
}

)C";

const char* kEpilogue = "#endif /* ROPEGEN_@P@_H */\n";

// The views only some specs pass (declared only where used: never read uninitialised).
std::string local_views(const LibraryDescription& lib) {
  std::string out;
  if (lib.spec.positions == PositionsMode::Explicit) out += "  @N@_rope_view_ vpos;\n";
  if (uses(lib, "cu_seqlens")) out += "  @N@_rope_view_ vcu;\n";
  if (lib.spec.layout == Layout::THD) out += "  int32_t whole[2];\n";
  return out;
}

// Positions, cu_seqlens and seq_len, as this spec's entry points take them.
std::string prepare_arguments(const LibraryDescription& lib) {
  const RopeSpec& spec = lib.spec;
  std::string out;
  if (spec.positions == PositionsMode::Explicit) {
    out += "  if (!positions || !positions_shape || (positions_rank != 1 && positions_rank != 2))\n"
           "    return @P@_ROPE_ERR_POSITIONS;\n"
           "  if ((err = @N@_rope_positions_view_(&vpos, positions, positions_are_int64, positions_shape, positions_rank,\n"
           "                                     qe[2], qe[3])) != 0)\n"
           "    return err;\n";
  } else {
    out += "  if (positions || offset < 0) return @P@_ROPE_ERR_POSITIONS;\n";
  }
  if (spec.layout == Layout::THD) {
    out += "  if (cu_seqlens) {\n"
           "    int i;\n"
           "    if (num_sequences < 1 || cu_seqlens[0] != 0 || cu_seqlens[num_sequences] != qe[2])\n"
           "      return @P@_ROPE_ERR_CU_SEQLENS;\n"
           "    for (i = 0; i < num_sequences; ++i)\n"
           "      if (cu_seqlens[i + 1] < cu_seqlens[i]) return @P@_ROPE_ERR_CU_SEQLENS;\n"
           "  } else {\n"
           "    whole[0] = 0;\n"
           "    whole[1] = (int32_t)qe[2];\n"
           "    cu_seqlens = whole;\n"
           "    num_sequences = 1;\n"
           "  }\n";
    if (uses(lib, "cu_seqlens"))
      out += "  @N@_rope_init_(&vcu, cu_seqlens, halide_type_int, 32, 1);\n"
             "  @N@_rope_dim_(&vcu.dim[0], (int64_t)num_sequences + 1, 1);\n";
  } else {
    out += "  if (cu_seqlens) return @P@_ROPE_ERR_CU_SEQLENS;\n";
  }
  if (uses(lib, "seq_len")) {
    out += "  if (seq_len <= 0) { /* as HF: max position + 1 */\n";
    if (spec.positions == PositionsMode::Explicit) {
      out += "    int64_t i, n = positions_shape[0] * (positions_rank == 2 ? positions_shape[1] : 1);\n"
             "    seq_len = 1;\n"
             "    for (i = 0; i < n; ++i) {\n"
             "      const int64_t id = positions_are_int64 ? ((const int64_t *)positions)[i] : ((const int32_t *)positions)[i];\n"
             "      if (id + 1 > seq_len) seq_len = id + 1;\n"
             "    }\n";
    } else if (spec.layout == Layout::THD) {
      out += "    int i;\n"
             "    seq_len = 1;\n"
             "    for (i = 0; i < num_sequences; ++i)\n"
             "      if (offset + cu_seqlens[i + 1] - cu_seqlens[i] > seq_len) seq_len = offset + cu_seqlens[i + 1] - cu_seqlens[i];\n";
    } else {
      out += "    seq_len = offset + qe[2];\n";
    }
    out += "  }\n";
  }
  return out;
}

// Partial rotary, out of place: the dims outside [offset, offset + R) are copied.
std::string pass_through(const LibraryDescription& lib) {
  const RopeSpec& spec = lib.spec;
  if (!spec.has_pass_through()) return "";
  const CompiledEntry* copy = nullptr;
  for (const auto& e : lib.entries)
    if (e.entry.kind == EntryPoint::Kind::PassThrough) copy = &e;
  if (!copy) throw std::logic_error("rope-gen: a partial-rotary AOT library without its pass-through entry");
  std::string out;
  const int after = spec.rotary_offset + spec.rotary_dim;
  for (auto [in, o, e, s] : {std::tuple{"q", "out_q", "qe", "qs"}, std::tuple{"k", "out_k", "ke", "ks"}}) {
    out += fmt::format("  if ({0} && {1} != {0}) {{\n    @N@_rope_view_ vin, vout;\n", in, o);
    for (auto [first, count] : {std::pair{0, spec.rotary_offset}, std::pair{after, spec.head_dim - after}}) {
      if (count == 0) continue;
      out += fmt::format("    @N@_rope_range_view_(&vin, {}, {}, {}, {}, {});\n", in, e, s, first, count);
      out += fmt::format("    @N@_rope_range_view_(&vout, {}, {}, {}, {}, {});\n", o, e, s, first, count);
      out += fmt::format("    if ((err = {}) != 0) return err;\n", call(*copy));
    }
    out += "  }\n";
  }
  return out;
}

// One direction of the call: its declaration, the entries it calls and the
// pairing it writes.
std::string rope_function(const LibraryDescription& lib, bool backward) {
  std::string text = std::string("static inline ") + kRopeFunction;
  replace_all(text, "@DECLARATION@", rope_function_declaration(lib.spec, backward));
  replace_all(text, "@CALLS@", kernel_calls(lib, backward));
  const Pairing written = backward ? lib.spec.pairing : lib.spec.output_pairing;
  replace_all(text, "@OUT_INTERLEAVED@", written == Pairing::Interleaved ? "1" : "0");
  return text;
}

// Argument meanings for the raw entry points of specs without the
// convenience call (manifest.json gives each one's type and dims).
const char* argument_doc(const std::string& name) {
  static const std::pair<const char*, const char*> docs[] = {
      {"x", "the tensor, as (d, h, s, b): sinusoidal/learned rows (h = 1); ALiBi scores (key, head, query, batch)"},
      {"out_x", "the result, x's shape (may be x: in place)"},
      {"q", "q (backward: dL/d(out_q)) as (d, h, s, b)"},
      {"k", "k (backward: dL/d(out_k)) as (d, h, s, b)"},
      {"positions", "position ids as (s, b); multi-axis (axis, s, b)"},
      {"cu_seqlens", "packed layouts: sequence starts (n + 1), int32"},
      {"table", "learned: the table as (d, position)"},
      {"freqs", "run-time inv_freq (rotary_dim / 2), float32"},
      {"saved_q", "backward: the forward's q, for dL/d(inv_freq)"},
      {"saved_k", "backward: the forward's k, for dL/d(inv_freq)"},
      {"offset", "implicit positions: the first position (ALiBi: of the first query row)"},
      {"seq_len", "the run-time sequence length"},
      {"out_q", "rotated q (backward: dL/dq), the rotary view (r, m, h, s, b) or (m, r, h, s, b)"},
      {"out_k", "rotated k (backward: dL/dk), as out_q"},
      {"d_freqs", "backward: dL/d(inv_freq) (rotary_dim / 2), float32"},
      {"pass_in", "partial rotary: dims outside the rotary range, as (d, h, s, b)"},
      {"pass_out", "where pass_in is copied"},
  };
  for (const auto& [n, doc] : docs)
    if (name == n) return doc;
  throw std::logic_error("rope-gen's C header does not know the kernel argument `" + name + "`");
}

const char* kRawHeader = R"C(/* @N@.h: the @ENCODING@ library of spec `@N@` (spec hash @HASH@), generated
 * by rope-gen with Halide @HALIDE@. Do not edit: regenerate with `rope-gen build`.
 *
 * Files: this header, HalideRuntime.h, @ENTRY_HEADERS@ (Halide's
 * declarations of the entry points, included below) and lib@N@.a, which
 * holds every entry point for @TARGET_COUNT@ target(s), picked at run time
 * by what the CPU supports. Link:
 *     cc -std=c99 app.c -I DIR DIR/lib@N@.a -lpthread -ldl -lm
 *
 * This spec has no <name>_rope() convenience call (@WHY@): call the
 * entry points with halide_buffer_t views. manifest.json lists each entry's
 * arguments with their types and dims. Arguments:
@ARGUMENT_DOCS@ */
#ifndef ROPEGEN_@P@_H
#define ROPEGEN_@P@_H

#include "HalideRuntime.h"
@INCLUDES@
#define @P@_SPEC_HASH "@HASH@"

#endif /* ROPEGEN_@P@_H */
)C";

// The placeholders both kinds of header share; last, since the others
// insert text holding @P@ and @N@.
void fill_library_placeholders(std::string& text, const LibraryDescription& lib) {
  std::string includes, entry_headers;
  for (const auto& e : lib.entries) {
    includes += fmt::format("#include \"{}\"\n", entry_header_file(e.entry));
    entry_headers += (entry_headers.empty() ? "" : ", ") + entry_header_file(e.entry);
  }
  replace_all(text, "@INCLUDES@", includes);
  replace_all(text, "@ENTRY_HEADERS@", entry_headers);
  replace_all(text, "@TARGET_COUNT@", std::to_string(lib.targets.size()));
  replace_all(text, "@HALIDE@", fmt::format("{}.{}.{}", HALIDE_VERSION_MAJOR, HALIDE_VERSION_MINOR, HALIDE_VERSION_PATCH));
  replace_all(text, "@HASH@", spec_hash(lib.spec));
  replace_all(text, "@P@", upper(lib.spec.name));
  replace_all(text, "@N@", lib.spec.name);
}

std::string raw_header(const LibraryDescription& lib, const std::string& why) {
  std::string docs;
  std::vector<std::string> documented;
  for (const auto& e : lib.entries) {
    for (const auto& a : e.arguments) {
      const std::string name = a.name.substr(0, a.name.find('$'));
      if (std::find(documented.begin(), documented.end(), name) != documented.end()) continue;
      documented.push_back(name);
      docs += fmt::format(" *   {:<11}{}\n", name, argument_doc(name));
    }
  }
  std::string text = kRawHeader;
  replace_all(text, "@ENCODING@", to_string(lib.spec.encoding));
  replace_all(text, "@WHY@", why);
  replace_all(text, "@ARGUMENT_DOCS@", docs);
  fill_library_placeholders(text, lib);
  return text;
}

}  // namespace

std::string no_convenience_call(const RopeSpec& spec) {
  if (spec.encoding != Encoding::Rope) return fmt::format("encoding {}", to_string(spec.encoding));
  if (spec.axes.enabled()) return "multi-axis positions";
  if (spec.frequency.scheme == FrequencyScheme::Runtime) return "run-time frequencies";
  return "";
}

std::string rope_function_declaration(const RopeSpec& spec, bool backward) {
  return fmt::format(
      "int {}_rope{}(void *q, void *out_q, const int64_t *q_shape, const int64_t *q_strides,\n"
      "    void *k, void *out_k, const int64_t *k_shape, const int64_t *k_strides,\n"
      "    const void *positions, int positions_are_int64, const int64_t *positions_shape, int positions_rank,\n"
      "    const int32_t *cu_seqlens, int num_sequences, int64_t offset, int64_t seq_len)",
      spec.name, backward ? "_backward" : "");
}

std::string c_header(const LibraryDescription& lib) {
  const RopeSpec& spec = lib.spec;
  if (const std::string why = no_convenience_call(spec); !why.empty()) return raw_header(lib, why);
  const Halide::Type type = lib.entries.front().arguments.front().type;  // q
  const bool explicit_positions = spec.positions == PositionsMode::Explicit;

  std::string text = std::string(kPrologue) + rope_function(lib, false) + rope_function(lib, true) + kEpilogue;
  replace_all(text, "@LOGICAL@", logical_mapping(spec.layout));
  replace_all(text, "@POSITIONS_MAPPING@", positions_mapping(spec.layout));
  replace_all(text, "@PREPARE@", prepare_arguments(lib));
  replace_all(text, "@LOCALS@", local_views(lib));
  // Writing pairs elsewhere than they are read would overwrite other pairs' inputs.
  replace_all(text, "@IN_PLACE@",
              spec.output_pairing == spec.pairing ? ""
                                                  : "  if (out_q == q || (k && out_k == k)) return @P@_ROPE_ERR_IN_PLACE;\n");
  replace_all(text, "@PASS_THROUGH@", pass_through(lib));
  replace_all(text, "@POSITIONS_DOC@", positions_doc(spec));
  replace_all(text, "@POSITIONS_ARG_DOC@",
              explicit_positions ? "the position ids (this spec has `positions: explicit`): the token dims of q,\n"
                                   " *                or [S] (thd: [T]) shared by the batch. Ids must be >= 0."
                                 : "must be NULL (this spec has `positions: implicit`: offset + index).");
  replace_all(text, "@SEQ_LEN_DOC@",
              spec.needs_seq_len() ? "This spec reads it." : "This spec does not read it (pass 0).");
  replace_all(text, "@SHAPE@", layout_dims(spec.layout));
  replace_all(text, "@LAYOUT@", to_string(spec.layout));
  replace_all(text, "@ELEMENT@", element_doc(spec.dtype));
  replace_all(text, "@OTHER_DIMS@",
              !spec.has_pass_through() ? ""
                                               : "; the other dims\n *             are copied unchanged (out of place) or "
                                                 "left alone (in place)");
  replace_all(text, "@PAIRING@",
              spec.output_pairing == spec.pairing
                  ? fmt::format("{} pairing", to_string(spec.pairing))
                  : fmt::format("pairs read {}, written {} (out of place only)", to_string(spec.pairing),
                                to_string(spec.output_pairing)));
  replace_all(text, "@END@", std::to_string(spec.rotary_offset + spec.rotary_dim));
  replace_all(text, "@OFF@", std::to_string(spec.rotary_offset));
  replace_all(text, "@D@", std::to_string(spec.head_dim));
  replace_all(text, "@R@", std::to_string(spec.rotary_dim));
  replace_all(text, "@RANK@", spec.layout == Layout::THD ? "3" : "4");
  replace_all(text, "@EXPLICIT@", explicit_positions ? "1" : "0");
  replace_all(text, "@TYPE_CODE@", halide_type_code(type));
  replace_all(text, "@TYPE_BITS@", std::to_string(type.bits()));
  replace_all(text, "@ELEMENT_BYTES@", std::to_string(type.bytes()));
  fill_library_placeholders(text, lib);
  return text;
}

}  // namespace ropegen::targets::aot
