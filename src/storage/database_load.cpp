// Database: a restart's read of what the node wrote: the applied position, the task
// records (into a Store::Loader, read on a thread of its own: task_scan.h), the overlay
// and the log after the applied state.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>

#include <rocksdb/db.h>

#include "queue/store.h"
#include "queue/store_loader.h"
#include "storage/be64.h"
#include "storage/database.h"
#include "storage/database_keys.h"
#include "storage/task_scan.h"

namespace dueq::storage {

using namespace db;  // the column families and keys database_keys.h names

std::uint64_t Database::raw_task_bytes() const {
    // Uncompressed: what the records will take in memory, whatever the files take on disk.
    std::uint64_t bytes = 0;
    std::map<std::string, std::string> table;
    if (db_->GetMapProperty(handles_[kTasks], rocksdb::DB::Properties::kAggregatedTableProperties,
                            &table)) {
        for (const char* name : {"raw_key_size", "raw_value_size"}) {
            auto it = table.find(name);
            if (it != table.end()) bytes += std::strtoull(it->second.c_str(), nullptr, 10);
        }
    }
    std::uint64_t memtable = 0;
    db_->GetIntProperty(handles_[kTasks], "rocksdb.cur-size-all-mem-tables", &memtable);
    return std::min<std::uint64_t>(bytes + memtable, 1ull << 40);
}

Status Database::load(queue::Store& store, Loaded& out) {
    out = Loaded{};
    if (auto st = load_positions(out); !st.ok) return st;
    if (auto st = load_tasks(store, out); !st.ok) return st;
    if (auto st = load_overlay(out); !st.ok) return st;
    return load_log(out);
}

Status Database::read_meta(std::string_view key, std::size_t size, std::string& value,
                           std::string_view& body) const {
    body = {};
    auto s = db_->Get({}, handles_[kMeta], slice(key), &value);
    if (s.IsNotFound()) return Status{};
    if (!s.ok()) return Status::error("reading meta/" + std::string(key) + ": " + s.ToString());
    auto b = unseal(value, key);
    if (!b || (size && b->size() != size))
        return Status::error("corrupt record meta/" + std::string(key));
    body = *b;
    return Status{};
}

Status Database::read_member(std::string& record) const {
    std::string value;
    std::string_view body;
    if (auto st = read_meta(kMemberKey, 0, value, body); !st.ok) return st;
    record.assign(body);
    return Status{};
}

Status Database::load_positions(Loaded& out) const {
    std::string value;
    std::string_view body;
    if (auto st = read_meta(kAppliedKey, 16, value, body); !st.ok) return st;
    if (!body.empty()) {
        out.applied_index = get_be64(body);
        out.applied_time = std::int64_t(get_be64(body.substr(8)));
    }
    if (auto st = read_meta(kHardStateKey, 24, value, body); !st.ok) return st;
    if (!body.empty())
        out.hard_state = {get_be64(body), get_be64(body.substr(8)), get_be64(body.substr(16))};
    if (auto st = read_meta(kLogBaseKey, 24, value, body); !st.ok) return st;
    if (!body.empty())
        out.base = {get_be64(body), get_be64(body.substr(8)),
                    raft::Millis(get_be64(body.substr(16)))};
    return Status{};
}

Status Database::load_tasks(queue::Store& store, Loaded& out) const {
    // RocksDB's estimate counts overwritten records not compacted yet: trust it only so far.
    std::uint64_t estimate = 0;
    if (db_->GetIntProperty(handles_[kTasks], "rocksdb.estimate-num-keys", &estimate))
        estimate = std::min<std::uint64_t>(estimate, 1'000'000'000);
    queue::Store::Loader loader(store, std::size_t(estimate), std::size_t(raw_task_bytes()));
    std::string value;
    auto s = db_->Get({}, handles_[kMeta], slice(kStoreMetaKey), &value);
    if (s.ok()) {
        if (!load_store_meta(loader, value)) return Status::error("corrupt record meta/store");
    } else if (!s.IsNotFound()) {
        return Status::error("reading meta/store: " + s.ToString());
    }
    // Each chunk's records go to the loader at once: it loads their memory ahead.
    std::vector<queue::Store::Loader::Record> records;
    ScanCalls calls;
    calls.each = [&](std::string_view key, std::string_view body) {
        auto qk = split_task_key(key);
        if (qk) records.push_back({qk->first, qk->second, body});
        return qk.has_value();
    };
    calls.chunk_done = [&] {
        const bool loaded = loader.tasks(records);
        records.clear();
        return loaded;
    };
    calls.between_chunks = [&] { loader.prefault(); };
    using Clock = std::chrono::steady_clock;
    const auto began = Clock::now();
    auto scanned = scan_task_records(db_, handles_[kTasks], kTasksEnd, calls);
    if (!scanned.ok) return scanned;
    const auto read = Clock::now();
    loader.finish();
    auto ms = [](Clock::duration d) {
        return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
    };
    out.tasks_read_ms = ms(read - began);
    out.indexes_built_ms = ms(Clock::now() - read);
    return Status{};
}

Status Database::load_overlay(Loaded& out) const {
    std::unique_ptr<rocksdb::Iterator> ov(db_->NewIterator({}, handles_[kOverlay]));
    for (ov->SeekToFirst(); ov->Valid(); ov->Next()) {
        const std::string_view k = ov->key().ToStringView();
        auto body = unseal(ov->value().ToStringView(), k);
        auto qk = split_task_key(k);
        if (!body || !qk || !queue::decode_overlay_record(*body))
            return Status::error("corrupt record in column family 'overlay'");
        out.overlay.push_back(
            {std::string(qk->first), std::string(qk->second), std::string(*body)});
    }
    if (!ov->status().ok()) return Status::error("reading overlay: " + ov->status().ToString());
    return Status{};
}

Status Database::load_log(Loaded& out) const {
    std::unique_ptr<rocksdb::Iterator> log(db_->NewIterator({}, handles_[kLog]));
    std::uint64_t expect = out.base.index + 1;
    for (log->Seek(slice(index_key(expect))); log->Valid(); log->Next()) {
        const std::string_view key = log->key().ToStringView();
        auto e = decode_log_record(key, log->value().ToStringView());
        if (!e)
            return Status::error("corrupt log entry " +
                                 std::to_string(key.size() == 8 ? get_be64(key) : expect));
        if (e->index > expect && e->index <= out.applied_index) {
            // A flush left out entries the applied state it carried covers, and no later
            // write recorded the trim (flushed_applied.h): the log starts here.
            out.base = {e->index, e->term, e->time};
            out.entries.clear();
            expect = e->index + 1;
            continue;
        }
        if (e->index != expect)
            return Status::error("log gap: expected entry " + std::to_string(expect) + ", found " +
                                 std::to_string(e->index));
        out.entries.push_back(std::move(*e));
        ++expect;
    }
    if (!log->status().ok()) return Status::error("reading log: " + log->status().ToString());
    if (out.applied_index < out.base.index)
        return Status::error("applied index " + std::to_string(out.applied_index) +
                             " is behind the log, which starts after " +
                             std::to_string(out.base.index));
    if (out.applied_index > out.base.index + out.entries.size())
        return Status::error("applied index " + std::to_string(out.applied_index) +
                             " is past the end of the log");
    return Status{};
}

}  // namespace dueq::storage
