#include "storage/task_scan.h"

#include <rocksdb/db.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace dueq::storage {

namespace {

// Chunk layout: per record, its key's and its sealed value's length (4 bytes each, native
// order: the chunk never leaves the process), then the key, then the value.
void append_record(std::string& chunk, std::string_view key, std::string_view value) {
    const std::uint32_t sizes[2] = {std::uint32_t(key.size()), std::uint32_t(value.size())};
    chunk.append(reinterpret_cast<const char*>(sizes), sizeof sizes);
    chunk.append(key);
    chunk.append(value);
}

class Handoff {
  public:
    Handoff() {
        for (std::size_t i = 0; i < kScanChunks; ++i)
            empty_.emplace_back();
    }
    // The reader: an empty chunk to fill, or nothing once the loader has stopped.
    bool take_empty(std::string& chunk) {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return stop_ || !empty_.empty(); });
        if (stop_ || !pop_front(empty_, chunk)) return false;
        chunk.clear();
        return true;
    }
    void put_full(std::string& chunk) { push_back(full_, chunk); }
    void finish(Status status) {
        std::lock_guard lock(m_);
        done_ = true;
        status_ = std::move(status);
        cv_.notify_all();
    }
    // The loader: the next full chunk; false once there are no more.
    bool take_full(std::string& chunk) {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return done_ || !full_.empty(); });
        return pop_front(full_, chunk);
    }
    void give_back(std::string& chunk) { push_back(empty_, chunk); }
    // Whether the loader has a chunk to work on beyond the one it is on.
    bool loader_busy() {
        std::lock_guard lock(m_);
        return full_.size() >= 2;
    }
    void stop() {
        std::lock_guard lock(m_);
        stop_ = true;
        cv_.notify_all();
    }
    Status status() {
        std::lock_guard lock(m_);
        return status_;
    }

  private:
    // Chunks change hands by swapping, so their buffers are never copied or freed.
    void push_back(std::deque<std::string>& to, std::string& chunk) {
        std::lock_guard lock(m_);
        to.emplace_back();
        to.back().swap(chunk);
        cv_.notify_all();
    }
    static bool pop_front(std::deque<std::string>& from, std::string& chunk) {
        if (from.empty()) return false;
        chunk.swap(from.front());
        from.pop_front();
        return true;
    }

    std::mutex m_;
    std::condition_variable cv_;
    std::deque<std::string> empty_, full_;
    bool done_ = false, stop_ = false;
    Status status_;
};

Status read_records(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, std::string_view end,
                    Handoff& handoff, const std::function<void()>& between_chunks) {
    const rocksdb::Slice upper(end.data(), end.size());
    rocksdb::ReadOptions sequential;
    sequential.iterate_upper_bound = &upper;
    sequential.readahead_size = 8 << 20;
    sequential.fill_cache = false;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(sequential, cf));
    std::string chunk;
    if (!handoff.take_empty(chunk)) return Status{};
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
        append_record(chunk, it->key().ToStringView(), it->value().ToStringView());
        if (chunk.size() >= kScanChunkBytes) {
            handoff.put_full(chunk);
            // Only while the loader has work queued: when it waits for records, reading
            // them comes first (it then faults in its memory itself).
            if (between_chunks && handoff.loader_busy()) between_chunks();
            if (!handoff.take_empty(chunk)) return Status{};
        }
    }
    handoff.put_full(chunk);
    if (!it->status().ok()) return Status::error("reading tasks: " + it->status().ToString());
    return Status{};
}

}  // namespace

Status scan_task_records(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, std::string_view end,
                         const ScanCalls& calls) {
    Handoff handoff;
    std::thread reader(
        [&] { handoff.finish(read_records(db, cf, end, handoff, calls.between_chunks)); });
    bool corrupt = false;
    std::string chunk;
    std::vector<std::pair<std::string_view, std::string_view>> records;
    while (!corrupt && handoff.take_full(chunk)) {
        records.clear();
        for (std::size_t at = 0; at < chunk.size();) {
            std::uint32_t sizes[2];
            std::memcpy(sizes, chunk.data() + at, sizeof sizes);
            at += sizeof sizes;
            records.emplace_back(std::string_view(chunk.data() + at, sizes[0]),
                                 std::string_view(chunk.data() + at + sizes[0], sizes[1]));
            at += std::size_t(sizes[0]) + sizes[1];
        }
        for (std::size_t i = 0; i < records.size(); ++i) {
            const auto body = unseal(records[i].second, records[i].first);
            if (!body || !calls.each(records[i].first, *body)) {
                corrupt = true;
                break;
            }
        }
        if (!corrupt && calls.chunk_done && !calls.chunk_done()) corrupt = true;
        handoff.give_back(chunk);
    }
    handoff.stop();
    reader.join();
    if (corrupt) return Status::error("corrupt task record in column family 'tasks'");
    return handoff.status();
}

}  // namespace dueq::storage
