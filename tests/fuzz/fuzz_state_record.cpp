// A state file's bytes, which anything may have written, and key names: decoding never crashes,
// a record it accepts is one the core accepts and encodes back to itself (an older version's as
// the current version's, which does), and keys and their file names map one to one; an accepted
// record is within the bounds of its parameters.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include "errors.hpp"
#include "ratelimit/token_bucket.hpp"
#include "stores/state_file/state_file_format.hpp"

using namespace ratelimit;
using namespace std::chrono_literals;

// When the records are read, on their clock.
constexpr std::chrono::nanoseconds kNow = 1000s;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  const stores::state_file::DecodedRecord decoded = stores::state_file::decode_record(bytes, kNow);
  if (decoded.record) {
    // A record of an older version (magic and version: 12 bytes) is written as the current
    // version's, which reads back as itself.
    const std::string encoded = stores::state_file::encode_record(*decoded.record);
    if (std::string_view(encoded).substr(0, 12) == bytes.substr(0, 12)) {
      if (encoded != bytes) std::abort();
    } else {
      const stores::state_file::DecodedRecord again =
          stores::state_file::decode_record(encoded, kNow);
      if (!again.record || stores::state_file::encode_record(*again.record) != encoded)
        std::abort();
    }
    // A record that the core refuses would make every later call with this key fail.
    TokenBucket bucket(decoded.record->params, decoded.record->state);
    // One beyond its parameters' bounds would hand out more than the rate, or hold the key longer
    // than any request could.
    const BucketState& state = decoded.record->state;
    if (!(state.stored_permits <= bucket.max_permits() * (1.0 + 1e-9))) std::abort();
    const std::chrono::nanoseconds longest =
        stores::state_file::longest_booked_wait(bucket.params());
    if (kNow < std::chrono::nanoseconds::max() - longest && state.next_free > kNow + longest)
      std::abort();
    bucket.reserve(1, decoded.record->state.next_free);
  } else if (decoded.problem.empty()) {
    std::abort();
  }

  try {
    state::validate_key(bytes);
    const std::string file_name = stores::state_file::bucket_file_name(bytes);
    if (file_name.find('/') != std::string::npos || file_name == "." || file_name == "..")
      std::abort();
    if (stores::state_file::key_of_bucket_file(file_name) != std::string(bytes)) std::abort();
  } catch (const UsageError&) {
  }
  if (const std::optional<std::string> key = stores::state_file::key_of_bucket_file(bytes)) {
    if (stores::state_file::bucket_file_name(*key) != bytes) std::abort();
  }
  return 0;
}
