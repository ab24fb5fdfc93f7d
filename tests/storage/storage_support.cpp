#include "storage/storage_support.h"

#include <catch2/catch.hpp>

#include <random>

#include "queue/command_codec.h"

namespace dueq::raft {
std::ostream& operator<<(std::ostream& os, const Entry& e) {
    return os << "{term " << e.term << " index " << e.index << " time " << e.time << " type "
              << int(e.type) << " data " << e.data.size() << " bytes}";
}
std::ostream& operator<<(std::ostream& os, const HardState& hs) {
    return os << "{term " << hs.term << " vote " << hs.vote << " commit " << hs.commit << "}";
}
std::ostream& operator<<(std::ostream& os, const SnapshotMeta& m) {
    return os << "{index " << m.index << " term " << m.term << " time " << m.time << "}";
}
}  // namespace dueq::raft

namespace dueq::test {

TempDir::TempDir(const std::string& name) {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("dueq-storage-" + name + "-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

std::unique_ptr<storage::Database> open_db(const std::string& path, bool sync, rocksdb::Env* env) {
    storage::Status st;
    auto db = storage::Database::open(path, sync, st, env);
    INFO(st.message);
    REQUIRE(db);
    REQUIRE(st.ok);
    return db;
}

queue::Put put_for(std::uint64_t index) {
    queue::Put p;
    p.queue = "q";
    p.key = "k" + std::to_string(index);
    // A msgpack str holding "payload <index>" (payloads are stored verbatim).
    const std::string text = "payload " + std::to_string(index);
    p.payload = std::string(1, char(0xa0 | text.size())) + text;
    return p;
}

raft::Entry entry_for(std::uint64_t index, raft::Term term) {
    raft::Entry e;
    e.term = term ? term : term_of(index);
    e.index = index;
    e.time = raft::Millis(log_time_of(index));
    e.type = raft::EntryType::normal;
    e.data = queue::encode_command(put_for(index));
    return e;
}

std::vector<raft::Entry> entries(std::uint64_t from, std::uint64_t to, raft::Term term) {
    std::vector<raft::Entry> out;
    for (std::uint64_t i = from; i <= to; ++i) out.push_back(entry_for(i, term));
    return out;
}

storage::LogWrite log_write(std::uint64_t from, std::uint64_t to, raft::Term term) {
    storage::LogWrite w;
    w.entries = entries(from, to, term);
    w.sync = true;
    return w;
}

raft::SnapshotMeta meta_of(std::uint64_t index) {
    return raft::SnapshotMeta{index, term_of(index), raft::Millis(log_time_of(index))};
}

storage::AppliedState apply_records(queue::Store& store, std::uint64_t from, std::uint64_t to) {
    for (std::uint64_t i = from; i <= to; ++i) {
        auto r = store.apply(put_for(i), log_time_of(i));
        REQUIRE(r.ok());
    }
    storage::AppliedState s;
    s.applied_index = to;
    s.applied_time = log_time_of(to);
    store.drain_changes([&](std::string_view q, std::string_view k,
                            const std::optional<std::string>& encoded) {
        s.changes.push_back(storage::TaskChange{std::string(q), std::string(k), encoded});
    });
    s.store_meta = store.encode_meta();
    return s;
}

storage::Status load_db(const std::string& path, queue::Store& store, storage::Loaded& out) {
    auto db = open_db(path, true);
    return db->load(store, out);
}

storage::Loaded load_ok(const std::string& path, queue::Store& store) {
    storage::Loaded out;
    auto st = load_db(path, store, out);
    INFO("load: " << st.message);
    REQUIRE(st.ok);
    return out;
}

std::string load_error(const std::string& path) {
    queue::Store store;
    storage::Loaded out;
    auto st = load_db(path, store, out);
    INFO("load: " << st.message);
    CHECK_FALSE(st.ok);
    return st.message;
}

StoreContents contents(const queue::Store& store) {
    StoreContents c;
    store.for_each_task([&](std::string_view q, std::string_view k, std::string_view encoded) {
        c.tasks.emplace(std::make_pair(std::string(q), std::string(k)), std::string(encoded));
    });
    c.meta = store.encode_meta();
    return c;
}

void copy_dir(const std::filesystem::path& from, const std::filesystem::path& to) {
    std::filesystem::copy(from, to,
                          std::filesystem::copy_options::recursive |
                              std::filesystem::copy_options::overwrite_existing);
}

bool same_task(const queue::TaskView& a, const queue::TaskView& b) {
    return a.queue == b.queue && a.key == b.key && a.payload == b.payload &&
           a.status == b.status && a.time == b.time && a.attempts == b.attempts &&
           a.version == b.version && a.hlc == b.hlc && a.lease == b.lease &&
           a.lease_until == b.lease_until && a.owner == b.owner &&
           a.release_on_disconnect == b.release_on_disconnect && a.not_before == b.not_before &&
           a.done_until == b.done_until;
}

std::string log_key(std::uint64_t index) {
    std::string k;
    for (int i = 7; i >= 0; --i) k.push_back(char(index >> (8 * i)));
    return k;
}

RawDb::RawDb(const std::string& path) {
    rocksdb::Options opts;
    auto s = rocksdb::DB::ListColumnFamilies(opts, path, &names_);
    INFO(s.ToString());
    REQUIRE(s.ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (const auto& n : names_) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
    s = rocksdb::DB::Open(rocksdb::DBOptions(opts), path, cfs, &handles_, &db_);
    INFO(s.ToString());
    REQUIRE(s.ok());
}

RawDb::~RawDb() {
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
    db_->Close();
    delete db_;
}

rocksdb::ColumnFamilyHandle* RawDb::cf(const std::string& name) const {
    for (std::size_t i = 0; i < names_.size(); ++i)
        if (names_[i] == name) return handles_[i];
    FAIL("no column family " << name);
    return nullptr;
}

std::string RawDb::get(const std::string& cfname, const std::string& key) const {
    std::string v;
    auto s = db_->Get({}, cf(cfname), key, &v);
    INFO(cfname << ": " << s.ToString());
    REQUIRE(s.ok());
    return v;
}

void RawDb::put(const std::string& cfname, const std::string& key, const std::string& value) {
    REQUIRE(db_->Put({}, cf(cfname), key, value).ok());
}

void RawDb::del(const std::string& cfname, const std::string& key) {
    REQUIRE(db_->Delete({}, cf(cfname), key).ok());
}

std::vector<std::string> RawDb::keys(const std::string& cfname) const {
    std::vector<std::string> out;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator({}, cf(cfname)));
    for (it->SeekToFirst(); it->Valid(); it->Next()) out.push_back(it->key().ToString());
    REQUIRE(it->status().ok());
    return out;
}

void RawDb::flip_byte(const std::string& cfname, const std::string& key, int at) {
    std::string v = get(cfname, key);
    REQUIRE(!v.empty());
    const std::size_t i = at >= 0 ? std::size_t(at) : v.size() - std::size_t(-at);
    REQUIRE(i < v.size());
    v[i] = char(~static_cast<unsigned char>(v[i]));
    put(cfname, key, v);
}

}  // namespace dueq::test
