// Which of many sockets have bytes to read, from one epoll set of our own.
//
// Asio re-arms a socket in its epoll set (EPOLL_CTL_MOD) for every wait: a client that
// sends its next request only after the answer (64 connections x 1) costs one system call
// per request for the wait alone, 6% of the event loop's time at get 64 x 1. Here each
// socket is added once, edge-triggered, and Asio waits on this set's descriptor instead:
// one re-arm per turn of the loop, however many sockets became readable.
//
// Edge-triggered: a socket is reported when bytes (or its end, or an error) arrive after
// it was added. Whoever stops reading before the socket is empty (a full buffer, a pause)
// must read again on its own; a read that returns less than it asked for has emptied the
// socket, and what arrives after it is reported.
//
// Thread-safety: none; the owner's event loop calls everything and runs every callback.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <functional>
#include <memory>

namespace dueq::net {

class ReadableSet {
  public:
    // on_readable(key) runs for each reported socket, with the key it was added under.
    using OnReadable = std::function<void(void* key)>;
    // Throws std::system_error if the kernel refuses an epoll set.
    ReadableSet(boost::asio::io_context& io, OnReadable on_readable);
    ~ReadableSet();
    ReadableSet(const ReadableSet&) = delete;
    ReadableSet& operator=(const ReadableSet&) = delete;

    // Watches `fd` until remove() or until it is closed. False (errno set) if refused.
    bool add(int fd, void* key);
    void remove(int fd);
    // Stops watching every socket; no callback runs after this.
    void stop();

  private:
    void wait();
    void drain();

    boost::asio::posix::stream_descriptor epoll_;
    OnReadable on_readable_;
    // False once stopped: a wait that completed before the stop may still be queued.
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace dueq::net
