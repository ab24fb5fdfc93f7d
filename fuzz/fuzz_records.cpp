// Why: the decoders of what a node stored, run when it restarts (Database::load) and
// when a follower installs a snapshot whose records come from the leader: unseal (the
// CRC-32C of key and body), the log record decoder (storage::decode_log_record), and the
// task and store-wide records (storage::load_task_record / load_store_meta, i.e.
// queue::Store::Loader's task / meta, task_codec.cpp). A damaged disk or stream must
// be refused, never crash a node or leave a store it cannot write back.
//
// The input is a sequence of records (fuzz_support.h: RecordKind). All kinds but
// kRawTask are sealed here, so the fuzzer reaches the body decoders instead of spending
// its time on checksums; kRawTask goes through the checksum as given. Every record
// loads into the same store, as a restart does; that store must then persist and load
// again identically.
#include "fuzz/fuzz_support.h"
#include "storage/database.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace dueq;
    fuzz::Reader in(fuzz::as_view(data, size));
    queue::Store store;
    while (!in.empty()) {
        const auto kind = in.uint(1);
        const auto key = in.piece(fuzz::kRecordKeyLenBytes);
        const auto body = key ? in.piece(fuzz::kRecordBodyLenBytes) : std::nullopt;
        if (!body) break;
        switch (*kind % 4) {
            case fuzz::kTaskRecord:
                storage::load_task_record(store, *key, storage::seal(*body, *key));
                break;
            case fuzz::kStoreMeta:
                storage::load_store_meta(store, storage::seal_store_meta(*body));
                break;
            case fuzz::kLogRecord: {
                auto e = storage::decode_log_record(*key, storage::seal(*body, *key));
                if (!e) break;
                FUZZ_CHECK(key->size() == 8 && body->size() >= 17);
                FUZZ_CHECK(e->type == raft::EntryType::normal || e->type == raft::EntryType::noop ||
                           e->type == raft::EntryType::config);
                FUZZ_CHECK(e->data == body->substr(17));
                break;
            }
            case fuzz::kRawTask:
                if (auto b = storage::unseal(*body, *key)) {
                    FUZZ_CHECK(storage::seal(*b, *key) == *body);
                    storage::load_task_record(store, *key, *body);
                }
                break;
        }
    }
    fuzz::check_store_round_trip(store);
    return 0;
}
