// Hostile .npy inputs: every one is exit 2 with a message naming the file and
// the problem, never a crash (std::regex recursed on a long header), exit 3
// ("stoll"), or a bogus output written.
#include <gmock/gmock.h>

#include <cstdint>

#include "cli/cli_fixture.h"

namespace ropegen {
namespace {

using ::testing::HasSubstr;

// A .npy file with this header dict, data, version and (when given) a
// header length that differs from the dict's.
std::string npy(const std::string& dict, const std::string& data, int major = 1, int64_t length = -1) {
  const uint32_t n = length < 0 ? static_cast<uint32_t>(dict.size()) : static_cast<uint32_t>(length);
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + dict + data;
}

std::string dict(const std::string& descr, const std::string& shape, const std::string& order = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': " + shape + ", }\n";
}

struct HostileNpy {
  const char* name;
  std::string bytes;
  const char* message;
};

const std::string kData(64, '\0');  // what shape (1, 2, 1, 8) of float32 needs

const std::vector<HostileNpy> kCases = {
    {"string_dim", npy(dict("<f4", "('abc',)"), ""), "expected a dimension (a decimal integer)"},
    {"power", npy(dict("<f4", "(10**30,)"), ""), "expected ')', found '*'"},
    {"dim_past_int64", npy(dict("<f4", "(100000000000000000000,)"), ""), "a dimension is larger than 2^63 - 1"},
    {"product_wraps", npy(dict("<f4", "(4294967296, 4294967296, 1, 8)"), kData), "has more than 2^63 elements"},
    {"bytes_wrap", npy(dict("<f8", "(2305843009213693952, 2)"), ""), "needs more than 2^64 bytes"},
    {"huge_shape_tiny_file", npy(dict("<f4", "(100000, 100000, 100, 8)"), kData),
     "expected 32000000000000 bytes of data for shape (100000, 100000, 100, 8) (<f4), found 64"},
    {"negative_dim", npy(dict("<f4", "(-1, 2, 1, 8)"), kData), "a dimension is negative"},
    {"huge_header_length", npy(dict("<f4", "(1,)"), "", 2, 0xffffffff), "header of 4294967295 bytes is longer than the 65536"},
    {"long_header", npy(dict("<f4", "(" + std::string(200000, ' ') + "1, 2, 1, 8)"), kData, 2),
     "bytes is longer than the 65536 rope-gen reads"},
    {"truncated_data", npy(dict("<f4", "(1, 2, 1, 8)"), kData.substr(1)), "expected 64 bytes of data for shape (1, 2, 1, 8) (<f4), found 63"},
    {"trailing_data", npy(dict("<f4", "(1, 2, 1, 8)"), kData + "xx"), "found 66"},
    {"truncated_header", npy(dict("<f4", "(1, 2, 1, 8)"), "").substr(0, 30), "truncated .npy header"},
    {"wrong_dtype", npy(dict("|i1", "(1, 2, 1, 8)"), kData.substr(0, 16)), "dtype |i1 is not supported"},
    {"uint8_for_float32", npy(dict("|u1", "(1, 2, 1, 8)"), kData.substr(0, 16)), "must be float32"},
    {"float64_for_float32", npy(dict("<f8", "(1, 2, 1, 8)"), kData + kData), "must be float32"},
    {"fortran_order", npy(dict("<f4", "(1, 2, 1, 8)", "True"), kData), "Fortran-ordered arrays are not supported"},
    {"big_endian", npy(dict(">f4", "(1, 2, 1, 8)"), kData), "dtype >f4 is big-endian"},
    {"structured", npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", "1234"), "structured dtypes"},
    {"missing_key", npy("{'descr': '<f4', 'shape': (1, 2, 1, 8), }", kData), "needs the keys"},
    {"duplicate_key", npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "1234"),
     "key 'descr' appears twice"},
    {"unknown_version", npy(dict("<f4", "(1, 2, 1, 8)"), kData, 9), "unsupported .npy version 9"},
    {"empty_file", "", "is not a .npy file"},
};

class HostileNpyTest : public test::CliFixture, public ::testing::WithParamInterface<HostileNpy> {};

TEST_P(HostileNpyTest, ExitsTwoNamingTheFileAndTheProblem) {
  const HostileNpy& c = GetParam();
  test::write_text(path("q.npy"), c.bytes);
  const std::string s = spec("r.yaml", "name: r\nhead_dim: 8\n");
  const test::CommandResult r = rope_gen("apply " + s + " --q " + path("q.npy") + " --out-q " + path("out.npy"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr(path("q.npy")));
  EXPECT_THAT(r.err, HasSubstr(c.message));
  EXPECT_FALSE(std::filesystem::exists(path("out.npy")));
}

INSTANTIATE_TEST_SUITE_P(Cases, HostileNpyTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<HostileNpy>& i) { return std::string(i.param.name); });

using NpyInputs = test::CliFixture;

TEST_F(NpyInputs, DirectoriesAndEndlessStreamsAreRefused) {
  const std::string s = spec("r.yaml", "name: r\nhead_dim: 8\n");
  for (const std::string& input : {dir_, std::string("/dev/zero")}) {
    const test::CommandResult r = rope_gen("apply " + s + " --q " + input + " --out-q " + path("out.npy"));
    EXPECT_EQ(r.exit_code, 2) << input << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(input));
  }
  EXPECT_FALSE(std::filesystem::exists(path("out.npy")));
}

TEST_F(NpyInputs, FloatIdsAreRefused) {
  const std::string s = spec("t.yaml", "name: r\nhead_dim: 8\n");
  const test::CommandResult r = rope_gen("table " + s + " --positions " + floats("p.npy", {3}) + " --out " + path("t.npy"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("must be int32 or int64"));
}

}  // namespace
}  // namespace ropegen
