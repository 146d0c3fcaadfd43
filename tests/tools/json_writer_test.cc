#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" {
#include "json_writer.h"
}

namespace {

// Captures a writer's output in memory.
class JsonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = open_memstream(&buf_, &len_);
    ASSERT_NE(out_, nullptr);
    json_init(&w_, out_);
  }
  void TearDown() override {
    if (out_) fclose(out_);
    free(buf_);
  }
  std::string Text() {
    fflush(out_);
    return std::string(buf_, len_);
  }
  // Whitespace is free in JSON; compare without it (strings here have none).
  static std::string Squeeze(const std::string &s) {
    std::string r;
    for (char c : s)
      if (c != ' ' && c != '\n') r += c;
    return r;
  }
  json_writer w_;
  FILE *out_ = nullptr;
  char *buf_ = nullptr;
  size_t len_ = 0;
};

TEST_F(JsonTest, NestedDocument) {
  json_begin_object(&w_, nullptr);
  json_string(&w_, "tool", "srd-perf");
  json_int(&w_, "n", -3);
  json_uint(&w_, "big", 18446744073709551615ull);
  json_bool(&w_, "ok", 1);
  json_null(&w_, "none");
  json_begin_array(&w_, "list");
  json_int(&w_, nullptr, 1);
  json_begin_object(&w_, nullptr);
  json_double(&w_, "x", 2.5);
  json_end_object(&w_);
  json_end_array(&w_);
  json_begin_array(&w_, "empty");
  json_end_array(&w_);
  json_end_object(&w_);
  EXPECT_EQ(json_finish(&w_), 0);
  EXPECT_EQ(Squeeze(Text()),
            "{\"tool\":\"srd-perf\",\"n\":-3,\"big\":18446744073709551615,\"ok\":true,\"none\":null,"
            "\"list\":[1,{\"x\":2.5}],\"empty\":[]}");
}

TEST_F(JsonTest, EscapesStrings) {
  json_begin_array(&w_, nullptr);
  json_string(&w_, nullptr, "a\"b\\c\nd\te\x01");
  json_string(&w_, nullptr, nullptr);
  json_string(&w_, nullptr, "h\xc3\xa9");  // UTF-8 passes through
  json_end_array(&w_);
  EXPECT_EQ(json_finish(&w_), 0);
  EXPECT_EQ(Squeeze(Text()), "[\"a\\\"b\\\\c\\nd\\te\\u0001\",null,\"h\xc3\xa9\"]");
}

TEST_F(JsonTest, NonFiniteBecomesNull) {
  json_begin_array(&w_, nullptr);
  json_double(&w_, nullptr, NAN);
  json_double(&w_, nullptr, INFINITY);
  json_double(&w_, nullptr, 0.001);
  json_end_array(&w_);
  EXPECT_EQ(json_finish(&w_), 0);
  EXPECT_EQ(Squeeze(Text()), "[null,null,0.001]");
}

TEST_F(JsonTest, UnbalancedIsReported) {
  json_begin_object(&w_, nullptr);
  EXPECT_NE(json_finish(&w_), 0);
}

TEST_F(JsonTest, ExtraCloseIsReported) {
  json_begin_array(&w_, nullptr);
  json_end_array(&w_);
  json_end_array(&w_);
  EXPECT_NE(json_finish(&w_), 0);
}

TEST_F(JsonTest, TwoTopLevelValuesAreReported) {
  json_int(&w_, nullptr, 1);
  json_int(&w_, nullptr, 2);
  EXPECT_NE(json_finish(&w_), 0);
}

TEST_F(JsonTest, TooDeepIsReported) {
  for (int i = 0; i < JSON_MAX_DEPTH + 2; i++) json_begin_array(&w_, nullptr);
  for (int i = 0; i < JSON_MAX_DEPTH + 2; i++) json_end_array(&w_);
  EXPECT_NE(json_finish(&w_), 0);
}

}  // namespace
