#include "net/readable_set.h"

#include <spdlog/spdlog.h>
#include <sys/epoll.h>

#include <array>
#include <cerrno>
#include <system_error>

namespace dueq::net {

namespace {
int make_epoll() {
    const int fd = epoll_create1(EPOLL_CLOEXEC);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
    return fd;
}
// Reported per drain; more wait for the next turn, behind the loop's other handlers.
constexpr int kEventsPerTurn = 64;
}  // namespace

ReadableSet::ReadableSet(boost::asio::io_context& io, OnReadable on_readable)
    : epoll_(io, make_epoll()), on_readable_(std::move(on_readable)) {
    wait();
}

ReadableSet::~ReadableSet() {
    stop();
}

bool ReadableSet::add(int fd, void* key) {
    if (!*alive_) {
        errno = EBADF;
        return false;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
    ev.data.ptr = key;
    return epoll_ctl(epoll_.native_handle(), EPOLL_CTL_ADD, fd, &ev) == 0;
}

void ReadableSet::remove(int fd) {
    if (!*alive_) return;
    epoll_event ev{};  // ignored by the kernel, but must not be null before Linux 2.6.9
    epoll_ctl(epoll_.native_handle(), EPOLL_CTL_DEL, fd, &ev);
}

void ReadableSet::stop() {
    if (!*alive_) return;
    *alive_ = false;
    boost::system::error_code ec;
    epoll_.close(ec);
}

// Asio re-arms this descriptor for the wait, and epoll then reports a set that already
// holds readable sockets: none left from the last drain is missed.
void ReadableSet::wait() {
    epoll_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                      [this, alive = alive_](boost::system::error_code ec) {
                          if (!*alive || ec == boost::asio::error::operation_aborted) return;
                          // Cannot happen with a valid descriptor; draining re-arms the wait.
                          if (ec) spdlog::warn("waiting for readable sockets: {}", ec.message());
                          drain();
                      });
}

void ReadableSet::drain() {
    std::array<epoll_event, kEventsPerTurn> events;
    const int n = epoll_wait(epoll_.native_handle(), events.data(), int(events.size()), 0);
    // A callback may stop the set (and the owner destroy it): `alive` outlives it.
    const auto alive = alive_;
    for (int i = 0; i < n && *alive; ++i)
        on_readable_(events[std::size_t(i)].data.ptr);
    if (*alive) wait();
}

}  // namespace dueq::net
