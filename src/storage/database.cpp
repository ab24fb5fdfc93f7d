#include "storage/database.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "queue/store.h"
#include "storage/crc32c.h"

namespace dueq::storage {
namespace {

enum Cf { kDefault = 0, kLog = 1, kMeta = 2, kTasks = 3, kOverlay = 4 };
const char* const kCfNames[] = {"default", "log", "meta", "tasks", "overlay"};
constexpr std::string_view kAppliedKey = "applied";
constexpr std::string_view kStoreMetaKey = "store";

void put_be64(std::string& out, std::uint64_t v) {
    for (int i = 7; i >= 0; --i)
        out.push_back(char(v >> (8 * i)));
}
std::uint64_t get_be64(std::string_view s) {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
        v = (v << 8) | static_cast<unsigned char>(s[i]);
    return v;
}
std::string index_key(std::uint64_t index) {
    std::string k;
    put_be64(k, index);
    return k;
}
rocksdb::Slice slice(std::string_view s) {
    return rocksdb::Slice(s.data(), s.size());
}

}  // namespace

namespace {
std::uint32_t record_crc(std::string_view key, std::string_view body) {
    return crc32c_extend(crc32c(key.data(), key.size()), body.data(), body.size());
}
}  // namespace

std::string seal(std::string_view body, std::string_view key) {
    const std::uint32_t c = record_crc(key, body);
    std::string out{char(c >> 24), char(c >> 16), char(c >> 8), char(c)};
    out.append(body);
    return out;
}

std::optional<std::string_view> unseal(std::string_view record, std::string_view key) {
    if (record.size() < 4) return std::nullopt;
    const auto* p = reinterpret_cast<const unsigned char*>(record.data());
    const std::uint32_t want = (std::uint32_t(p[0]) << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
    if (record_crc(key, record.substr(4)) != want) return std::nullopt;
    return record.substr(4);
}

std::string task_key(std::string_view queue, std::string_view key) {
    std::string k{char(queue.size() >> 8), char(queue.size())};
    k.append(queue);
    k.append(key);
    return k;
}

std::unique_ptr<Database> Database::open(const std::string& path, bool sync, Status& status,
                                         rocksdb::Env* env) {
    rocksdb::Options opts;
    if (env) opts.env = env;
    opts.create_if_missing = true;
    opts.create_missing_column_families = true;
    opts.paranoid_checks = true;
    // Our own log is the durability point; RocksDB's WAL carries the batches to it.
    opts.manual_wal_flush = false;
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (const char* name : kCfNames)
        cfs.emplace_back(name, rocksdb::ColumnFamilyOptions(opts));
    std::unique_ptr<Database> d(new Database());
    d->sync_ = sync;
    auto s = rocksdb::DB::Open(rocksdb::DBOptions(opts), path, cfs, &d->handles_, &d->db_);
    if (!s.ok()) {
        status = Status::error("cannot open RocksDB at " + path + ": " + s.ToString());
        return nullptr;
    }
    // Find the log's extent once; afterwards the writer keeps it.
    std::unique_ptr<rocksdb::Iterator> it(d->db_->NewIterator({}, d->handles_[kLog]));
    it->SeekToLast();
    if (it->Valid()) d->last_log_index_ = get_be64(it->key().ToStringView());
    it->SeekToFirst();
    if (it->Valid()) d->first_log_index_ = get_be64(it->key().ToStringView());
    status = Status{};
    return d;
}

Database::~Database() {
    if (!db_) return;
    for (auto* h : handles_)
        db_->DestroyColumnFamilyHandle(h);
    db_->Close();
    delete db_;
}

Status Database::load(queue::Store& store, std::uint64_t& applied_index, std::int64_t& applied_time,
                      std::vector<LogRecord>& tail) {
    applied_index = 0;
    applied_time = 0;
    std::string value;
    auto s = db_->Get({}, handles_[kMeta], slice(kAppliedKey), &value);
    if (s.ok()) {
        auto body = unseal(value, kAppliedKey);
        if (!body || body->size() != 16) return Status::error("corrupt record meta/applied");
        applied_index = get_be64(*body);
        applied_time = std::int64_t(get_be64(body->substr(8)));
    } else if (!s.IsNotFound()) {
        return Status::error("reading meta/applied: " + s.ToString());
    }
    s = db_->Get({}, handles_[kMeta], slice(kStoreMetaKey), &value);
    if (s.ok()) {
        auto body = unseal(value, kStoreMetaKey);
        if (!body || !store.load_meta(*body)) return Status::error("corrupt record meta/store");
    } else if (!s.IsNotFound()) {
        return Status::error("reading meta/store: " + s.ToString());
    }

    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator({}, handles_[kTasks]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
        auto k = it->key().ToStringView();
        const std::size_t qlen =
            k.size() >= 2 ? (std::size_t((unsigned char)k[0]) << 8 | (unsigned char)k[1]) : 0;
        auto body = unseal(it->value().ToStringView(), k);
        if (k.size() < 2 + qlen || !body ||
            !store.load_task(k.substr(2, qlen), k.substr(2 + qlen), *body))
            return Status::error("corrupt task record in column family 'tasks'");
    }
    if (!it->status().ok()) return Status::error("reading tasks: " + it->status().ToString());

    std::unique_ptr<rocksdb::Iterator> log(db_->NewIterator({}, handles_[kLog]));
    std::uint64_t expect = applied_index + 1;
    for (log->Seek(slice(index_key(applied_index + 1))); log->Valid(); log->Next()) {
        const std::uint64_t index = get_be64(log->key().ToStringView());
        auto body = unseal(log->value().ToStringView(), log->key().ToStringView());
        if (!body || body->size() < 8)
            return Status::error("corrupt log entry " + std::to_string(index));
        if (index != expect)
            return Status::error("log gap: expected entry " + std::to_string(expect) + ", found " +
                                 std::to_string(index));
        tail.push_back(
            LogRecord{index, std::int64_t(get_be64(*body)), std::string(body->substr(8))});
        ++expect;
    }
    if (!log->status().ok()) return Status::error("reading log: " + log->status().ToString());
    return Status{};
}

Status Database::write(const std::vector<LogRecord>& appends,
                       const std::vector<AppliedState>& applied) {
    rocksdb::WriteBatch batch;
    std::string body;
    for (const auto& a : applied) {
        for (const auto& c : a.changes) {
            const std::string k = task_key(c.queue, c.key);
            if (c.encoded)
                batch.Put(handles_[kTasks], k, seal(*c.encoded, k));
            else
                batch.Delete(handles_[kTasks], k);
        }
        body.clear();
        put_be64(body, a.applied_index);
        put_be64(body, std::uint64_t(a.applied_time));
        batch.Put(handles_[kMeta], slice(kAppliedKey), seal(body, kAppliedKey));
        batch.Put(handles_[kMeta], slice(kStoreMetaKey), seal(a.store_meta, kStoreMetaKey));
        if (a.trim_through >= first_log_index_) {
            batch.DeleteRange(handles_[kLog], index_key(first_log_index_),
                              index_key(a.trim_through + 1));
            first_log_index_ = a.trim_through + 1;
        }
    }
    for (const auto& r : appends) {
        body.clear();
        put_be64(body, std::uint64_t(r.time));
        body.append(r.command);
        const std::string key = index_key(r.index);
        batch.Put(handles_[kLog], key, seal(body, key));
    }
    rocksdb::WriteOptions wo;
    wo.sync = sync_ && !appends.empty();
    auto s = db_->Write(wo, &batch);
    if (!s.ok()) return Status::error("RocksDB write failed: " + s.ToString());
    if (!appends.empty()) last_log_index_ = appends.back().index;
    return Status{};
}

}  // namespace dueq::storage
