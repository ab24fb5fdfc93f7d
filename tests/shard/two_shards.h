// Two shards of three real dueqd processes each on 127.0.0.1, one shard map file, and
// dueq-proxy processes in front of them: the deployment of config/two-shards, made with
// free ports in a fresh directory (tests/cluster/cluster.h runs each shard).
#pragma once

#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "cluster/cluster.h"
#include "shard/request_map.h"
#include "shard/shard_map.h"

namespace dueq::test {

class TwoShards {
  public:
    // `extra_args` go to every dueqd (e.g. {"--plant", "shard_serves_every_key"}).
    explicit TwoShards(const std::string& name, std::vector<std::string> extra_args = {});
    ~TwoShards();

    Cluster& shard(int s) { return s == 0 ? *a_ : *b_; }
    // Writes the map file: shard a owns `a_ranges`, b the rest of 1024 buckets.
    void write_map(std::uint64_t version, const std::string& a_ranges, const std::string& b_ranges);
    const std::filesystem::path& map_path() const { return map_path_; }
    shard::ShardMap map() const { return shard::load_shard_map_file(map_path_.string()); }
    // Starts all six nodes and waits until each shard has a leader; returns their indexes.
    std::pair<int, int> start_all();
    // Starts a dueq-proxy; returns its client address.
    std::string start_proxy(std::vector<std::string> extra_args = {});
    pid_t proxy_pid(std::size_t i) const { return proxies_.at(i)->pid(); }

  private:
    std::filesystem::path dir_, map_path_;
    std::unique_ptr<Cluster> a_, b_;
    std::vector<std::unique_ptr<DueqdProcess>> proxies_;
};

// A request built field by field and sent as is (so a test can set fields the typed client
// API does not have, such as `redirect`); waits for the answer.
client::Result<client::ResponseFrame> raw_call(
    client::Client& c, std::string_view op, std::uint32_t fields,
    const std::function<void(shard::Packer&)>& pack = [](shard::Packer&) {});

using shard::field;

}  // namespace dueq::test
