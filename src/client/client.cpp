// The I/O core of Client. Everything below Impl's public entry points runs on the one
// I/O thread, so connection and request state needs no locks; only the small snapshot
// read by current_address()/current_session() is shared (info_mu_).
#include "client/client.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <utility>  // before asio: Boost 1.74 uses std::exchange without it

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>

#include "client/codec.h"
#include "client/forward.h"
#include "net/asio_tls.h"
#include "net/tls.h"

namespace dueq::client {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kRedirectBackoffMin{50};
constexpr milliseconds kBackoffMax{1000};
constexpr std::size_t kReadChunk = 64 * 1024;

struct Conn;

// One submitted call, from submission until its callback has run.
struct Pending {
    explicit Pending(asio::io_context& io) : timer(io), retry_timer(io) {}
    uint64_t id = 0;
    std::string_view op;
    std::string frame;
    bool resend_ok = false;   // may go out again after a broken connection
    bool pinned = false;      // belongs to one connection (its automatic hello)
    bool keep_body = false;   // its answer keeps the frame's bytes (async_forward)
    int redirects = 0;        // to a leader a refusal named (at most max_redirects)
    int retries = 0;          // after a refusal that named none (until the deadline)
    std::optional<Error> refused;  // the last such refusal: the answer at the deadline
    Clock::time_point deadline;
    asio::steady_timer timer;
    asio::steady_timer retry_timer;
    std::function<void(Result<ResponseFrame>)> complete;
    std::shared_ptr<Conn> conn;  // where it was queued or sent; null while waiting
    bool written = false;        // its bytes were handed to conn's socket
    Clock::time_point written_at;
    std::string closed_under;  // why a connection it was written to closed (for messages)
    bool done = false;
};
using PendingPtr = std::shared_ptr<Pending>;

struct Conn {
    Conn(asio::io_context& io, std::string addr)
        : socket(io), resolver(io), connect_timer(io), address(std::move(addr)) {}
    enum class State { connecting, open, closed };
    tcp::socket socket;
    // TLS over `socket` (ClientOptions::tls), made once the TCP connect succeeds.
    std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls;
    tcp::resolver resolver;
    asio::steady_timer connect_timer;
    std::string address;
    State state = State::connecting;
    bool retired = false;  // takes no new requests; closes when `inflight` reaches 0
    std::size_t inflight = 0;
    std::deque<PendingPtr> outbox;
    std::vector<PendingPtr> writing;
    bool write_busy = false;
    bool flush_posted = false;
    // Bytes read and not yet taken as frames: reads take whatever the socket has, so a
    // burst of answers costs one read, not two per frame.
    std::vector<char> in = std::vector<char>(kReadChunk);
    std::size_t in_len = 0;
    std::string server_error;  // the last id-0 error frame, for messages
    // The node refused the automatic hello (a wrong or missing token): it answers nothing
    // else on this connection and closes it, and any node of the cluster would do the same.
    std::optional<Error> refused;
    Clock::time_point last_rx;  // when the last whole frame arrived
};
using ConnPtr = std::shared_ptr<Conn>;

// Pending::op must outlive the call: the op's name from a fixed table.
std::string_view known_op_name(std::string_view op) {
    if (auto known = wire::op_from_name(op)) return wire::op_name(*known);
    return "request";
}

}  // namespace

Result<std::pair<std::string, std::string>> parse_address(const std::string& address) {
    std::string host, port;
    if (!address.empty() && address.front() == '[') {
        const auto close = address.find(']');
        if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':') {
            return Error(Code::bad_request, "bad address '" + address + "' (want [v6]:port)");
        }
        host = address.substr(1, close - 1);
        port = address.substr(close + 2);
    } else {
        const auto colon = address.rfind(':');
        if (colon == std::string::npos) {
            return Error(Code::bad_request, "bad address '" + address + "' (want host:port)");
        }
        host = address.substr(0, colon);
        port = address.substr(colon + 1);
    }
    const bool digits = !port.empty() && port.size() <= 5 &&
                        std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (host.empty() || !digits || std::stoul(port) == 0 || std::stoul(port) > 65535) {
        return Error(Code::bad_request, "bad address '" + address + "' (want host:port)");
    }
    return std::make_pair(host, port);
}

class Client::Impl : public std::enable_shared_from_this<Client::Impl> {
  public:
    // `external`: run on that io_context (its thread) instead of a thread of our own.
    Impl(ClientOptions options, asio::io_context* external)
        : opts_(std::move(options)),
          own_io_(external ? nullptr : std::make_unique<asio::io_context>()),
          io_(external ? *external : *own_io_) {
        for (const auto& seed : opts_.seeds) {
            auto parsed = parse_address(seed);
            if (parsed.ok()) {
                seeds_.push_back(seed);
            } else if (config_error_.empty()) {
                config_error_ = parsed.error().message;
            }
        }
        if (seeds_.empty() && config_error_.empty()) config_error_ = "no seed address given";
        if (opts_.tls.enabled && config_error_.empty()) {
            std::string error;
            auto ctx = net::TlsContext::make(
                net::TlsRole::client, {opts_.tls.ca_file, opts_.tls.cert_file, opts_.tls.key_file},
                net::PeerCert::none, error);
            if (!ctx) {
                config_error_ = "TLS: " + error;
            } else {
                ssl_ctx_ = net::asio_context(*ctx);
            }
        }
        if (own_io_) {
            guard_.emplace(io_.get_executor());
            thread_ = std::thread([this] { io_.run(); });
        }
    }

    // Completes every call and closes the connections. Handlers still queued hold a
    // reference (shared_from_this), so the Impl outlives them; with its own thread, that
    // thread has run them all by the time it is joined.
    void close() {
        if (!own_io_) return shutdown();
        asio::post(io_, [self = shared_from_this()] { self->shutdown(); });
        guard_.reset();
        thread_.join();
    }

    bool on_io_thread() const { return io_.get_executor().running_in_this_thread(); }

    template <class Req>
    void submit(const Req& req, Callback<ResponseOfT<Req>> done, const CallOptions& call_opts,
                milliseconds extra_wait = milliseconds(0)) {
        using Resp = ResponseOfT<Req>;
        auto p = new_pending(Req::op, call_opts, extra_wait);
        p->complete = [done = std::move(done)](Result<ResponseFrame> r) {
            if (!r.ok()) return done(r.error());
            if (!r->ok) return done(r->error);
            Resp out;
            Status st = decode_result(*r->map, &out);
            if (!st.ok()) return done(st.error());
            done(std::move(out));
        };
        post_start(p, encode_request(req, p->id));
    }

    void submit_raw(std::string_view op, const msgpack::object& request,
                    std::function<void(Result<ResponseFrame>)> done, const CallOptions& call_opts,
                    milliseconds extra_wait,
                    const std::vector<std::pair<std::string, bool>>& extra) {
        auto p = new_pending(known_op_name(op), call_opts, extra_wait);
        p->complete = std::move(done);
        post_start(p, repack_with_id(request, p->id, extra));
    }

    void submit_forward(std::string_view op, std::string_view body,
                        std::function<void(Result<ResponseFrame>)> done,
                        const CallOptions& call_opts, milliseconds extra_wait,
                        const std::vector<std::pair<std::string, bool>>& extra, BodyCheck check) {
        auto p = new_pending(known_op_name(op), call_opts, extra_wait);
        p->complete = std::move(done);
        p->keep_body = true;
        post_start(p, frame_with_id(body, p->id, extra, check));
    }

    void set_seeds(std::vector<std::string> seeds) {
        asio::post(io_, [this, self = shared_from_this(), seeds = std::move(seeds)]() mutable {
            std::erase_if(seeds, [](const std::string& s) { return !parse_address(s).ok(); });
            if (seeds.empty()) return;
            seeds_ = std::move(seeds);
            next_seed_ = 0;
            failures_in_round_ = 0;
        });
    }

    std::string current_address() const {
        std::lock_guard<std::mutex> lock(info_mu_);
        return info_address_;
    }
    std::optional<uint64_t> current_session() const {
        std::lock_guard<std::mutex> lock(info_mu_);
        return info_session_;
    }

private:
    // ---- request lifecycle ----

  // `op` must outlive the call (a name from a fixed table).
  PendingPtr new_pending(std::string_view op, const CallOptions& call_opts,
                         milliseconds extra_wait) {
      auto p = std::make_shared<Pending>(io_);
      p->id = next_id_.fetch_add(1);
      p->op = op;
      p->resend_ok = always_safe_to_resend(op) || call_opts.resend_on_reconnect;
      p->deadline = Clock::now() + call_opts.timeout.value_or(opts_.call_timeout) + extra_wait;
      return p;
  }

  // Starts p with `frame` on the I/O thread; a bad configuration or a frame that could
  // not be made fails it there instead, as the header promises.
  void post_start(const PendingPtr& p, Result<std::string> frame) {
      std::optional<Error> early;
      if (!config_error_.empty())
          early = Error(Code::bad_request, config_error_);
      else if (!frame.ok())
          early = frame.error();
      else
          p->frame = std::move(frame).value();
      asio::post(io_, [this, self = shared_from_this(), p, early = std::move(early)]() mutable {
          if (early) {
              p->done = true;
              p->complete(std::move(*early));
              return;
          }
          start(p);
      });
  }

    void start(const PendingPtr& p) {
        if (shutting_down_) return finish(p, Error(Code::unavailable, "client is closing"));
        pending_.emplace(p->id, p);
        p->timer.expires_at(p->deadline);
        p->timer.async_wait(
            [this, self = shared_from_this(), p](const boost::system::error_code& ec) {
                if (!ec) on_deadline(p);
            });
        dispatch(p);
    }

    void on_deadline(const PendingPtr& p) {
        if (p->done) return;
        if (p->written) {
            const ConnPtr conn = p->conn;
            const auto sent = p->written_at;
            std::string why =
                std::string(p->op) + " got no answer in time; it may or may not have been applied";
            // A resent call: what closed its earlier connection is the likelier story.
            if (!p->closed_under.empty()) why += " (before that: " + p->closed_under + ")";
            Error e(Code::timeout, why);
            e.maybe_applied = true;
            finish(p, std::move(e));
            // Not one frame came back on that connection for the call's whole timeout: a
            // frozen server or a silent link, and every later call would wait on it too
            // (a leader paused by SIGSTOP kept its clients for as long as it slept). Drop
            // it; the next call dials the next seed, which knows the current leader.
            if (conn && conn->state == Conn::State::open && conn->last_rx < sent)
                close_conn(conn, "no answer from the server since " + std::string(p->op) +
                                     " was sent");
        } else if (p->refused) {
            // Not applied: the nodes it reached refused it, and no leader came up in time.
            finish(p, Error(*p->refused));
        } else {
            std::string why = "no dueq server reachable in time";
            if (!last_connect_error_.empty()) why += " (" + last_connect_error_ + ")";
            Error e(Code::unavailable, why);
            e.unreachable = true;
            finish(p, std::move(e));
        }
    }

    void finish(const PendingPtr& p, Result<ResponseFrame> result) {
        if (p->done) return;
        p->done = true;
        p->timer.cancel();
        p->retry_timer.cancel();
        pending_.erase(p->id);
        detach(p);
        p->complete(std::move(result));
    }

    // Takes p off its connection's books; a retired connection closes once it is idle.
    void detach(const PendingPtr& p) {
        ConnPtr conn = std::move(p->conn);
        p->conn.reset();
        p->written = false;
        if (!conn) return;
        if (conn->inflight > 0) --conn->inflight;
        if (conn->retired && conn->inflight == 0) close_conn(conn, "retired connection drained");
    }

    // Queues p on the active connection, opening one if needed.
    void dispatch(const PendingPtr& p) {
        if (p->done) return;
        ensure_active();
        if (!active_) {
            waiting_.push_back(p);
            return;
        }
        p->conn = active_;
        ++active_->inflight;
        active_->outbox.push_back(p);
        flush_soon(active_);
    }

    // Writes what is queued once the handlers ready now have run: the calls submitted in
    // one turn (a proxy's answer to a burst of client frames) go out in one write.
    void flush_soon(const ConnPtr& conn) {
        if (conn->flush_posted) return;
        conn->flush_posted = true;
        asio::post(io_, [this, self = shared_from_this(), conn] {
            conn->flush_posted = false;
            flush(conn);
        });
    }

    // An ok answer to async_forward goes on as its bytes: nothing reads its map.
    bool wants_bytes_only(uint64_t id) const {
        auto it = pending_.find(id);
        return it != pending_.end() && it->second->keep_body;
    }

    // `body`: the frame's bytes, valid for this call only.
    void on_response(const ConnPtr& conn, ResponseFrame frame, std::string_view body) {
        if (frame.id == 0) {
            conn->server_error = frame.error.to_string();
            return;
        }
        auto it = pending_.find(frame.id);
        if (it == pending_.end()) return;  // answered after its deadline: dropped
        PendingPtr p = it->second;
        if (p->conn != conn) return;
        const bool elsewhere =
            frame.error.code == Code::not_leader || frame.error.code == Code::no_quorum;
        const bool named = !frame.error.leader.empty() && frame.error.leader != conn->address;
        // A named leader is followed max_redirects times (two nodes could name each other);
        // without one, the call goes on to the next seed, backing off, until its deadline.
        // A cut-off node's no_quorum with no other seed to try is the answer (dueqctl --addr).
        const bool stuck = frame.error.code == Code::no_quorum && !named && seeds_.size() < 2;
        if (!frame.ok && elsewhere && !stuck && !p->pinned && opts_.max_redirects > 0 &&
            (!named || p->redirects < opts_.max_redirects)) {
            p->refused = frame.error;
            return redirect(p, conn, named ? frame.error.leader : std::string());
        }
        // The key's bucket is moving between shards (not applied): the same node again,
        // backing off, until the deadline; by then one of the two shards serves it.
        if (!frame.ok && frame.error.code == Code::moving && opts_.max_redirects > 0) {
            p->refused = frame.error;
            return retry_later(p, nullptr);
        }
        if (p->keep_body) frame.body = std::string(body);
        finish(p, std::move(frame));
    }

    // not_leader and no_quorum mean "not applied", so any op may go again, to the named
    // leader at once, or to the next seed after a backoff when the refusing node knows no
    // leader (an election runs, or it is cut off from the others).
    void redirect(const PendingPtr& p, const ConnPtr& refused_by, const std::string& leader) {
        detach(p);
        if (!leader.empty()) {
            ++p->redirects;
            if (!active_ || active_->address != leader) {
                retire_active();
                leader_hint_ = leader;
            }
            return dispatch(p);
        }
        retry_later(p, refused_by);
    }

    // Sends p again after a backoff; to another node when `leave` is still the active one.
    void retry_later(const PendingPtr& p, const ConnPtr& leave) {
        detach(p);
        ++p->retries;
        auto delay = kRedirectBackoffMin * (1 << std::min(p->retries - 1, 5));
        delay = std::min<milliseconds>(delay, kBackoffMax);
        p->retry_timer.expires_after(delay);
        p->retry_timer.async_wait(
            [this, self = shared_from_this(), p, leave](const boost::system::error_code& ec) {
                if (ec || p->done) return;
                if (leave && active_ == leave) retire_active();
                dispatch(p);
            });
    }

    // ---- connections ----

    void ensure_active() {
        if (active_ || shutting_down_ || backoff_armed_) return;
        std::string address;
        if (!leader_hint_.empty()) {
            address = std::move(leader_hint_);
            leader_hint_.clear();
        } else {
            address = seeds_[next_seed_++ % seeds_.size()];
        }
        auto conn = std::make_shared<Conn>(io_, address);
        active_ = conn;
        conns_.insert(conn);
        set_info(conn->address, std::nullopt);
        if (opts_.say_hello) queue_hello(conn);
        std::deque<PendingPtr> waiting;
        waiting.swap(waiting_);
        for (auto& p : waiting) dispatch(p);
        open(conn);
    }

    void retire_active() {
        if (!active_) return;
        ConnPtr old = std::move(active_);
        active_.reset();
        old->retired = true;
        if (old->inflight == 0) close_conn(old, "retired");
    }

    void queue_hello(const ConnPtr& conn) {
        HelloRequest hello;
        hello.token = opts_.token;
        hello.session = session_;
        auto p = std::make_shared<Pending>(io_);
        p->id = next_id_.fetch_add(1);
        p->op = HelloRequest::op;
        p->pinned = true;
        p->frame = encode_request(hello, p->id).value();
        p->deadline = Clock::now() + opts_.connect_timeout + opts_.call_timeout;
        std::weak_ptr<Conn> weak = conn;
        p->complete = [this, weak, offered = session_](Result<ResponseFrame> r) {
            ConnPtr c = weak.lock();
            if (c && r.ok() && !r->ok && r->error.code == Code::unauthorized) c->refused = r->error;
            HelloResponse hello_out;
            if (!c || !r.ok() || !r->ok || !decode_result(*r->map, &hello_out).ok()) return;
            session_ = hello_out.session;
            if (c != active_) return;
            set_info(c->address, hello_out.session);
            // The leader keeps sessions (docs/protocol.md §5): a session resumed on a
            // follower would run out there while its tasks wait on the leader.
            if (offered == hello_out.session && !hello_out.leader.empty() &&
                hello_out.leader != c->address) {
                retire_active();
                leader_hint_ = hello_out.leader;
            }
        };
        pending_.emplace(p->id, p);
        p->timer.expires_at(p->deadline);
        p->timer.async_wait(
            [this, self = shared_from_this(), p](const boost::system::error_code& ec) {
                if (!ec) on_deadline(p);
            });
        p->conn = conn;
        ++conn->inflight;
        conn->outbox.push_front(p);
    }

    void open(const ConnPtr& conn) {
        auto hp = parse_address(conn->address);
        if (!hp.ok()) return connect_failed(conn, hp.error().message);
        conn->connect_timer.expires_after(opts_.connect_timeout);
        conn->connect_timer.async_wait(
            [this, self = shared_from_this(), conn](const boost::system::error_code& ec) {
                if (!ec && conn->state == Conn::State::connecting) {
                    connect_failed(conn, "connect to " + conn->address + " timed out");
                }
            });
        conn->resolver.async_resolve(
            hp->first, hp->second,
            [this, self = shared_from_this(), conn](const boost::system::error_code& ec,
                                                    tcp::resolver::results_type eps) {
                if (conn->state != Conn::State::connecting) return;
                if (ec) return connect_failed(conn, conn->address + ": " + ec.message());
                asio::async_connect(
                    conn->socket, eps,
                    [this, self = shared_from_this(), conn](const boost::system::error_code& ec2,
                                                            const tcp::endpoint&) {
                        if (conn->state != Conn::State::connecting) return;
                        if (ec2) {
                            return connect_failed(conn, conn->address + ": " + ec2.message());
                        }
                        connected(conn);
                    });
            });
    }

    void connected(const ConnPtr& conn) {
        boost::system::error_code ignored;
        conn->socket.set_option(tcp::no_delay(true), ignored);
        if (ssl_ctx_ && !conn->tls) {
            // The connect timer still runs: a server that never answers the handshake is a
            // connect that timed out.
            conn->tls = std::make_unique<asio::ssl::stream<tcp::socket&>>(conn->socket, *ssl_ctx_);
            conn->tls->async_handshake(
                asio::ssl::stream_base::client,
                [this, self = shared_from_this(), conn](const boost::system::error_code& ec) {
                    if (conn->state != Conn::State::connecting) return;
                    if (ec)
                        return connect_failed(conn, "TLS handshake with " + conn->address +
                                                        " failed: " + ec.message());
                    connected(conn);
                });
            return;
        }
        conn->state = Conn::State::open;
        conn->connect_timer.cancel();
        failures_in_round_ = 0;
        backoff_ = milliseconds(0);
        read_more(conn);
        flush(conn);
    }

    void connect_failed(const ConnPtr& conn, std::string why) {
        last_connect_error_ = why;
        ++failures_in_round_;
        close_conn(conn, std::move(why));
    }

    // Batches everything queued into one write; frames are owned by their Pending.
    void flush(const ConnPtr& conn) {
        if (conn->write_busy || conn->state != Conn::State::open) return;
        std::vector<asio::const_buffer> buffers;
        while (!conn->outbox.empty()) {
            PendingPtr p = std::move(conn->outbox.front());
            conn->outbox.pop_front();
            if (p->done || p->conn != conn) continue;
            buffers.emplace_back(asio::buffer(p->frame));
            conn->writing.push_back(std::move(p));
        }
        if (buffers.empty()) return;
        const auto now = Clock::now();
        for (auto& p : conn->writing) {
            p->written = true;
            p->written_at = now;
        }
        conn->write_busy = true;
        write_to(conn, buffers,
                 [this, self = shared_from_this(), conn](const boost::system::error_code& ec,
                                                         std::size_t) {
                     conn->write_busy = false;
                     conn->writing.clear();
                     if (conn->state != Conn::State::open) return;
                     if (ec) return close_conn(conn, "write: " + ec.message());
                     flush(conn);
                 });
    }

    template <class Buffers, class Handler>
    void write_to(const ConnPtr& conn, const Buffers& buffers, Handler handler) {
        if (conn->tls)
            asio::async_write(*conn->tls, buffers, std::move(handler));
        else
            asio::async_write(conn->socket, buffers, std::move(handler));
    }
    void read_more(const ConnPtr& conn) {
        auto space = asio::buffer(conn->in.data() + conn->in_len, conn->in.size() - conn->in_len);
        auto on_read = [this, self = shared_from_this(), conn](const boost::system::error_code& ec,
                                                               std::size_t n) {
            if (conn->state != Conn::State::open) return;
            if (ec) return close_conn(conn, "read: " + ec.message());
            conn->in_len += n;
            take_frames(conn);
            if (conn->state == Conn::State::open) read_more(conn);
        };
        if (conn->tls)
            conn->tls->async_read_some(space, std::move(on_read));
        else
            conn->socket.async_read_some(space, std::move(on_read));
    }

    // Answers every whole frame in conn->in, keeps the rest at the front, and makes room
    // for the next read (a frame larger than the buffer grows it, up to max_frame_bytes).
    void take_frames(const ConnPtr& conn) {
        std::size_t at = 0;
        DecodeLimits limits;
        limits.max_frame_bytes = opts_.max_frame_bytes;
        std::size_t need = 0;  // the bytes the partial frame at `at` needs in all
        while (conn->state == Conn::State::open && conn->in_len - at >= kFrameHeaderBytes) {
            const auto* header = reinterpret_cast<const unsigned char*>(conn->in.data() + at);
            const uint32_t len = read_frame_length(header);
            if (len == 0 || len > opts_.max_frame_bytes)
                return close_conn(conn, "server sent a frame of " + std::to_string(len) + " bytes");
            if (conn->in_len - at < kFrameHeaderBytes + len) {
                need = kFrameHeaderBytes + len;
                break;
            }
            const std::string_view body(conn->in.data() + at + kFrameHeaderBytes, len);
            at += kFrameHeaderBytes + len;
            auto head = peek_response(body, limits);
            // An undecodable frame cannot be matched to its request, so the stream is no
            // longer trusted.
            if (!head.ok()) return close_conn(conn, head.error().message);
            conn->last_rx = Clock::now();
            if (head->ok && wants_bytes_only(head->id)) {
                on_response(conn, ResponseFrame{head->id, true, {}, nullptr, nullptr, {}}, body);
                continue;
            }
            auto frame = decode_peeked_response(body, *head, limits);
            if (!frame.ok()) return close_conn(conn, frame.error().message);
            on_response(conn, std::move(frame).value(), body);
        }
        if (conn->state != Conn::State::open) return;
        if (at > 0) {
            std::memmove(conn->in.data(), conn->in.data() + at, conn->in_len - at);
            conn->in_len -= at;
        }
        if (need > conn->in.size()) conn->in.resize(need);
        // A buffer grown for one large answer goes back to its usual size once it is read.
        if (need == 0 && conn->in_len <= kReadChunk && conn->in.size() > kReadChunk) {
            conn->in.resize(kReadChunk);
            conn->in.shrink_to_fit();
        }
    }

    // Closes conn and settles what was on it: unsent and safe requests go again,
    // anything else completes with unavailable.
    void close_conn(const ConnPtr& conn, std::string why) {
        if (conn->state == Conn::State::closed) return;
        const bool was_open = conn->state == Conn::State::open;
        conn->state = Conn::State::closed;
        boost::system::error_code ignored;
        conn->socket.close(ignored);
        conn->resolver.cancel();
        conn->connect_timer.cancel();
        conn->outbox.clear();
        conns_.erase(conn);
        if (active_ == conn) {
            active_.reset();
            set_info("", std::nullopt);
        }
        if (!conn->server_error.empty()) {
            why += "; server said " + conn->server_error;
            last_connect_error_ = conn->address + ": " + why;
        }
        std::vector<PendingPtr> again;
        std::vector<PendingPtr> lost;
        for (auto& [id, p] : pending_) {
            if (p->conn != conn) continue;
            if (p->pinned || (p->written && !p->resend_ok)) {
                lost.push_back(p);
            } else {
                again.push_back(p);
            }
        }
        if (conn->refused) {
            // Nothing after a refused hello was applied, and another connection would be
            // refused too: every request on this one gets the node's answer.
            for (auto* ps : {&lost, &again})
                for (auto& p : *ps) {
                    Error e = *conn->refused;
                    e.maybe_applied = false;
                    finish(p, std::move(e));
                }
            return;
        }
        for (auto& p : lost) {
            Error e(Code::unavailable, "connection to " + conn->address + " lost (" + why + "); " +
                                           std::string(p->op) + " may or may not have been applied");
            e.maybe_applied = true;
            finish(p, std::move(e));
        }
        for (auto& p : again) {
            if (p->written) p->closed_under = conn->address + ": " + why;
            detach(p);
        }
        if (shutting_down_) return;
        if (!was_open && failures_in_round_ >= seeds_.size() && !again.empty()) {
            arm_backoff();
        }
        for (auto& p : again) dispatch(p);
    }

    void arm_backoff() {
        if (backoff_armed_) return;
        backoff_ = std::min(kBackoffMax, std::max(kRedirectBackoffMin, backoff_ * 2));
        backoff_armed_ = true;
        failures_in_round_ = 0;
        backoff_timer_.expires_after(backoff_);
        backoff_timer_.async_wait(
            [this, self = shared_from_this()](const boost::system::error_code& ec) {
                backoff_armed_ = false;
                if (ec || shutting_down_ || waiting_.empty()) return;
                std::deque<PendingPtr> waiting;
                waiting.swap(waiting_);
                for (auto& p : waiting)
                    dispatch(p);
            });
    }

    void shutdown() {
        shutting_down_ = true;
        backoff_timer_.cancel();
        std::vector<PendingPtr> all;
        for (auto& [id, p] : pending_) all.push_back(p);
        for (auto& p : waiting_) all.push_back(p);
        waiting_.clear();
        for (auto& p : all) {
            Error e(Code::unavailable, "client is closing");
            e.maybe_applied = p->written;
            finish(p, std::move(e));
        }
        std::vector<ConnPtr> conns(conns_.begin(), conns_.end());
        for (auto& c : conns) close_conn(c, "client is closing");
    }

    void set_info(const std::string& address, std::optional<uint64_t> session) {
        std::lock_guard<std::mutex> lock(info_mu_);
        info_address_ = address;
        info_session_ = session;
    }

    ClientOptions opts_;
    std::shared_ptr<asio::ssl::context> ssl_ctx_;  // ClientOptions::tls, when enabled
    std::vector<std::string> seeds_;
    std::string config_error_;
    std::unique_ptr<asio::io_context> own_io_;  // null when running on the caller's
    asio::io_context& io_;
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard_;
    std::thread thread_;
    std::atomic<uint64_t> next_id_{1};

    // Owned by the I/O thread.
    std::unordered_map<uint64_t, PendingPtr> pending_;
    std::deque<PendingPtr> waiting_;  // no connection to queue on (backoff)
    std::unordered_set<ConnPtr> conns_;
    ConnPtr active_;
    std::string leader_hint_;
    std::size_t next_seed_ = 0;
    std::size_t failures_in_round_ = 0;
    milliseconds backoff_{0};
    bool backoff_armed_ = false;
    asio::steady_timer backoff_timer_{io_};
    std::optional<uint64_t> session_;  // the session hello last gave us, on any node
    std::string last_connect_error_;
    bool shutting_down_ = false;

    mutable std::mutex info_mu_;  // guards info_address_, info_session_
    std::string info_address_;
    std::optional<uint64_t> info_session_;
};

Client::Client(ClientOptions options)
    : impl_(std::make_shared<Impl>(std::move(options), nullptr)) {}
Client::Client(boost::asio::io_context& io, ClientOptions options)
    : impl_(std::make_shared<Impl>(std::move(options), &io)) {}
Client::~Client() {
    impl_->close();
}

bool Client::on_io_thread() const { return impl_->on_io_thread(); }
std::string Client::current_address() const { return impl_->current_address(); }
void Client::set_seeds(std::vector<std::string> seeds) { impl_->set_seeds(std::move(seeds)); }
std::optional<uint64_t> Client::current_session() const { return impl_->current_session(); }

#define DUEQ_ASYNC(Req)                                                          \
    void Client::async(const Req& req, Callback<ResponseOfT<Req>> done, CallOptions opts) { \
        impl_->submit(req, std::move(done), opts);                               \
    }
DUEQ_ASYNC(PingRequest)
DUEQ_ASYNC(HelloRequest)
DUEQ_ASYNC(DeclareRequest)
DUEQ_ASYNC(PutRequest)
DUEQ_ASYNC(GetRequest)
DUEQ_ASYNC(DeleteRequest)
DUEQ_ASYNC(TouchRequest)
DUEQ_ASYNC(AckRequest)
DUEQ_ASYNC(ReleaseRequest)
DUEQ_ASYNC(BuryRequest)
DUEQ_ASYNC(KickRequest)
DUEQ_ASYNC(StatsRequest)
DUEQ_ASYNC(ListRequest)
DUEQ_ASYNC(BackupRequest)
DUEQ_ASYNC(StatusRequest)
DUEQ_ASYNC(MembersRequest)
DUEQ_ASYNC(MemberAddRequest)
DUEQ_ASYNC(MemberPromoteRequest)
DUEQ_ASYNC(MemberRemoveRequest)
#undef DUEQ_ASYNC

void Client::async_raw(std::string_view op, const msgpack::object& request,
                       std::function<void(Result<ResponseFrame>)> done, CallOptions opts,
                       milliseconds extra_wait,
                       const std::vector<std::pair<std::string, bool>>& extra) {
    impl_->submit_raw(op, request, std::move(done), opts, extra_wait, extra);
}

void Client::async_forward(std::string_view op, std::string_view body,
                           std::function<void(Result<ResponseFrame>)> done, CallOptions opts,
                           milliseconds extra_wait,
                           const std::vector<std::pair<std::string, bool>>& extra,
                           BodyCheck check) {
    impl_->submit_forward(op, body, std::move(done), opts, extra_wait, extra, check);
}

Result<ResponseFrame> Client::call_raw(std::string_view op, const msgpack::object& request,
                                       CallOptions opts) {
    if (on_io_thread()) return Error(Code::internal, "blocking dueq call from a client callback");
    std::promise<Result<ResponseFrame>> answer;
    auto got = answer.get_future();
    async_raw(op, request, [&answer](Result<ResponseFrame> r) { answer.set_value(std::move(r)); },
              opts);
    return got.get();
}

void Client::async(const TakeRequest& req, Callback<TakeResponse> done, CallOptions opts) {
    impl_->submit(req, std::move(done), opts, milliseconds(std::max<int64_t>(0, req.timeout_ms.value_or(0))));
}

}  // namespace dueq::client
