#include "storage/database.h"

#include <algorithm>
#include <array>

#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/listener.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "queue/store_loader.h"
#include "storage/be64.h"
#include "storage/crc32c.h"
#include "storage/database_keys.h"
#include "storage/flushed_applied.h"
#include "storage/prezeroed_wal.h"
#include "storage/sorted_flush_memtable.h"
#include "storage/wal_check.h"

namespace dueq::storage {

using namespace db;  // the column families and keys database_keys.h names

namespace {

std::string encode_meta3(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
    std::string body;
    put_be64(body, a);
    put_be64(body, b);
    put_be64(body, c);
    return body;
}

// A log record's body is this head (term, log time, type: 17 bytes) and then the entry's
// data.
void entry_head(const raft::Entry& e, std::string& head) {
    head.clear();
    put_be64(head, e.term);
    put_be64(head, e.time);
    head.push_back(char(e.type));
}

}  // namespace

namespace {
std::uint32_t record_crc(std::string_view key, std::string_view body) {
    return crc32c_extend(crc32c(key.data(), key.size()), body.data(), body.size());
}

// A sealed record's first 4 bytes: its CRC, big-endian.
std::array<char, 4> crc_prefix(std::uint32_t c) {
    return {char(c >> 24), char(c >> 16), char(c >> 8), char(c)};
}

// Puts seal(head + body, key) into the batch without building it: the CRC is computed
// over the parts, and RocksDB gathers them into the batch, the one copy.
void put_sealed(rocksdb::WriteBatch& batch, rocksdb::ColumnFamilyHandle* cf, std::string_view key,
                std::string_view head, std::string_view body) {
    const auto crc = crc_prefix(crc32c_extend(record_crc(key, head), body.data(), body.size()));
    const rocksdb::Slice k(key.data(), key.size());
    const rocksdb::Slice v[3] = {rocksdb::Slice(crc.data(), crc.size()),
                                 rocksdb::Slice(head.data(), head.size()),
                                 rocksdb::Slice(body.data(), body.size())};
    batch.Put(cf, rocksdb::SliceParts(&k, 1), rocksdb::SliceParts(v, 3));
}
}  // namespace

std::string seal(std::string_view body, std::string_view key) {
    const auto crc = crc_prefix(record_crc(key, body));
    std::string out(crc.data(), crc.size());
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

std::optional<raft::Entry> decode_log_record(std::string_view key, std::string_view value) {
    if (key.size() != 8) return std::nullopt;
    auto b = unseal(value, key);
    if (!b || b->size() < 17 || std::uint8_t((*b)[16]) > std::uint8_t(raft::EntryType::config))
        return std::nullopt;
    return raft::Entry{get_be64(*b), get_be64(key), raft::Millis(get_be64(b->substr(8))),
                       raft::EntryType(std::uint8_t((*b)[16])), std::string(b->substr(17))};
}

std::string task_key(std::string_view queue, std::string_view key) {
    std::string k{char(queue.size() >> 8), char(queue.size())};
    k.append(queue);
    k.append(key);
    return k;
}

namespace {

constexpr std::size_t kKeptSlabBytes = std::size_t{64} << 20;

rocksdb::Env* prezeroed_wal_env() {
    static const std::unique_ptr<rocksdb::Env> env =
        rocksdb::NewCompositeEnv(prezeroed_wal_fs(rocksdb::FileSystem::Default()));
    return env.get();
}

rocksdb::Options open_options(rocksdb::Env* env) {
    rocksdb::Options opts;
    // A test's environment (the power-cut file system) brings its own pre-zeroed WAL.
    opts.env = env ? env : prezeroed_wal_env();
    opts.create_if_missing = true;
    opts.create_missing_column_families = true;
    opts.paranoid_checks = true;
    // Our own log is the durability point; RocksDB's WAL carries the batches to it.
    opts.manual_wal_flush = false;
    // One thread writes at a time (the storage thread, or the event loop writing inline:
    // storage/writer.h) and nothing reads a memtable on the hot path
    // (a restart or a checkpoint reads it once, in order): the log and the task records
    // go into memtables that append and sort once, at flush (sorted_flush_memtable.h),
    // instead of a skiplist whose random-key inserts were the write path's largest cost
    // (docs/benchmarks.md).
    opts.allow_concurrent_memtable_write = false;
    // `meta` and `overlay` take few writes and would keep every WAL file alive until their
    // memtables fill: past this much WAL, RocksDB flushes them, so a restart after a kill
    // replays at most about this much.
    opts.max_total_wal_size = 256ull << 20;
    // Every flush cuts all column families at one point, so that the applied state in
    // files (written without the WAL) is the state at one applied index: `tasks` and
    // meta/applied never come from two different moments.
    opts.atomic_flush = true;
    return opts;
}

// The column families, with their options; the memtable factories of `log` and `tasks`
// go to `memtables`.
std::vector<rocksdb::ColumnFamilyDescriptor> column_families(
    const rocksdb::Options& opts, const std::shared_ptr<FlushedApplied>& flushed_applied,
    std::vector<std::shared_ptr<SortedFlushMemTableFactory>>& memtables) {
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (const char* name : kCfNames) {
        cfs.emplace_back(name, rocksdb::ColumnFamilyOptions(opts));
        const std::string_view n = name;
        if (n == "log" || n == "tasks") {
            memtables.push_back(sorted_flush_memtable());
            cfs.back().options.memtable_factory = memtables.back();
        }
        // Log files live until the next trims, a few memtables later, and are read back
        // only by a restart or a lagging follower: compressing them was 1% of a follower's
        // CPU (its flush thread) for a few seconds' worth of disk space.
        if (n == "log") {
            cfs.back().options.compression = rocksdb::kNoCompression;
            cfs.back().options.compaction_filter_factory = log_flush_filter(flushed_applied);
        }
    }
    return cfs;
}

}  // namespace

std::unique_ptr<Database> Database::open(const std::string& path, bool sync, Status& status,
                                         rocksdb::Env* env) {
    // Before RocksDB replays the WAL and, at a damaged record, quietly stops there.
    if (status = check_wal(path); !status.ok) return nullptr;
    rocksdb::Options opts = open_options(env);
    std::unique_ptr<Database> d(new Database());
    d->sync_ = sync;
    d->flushed_applied_ = std::make_shared<FlushedApplied>(0, kCfNames[kMeta], kCfNames[kLog]);
    opts.listeners.push_back(d->flushed_applied_);
    std::vector<std::shared_ptr<SortedFlushMemTableFactory>> memtables;
    const auto cfs = column_families(opts, d->flushed_applied_, memtables);
    auto s = rocksdb::DB::Open(rocksdb::DBOptions(opts), path, cfs, &d->handles_, &d->db_);
    if (!s.ok()) {
        status = Status::error("cannot open RocksDB at " + path + ": " + s.ToString());
        return nullptr;
    }
    // While writes flow, a memtable fills as the one before it is flushed and freed: its
    // slabs, kept, serve the next one. One write buffer's worth (RocksDB's default
    // 64 MiB) per column family: then, once the first memtables have filled, no slab is
    // fresh (counted in a three-node put run); less leaves part of each memtable fresh.
    // Not before now, so that what a restart replayed is given back.
    for (auto& m : memtables)
        m->keep_freed_slabs(kKeptSlabBytes);
    d->find_extent();
    status = Status{};
    return d;
}

void Database::find_extent() {
    {
        // Whatever meta/applied holds now is in files or in the WAL: durable.
        std::string value;
        std::uint64_t applied = 0;
        if (db_->Get({}, handles_[kMeta], slice(kAppliedKey), &value).ok())
            if (auto b = unseal(value, kAppliedKey); b && b->size() == 16) applied = get_be64(*b);
        flushed_applied_->flushed(applied);
    }
    // Find the log's extent once; afterwards the writer keeps it.
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator({}, handles_[kLog]));
    it->SeekToLast();
    if (it->Valid()) last_log_index_ = get_be64(it->key().ToStringView());
    it->SeekToFirst();
    if (it->Valid()) first_log_index_ = get_be64(it->key().ToStringView());
}

Status Database::write_member(std::string_view record) {
    rocksdb::WriteOptions synced;
    synced.sync = true;
    auto s = db_->Put(synced, handles_[kMeta], slice(kMemberKey), seal(record, kMemberKey));
    if (!s.ok()) return Status::error("writing meta/member: " + s.ToString());
    return Status{};
}

Status Database::flush() {
    // Nothing writes any more: waiting for a stall to clear (compactions) would only delay
    // the stop.
    rocksdb::FlushOptions now;
    now.allow_write_stall = true;
    auto s = db_->Flush(now, handles_);
    if (!s.ok()) return Status::error("RocksDB flush failed: " + s.ToString());
    // Everything written is in files now, whether or not the listener has heard yet.
    flushed_applied_->flushed(last_applied_written_);
    // The trims that waited for this flush are done now, so that the next start does not
    // read back (and hold in memory) a log the applied state already covers.
    rocksdb::WriteBatch trims;
    trim_log(trims);
    if (trims.Count() == 0) return Status{};
    rocksdb::WriteOptions wo;
    wo.sync = sync_;
    if (s = db_->Write(wo, &trims); s.ok()) s = db_->Flush(now, handles_);
    if (!s.ok()) return Status::error("RocksDB flush failed: " + s.ToString());
    return Status{};
}

void Database::halt_background_work() {
    rocksdb::CancelAllBackgroundWork(db_, true);
}

Database::~Database() {
    if (!db_) return;
    for (auto* h : handles_)
        db_->DestroyColumnFamilyHandle(h);
    db_->Close();
    delete db_;
}

Status Database::write(const std::vector<LogWrite>& logs, const std::vector<AppliedState>& applied,
                       const std::vector<OverlayWrite>& overlay, Written* written) {
    // A batch far beyond the usual (a large applied state) does not keep its memory.
    constexpr std::size_t kKeptBatchBytes = 16 << 20;
    for (auto* b : {&batch_, &applied_batch_})
        if (!*b || (*b)->GetDataSize() > kKeptBatchBytes)
            *b = std::make_unique<rocksdb::WriteBatch>();
    rocksdb::WriteBatch& batch = *batch_;
    batch.Clear();
    bool sync = add_logs(batch, logs);
    // The applied state goes in a batch of its own, without the WAL (FlushedApplied).
    rocksdb::WriteBatch& states = *applied_batch_;
    states.Clear();
    const std::uint64_t applied_index = add_applied(states, applied);
    trim_log(batch);
    sync = add_overlay(batch, overlay) || sync;
    rocksdb::WriteOptions wo;
    wo.sync = sync_ && sync;
    if (batch.Count() > 0 || wo.sync) {
        auto s = db_->Write(wo, &batch);
        if (!s.ok()) return Status::error("RocksDB write failed: " + s.ToString());
    }
    if (states.Count() > 0) {
        rocksdb::WriteOptions unlogged;
        unlogged.disableWAL = true;
        auto s = db_->Write(unlogged, &states);
        if (!s.ok()) return Status::error("RocksDB write failed: " + s.ToString());
        flushed_applied_->written(db_->GetLatestSequenceNumber(), applied_index);
        last_applied_written_ = applied_index;
    }
    if (written) *written = {batch.GetDataSize() + states.GetDataSize(), wo.sync};
    return Status{};
}

bool Database::add_logs(rocksdb::WriteBatch& batch, const std::vector<LogWrite>& logs) {
    bool sync = false;
    for (const auto& w : logs) {
        sync = sync || w.sync;
        if (!w.entries.empty()) {
            const std::uint64_t first = w.entries.front().index, last = w.entries.back().index;
            std::string head;
            for (const auto& e : w.entries) {
                const std::string key = index_key(e.index);
                entry_head(e, head);
                put_sealed(batch, handles_[kLog], key, head, e.data);
            }
            if (last < last_log_index_)
                batch.DeleteRange(handles_[kLog], index_key(last + 1),
                                  index_key(last_log_index_ + 1));
            if (first_log_index_ > last_log_index_) first_log_index_ = first;
            last_log_index_ = last;
        }
        if (w.hard_state) {
            const auto& hs = *w.hard_state;
            batch.Put(handles_[kMeta], slice(kHardStateKey),
                      seal(encode_meta3(hs.term, hs.vote, hs.commit), kHardStateKey));
        }
    }
    return sync;
}

std::uint64_t Database::add_applied(rocksdb::WriteBatch& states,
                                    const std::vector<AppliedState>& applied) {
    std::uint64_t applied_index = 0;
    std::string body;
    for (const auto& a : applied) {
        for (const auto& c : a.changes) {
            const std::string k = task_key(c.queue, c.key);
            if (c.encoded)
                put_sealed(states, handles_[kTasks], k, {}, *c.encoded);
            else
                states.Delete(handles_[kTasks], k);
        }
        body.clear();
        put_be64(body, a.applied_index);
        put_be64(body, std::uint64_t(a.applied_time));
        states.Put(handles_[kMeta], slice(kAppliedKey), seal(body, kAppliedKey));
        states.Put(handles_[kMeta], slice(kStoreMetaKey), seal(a.store_meta, kStoreMetaKey));
        applied_index = a.applied_index;
        if (a.trim.index > 0) flushed_applied_->trim_asked(a.trim);
    }
    return applied_index;
}

bool Database::add_overlay(rocksdb::WriteBatch& batch, const std::vector<OverlayWrite>& overlay) {
    bool sync = false;
    for (const auto& o : overlay) {
        sync = sync || o.sync;
        for (const auto& c : o.changes) {
            const std::string k = task_key(c.queue, c.key);
            if (c.record)
                batch.Put(handles_[kOverlay], k, seal(*c.record, k));
            else
                batch.Delete(handles_[kOverlay], k);
        }
    }
    return sync;
}

// A restart replays the log from the applied state in files, so the log is trimmed only
// up to it: the newest trim asked for at or below it is done, later ones wait.
void Database::trim_log(rocksdb::WriteBatch& batch) {
    const auto trim = flushed_applied_->trim_due();
    if (!trim || trim->index < first_log_index_ || trim->index > last_log_index_) return;
    batch.DeleteRange(handles_[kLog], index_key(first_log_index_), index_key(trim->index + 1));
    batch.Put(handles_[kMeta], slice(kLogBaseKey),
              seal(encode_meta3(trim->index, trim->term, trim->time), kLogBaseKey));
    first_log_index_ = trim->index + 1;
}

Status Database::install(const SnapshotInstall& snap) {
    rocksdb::WriteBatch batch;
    batch.DeleteRange(handles_[kTasks], std::string_view(), kTasksEnd);
    for (const auto& [k, v] : snap.tasks)
        batch.Put(handles_[kTasks], k, v);
    batch.DeleteRange(handles_[kLog], index_key(0), index_key(~std::uint64_t(0)));
    const auto& m = snap.meta;
    batch.Put(handles_[kMeta], slice(kLogBaseKey),
              seal(encode_meta3(m.index, m.term, m.time), kLogBaseKey));
    std::string body;
    put_be64(body, m.index);
    put_be64(body, m.time);
    batch.Put(handles_[kMeta], slice(kAppliedKey), seal(body, kAppliedKey));
    batch.Put(handles_[kMeta], slice(kStoreMetaKey), snap.store_meta_sealed);
    const auto& hs = snap.hard_state;
    batch.Put(handles_[kMeta], slice(kHardStateKey),
              seal(encode_meta3(hs.term, hs.vote, hs.commit), kHardStateKey));
    rocksdb::WriteOptions wo;
    wo.sync = sync_;
    auto s = db_->Write(wo, &batch);
    if (!s.ok()) return Status::error("RocksDB write failed: " + s.ToString());
    first_log_index_ = m.index + 1;
    last_log_index_ = m.index;
    flushed_applied_->installed(m.index);
    last_applied_written_ = m.index;
    return Status{};
}

std::shared_ptr<const Checkpoint> Database::checkpoint(const raft::SnapshotMeta& meta) {
    std::shared_ptr<Checkpoint> cp(new Checkpoint());
    cp->db_ = this;
    cp->snap_ = db_->GetSnapshot();
    cp->meta_ = meta;
    return cp;
}

Checkpoint::~Checkpoint() {
    if (snap_) db_->db_->ReleaseSnapshot(snap_);
}

Checkpoint::Reader::Reader(std::shared_ptr<const Checkpoint> cp) : cp_(std::move(cp)) {
    rocksdb::ReadOptions ro;
    ro.snapshot = cp_->snap_;
    ro.fill_cache = false;
    it_.reset(cp_->db_->db_->NewIterator(ro, cp_->db_->handles_[kTasks]));
    it_->SeekToFirst();
}

Checkpoint::Reader::~Reader() = default;

bool Checkpoint::Reader::next(std::string& out, std::size_t max_bytes) {
    const std::size_t start = out.size();
    max_bytes = std::max<std::size_t>(max_bytes, 1);
    for (; it_->Valid() && out.size() - start < max_bytes; it_->Next())
        append_pair(out, it_->key().ToStringView(), it_->value().ToStringView());
    return it_->Valid();
}

std::string Checkpoint::Reader::store_meta() {
    rocksdb::ReadOptions ro;
    ro.snapshot = cp_->snap_;
    std::string value;
    auto s = cp_->db_->db_->Get(ro, cp_->db_->handles_[kMeta], slice(kStoreMetaKey), &value);
    if (s.IsNotFound()) return seal_store_meta(std::string_view());
    if (!s.ok()) meta_status_ = Status::error("reading a checkpoint's meta/store: " + s.ToString());
    return value;
}

Status Checkpoint::Reader::status() const {
    if (!it_->status().ok())
        return Status::error("reading a checkpoint: " + it_->status().ToString());
    return meta_status_;
}

std::optional<std::pair<std::string_view, std::string_view>> split_task_key(std::string_view k) {
    if (k.size() < 2) return std::nullopt;
    const std::size_t qlen = std::size_t((unsigned char)k[0]) << 8 | (unsigned char)k[1];
    if (k.size() < 2 + qlen) return std::nullopt;
    return std::pair(k.substr(2, qlen), k.substr(2 + qlen));
}

bool load_task_record(queue::Store::Loader& loader, std::string_view k, std::string_view sealed) {
    auto qk = split_task_key(k);
    auto body = unseal(sealed, k);
    return qk && body && loader.task(qk->first, qk->second, *body);
}

bool load_task_record(queue::Store& store, std::string_view k, std::string_view sealed) {
    queue::Store::Loader loader(store);
    return load_task_record(loader, k, sealed);
}

bool load_store_meta(queue::Store::Loader& loader, std::string_view sealed) {
    auto body = unseal(sealed, kStoreMetaKey);
    return body && (body->empty() || loader.meta(*body));
}

bool load_store_meta(queue::Store& store, std::string_view sealed) {
    queue::Store::Loader loader(store);
    return load_store_meta(loader, sealed);
}

std::unique_ptr<queue::Store> store_of(const SnapshotInstall& records) {
    // Not a node's own [limits]: every replica applies with the same bounds.
    auto store = std::make_unique<queue::Store>(queue::kApplyLimits);
    queue::Store::Loader loader(*store, records.tasks.size());
    if (!load_store_meta(loader, records.store_meta_sealed)) return nullptr;
    for (const auto& [k, v] : records.tasks)
        if (!load_task_record(loader, k, v)) return nullptr;
    loader.finish();
    return store;
}

std::string seal_store_meta(std::string_view body) {
    return seal(body, kStoreMetaKey);
}

}  // namespace dueq::storage
