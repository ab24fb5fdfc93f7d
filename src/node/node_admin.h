// The node's HTTP admin (docs/admin.md): /health, /ready, /status, /cluster, /metrics and
// the dashboard at /, and what it counts over time (leader changes, the ack history).
// It reads the node's state on the event loop, where the node owns it (a friend of Node,
// reading only); admin.cpp has the endpoints, metrics_text.cpp the /metrics text.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "admin/http_server.h"
#include "admin/prometheus.h"

namespace dueq::node {

class Node;

class NodeAdmin {
  public:
    explicit NodeAdmin(Node& node) : node_(node) {}

    // Listens on [admin] listen, if set; a message when it cannot.
    std::optional<std::string> start();
    void stop();
    // HTTPS for new connections with this context; null: plain HTTP (SIGHUP's reload).
    void set_tls(std::shared_ptr<const net::TlsContext> ctx);
    std::uint16_t port() const { return http_ ? http_->port() : 0; }

    // Called on every tick: leader changes, elections, the ack history.
    void observe_raft();

    // Empty when healthy, else why not.
    std::string unhealthy_reason() const;
    std::string tls_warning() const;
    std::string store_warning() const;
    void process_metrics(admin::PromText& m) const;
    std::string warning() const;  // every warning above, joined
    std::string metrics_text() const;

  private:
    void on_request(const admin::HttpRequest& req, admin::HttpServer::Respond respond);
    nlohmann::json status_object() const;  // what /status answers
    void cluster_json(admin::HttpServer::Respond respond);
    // The parts of /metrics.
    void request_metrics(admin::PromText& m) const;
    void raft_metrics(admin::PromText& m) const;
    void queue_metrics(admin::PromText& m) const;
    void peer_metrics(admin::PromText& m) const;

    Node& node_;
    std::unique_ptr<admin::HttpServer> http_;
};

}  // namespace dueq::node
