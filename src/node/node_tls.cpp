#include "node/node_tls.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "node/node.h"
#include "node/node_admin.h"

namespace dueq::node {

namespace {

std::int64_t days_left(std::int64_t not_after_ms) {
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    return (not_after_ms - now) / 86'400'000;
}

}  // namespace

std::int64_t NodeTls::not_after_ms() const {
    for (const auto* c : {&peer_accept, &clients, &admin})
        if (*c) return (*c)->not_after_ms();
    return 0;
}

std::string load_node_tls(const Config& config, NodeTls& out) {
    const TlsConfig& t = config.tls;
    const net::TlsFiles files{t.ca_file, t.cert_file, t.key_file};
    NodeTls made;
    std::string error;
    if (t.client_tls()) {
        made.clients = net::TlsContext::make(
            net::TlsRole::server, files,
            t.clients == "mutual" ? net::PeerCert::required : net::PeerCert::none, error);
        if (!made.clients) return "[tls] for clients: " + error;
    }
    if (t.peer_tls() && config.members.size() > 1) {
        made.peer_accept =
            net::TlsContext::make(net::TlsRole::server, files, net::PeerCert::required, error);
        if (!made.peer_accept) return "[tls] for peers: " + error;
        made.peer_dial =
            net::TlsContext::make(net::TlsRole::client, files, net::PeerCert::none, error);
        if (!made.peer_dial) return "[tls] for peers: " + error;
    }
    if (config.admin_tls) {
        made.admin = net::TlsContext::make(net::TlsRole::server, files, net::PeerCert::none, error);
        if (!made.admin) return "[admin] tls: " + error;
        made.admin_dial =
            net::TlsContext::make(net::TlsRole::client, files, net::PeerCert::none, error);
        if (!made.admin_dial) return "[admin] tls: " + error;
    }
    out = std::move(made);
    return "";
}

std::string Node::reload_tls() {
    if (!config_.tls.client_tls() && !config_.tls.peer_tls() && !config_.admin_tls) return "";
    NodeTls next;
    if (auto err = load_node_tls(config_, next); !err.empty()) {
        spdlog::warn("TLS reload refused: {}; the old certificates stay in use", err);
        return err;
    }
    tls_ = std::move(next);
    if (server_) server_->set_tls(tls_.clients);
    if (raft_io_) raft_io_->set_peer_tls({tls_.peer_accept, tls_.peer_dial, {}});
    admin_->set_tls(tls_.admin);
    const auto* any = tls_.peer_accept ? tls_.peer_accept.get()
                      : tls_.clients   ? tls_.clients.get()
                                       : tls_.admin.get();
    spdlog::info("TLS files reloaded: {} (expires in {} days); new connections use them",
                 any ? any->subject() : "", any ? days_left(any->not_after_ms()) : 0);
    return "";
}

client::ClientTls forwarding_tls(const Config& config) {
    const TlsConfig& t = config.tls;
    return {t.client_tls(), t.ca_file, t.cert_file, t.key_file};
}

}  // namespace dueq::node
