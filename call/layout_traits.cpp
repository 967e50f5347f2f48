#include "call/layout_traits.h"

namespace ropegen::call {

Shape LayoutTraits::token_dims(const int64_t* shape) const {
  if (b < 0) return {shape[s]};
  return b < s ? Shape{shape[b], shape[s]} : Shape{shape[s], shape[b]};
}

const LayoutTraits& layout_traits(Layout layout) {
  //                                  rank  d  h  s  b
  static const LayoutTraits bshd{4, 3, 2, 1, 0, Layout::BSHD, "bshd", "[B, S, H, D]"};
  static const LayoutTraits bhsd{4, 3, 1, 2, 0, Layout::BHSD, "bhsd", "[B, H, S, D]"};
  static const LayoutTraits sbhd{4, 3, 2, 0, 1, Layout::SBHD, "sbhd", "[S, B, H, D]"};
  static const LayoutTraits thd{3, 2, 1, 0, -1, Layout::THD, "thd", "[T, H, D]"};
  static const LayoutTraits bsd{3, 2, -1, 1, 0, Layout::BSHD, "bsd", "[B, S, D]"};
  static const LayoutTraits sbd{3, 2, -1, 0, 1, Layout::SBHD, "sbd", "[S, B, D]"};
  static const LayoutTraits td{2, 1, -1, 0, -1, Layout::THD, "td", "[T, D]"};
  switch (layout) {
    case Layout::BSHD: return bshd;
    case Layout::BHSD: return bhsd;
    case Layout::SBHD: return sbhd;
    case Layout::THD: return thd;
    case Layout::BSD: return bsd;
    case Layout::SBD: return sbd;
    case Layout::TD: return td;
  }
  return bshd;
}

}  // namespace ropegen::call
