// srd-perf's side-by-side table: each value is the median run with the runs'
// spread, and the marks and warnings that tell a reader when not to trust it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" {
#include "perf_report.h"
}

namespace {

perf_result run(double lat, double bw) {
  perf_result r{};
  r.size = 8;
  r.have_lat = r.have_bw = 1;
  r.lat_us.p50 = lat;
  r.bw_GBps = bw;
  r.bw_msg_rate = bw * 10;
  return r;
}

perf_result combined(std::vector<perf_result> runs) {
  perf_result out{};
  perf_results_combine(runs.data(), (int)runs.size(), &out);
  return out;
}

TEST(PerfResultsCombine, EachMetricFromItsMedianRunWithTheSpread) {
  // Latency's and bandwidth's median runs differ: each metric takes its own.
  perf_result r = combined({run(30, 1.0), run(10, 3.0), run(20, 2.5)});
  EXPECT_EQ(r.runs, 3);
  EXPECT_DOUBLE_EQ(r.lat_us.p50, 20);
  EXPECT_DOUBLE_EQ(r.lat_p50_min, 10);
  EXPECT_DOUBLE_EQ(r.lat_p50_max, 30);
  EXPECT_DOUBLE_EQ(r.bw_GBps, 2.5);
  EXPECT_DOUBLE_EQ(r.bw_msg_rate, 25);  // from the same run as the bandwidth
  EXPECT_DOUBLE_EQ(r.bw_min, 1.0);
  EXPECT_DOUBLE_EQ(r.bw_max, 3.0);
}

TEST(PerfResultsCombine, EvenCountTakesTheLowerMiddle) {
  perf_result r = combined({run(4, 4), run(1, 1), run(3, 3), run(2, 2)});
  EXPECT_DOUBLE_EQ(r.lat_us.p50, 2);
  EXPECT_DOUBLE_EQ(r.bw_GBps, 2);
}

TEST(PerfResultsCombine, OneRunHasNoSpread) {
  perf_result r = combined({run(7, 0.5)});
  EXPECT_DOUBLE_EQ(r.lat_p50_min, 7);
  EXPECT_DOUBLE_EQ(r.lat_p50_max, 7);
  EXPECT_DOUBLE_EQ(r.bw_min, 0.5);
  EXPECT_DOUBLE_EQ(r.bw_max, 0.5);
}

// The table for one size, plugin and raw each from three runs.
std::string table(std::vector<perf_result> plugin_runs, std::vector<perf_result> raw_runs, int runs = 3) {
  perf_opts o;
  perf_args_defaults(&o);
  o.runs = runs;
  perf_result p = combined(plugin_runs), r = combined(raw_runs);
  perf_side ps{}, rs{};
  ps.results = &p, ps.n = 1;
  rs.results = &r, rs.n = 1;
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  perf_report_compare(f, &o, &ps, &rs);
  fclose(f);
  std::string s(buf, len);
  free(buf);
  return s;
}

// The row of 8 B, its columns one space apart.
std::string row(const std::string &t) {
  size_t at = t.find("8 B");
  std::string r, line = t.substr(at, t.find('\n', at) - at);
  for (char c : line)
    if (c != ' ' || (!r.empty() && r.back() != ' ')) r += c;
  return r;
}

TEST(PerfReportCompare, ColumnsSayWhichWayIsBetter) {
  std::string t = table({run(10, 1), run(10, 1), run(10, 1)}, {run(10, 1), run(10, 1), run(10, 1)});
  EXPECT_NE(t.find("lat_us: lower is better"), std::string::npos) << t;
  EXPECT_NE(t.find("bw: higher is better"), std::string::npos) << t;
  EXPECT_NE(t.find("median of 3 runs"), std::string::npos) << t;
  EXPECT_EQ(t.find("WARNING"), std::string::npos) << t;
  EXPECT_EQ(t.find("NOTE"), std::string::npos) << t;
}

TEST(PerfReportCompare, RowShowsMedianAndSpread) {
  std::string t = table({run(11, 1), run(10, 1), run(12, 1)}, {run(9, 2), run(9.5, 2), run(9, 2)});
  EXPECT_EQ(row(t), "8 B 11.00 10.00-12.00 9.00 9.00-9.50 1.22 1.0000 1.0000-1.0000 2.0000 2.0000-2.0000 0.50") << t;
}

TEST(PerfReportCompare, RunsThatDisagreeAreMarkedAndWarned) {
  // Plugin latency runs 10..15 (50% of the median): '!' and a warning.
  std::string t = table({run(10, 1), run(12, 1), run(15, 1)}, {run(9, 1), run(9, 1), run(9, 1)});
  EXPECT_NE(row(t).find("1.33!"), std::string::npos) << t;
  EXPECT_NE(t.find("WARNING: 1 value(s) marked !"), std::string::npos) << t;
  // Raw's runs disagreeing marks the cell too.
  t = table({run(9, 1), run(9, 1), run(9, 1)}, {run(10, 1), run(12, 1), run(15, 1)});
  EXPECT_NE(t.find("WARNING: 1 value(s) marked !"), std::string::npos) << t;
  // Within 20%: no mark.
  t = table({run(10, 1), run(10.5, 1), run(11.5, 1)}, {run(10, 1), run(10, 1), run(10, 1)});
  EXPECT_EQ(t.find('!'), std::string::npos) << t;
}

TEST(PerfReportCompare, BeatingRawsBestRunIsMarkedAndExplained) {
  // Latency: lower than raw's fastest run by more than 5%.
  std::string t = table({run(8, 1), run(8, 1), run(8, 1)}, {run(9, 1), run(9, 1), run(9.2, 1)});
  EXPECT_NE(row(t).find("0.89^"), std::string::npos) << t;
  EXPECT_NE(t.find("NOTE: 1 value(s) marked ^ beat raw's best run"), std::string::npos) << t;
  // Bandwidth: above raw's best run.
  t = table({run(9, 2.2), run(9, 2.2), run(9, 2.2)}, {run(9, 2), run(9, 2), run(9, 2)});
  EXPECT_NE(row(t).find("1.10^"), std::string::npos) << t;
  // Slower than raw, or within 5% of its best run: no mark.
  t = table({run(9.2, 1.9), run(9.2, 1.9), run(9.2, 1.9)}, {run(9, 2), run(9, 2), run(9, 2)});
  EXPECT_EQ(t.find('^'), std::string::npos) << t;
  t = table({run(8.9, 2.05), run(8.9, 2.05), run(8.9, 2.05)}, {run(9, 2), run(9, 2), run(9, 2)});
  EXPECT_EQ(t.find('^'), std::string::npos) << t;
}

std::string footer(std::vector<perf_result> runs, int nruns) {
  perf_opts o;
  perf_args_defaults(&o);
  o.runs = nruns;
  perf_result r = combined(runs);
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  perf_report_footer(f, &o, &r, 1);
  fclose(f);
  std::string s(buf, len);
  free(buf);
  return s;
}

TEST(PerfReportFooter, SingleTableWarnsWhereRunsDisagree) {
  EXPECT_NE(footer({run(10, 1), run(10, 2), run(10, 1)}, 3).find("WARNING: at 1 size(s) (8 B) the 3 runs"),
            std::string::npos);
  EXPECT_EQ(footer({run(10, 1), run(10.5, 1.1), run(10, 1)}, 3), "");
  EXPECT_EQ(footer({run(10, 1)}, 1), "");
}

TEST(PerfReportCompare, OneRunSaysNothingShowsTheSpread) {
  std::string t = table({run(10, 1)}, {run(10, 1)}, 1);
  EXPECT_NE(t.find("one run per size"), std::string::npos) << t;
}

}  // namespace
