// pipe_probe [--lines] [--window SECONDS] [--trace FILE [--absolute]] [--input FIFO] [--copy FILE]
//
// Reads standard input (or FIFO) to its end and records the time and size of every read, as a
// consumer sees the stream. Prints one line:
//   units=N seconds=S steady_rate=R max_window=W
// where S is the time from the first to the last read, R the slope of the least-squares line
// through the units delivered against time, the last read left out (the rate a shaper holds once
// it runs), and W the most
// units in any window of --window seconds (default 0.1). With --trace, writes
// "seconds_since_first_read units_so_far" per read; with --absolute too, the times are the
// monotonic clock's, so traces of several probes merge.
// --input opens the FIFO once the probe runs: a shell's `<fifo` would open it before starting the
// probe, whose start-up then delays the first read and makes the first gap look short.
// --copy writes what was read to FILE too (after its time is taken), so that the output of a timed
// run can be compared with its input.
#include <fcntl.h>
#include <fmt/core.h>
#include <fmt/os.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

struct Read {
  std::chrono::steady_clock::time_point time;
  std::uint64_t units;
};

double seconds_between(std::chrono::steady_clock::time_point from,
                       std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// The slope of the least-squares line through (time of a read, units delivered by it), the last
// read left out: a chunk that is written before its wait (Guava's) and one written after it (pay
// first) give the same rate, where "units after the first read over first to last read" counts
// one chunk short for the first kind, an error as large as a chunk is against the whole run; and
// the last read is the input's remainder, a part of a chunk, which would bend the line down.
double least_squares_rate(const std::vector<Read>& reads) {
  const std::size_t fitted = reads.size() > 2 ? reads.size() - 1 : reads.size();
  std::vector<std::pair<double, double>> points;  // (seconds since the first read, units so far)
  points.reserve(fitted);
  std::uint64_t so_far = 0;
  double mean_time = 0.0;
  double mean_units = 0.0;
  for (std::size_t i = 0; i < fitted; ++i) {
    so_far += reads[i].units;
    const auto& point = points.emplace_back(seconds_between(reads.front().time, reads[i].time),
                                            static_cast<double>(so_far));
    mean_time += point.first / static_cast<double>(fitted);
    mean_units += point.second / static_cast<double>(fitted);
  }
  double covariance = 0.0;
  double variance = 0.0;
  for (const auto& [time, units] : points) {
    covariance += (time - mean_time) * (units - mean_units);
    variance += (time - mean_time) * (time - mean_time);
  }
  return variance > 0.0 ? covariance / variance : 0.0;
}

// The most units delivered within any `window` seconds, reads counted whole.
std::uint64_t max_in_window(const std::vector<Read>& reads, double window) {
  std::uint64_t best = 0;
  std::uint64_t sum = 0;
  std::size_t first = 0;
  for (const Read& read : reads) {
    sum += read.units;
    while (seconds_between(reads[first].time, read.time) >= window) sum -= reads[first++].units;
    best = std::max(best, sum);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  bool lines = false;
  bool absolute = false;
  double window = 0.1;
  std::string trace_path;
  std::string input_path;
  std::string copy_path;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    if (argument == "--lines") {
      lines = true;
    } else if (argument == "--absolute") {
      absolute = true;
    } else if (argument == "--window" && i + 1 < argc) {
      window = std::stod(argv[++i]);
    } else if (argument == "--trace" && i + 1 < argc) {
      trace_path = argv[++i];
    } else if (argument == "--input" && i + 1 < argc) {
      input_path = argv[++i];
    } else if (argument == "--copy" && i + 1 < argc) {
      copy_path = argv[++i];
    } else {
      fmt::print(stderr,
                 "usage: pipe_probe [--lines] [--window SECONDS] [--trace FILE [--absolute]] "
                 "[--input FIFO] [--copy FILE]\n");
      return 64;
    }
  }

  std::vector<char> buffer(1 << 20);
  std::vector<Read> reads;
  reads.reserve(1 << 20);
  if (!input_path.empty()) {
    const int input = ::open(input_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (input < 0 || ::dup2(input, STDIN_FILENO) < 0) {
      fmt::print(stderr, "pipe_probe: {}: {}\n", input_path, std::strerror(errno));
      return 66;
    }
    ::close(input);
  }
  std::FILE* copy = nullptr;
  if (!copy_path.empty() && !(copy = std::fopen(copy_path.c_str(), "wb"))) {
    fmt::print(stderr, "pipe_probe: {}: {}\n", copy_path, std::strerror(errno));
    return 73;
  }
  while (true) {
    const ssize_t got = ::read(STDIN_FILENO, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      fmt::print(stderr, "pipe_probe: read: {}\n", std::strerror(errno));
      return 74;
    }
    if (got == 0) break;
    const auto now = std::chrono::steady_clock::now();
    const auto units =
        lines ? static_cast<std::uint64_t>(std::count(buffer.data(), buffer.data() + got, '\n'))
              : static_cast<std::uint64_t>(got);
    reads.push_back({now, units});
    if (copy && std::fwrite(buffer.data(), 1, static_cast<std::size_t>(got), copy) !=
                    static_cast<std::size_t>(got)) {
      fmt::print(stderr, "pipe_probe: {}: {}\n", copy_path, std::strerror(errno));
      return 74;
    }
  }
  if (copy && std::fclose(copy) != 0) {
    fmt::print(stderr, "pipe_probe: {}: {}\n", copy_path, std::strerror(errno));
    return 74;
  }

  std::uint64_t total = 0;
  for (const Read& read : reads) total += read.units;
  const double seconds =
      reads.size() > 1 ? seconds_between(reads.front().time, reads.back().time) : 0.0;
  const double steady_rate = seconds > 0.0 ? least_squares_rate(reads) : 0.0;
  fmt::print("units={} seconds={:.4f} steady_rate={:.3f} max_window={}\n", total, seconds,
             steady_rate, max_in_window(reads, window));

  if (!trace_path.empty()) {
    auto trace = fmt::output_file(trace_path);
    const std::chrono::steady_clock::time_point origin =
        absolute ? std::chrono::steady_clock::time_point{} : reads.front().time;
    std::uint64_t so_far = 0;
    for (const Read& read : reads) {
      so_far += read.units;
      trace.print("{:.6f} {}\n", seconds_between(origin, read.time), so_far);
    }
  }
  return 0;
}
