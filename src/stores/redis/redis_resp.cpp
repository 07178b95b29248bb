#include "stores/redis/redis_resp.hpp"

#include <hiredis/hiredis.h>

#include <memory>
#include <new>

namespace ratelimit::stores::redis {
namespace {

// A status's or an error's text as one line of RESP.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  return text;
}

void append_value(std::string& out, const Value& value) {
  switch (value.type) {
    case Value::Type::nil:
      out += "$-1\r\n";
      break;
    case Value::Type::integer:
      out += ':' + std::to_string(value.integer) + "\r\n";
      break;
    case Value::Type::string:
      out += '$' + std::to_string(value.text.size()) + "\r\n" + value.text + "\r\n";
      break;
    case Value::Type::status:
      out += '+' + one_line(value.text) + "\r\n";
      break;
    case Value::Type::error:
      out += '-' + one_line(value.text) + "\r\n";
      break;
    case Value::Type::array:
      out += '*' + std::to_string(value.elements.size()) + "\r\n";
      for (const Value& element : value.elements) append_value(out, element);
      break;
  }
}

struct FreeReader {
  void operator()(redisReader* reader) const { ::redisReaderFree(reader); }
};

struct FreeReply {
  void operator()(void* reply) const { ::freeReplyObject(reply); }
};

}  // namespace

Value copy_reply(const redisReply& reply) {
  Value value;
  switch (reply.type) {
    case REDIS_REPLY_INTEGER:
      value.type = Value::Type::integer;
      value.integer = reply.integer;
      break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      value.type = reply.type == REDIS_REPLY_STRING   ? Value::Type::string
                   : reply.type == REDIS_REPLY_STATUS ? Value::Type::status
                                                      : Value::Type::error;
      value.text.assign(reply.str, reply.len);
      break;
    case REDIS_REPLY_ARRAY:
      value.type = Value::Type::array;
      for (std::size_t i = 0; i < reply.elements; ++i)
        value.elements.push_back(copy_reply(*reply.element[i]));
      break;
    default:
      value.type = Value::Type::nil;
  }
  return value;
}

std::string resp_command(const std::vector<std::string>& arguments) {
  std::vector<const char*> pointers;
  std::vector<std::size_t> lengths;
  for (const std::string& argument : arguments) {
    pointers.push_back(argument.data());
    lengths.push_back(argument.size());
  }
  char* formatted = nullptr;
  const int length = ::redisFormatCommandArgv(&formatted, static_cast<int>(arguments.size()),
                                              pointers.data(), lengths.data());
  if (length < 0) throw std::bad_alloc();
  const std::unique_ptr<char, decltype(&::redisFreeCommand)> owned(formatted, &::redisFreeCommand);
  return std::string(formatted, static_cast<std::size_t>(length));
}

std::string resp_value(const Value& value) {
  std::string out;
  append_value(out, value);
  return out;
}

std::optional<Value> read_resp_value(std::string_view text) {
  const std::unique_ptr<redisReader, FreeReader> reader(::redisReaderCreate());
  if (!reader) throw std::bad_alloc();
  void* reply = nullptr;
  if (::redisReaderFeed(reader.get(), text.data(), text.size()) != REDIS_OK ||
      ::redisReaderGetReply(reader.get(), &reply) != REDIS_OK || reply == nullptr)
    return std::nullopt;
  const std::unique_ptr<void, FreeReply> owned(reply);
  // Nothing may follow the value.
  if (reader->pos != reader->len) return std::nullopt;
  return copy_reply(*static_cast<const redisReply*>(reply));
}

}  // namespace ratelimit::stores::redis
