#include "sim/sim_disk.h"

#include "queue/store_loader.h"

namespace dueq::sim {

std::unique_ptr<queue::Store> StoreImage::load() const {
    auto store = std::make_unique<queue::Store>(queue::kApplyLimits);
    {
        queue::Store::Loader loader(*store, tasks.size());
        if (!store_meta.empty() && !loader.meta(store_meta)) return nullptr;
        for (const auto& [qk, encoded] : tasks)
            if (!loader.task(qk.first, qk.second, encoded)) return nullptr;
    }
    store->drain_changes([](auto, auto, const auto&) {});
    return store;
}

std::uint64_t SimDisk::submit(Job job) {
    if (queue_.empty() && hooks_.schedule_flush) hooks_.schedule_flush();
    queue_.emplace_back(++next_ticket_, std::move(job));
    return next_ticket_;
}

bool SimDisk::syncs(const Job& job) {
    if (const auto* w = std::get_if<storage::LogWrite>(&job)) return w->sync;
    if (const auto* o = std::get_if<storage::OverlayWrite>(&job)) return o->sync;
    return std::holds_alternative<Install>(job);
}

void SimDisk::carry_out(DiskImage& img, const Job& job) {
    if (const auto* w = std::get_if<storage::LogWrite>(&job)) {
        if (!w->entries.empty()) img.log.append(w->entries);
        if (w->hard_state) img.log.set_hard_state(*w->hard_state);
    } else if (const auto* a = std::get_if<storage::AppliedState>(&job)) {
        img.applied_index = a->applied_index;
        img.applied_time = a->applied_time;
        for (const auto& c : a->changes) {
            if (c.encoded)
                img.store.tasks[{c.queue, c.key}] = *c.encoded;
            else
                img.store.tasks.erase({c.queue, c.key});
        }
        img.store.store_meta = a->store_meta;
        if (a->trim.index > img.log.snapshot().meta.index &&
            img.log.create_snapshot(a->trim.index, {}).is_ok())
            img.log.compact(a->trim.index);
    } else if (const auto* o = std::get_if<storage::OverlayWrite>(&job)) {
        for (const auto& c : o->changes) {
            if (c.record)
                img.overlay[{c.queue, c.key}] = *c.record;
            else
                img.overlay.erase({c.queue, c.key});
        }
    } else if (const auto* s = std::get_if<Install>(&job)) {
        img.log.apply_snapshot(raft::Snapshot{s->meta, {}});
        img.log.set_hard_state(s->hard_state);
        img.applied_index = s->meta.index;
        img.applied_time = std::int64_t(s->meta.time);
        img.store.tasks = s->image->tasks;
        img.store.store_meta = s->image->store_meta;
    }
}

std::pair<std::uint64_t, std::vector<raft::SnapshotMeta>> SimDisk::flush(std::size_t max_jobs) {
    std::uint64_t last = 0;
    std::vector<raft::SnapshotMeta> checkpoints;
    for (std::size_t n = 0; n < max_jobs && !queue_.empty(); ++n) {
        auto [ticket, job] = std::move(queue_.front());
        queue_.pop_front();
        last = ticket;
        if (const auto* c = std::get_if<CheckpointJob>(&job)) {
            auto image = std::make_shared<StoreImage>(visible_.store);
            image->meta = c->meta;
            checkpoint_ = std::move(image);
            checkpoints.push_back(c->meta);
            continue;
        }
        carry_out(visible_, job);
        const bool sync = syncs(job);
        unsynced_.push_back(std::move(job));
        if (!sync) continue;
        for (const Job& j : unsynced_) {
            if (const auto* w = std::get_if<storage::LogWrite>(&j); w && hooks_.on_synced)
                hooks_.on_synced(*w);
            if (const auto* i = std::get_if<Install>(&j); i && hooks_.on_synced)
                hooks_.on_synced(storage::LogWrite{{}, i->hard_state, true});
            carry_out(durable_, j);
        }
        unsynced_.clear();
    }
    if (!queue_.empty() && hooks_.schedule_flush) hooks_.schedule_flush();
    return {last, std::move(checkpoints)};
}

void SimDisk::crash(std::size_t keep) {
    for (std::size_t k = 0; k < keep && k < unsynced_.size(); ++k)
        carry_out(durable_, unsynced_[k]);
    unsynced_.clear();
    queue_.clear();
    visible_ = durable_;
    received_.reset();
    checkpoint_.reset();
}

std::optional<std::pair<storage::Loaded, std::unique_ptr<queue::Store>>> SimDisk::load() const {
    storage::Loaded loaded;
    const raft::MemoryStorage& log = durable_.log;
    loaded.hard_state = log.hard_state();
    loaded.base = log.snapshot().meta;
    if (log.last_index() >= log.first_index()) {
        auto entries = log.entries(log.first_index(), log.last_index() + 1, ~std::uint64_t(0));
        if (!entries) return std::nullopt;
        loaded.entries = std::move(entries.value());
    }
    loaded.applied_index = durable_.applied_index;
    loaded.applied_time = durable_.applied_time;
    for (const auto& [qk, record] : durable_.overlay)
        loaded.overlay.push_back({qk.first, qk.second, record});
    auto store = durable_.store.load();
    if (!store) return std::nullopt;
    return std::make_pair(std::move(loaded), std::move(store));
}

std::shared_ptr<const StoreImage> SimDisk::checkpoint_at(const raft::SnapshotMeta& meta) const {
    return checkpoint_ && checkpoint_->meta == meta ? checkpoint_ : nullptr;
}

void SimDisk::checkpoint_now(const raft::SnapshotMeta& meta) {
    auto image = std::make_shared<StoreImage>(visible_.store);
    image->meta = meta;
    checkpoint_ = std::move(image);
}

std::optional<std::uint64_t> SimDisk::install_snapshot(const raft::SnapshotMeta& meta,
                                                       const raft::HardState& hs) {
    if (!received_ || !(received_->meta == meta)) return std::nullopt;
    if (hooks_.on_install) hooks_.on_install(*received_);
    return submit(Install{meta, hs, received_});
}

}  // namespace dueq::sim
