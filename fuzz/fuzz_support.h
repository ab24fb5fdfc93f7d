// What the fuzz targets share: a check that aborts (libFuzzer then saves the input as a
// crash), the piece formats the multi-record targets cut their input into (make_corpus
// writes the same), and a round-trip check of a whole queue::Store.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "queue/store.h"
#include "queue/store_loader.h"

namespace dueq::fuzz {

[[noreturn]] inline void fail(const char* what, const char* file, int line) {
    std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", file, line, what);
    std::abort();
}
#define FUZZ_CHECK(cond) ((cond) ? void(0) : ::dueq::fuzz::fail(#cond, __FILE__, __LINE__))

inline std::string_view as_view(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

// Cuts an input into big-endian integers and length-prefixed pieces.
class Reader {
  public:
    explicit Reader(std::string_view in) : in_(in) {}
    bool empty() const { return in_.empty(); }
    std::optional<std::uint64_t> uint(int bytes) {
        if (in_.size() < std::size_t(bytes)) return std::nullopt;
        std::uint64_t v = 0;
        for (int i = 0; i < bytes; ++i)
            v = (v << 8) | static_cast<unsigned char>(in_[std::size_t(i)]);
        in_.remove_prefix(std::size_t(bytes));
        return v;
    }
    // `len_bytes` of length, then that many bytes; nullopt when the input ends first.
    std::optional<std::string_view> piece(int len_bytes) {
        auto n = uint(len_bytes);
        if (!n || *n > in_.size()) return std::nullopt;
        auto p = in_.substr(0, *n);
        in_.remove_prefix(*n);
        return p;
    }

  private:
    std::string_view in_;
};

inline void put_be(std::string& out, std::uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i)
        out.push_back(char(v >> (8 * i)));
}
inline std::string piece(std::string_view bytes, int len_bytes) {
    std::string out;
    put_be(out, bytes.size(), len_bytes);
    out.append(bytes);
    return out;
}

// fuzz_peer input: what a peer link reads, frames of a 4-byte length and a payload.
inline constexpr int kPeerFrameLenBytes = 4;

// fuzz_records input: records of kind (u8), key (u8 length), body (u16 length).
inline constexpr int kRecordKeyLenBytes = 1, kRecordBodyLenBytes = 2;
enum RecordKind : std::uint8_t {
    kTaskRecord = 0,  // tasks column family: task_key -> body, sealed by the target
    kStoreMeta = 1,   // meta/store: body, sealed by the target
    kLogRecord = 2,   // log column family: be64 index -> body, sealed by the target
    kRawTask = 3,     // a tasks record as given, checksum included (body = crc + task)
};
inline std::string record(RecordKind kind, std::string_view key, std::string_view body) {
    std::string out(1, char(kind));
    out += piece(key, kRecordKeyLenBytes);
    out += piece(body, kRecordBodyLenBytes);
    return out;
}

// What a store persists (its meta record and every task, sorted) must load into an
// empty store and persist again byte for byte: the task and meta codecs agree, and
// loading normalises nothing it would write differently.
inline void check_store_round_trip(const queue::Store& store) {
    using Rows = std::vector<std::tuple<std::string, std::string, std::string>>;
    auto rows_of = [](const queue::Store& s) {
        Rows rows;
        s.for_each_task([&](std::string_view q, std::string_view k, std::string_view t) {
            rows.emplace_back(q, k, t);
        });
        std::sort(rows.begin(), rows.end());
        return rows;
    };
    const std::string meta = store.encode_meta();
    const Rows rows = rows_of(store);
    queue::Store copy;
    {
        queue::Store::Loader load(copy, rows.size());
        FUZZ_CHECK(load.meta(meta));
        for (const auto& [q, k, t] : rows)
            FUZZ_CHECK(load.task(q, k, t));
    }
    FUZZ_CHECK(copy.encode_meta() == meta);
    FUZZ_CHECK(rows_of(copy) == rows);
}

}  // namespace dueq::fuzz
