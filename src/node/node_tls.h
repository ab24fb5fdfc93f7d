// The TLS contexts a node's config asks for ([tls], docs/security.md), made at start and
// again on SIGHUP (new connections take the new files; open ones keep theirs).
#pragma once

#include <memory>
#include <string>

#include "client/client.h"
#include "net/tls.h"
#include "node/config.h"

namespace dueq::node {

struct NodeTls {
    std::shared_ptr<const net::TlsContext> clients;      // the client listener; null: plaintext
    std::shared_ptr<const net::TlsContext> peer_accept;  // accepted peer links; null: plaintext
    std::shared_ptr<const net::TlsContext> peer_dial;    // dialed peer links
    std::shared_ptr<const net::TlsContext> admin;        // the HTTPS admin; null: plain HTTP
    std::shared_ptr<const net::TlsContext> admin_dial;   // /cluster asking the other members
    // This node's certificate's notAfter (ms since the epoch); 0 without one.
    std::int64_t not_after_ms() const;
};

// Makes the contexts `config.tls` asks for into `out`; "" or why not.
std::string load_node_tls(const Config& config, NodeTls& out);

// How this node dials other shards' client listeners: TLS when its own listener has it
// (one deployment, one CA), with its own certificate for those that require one.
client::ClientTls forwarding_tls(const Config& config);

}  // namespace dueq::node
