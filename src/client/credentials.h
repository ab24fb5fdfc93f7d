// What a tool needs to reach a cluster that asks for more than an address
// (docs/security.md): the hello token, and TLS files. Every tool takes them the same way,
// by flag or environment variable (add_credential_flags in cmd/common/credential_flags.h):
//
//   --token TOKEN      DUEQ_TOKEN        the auth token said in hello
//   --token-file FILE  DUEQ_TOKEN_FILE   the same, read from a file (trailing space dropped)
//   --cacert FILE      DUEQ_CACERT       TLS to the nodes, verified against this CA
//   --cert FILE        DUEQ_CERT         this client's certificate (clients = "mutual")
//   --key FILE         DUEQ_KEY          its key
//
// The token is never printed or logged by the tools.
#pragma once

#include <optional>
#include <string>

#include "client/client.h"

namespace dueq::client {

struct Credentials {
    std::string token;
    std::string token_file;
    std::string ca_file, cert_file, key_file;

    // Fills `o` (token, tls). "" or why not (a token file that cannot be read, a
    // certificate without its key).
    std::string apply(ClientOptions& o) const;
};

}  // namespace dueq::client
