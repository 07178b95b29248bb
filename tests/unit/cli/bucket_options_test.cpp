#include "cli/bucket_options.hpp"

#include <gtest/gtest.h>

#include "cli/units.hpp"
#include "usage_error.hpp"

namespace ratelimit::cli {
namespace {

using namespace std::chrono_literals;

// The options as the command line reads them.
BucketOptions read(std::vector<std::string> args) {
  CLI::App app;
  BucketOptions options;
  add_bucket_options(app, options, format::Counted::bytes);
  std::reverse(args.begin(), args.end());
  app.parse(args);
  return options;
}

BucketParams parse(std::vector<std::string> args,
                   format::Counted counted = format::Counted::bytes) {
  return bucket_of(read(std::move(args)), counted).params;
}

TEST(BucketOptions, DefaultIsGuavaOneSecondBursty) {
  const BucketParams params = parse({"--rate", "10k"});
  EXPECT_EQ(params.shape, BucketShape::bursty);
  EXPECT_EQ(params.permits_per_second, 10000.0);
  EXPECT_EQ(params.max_burst_seconds, 1.0);
}

TEST(BucketOptions, BurstAsTimeOrAsUnits) {
  EXPECT_EQ(parse({"--rate", "10k", "--burst", "2s"}).max_burst_seconds, 2.0);
  EXPECT_EQ(parse({"--rate", "10k", "--burst", "500ms"}).max_burst_seconds, 0.5);
  EXPECT_EQ(parse({"--rate", "10k", "--burst", "64k"}).max_burst_seconds, 6.4);
  EXPECT_EQ(parse({"--rate", "10k", "--burst", "0"}).max_burst_seconds, 0.0);
}

TEST(BucketOptions, WarmupSelectsWarmingUp) {
  const BucketParams params = parse({"--rate", "1M", "--warmup", "4s", "--cold-factor", "10"});
  EXPECT_EQ(params.shape, BucketShape::warming_up);
  EXPECT_EQ(params.warmup, 4s);
  EXPECT_EQ(params.cold_factor, 10.0);
}

TEST(BucketOptions, StartFullAndPayFirstMakeTheClassicBucket) {
  const BucketParams classic = parse(
      {"--rate", "3/s", "--burst", "5", "--start-full", "--pay-first"}, format::Counted::permits);
  EXPECT_TRUE(classic.start_full);
  EXPECT_TRUE(classic.pay_first);
  EXPECT_EQ(classic.max_burst_seconds * classic.permits_per_second, 5.0);
  const BucketParams guava = parse({"--rate", "3/s"});
  EXPECT_FALSE(guava.start_full);
  EXPECT_FALSE(guava.pay_first);
  // A warming-up bucket pays its cold cost first; it cannot also start full.
  EXPECT_TRUE(parse({"--rate", "1M", "--warmup", "4s", "--pay-first"}).pay_first);
  EXPECT_THROW(parse({"--rate", "1M", "--warmup", "4s", "--start-full"}), CLI::ExcludesError);
}

TEST(BucketOptions, RejectsBadCombinationsAndValues) {
  EXPECT_THROW(parse({"--rate", "1M", "--warmup", "4s", "--burst", "1s"}), CLI::ExcludesError);
  EXPECT_THROW(parse({"--rate", "1M", "--cold-factor", "2"}), CLI::RequiresError);
  EXPECT_THROW(parse({"--rate", "1M", "--warmup", "4s", "--cold-factor", "0.5"}),
               CLI::ValidationError);
  EXPECT_THROW(parse({"--rate", "1x"}), CLI::ValidationError);
  EXPECT_THROW(parse({"--rate", "10k", "--burst", "2q"}), CLI::ValidationError);
  // Values that would reach the core as NaN or infinity are refused here, with the value named.
  EXPECT_THROW(parse({"--rate", "1M", "--warmup", "4s", "--cold-factor", "nan"}),
               CLI::ValidationError);
  EXPECT_THROW(parse({"--rate", "1M", "--warmup", "4s", "--cold-factor", "inf"}),
               CLI::ValidationError);
  EXPECT_THROW(parse({"--rate", "1e-300", "--burst", "1e308"}), UsageError);
  EXPECT_THROW(parse({}), UsageError);
  EXPECT_THROW(parse({"--rate", "10kB/s"}, format::Counted::permits), UsageError);
  EXPECT_EQ(parse({"--rate", "2/s"}, format::Counted::permits).permits_per_second, 2.0);
}

TEST(BucketOptions, KeepTheNotationOfTheRateAndBurst) {
  EXPECT_EQ(
      bucket_of(read({"--rate", "10MiB/s", "--burst", "64k"}), format::Counted::bytes).notation,
      (format::Notation{.counted = format::Counted::bytes,
                        .binary_prefix = true,
                        .period_seconds = 1,
                        .burst_in_units = true}));
  EXPECT_EQ(bucket_of(read({"--rate", "30/m"}), format::Counted::lines).notation,
            (format::Notation{.counted = format::Counted::lines, .period_seconds = 60}));
  // A timetable's rates are shown with SI prefixes; quotas alone have no rate to show.
  EXPECT_EQ(notation_of(read_rate("08:00,1Mi 18:00,off"), format::Counted::bytes),
            (format::Notation{.counted = format::Counted::bytes}));
  EXPECT_EQ(bucket_of(read({"--quota", "5/h"}), format::Counted::permits).notation,
            (format::Notation{.counted = format::Counted::permits}));
}

TEST(BucketOptions, QuotasInTheOrderGiven) {
  const BucketOptions options = read({"--quota", "5000/h", "--quota", "50GB/d"});
  ASSERT_EQ(options.quotas.size(), 2u);
  EXPECT_EQ(options.quotas[0].text, "5000/h");
  EXPECT_EQ(options.quotas[1].text, "50GB/d");
  const ParsedBucket bucket = bucket_of(options, format::Counted::bytes);
  EXPECT_EQ(bucket.quotas[0], (QuotaParams{.limit = 5000, .period = 1h}));
  EXPECT_EQ(bucket.quotas[1], (QuotaParams{.limit = 50'000'000'000, .period = 24h}));
}

TEST(BucketOptions, ATimetableInBytesOnlyWhereBytesAreCounted) {
  const BucketOptions options = read({"--rate", "08:00,5 18:00,20kB"});
  EXPECT_GT(bucket_of(options, format::Counted::bytes).params.permits_per_second, 0.0);
  EXPECT_EQ(usage_error_of([&] { bucket_of(options, format::Counted::lines); }),
            "invalid timetable entry '18:00,20kB': rate '20kB' is in bytes or bits, but this "
            "command counts lines: write it without B/bit");
  EXPECT_EQ(usage_error_of([] {
              bucket_of(read({"--rate", "08:00,5 18:00,20"}), format::Counted::lines);
            }),
            "accepted");
}

// What the options' checks let through and the core refuses is bad usage too (64), the core's
// words kept: read_rate() and bucket_of() are where the user's values are handed to the core.
TEST(BucketOptions, TheCoresRefusalIsAUsageErrorInTheCoresWords) {
  EXPECT_EQ(usage_error_of([] { read_rate("08:00,1M 08:00,2M"); }),
            "invalid timetable '08:00,1M 08:00,2M': timetable entry 08:00: another entry takes "
            "effect at the same time (08:00)");
  // CLI11 keeps --start-full from --warmup; the core refuses the pair even so.
  BucketOptions warm_but_full;
  warm_but_full.rate = Written{read_rate("1M"), "1M"};
  warm_but_full.warmup = 4s;
  warm_but_full.start_full = true;
  EXPECT_EQ(usage_error_of([&] { bucket_of(warm_but_full, format::Counted::bytes); }),
            "start full applies to bursty buckets only: a warming-up bucket starts cold, full of "
            "slow permits");
}

TEST(NumberChecks, NameTheValueAndTheRange) {
  std::string text = "0.5";
  EXPECT_EQ(number_in(1, 1e6)(text), "'0.5' is not a number from 1 to 1000000");
  text = "nan";
  EXPECT_EQ(number_in(1, 1e6)(text), "'nan' is not a number from 1 to 1000000");
  text = "2.5";
  EXPECT_EQ(number_in(1, 1e6)(text), "");
  text = "1.5";
  EXPECT_EQ(whole_number_in(1, 256)(text), "'1.5' is not a whole number from 1 to 256");
  text = "257";
  EXPECT_EQ(whole_number_in(1, 256)(text), "'257' is not a whole number from 1 to 256");
  text = "99999999999999999999";
  EXPECT_EQ(whole_number_in(1, 256)(text),
            "'99999999999999999999' is not a whole number from 1 to 256");
  text = "256";
  EXPECT_EQ(whole_number_in(1, 256)(text), "");
}

}  // namespace
}  // namespace ratelimit::cli
