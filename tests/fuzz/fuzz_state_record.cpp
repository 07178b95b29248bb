// A state file's bytes, which anything may have written, and key names: decoding never crashes,
// a record it accepts is one the core accepts and encodes back to itself, and keys and their
// file names map one to one.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include "backends/state_file/state_file_format.hpp"
#include "errors.hpp"
#include "ratelimit/token_bucket.hpp"

using namespace ratelimit;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  const backends::DecodedRecord decoded = backends::decode_record(bytes);
  if (decoded.record) {
    if (backends::encode_record(*decoded.record) != bytes) std::abort();
    // A record that the core refuses would make every later call with this key fail.
    TokenBucket bucket(decoded.record->params, decoded.record->state);
    bucket.reserve(1, decoded.record->state.next_free);
  } else if (decoded.problem.empty()) {
    std::abort();
  }

  try {
    backends::validate_key(bytes);
    const std::string file_name = backends::bucket_file_name(bytes);
    if (file_name.find('/') != std::string::npos || file_name == "." || file_name == "..")
      std::abort();
    if (backends::key_of_bucket_file(file_name) != std::string(bytes)) std::abort();
  } catch (const UsageError&) {
  }
  if (const std::optional<std::string> key = backends::key_of_bucket_file(bytes)) {
    if (backends::bucket_file_name(*key) != bytes) std::abort();
  }
  return 0;
}
