#include "shard/two_shards.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <iostream>

#include "node/support.h"

namespace dueq::test {

TwoShards::TwoShards(const std::string& name, std::vector<std::string> extra_args)
    : dir_(fresh_dir("shards-" + name)), map_path_(dir_ / "shards.toml") {
    auto options = [&](const std::string& shard) {
        ClusterOptions o;
        o.node_prefix = shard;
        o.extra_args = extra_args;
        const std::string section =
            "[shard]\nname = \"" + shard + "\"\nmap_file = \"" + map_path_.string() + "\"\n";
        o.extra_config.assign(3, section);
        return o;
    };
    a_ = std::make_unique<Cluster>(name + "-a", options("a"));
    b_ = std::make_unique<Cluster>(name + "-b", options("b"));
    write_map(1, "[[0, 511]]", "[[512, 1023]]");
}

TwoShards::~TwoShards() {
    for (auto& p : proxies_)
        p->kill9();
    if (!test_case_failed() && std::uncaught_exceptions() == 0) {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    } else {
        for (std::size_t i = 0; i < proxies_.size(); ++i) {
            std::ifstream log(dir_ / ("proxy" + std::to_string(i) + ".log"));
            std::string line, text;
            while (std::getline(log, line))
                text += line + "\n";
            std::cerr << "proxy " << i << " log:\n"
                      << text.substr(text.size() > 4000 ? text.size() - 4000 : 0);
        }
    }
}

void TwoShards::write_map(std::uint64_t version, const std::string& a_ranges,
                          const std::string& b_ranges) {
    std::ofstream out(map_path_);
    out << "version = " << version << "\nbuckets = 1024\n";
    for (int s = 0; s < 2; ++s) {
        out << "[[shards]]\nname = \"" << (s == 0 ? "a" : "b")
            << "\"\nbuckets = " << (s == 0 ? a_ranges : b_ranges) << "\nmembers = [\n";
        for (int i = 0; i < 3; ++i)
            out << "  { id = \"" << shard(s).node_id(i) << "\", client = \""
                << shard(s).client_address(i) << "\" },\n";
        out << "]\n";
    }
    REQUIRE(out.good());
}

std::pair<int, int> TwoShards::start_all() {
    a_->start_all();
    b_->start_all();
    const int la = a_->wait_for_leader(20s), lb = b_->wait_for_leader(20s);
    REQUIRE(la >= 0);
    REQUIRE(lb >= 0);
    return {la, lb};
}

std::string TwoShards::start_proxy(std::vector<std::string> extra_args) {
    std::vector<std::string> args{"--map",    map_path_.string(),
                                  "--listen", "127.0.0.1:0",
                                  "--name",   "proxy" + std::to_string(proxies_.size())};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    const auto log = dir_ / ("proxy" + std::to_string(proxies_.size()) + ".log");
    proxies_.push_back(std::make_unique<DueqdProcess>(PROXY_BINARY, args, log.string()));
    return "127.0.0.1:" + std::to_string(proxies_.back()->port());
}

client::Result<client::ResponseFrame> raw_call(client::Client& c, std::string_view op,
                                               std::uint32_t fields,
                                               const std::function<void(shard::Packer&)>& pack) {
    return c.call_raw(op, shard::request_map(op, fields, pack)->get());
}

}  // namespace dueq::test
