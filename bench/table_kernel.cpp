#include "table_kernel.h"

#include <cmath>
#include <cstring>
#include <string>

#include "ropegen/rope_math.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ROPEGEN_TABLE_AVX512 1
#define ROPEGEN_AVX512_BF16 __attribute__((target("avx512f,avx512vl,avx512bw,avx512bf16,fma")))
#endif

namespace ropegen::bench {
namespace {

// bf16 as its bits; float32 -> bf16 rounds to nearest even (NaN stays NaN).
float load(float v) { return v; }
float load(uint16_t v) {
  const uint32_t u = uint32_t{v} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
void store(float* p, float v) { *p = v; }
void store(uint16_t* p, float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) *p = static_cast<uint16_t>((u >> 16) | 0x40);
  else *p = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

// `heads` rows of head_dim at x rotated into y with one token's cos/sin row.
template <typename T, bool Interleaved>
void rotate_portable(const void* xv, void* yv, int64_t heads, int head_dim, int pairs, const float* c, const float* s) {
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  for (int64_t h = 0; h < heads; ++h, x += head_dim, y += head_dim) {
    for (int i = 0; i < pairs; ++i) {
      const int a = Interleaved ? 2 * i : i, b = Interleaved ? 2 * i + 1 : i + pairs;
      const float x1 = load(x[a]), x2 = load(x[b]);
      store(y + a, x1 * c[i] - x2 * s[i]);
      store(y + b, x2 * c[i] + x1 * s[i]);
    }
  }
}

#ifdef ROPEGEN_TABLE_AVX512
ROPEGEN_AVX512_BF16 inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
ROPEGEN_AVX512_BF16 inline __m512 load16(const uint16_t* p) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}
ROPEGEN_AVX512_BF16 inline void store16(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
ROPEGEN_AVX512_BF16 inline void store16(uint16_t* p, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
}

// 16 pairs per step (half: pairs % 16 == 0; interleaved: 8 pairs in 16
// lanes, pairs % 8 == 0). Heads outermost: each head is read and written
// in order (with the cos/sin row, 512 bytes, re-read from L1 per head).
// Steps outermost, keeping cos/sin in registers across heads, strides
// through memory: 1.3-1.5x slower at [4, 4096] (Zen 5, 1 thread).
template <typename T, bool Interleaved>
ROPEGEN_AVX512_BF16 void rotate_avx512(const void* xv, void* yv, int64_t heads, int head_dim, int pairs, const float* c,
                                       const float* s) {
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  if (!Interleaved) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int i = 0; i < pairs; i += 16) {
        const __m512 cv = _mm512_loadu_ps(c + i), sv = _mm512_loadu_ps(s + i);
        const int64_t at = h * head_dim + i;
        const __m512 x1 = load16(x + at), x2 = load16(x + at + pairs);
        store16(y + at, _mm512_fmsub_ps(x1, cv, _mm512_mul_ps(x2, sv)));
        store16(y + at + pairs, _mm512_fmadd_ps(x2, cv, _mm512_mul_ps(x1, sv)));
      }
    }
    return;
  }
  const __m512i twice = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  for (int64_t h = 0; h < heads; ++h) {
    for (int i = 0; i < pairs; i += 8) {
      const __m512 cv = _mm512_permutexvar_ps(twice, _mm512_castps256_ps512(_mm256_loadu_ps(c + i)));
      const __m512 sv = _mm512_permutexvar_ps(twice, _mm512_castps256_ps512(_mm256_loadu_ps(s + i)));
      const int64_t at = h * head_dim + 2 * i;
      const __m512 v = load16(x + at), swapped = _mm512_permute_ps(v, 0xB1);
      // even lanes x1 c - x2 s, odd lanes x2 c + x1 s
      store16(y + at, _mm512_fmaddsub_ps(v, cv, _mm512_mul_ps(swapped, sv)));
    }
  }
}
#endif

template <typename T>
TableKernel::Rotate pick(bool interleaved, bool avx512) {
#ifdef ROPEGEN_TABLE_AVX512
  if (avx512) return interleaved ? rotate_avx512<T, true> : rotate_avx512<T, false>;
#endif
  return interleaved ? rotate_portable<T, true> : rotate_portable<T, false>;
}

}  // namespace

Result<TableKernel> TableKernel::make(const RopeSpec& spec, int64_t max_pos, bool allow_avx512) {
  auto refuse = [&](const std::string& what) { return named_error(spec.name, "the table kernel covers " + what); };
  if (spec.encoding != Encoding::Rope) return refuse("rope only");
  if (spec.layout != Layout::BSHD && spec.layout != Layout::THD) return refuse("bshd and thd layouts only");
  if (spec.dtype != DType::F32 && spec.dtype != DType::BF16) return refuse("f32 and bf16 only");
  if (spec.rotary_dim != spec.head_dim || spec.pairing != spec.output_pairing)
    return refuse("full rotary dims read and written in one pairing only");
  if (spec.frequency.scheme == FrequencyScheme::Runtime || spec.needs_seq_len() || spec.xpos.enabled || spec.axes.enabled())
    return refuse("frequencies fixed by the spec only (no run-time frequencies, seq_len, xPos or axes)");
  TableKernel k;
  k.head_dim_ = spec.head_dim, k.pairs_ = spec.num_pairs();
  k.interleaved_ = spec.pairing == Pairing::Interleaved, k.bf16_ = spec.dtype == DType::BF16;
  // `scheme: table` reads a cache: the bench gives it the lang frequencies' table, so this one is the same.
  RopeSpec computing = spec;
  if (spec.frequency.scheme == FrequencyScheme::Table) computing.frequency = Frequency{};
  const RopeFrequencies f = compute_frequencies(computing);
  k.cos_.resize(max_pos * k.pairs_), k.sin_.resize(max_pos * k.pairs_);
  for (int64_t p = 0; p < max_pos; ++p)
    for (int i = 0; i < k.pairs_; ++i) {
      const double angle = static_cast<double>(p) * f.inv_freq[i];
      k.cos_[p * k.pairs_ + i] = static_cast<float>(f.attention_factor * std::cos(angle));
      k.sin_[p * k.pairs_ + i] = static_cast<float>(f.attention_factor * std::sin(angle));
    }
#ifdef ROPEGEN_TABLE_AVX512
  k.avx512_ = allow_avx512 && __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
              k.pairs_ % (k.interleaved_ ? 8 : 16) == 0;
#endif
  k.rotate_ = k.bf16_ ? pick<uint16_t>(k.interleaved_, k.avx512_) : pick<float>(k.interleaved_, k.avx512_);
  return k;
}

void TableKernel::run(const TableTokens& t, int64_t begin, int64_t end) const {
  const int64_t elem = bf16_ ? 2 : 4, q_row = t.q_heads * head_dim_ * elem, k_row = t.k_heads * head_dim_ * elem;
  for (int64_t tok = begin; tok < end; ++tok) {
    const float* c = cos_.data() + t.positions[tok] * int64_t{pairs_};
    const float* s = sin_.data() + t.positions[tok] * int64_t{pairs_};
    rotate_(static_cast<const char*>(t.q) + tok * q_row, static_cast<char*>(t.out_q) + tok * q_row, t.q_heads, head_dim_,
            pairs_, c, s);
    if (t.k_heads > 0)
      rotate_(static_cast<const char*>(t.k) + tok * k_row, static_cast<char*>(t.out_k) + tok * k_row, t.k_heads,
              head_dim_, pairs_, c, s);
  }
}

}  // namespace ropegen::bench
