// A zero-allocation msgpack reader for untrusted frames.
//
// validate() walks a whole frame once and refuses it unless every length fits in the
// bytes that are left and nesting stays within a cap, so nothing is allocated on the
// strength of a declared length (an array32 header claiming 4 billion items is refused
// after reading 5 bytes). Values are then read as views into the frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dueq::wire {

enum class MsgType : std::uint8_t {
    nil,
    boolean,
    uint,
    sint,
    float32,
    float64,
    str,
    bin,
    array,
    map,
    ext
};

// One value inside a validated buffer: its type and its encoded bytes.
struct MsgValue {
    MsgType type = MsgType::nil;
    std::string_view encoded;  // the whole value, header included

    // Scalar readers; nullopt when the type does not fit (a negative number asked as
    // unsigned, a float asked as an integer, ...).
    std::optional<std::uint64_t> as_uint() const;
    std::optional<std::int64_t> as_int() const;
    std::optional<double> as_number() const;  // ints and floats
    std::optional<bool> as_bool() const;
    std::optional<std::string_view> as_str() const;         // str only
    std::optional<std::string_view> as_str_or_bin() const;  // str or bin
};

// Checks that `bytes` is exactly one well-formed msgpack value with nesting depth at
// most `max_depth`. On failure returns false and says why in `error`.
bool validate(std::string_view bytes, int max_depth, std::string& error);

// Reads the header of the value at the start of `bytes` (already validated) and
// returns it with its full extent.
MsgValue read_value(std::string_view bytes);

// Iterates the entries of a validated map value. Usage:
//   MapReader r(v); while (auto e = r.next()) { e->first ... e->second ... }
class MapReader {
  public:
    explicit MapReader(const MsgValue& map);
    std::optional<std::pair<MsgValue, MsgValue>> next();

  private:
    std::string_view rest_;
    std::uint32_t left_ = 0;
};

// Number of bytes of the value at the start of a validated buffer.
std::size_t value_size(std::string_view bytes);

}  // namespace dueq::wire
