// A restart's load of a store: its meta record and its task records, as storage wrote
// them (Store::drain_changes, Store::encode_meta), put back into a store.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>

#include "queue/store.h"

namespace dueq::queue {

namespace detail {
class BulkLinks;
}  // namespace detail

// While a Loader lives, the tasks it loads join their ordered indexes only at its end,
// in bulk (finish(), or its destruction): nothing but the Loader may use the store
// meanwhile. Loading a key again replaces what the key held. A Loader of no size loads
// a record or two the same way (a record of a snapshot stream, a test).
class Store::Loader {
  public:
    // `tasks`: about how many task records come; `record_bytes`: about how much they
    // take where they are read from. Both only size what the load sets aside.
    explicit Loader(Store& store, std::size_t tasks = 0, std::size_t record_bytes = 0);
    ~Loader();  // finishes
    Loader(const Loader&) = delete;
    Loader& operator=(const Loader&) = delete;

    // Each returns false (and the store must be dropped: its caller stops) if a record
    // does not decode.
    bool meta(std::string_view encoded);
    bool task(std::string_view queue, std::string_view key, std::string_view encoded);
    struct Record {
        std::string_view queue, key, encoded;
    };
    // Several records in order, as task() one by one; it loads the memory each will need
    // a few records ahead of it, so pass as many at a time as are at hand.
    bool tasks(std::span<const Record> records);

    // May run on one other thread while the load goes on (a reader that is ahead of this
    // one): faults in memory the next tasks will use. Page faults are most of a large
    // load's cost; this way another core takes them.
    void prefault();

    // Links what was loaded into the indexes; the store is the caller's again.
    void finish();

  private:
    Store& store_;
    std::unique_ptr<detail::BulkLinks> links_;  // nullptr once finished
};

}  // namespace dueq::queue
