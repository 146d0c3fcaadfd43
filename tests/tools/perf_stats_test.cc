#include <gtest/gtest.h>

#include <vector>

extern "C" {
#include "perf_stats.h"
}

namespace {

TEST(PerfStats, EmptyIsAllZero) {
  perf_stats s;
  perf_stats_compute(nullptr, 0, &s);
  EXPECT_EQ(s.n, 0u);
  EXPECT_EQ(s.p50, 0);
  EXPECT_EQ(s.avg, 0);
  EXPECT_EQ(perf_percentile_sorted(nullptr, 0, 50), 0);
}

TEST(PerfStats, OddCountMedianIsTheMiddle) {
  std::vector<double> v = {9, 1, 5, 3, 7};
  perf_stats s;
  perf_stats_compute(v.data(), v.size(), &s);
  EXPECT_EQ(s.n, 5u);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 9);
  EXPECT_DOUBLE_EQ(s.avg, 5);
  EXPECT_DOUBLE_EQ(s.p50, 5);
  EXPECT_DOUBLE_EQ(v[0], 1);  // sorted in place
  EXPECT_DOUBLE_EQ(v[4], 9);
}

TEST(PerfStats, EvenCountMedianInterpolates) {
  std::vector<double> v = {4, 1, 3, 2};
  perf_stats s;
  perf_stats_compute(v.data(), v.size(), &s);
  EXPECT_DOUBLE_EQ(s.p50, 2.5);
  EXPECT_DOUBLE_EQ(s.avg, 2.5);
}

TEST(PerfStats, Percentiles) {
  std::vector<double> v;
  for (int i = 1; i <= 101; i++) v.push_back(102 - i);  // 101 .. 1, reversed
  perf_stats s;
  perf_stats_compute(v.data(), v.size(), &s);
  EXPECT_DOUBLE_EQ(s.p50, 51);
  EXPECT_DOUBLE_EQ(s.p90, 91);
  EXPECT_DOUBLE_EQ(s.p99, 100);
  EXPECT_DOUBLE_EQ(perf_percentile_sorted(v.data(), v.size(), 0), 1);
  EXPECT_DOUBLE_EQ(perf_percentile_sorted(v.data(), v.size(), 100), 101);
  EXPECT_DOUBLE_EQ(perf_percentile_sorted(v.data(), v.size(), 25), 26);
  EXPECT_DOUBLE_EQ(perf_percentile_sorted(v.data(), v.size(), -5), 1);
  EXPECT_DOUBLE_EQ(perf_percentile_sorted(v.data(), v.size(), 200), 101);
}

TEST(PerfStats, SingleSample) {
  double x = 42;
  perf_stats s;
  perf_stats_compute(&x, 1, &s);
  EXPECT_DOUBLE_EQ(s.p50, 42);
  EXPECT_DOUBLE_EQ(s.p99, 42);
  EXPECT_DOUBLE_EQ(s.min, 42);
}

TEST(PerfStats, OutlierMovesAverageNotMedian) {
  std::vector<double> v = {10, 10, 10, 10, 1000};
  perf_stats s;
  perf_stats_compute(v.data(), v.size(), &s);
  EXPECT_DOUBLE_EQ(s.p50, 10);
  EXPECT_DOUBLE_EQ(s.avg, 208);
}

}  // namespace
