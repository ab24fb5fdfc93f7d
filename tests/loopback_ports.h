#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

// `count` distinct loopback ports, each free a moment ago, for test servers that are
// told their port before they bind it. They come from below the kernel's ephemeral
// range (32768 and up): a port the kernel picked could be handed again to an outgoing
// connection, or to a listener on port 0, before the server binds it (seen in CI, a
// mesh's own failed dial holding the next mesh's port). A process never gets the same
// port twice, so two clusters set up one after the other do not collide either.
inline std::vector<std::uint16_t> free_loopback_ports(int count) {
    static std::mutex mu;
    static std::set<std::uint16_t> handed_out;
    static std::mt19937 rng{std::random_device{}()};
    constexpr int kLow = 20000, kHigh = 32000;
    std::lock_guard lock(mu);
    if (handed_out.size() > (kHigh - kLow) / 2) handed_out.clear();
    std::uniform_int_distribution<int> pick(kLow, kHigh - 1);
    std::vector<std::uint16_t> ports;
    for (int attempt = 0; attempt < 10000 && int(ports.size()) < count; ++attempt) {
        const auto port = std::uint16_t(pick(rng));
        if (handed_out.count(port)) continue;
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) continue;
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(port);
        // Without SO_REUSEADDR: a port with connections in TIME_WAIT counts as taken.
        const bool free = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        close(fd);
        if (!free) continue;
        handed_out.insert(port);
        ports.push_back(port);
    }
    if (int(ports.size()) != count)
        throw std::runtime_error("no free loopback ports left in 20000-31999");
    return ports;
}

inline std::uint16_t free_loopback_port() {
    return free_loopback_ports(1).front();
}
