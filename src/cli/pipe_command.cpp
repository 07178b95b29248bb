#include <fmt/core.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cli/bucket_options.hpp"
#include "cli/commands.hpp"
#include "cli/shared_bucket_options.hpp"
#include "cli/units.hpp"
#include "exit_codes.hpp"
#include "pipe/control.hpp"
#include "pipe/engine.hpp"
#include "pipe/files.hpp"
#include "pipe/progress.hpp"

namespace ratelimit::cli {
namespace {

// Records per write in record modes when --chunk is not given: beyond this, smoothness gains
// nothing and the buffer fills first anyway.
constexpr std::int64_t kMaxRecordsPerChunk = 65536;
// Bytes per write at the highest rates: Linux's default limit for an unprivileged pipe's size.
constexpr std::int64_t kMaxBytesPerChunk = 1 << 20;

struct PipeOptions {
  BucketOptions bucket;
  std::string key;  // empty: a bucket of the pipe's own
  StoreOptions store;
  std::vector<std::string> files;
  std::string output = "-";
  bool lines = false;
  bool null = false;
  std::string delimiter;
  std::string chunk;
  std::string progress;  // empty: none; "auto": on a terminal; "force": always
  std::string stats;     // empty: none; "text" or "json"
};

// "\n", "\t", "\0" and "\\" as escapes, or one character.
std::optional<char> parse_delimiter(const std::string& text) {
  if (text.size() == 1) return text[0];
  if (text == "\\n") return '\n';
  if (text == "\\t") return '\t';
  if (text == "\\0") return '\0';
  if (text == "\\\\") return '\\';
  return std::nullopt;
}

pipe::Unit unit_of(const PipeOptions& options) {
  if (options.lines) return pipe::Unit{'\n'};
  if (options.null) return pipe::Unit{'\0'};
  if (!options.delimiter.empty()) return pipe::Unit{parse_delimiter(options.delimiter)};
  return pipe::Unit{};
}

// Sets the chunk: the user's, or the default for the rate (which follows a new rate).
void choose_chunk(const PipeOptions& options, pipe::EngineOptions& engine_options,
                  pipe::FileIo& io) {
  const double rate = engine_options.bucket.permits_per_second;
  if (options.chunk.empty()) {
    if (!engine_options.unit.counts_bytes()) {
      engine_options.default_chunk_limit = kMaxRecordsPerChunk;
      return;
    }
    const std::int64_t wanted = pipe::default_chunk_units(rate, kMaxBytesPerChunk);
    engine_options.default_chunk_limit =
        static_cast<std::int64_t>(io.fit_pipes_to(static_cast<std::size_t>(wanted)));
    return;
  }
  const double chunk = parse_size(options.chunk);
  if (chunk < 1.0 || chunk > 1e9)
    throw UsageError("invalid chunk '" + options.chunk + "': must be from 1 to 1G units");
  engine_options.chunk_units = static_cast<std::int64_t>(chunk);
}

int exit_code(const pipe::Result& result) {
  switch (result.ending) {
    case pipe::Ending::end_of_input:
      return exit_ok;
    case pipe::Ending::downstream_closed:
      return exit_broken_pipe;
    case pipe::Ending::stopped:
      return 128 + result.signal;
  }
  return exit_ok;
}

pipe::Result run_engine(const PipeOptions& options, const pipe::EngineOptions& engine_options,
                        pipe::FileIo& io, const pipe::Engine::ProgressCallback& draw) {
  if (options.key.empty()) return pipe::Engine(engine_options, io, draw).run();
  const std::unique_ptr<backends::BucketBackend> backend = open_backend(options.store);
  const backends::PermitRequest request{.key = options.key, .params = engine_options.bucket};
  pipe::SharedPermitSource source(
      *backend, request, io.waiter(), [&](const BucketParams& replaced) {
        announce_replaced_params(options.key, replaced, engine_options.bucket);
      });
  return pipe::Engine(engine_options, io, source, draw).run();
}

int run_pipe(const PipeOptions& options) {
  const pipe::Unit unit = unit_of(options);
  pipe::EngineOptions engine_options;
  engine_options.unit = unit;
  engine_options.bucket =
      to_bucket_params(options.bucket, unit.counts_bytes() ? RateUnits::data : RateUnits::plain);

  const std::unique_ptr<pipe::ControlChannel> control =
      pipe::ControlChannel::create(unit.counts_bytes());
  pipe::FileIo io(options.files, options.output, control.get());
  choose_chunk(options, engine_options, io);

  const bool show_progress =
      options.progress == "force" || (options.progress == "auto" && ::isatty(STDERR_FILENO));
  pipe::ProgressMeter meter(unit, io.total_bytes());
  pipe::Engine::ProgressCallback draw;
  if (show_progress) {
    draw = [&meter](const pipe::Totals& totals) {
      fmt::print(stderr, "\r{}\033[K", meter.line(totals));
      std::fflush(stderr);
    };
  }
  const pipe::Result result = run_engine(options, engine_options, io, draw);
  if (show_progress) fmt::print(stderr, "\n");
  if (options.stats == "text") fmt::print(stderr, "{}\n", pipe::summary_text(result, unit));
  if (options.stats == "json") fmt::print(stderr, "{}\n", pipe::summary_json(result, unit));
  return exit_code(result);
}

}  // namespace

Command setup_pipe(CLI::App& app) {
  auto options = std::make_shared<PipeOptions>();
  add_bucket_options(app, options->bucket);
  add_key_option(app, options->key)
      ->description("Share the bucket NAME with every pipe, exec and acquire that names it");
  add_store_options(app, options->store);
  add_redis_policy_option(app, options->store);
  app.add_option("FILE", options->files, "Files to read in order, as cat does; - is standard input")
      ->group("Pipe");
  app.add_option("-o,--output", options->output, "Write here instead of standard output")
      ->group("Pipe");
  auto* lines = app.add_flag("-l,--lines", options->lines,
                             "Count lines: the rate is in lines, a line is never split")
                    ->group("Pipe");
  auto* null = app.add_flag("-0,--null", options->null, "Count NUL-terminated records")
                   ->group("Pipe")
                   ->excludes(lines);
  app.add_option("--delimiter", options->delimiter,
                 "Count records ended by this character (or \\n, \\t, \\0)")
      ->check(CLI::Validator(
          [](std::string& text) {
            return parse_delimiter(text) ? std::string()
                                         : "invalid delimiter '" + text +
                                               "': expected one character or \\n, \\t, \\0";
          },
          "CHAR"))
      ->excludes(lines)
      ->excludes(null)
      ->group("Pipe");
  app.add_option("--chunk", options->chunk,
                 "Units per write [default: 1/200 s of the rate, at most a pipe's capacity]")
      ->check(syntax_check(parse_size, "SIZE"))
      ->group("Pipe");
  app.add_flag("-p,--progress{auto}", options->progress,
               "Draw a progress line on standard error when it is a terminal (=force: always)")
      ->check(CLI::IsMember({"auto", "force"}))
      ->group("Output");
  app.add_flag("--stats{text}", options->stats,
               "Print a summary line on standard error at the end (=json: as JSON)")
      ->check(CLI::IsMember({"text", "json"}))
      ->group("Output");
  return Command{&app, [options] { return run_pipe(*options); }};
}

}  // namespace ratelimit::cli
