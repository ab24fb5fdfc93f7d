// dueq::client::Client — a connection to a dueq cluster (docs/protocol.md).
//
// Threads. A Client owns one boost::asio::io_context and one I/O thread, started in the
// constructor and joined in the destructor (or runs on the caller's io_context: see the
// second constructor). Every public method is thread-safe and may
// be called from any thread except the I/O thread itself. Callbacks given to async()
// run on the I/O thread: keep them short and never call a blocking method of the same
// Client from one (it returns `internal` instead of deadlocking).
//
// Pipelining. Requests go out on one connection as soon as they are submitted, without
// waiting for earlier answers; responses are matched by id, in whatever order they
// come. A blocking take (timeout_ms > 0) therefore never holds up other calls.
//
// Timeouts. Every call has a deadline: CallOptions::timeout, else
// ClientOptions::call_timeout; a take adds its own timeout_ms on top, so the server's
// empty answer arrives before the client gives up. At the deadline the call completes
// with `timeout` if the request was written to a server (it may or may not have been
// applied) or `unavailable` if no server could be reached in time. A reply that comes
// after the deadline is dropped; for a take this means the tasks it handed out are
// lost to this client and come back when their ttr runs out. When a call times out and
// nothing at all came back on its connection since it was sent (a frozen server, a silent
// link), the connection is dropped as if it had broken, and the next call dials the next
// seed.
//
// Redirects. A `not_leader` or `no_quorum` refusal means the op was not applied, so
// every op is retried: on the leader named in error.leader (the client connects there, and the old
// connection closes once its in-flight calls are answered), or, when no leader is
// named, on the next seed after a short backoff (50 ms doubling to 1 s). A named leader
// is followed at most ClientOptions::max_redirects times per call (0: every refusal is
// returned as it is); without one the call goes on until its deadline (a cut-off node
// knows no leader until its links come back, and the others need an election); then the
// last refusal is returned. With a single seed, no_quorum is returned at once.
//
// Broken connections. When a connection fails, the client reconnects to the next
// seed (round robin, backoff after a full round of failures). What was in flight is:
//   - resent automatically if it is always safe to resend: ping, hello, get, stats,
//     status, declare (declare sets settings to given values; repeating it is a no-op);
//   - resent automatically if it was never written to the socket;
//   - resent if the caller set CallOptions::resend_on_reconnect (the caller accepts that
//     a put/delete/ack/release/bury/kick/touch/take may then be applied twice, or a take
//     may lease tasks that nobody receives until their ttr runs out);
//   - otherwise completed with `unavailable` ("... may or may not have been applied").
// Server errors other than not_leader and no_quorum (timeout, unavailable, ...) are
// returned as they are: whether to retry those is the caller's decision.
//
// Sessions. The server treats each connection as a session; tasks taken with
// release_on_disconnect go back to ready some time (session_grace_ms) after it closes.
// When ClientOptions::say_hello is set (the default) the client sends `hello` first on
// every connection, and asks to resume the session it last had, on whichever node it
// reaches: a disconnect, or a leader change within session_grace_ms, does not lose its
// leases (a new leader knows which sessions hold some). An explicit hello() is passed
// through unchanged.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/codec.h"
#include "client/forward.h"
#include "client/messages.h"
#include "client/status.h"

namespace boost::asio {
class io_context;
}

namespace dueq::client {

// TLS to the nodes (docs/security.md): the server's certificate must be signed by the CA
// in ca_file; cert_file and key_file are this client's, for a node that requires client
// certificates ([tls] clients = "mutual").
struct ClientTls {
    bool enabled = false;
    std::string ca_file, cert_file, key_file;
};

struct ClientOptions {
    // "host:port" or "[v6addr]:port"; tried in order, then round robin.
    std::vector<std::string> seeds = {"127.0.0.1:7700"};
    std::chrono::milliseconds call_timeout{5000};
    std::chrono::milliseconds connect_timeout{2000};
    int max_redirects = 5;
    bool say_hello = true;
    std::optional<std::string> token;  // sent in the automatic hello
    // Responses larger than this close the connection (a server never sends one).
    std::size_t max_frame_bytes = limits::kMaxFrameBytes.dflt;
    ClientTls tls;  // files that do not load make every call fail with bad_request
};

struct CallOptions {
    std::optional<std::chrono::milliseconds> timeout;  // default: ClientOptions::call_timeout
    bool resend_on_reconnect = false;  // see "Broken connections" above
};

template <class T>
using Callback = std::function<void(Result<T>)>;

template <class Req>
struct ResponseOf;
template <> struct ResponseOf<PingRequest> { using type = PingResponse; };
template <> struct ResponseOf<HelloRequest> { using type = HelloResponse; };
template <> struct ResponseOf<DeclareRequest> { using type = DeclareResponse; };
template <> struct ResponseOf<PutRequest> { using type = PutResponse; };
template <> struct ResponseOf<GetRequest> { using type = GetResponse; };
template <> struct ResponseOf<DeleteRequest> { using type = DeleteResponse; };
template <> struct ResponseOf<TakeRequest> { using type = TakeResponse; };
template <> struct ResponseOf<TouchRequest> { using type = TouchResponse; };
template <> struct ResponseOf<AckRequest> { using type = AckResponse; };
template <> struct ResponseOf<ReleaseRequest> { using type = ReleaseResponse; };
template <> struct ResponseOf<BuryRequest> { using type = BuryResponse; };
template <> struct ResponseOf<KickRequest> { using type = KickResponse; };
template <> struct ResponseOf<StatsRequest> { using type = StatsResponse; };
template <>
struct ResponseOf<ListRequest> {
    using type = ListResponse;
};
template <>
struct ResponseOf<BackupRequest> {
    using type = BackupResponse;
};
template <> struct ResponseOf<StatusRequest> { using type = StatusResponse; };
template <>
struct ResponseOf<MembersRequest> {
    using type = MembersResponse;
};
template <>
struct ResponseOf<MemberAddRequest> {
    using type = MemberChangeResponse;
};
template <>
struct ResponseOf<MemberPromoteRequest> {
    using type = MemberChangeResponse;
};
template <>
struct ResponseOf<MemberRemoveRequest> {
    using type = MemberChangeResponse;
};
template <class Req>
using ResponseOfT = typename ResponseOf<Req>::type;

// Splits "host:port" / "[v6]:port". Error: bad_request.
Result<std::pair<std::string, std::string>> parse_address(const std::string& address);

class Client {
public:
    // Never blocks and never fails: connecting happens on the first call. Seeds that do
    // not parse make every call fail with bad_request.
    explicit Client(ClientOptions options = {});
    // Completes every outstanding call with `unavailable`, closes the connections and
    // joins the I/O thread. Must not run on the I/O thread (i.e. not in a callback).
    // Runs on `io` instead of a thread of its own (dueq-proxy, a node's router), so that a
    // request and its answer cross no thread: callbacks run on io's thread, every method
    // must be called there, and the blocking calls return `internal`. Destroy it on that
    // thread (or once io no longer runs), before io itself; calls still out complete with
    // `unavailable` as it goes.
    Client(boost::asio::io_context& io, ClientOptions options);
    ~Client();
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    // Submit a request; `done` is called exactly once, on the I/O thread.
    void async(const PingRequest& req, Callback<PingResponse> done, CallOptions opts = {});
    void async(const HelloRequest& req, Callback<HelloResponse> done, CallOptions opts = {});
    void async(const DeclareRequest& req, Callback<DeclareResponse> done, CallOptions opts = {});
    void async(const PutRequest& req, Callback<PutResponse> done, CallOptions opts = {});
    void async(const GetRequest& req, Callback<GetResponse> done, CallOptions opts = {});
    void async(const DeleteRequest& req, Callback<DeleteResponse> done, CallOptions opts = {});
    void async(const TakeRequest& req, Callback<TakeResponse> done, CallOptions opts = {});
    void async(const TouchRequest& req, Callback<TouchResponse> done, CallOptions opts = {});
    void async(const AckRequest& req, Callback<AckResponse> done, CallOptions opts = {});
    void async(const ReleaseRequest& req, Callback<ReleaseResponse> done, CallOptions opts = {});
    void async(const BuryRequest& req, Callback<BuryResponse> done, CallOptions opts = {});
    void async(const KickRequest& req, Callback<KickResponse> done, CallOptions opts = {});
    void async(const StatsRequest& req, Callback<StatsResponse> done, CallOptions opts = {});
    void async(const ListRequest& req, Callback<ListResponse> done, CallOptions opts = {});
    void async(const BackupRequest& req, Callback<BackupResponse> done, CallOptions opts = {});
    void async(const StatusRequest& req, Callback<StatusResponse> done, CallOptions opts = {});
    void async(const MembersRequest& req, Callback<MembersResponse> done, CallOptions opts = {});
    void async(const MemberAddRequest& req, Callback<MemberChangeResponse> done,
               CallOptions opts = {});
    void async(const MemberPromoteRequest& req, Callback<MemberChangeResponse> done,
               CallOptions opts = {});
    void async(const MemberRemoveRequest& req, Callback<MemberChangeResponse> done,
               CallOptions opts = {});

    // Forwarding a request someone else encoded (dueq-proxy, a node relaying to another
    // shard): `request` is the sender's request map; it goes out with this client's own id
    // and `extra` boolean fields added, and follows redirects and reconnects like a typed
    // call of the same `op` ("put", "take", ...). `done` gets the server's response frame,
    // whatever its `ok`; an error only when no answer came (timeout, unavailable).
    // `extra_wait` lengthens the deadline (a blocking take's timeout_ms).
    void async_raw(std::string_view op, const msgpack::object& request,
                   std::function<void(Result<ResponseFrame>)> done, CallOptions opts = {},
                   std::chrono::milliseconds extra_wait = std::chrono::milliseconds(0),
                   const std::vector<std::pair<std::string, bool>>& extra = {});
    // async_raw for a request still as bytes (`body`: the sender's msgpack map, as it
    // came): the entries are copied, not unpacked and repacked (client/forward.h), and the
    // answer's ResponseFrame::body holds the server's bytes for the caller to pass on the
    // same way. An ok answer is not unpacked: its `map` is null (an error's is set). A body
    // that is not a map completes with bad_request; `check` says whether it still needs the
    // walk that proves it well formed (forward.h).
    void async_forward(std::string_view op, std::string_view body,
                       std::function<void(Result<ResponseFrame>)> done, CallOptions opts = {},
                       std::chrono::milliseconds extra_wait = std::chrono::milliseconds(0),
                       const std::vector<std::pair<std::string, bool>>& extra = {},
                       BodyCheck check = BodyCheck::validate);
    // async_raw, waiting for the answer (not from a client callback: `internal` then).
    Result<ResponseFrame> call_raw(std::string_view op, const msgpack::object& request,
                                   CallOptions opts = {});

    // Pipelining with futures: submit many, then get() them in any order.
    template <class Req>
    std::future<Result<ResponseOfT<Req>>> call_async(const Req& req, CallOptions opts = {}) {
        auto promise = std::make_shared<std::promise<Result<ResponseOfT<Req>>>>();
        auto future = promise->get_future();
        async(
            req, [promise](Result<ResponseOfT<Req>> r) { promise->set_value(std::move(r)); },
            opts);
        return future;
    }

    // Blocks until the answer or the deadline.
    template <class Req>
    Result<ResponseOfT<Req>> call(const Req& req, CallOptions opts = {}) {
        if (on_io_thread()) {
            return Error(Code::internal, "blocking dueq call from a client callback");
        }
        return call_async(req, opts).get();
    }

    // Blocking shorthands, one per op.
    Result<PingResponse> ping(CallOptions o = {}) { return call(PingRequest{}, o); }
    Result<HelloResponse> hello(const HelloRequest& r, CallOptions o = {}) { return call(r, o); }
    Result<DeclareResponse> declare(const DeclareRequest& r, CallOptions o = {}) {
        return call(r, o);
    }
    Result<PutResponse> put(const PutRequest& r, CallOptions o = {}) { return call(r, o); }
    Result<GetResponse> get(const GetRequest& r, CallOptions o = {}) { return call(r, o); }
    Result<DeleteResponse> del(const DeleteRequest& r, CallOptions o = {}) { return call(r, o); }
    Result<TakeResponse> take(const TakeRequest& r, CallOptions o = {}) { return call(r, o); }
    Result<TouchResponse> touch(const TouchRequest& r, CallOptions o = {}) { return call(r, o); }
    Result<AckResponse> ack(const AckRequest& r, CallOptions o = {}) { return call(r, o); }
    Result<ReleaseResponse> release(const ReleaseRequest& r, CallOptions o = {}) {
        return call(r, o);
    }
    Result<BuryResponse> bury(const BuryRequest& r, CallOptions o = {}) { return call(r, o); }
    Result<KickResponse> kick(const KickRequest& r, CallOptions o = {}) { return call(r, o); }
    Result<StatsResponse> stats(const StatsRequest& r = {}, CallOptions o = {}) {
        return call(r, o);
    }
    Result<ListResponse> list(const ListRequest& r, CallOptions o = {}) { return call(r, o); }
    Result<BackupResponse> backup(const BackupRequest& r, CallOptions o = {}) { return call(r, o); }
    Result<StatusResponse> status(CallOptions o = {}) { return call(StatusRequest{}, o); }
    Result<MembersResponse> members(CallOptions o = {}) { return call(MembersRequest{}, o); }
    Result<MemberChangeResponse> member_add(const MemberAddRequest& r, CallOptions o = {}) {
        return call(r, o);
    }
    Result<MemberChangeResponse> member_promote(const MemberPromoteRequest& r, CallOptions o = {}) {
        return call(r, o);
    }
    Result<MemberChangeResponse> member_remove(const MemberRemoveRequest& r, CallOptions o = {}) {
        return call(r, o);
    }

    // The address of the connection new requests go to ("" while none is open), and the
    // session id its automatic hello got. For logs and tests; may be stale by return.
    std::string current_address() const;
    std::optional<uint64_t> current_session() const;

    // Replaces the seeds (a shard's membership changed): the open connection stays, and the
    // next one goes to the new seeds. Addresses that do not parse are left out; with none
    // left, the old seeds stay.
    void set_seeds(std::vector<std::string> seeds);

    bool on_io_thread() const;

private:
    class Impl;
    std::shared_ptr<Impl> impl_;
};

}  // namespace dueq::client
