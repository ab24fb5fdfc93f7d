// The credential flags every command-line tool takes (client/credentials.h), in one place.
#pragma once

#include <CLI/CLI.hpp>

#include "client/credentials.h"

namespace dueq::cmd {

// --cacert, --cert, --key.
inline void add_tls_flags(CLI::App& app, client::Credentials& c) {
    app.add_option("--cacert", c.ca_file,
                   "Connect with TLS, verifying the nodes' certificates against this CA (PEM).")
        ->envname("DUEQ_CACERT")
        ->type_name("FILE");
    app.add_option("--cert", c.cert_file,
                   "This client's certificate (PEM), for nodes with [tls] clients = \"mutual\".")
        ->envname("DUEQ_CERT")
        ->type_name("FILE");
    app.add_option("--key", c.key_file, "The private key of --cert (PEM).")
        ->envname("DUEQ_KEY")
        ->type_name("FILE");
}

// --token, --token-file and the TLS flags.
inline void add_credential_flags(CLI::App& app, client::Credentials& c) {
    app.add_option("--token", c.token,
                   "The auth token to say in hello, for nodes with [node] auth_token. Prefer "
                   "--token-file or DUEQ_TOKEN: a command line is visible to other users.")
        ->envname("DUEQ_TOKEN")
        ->type_name("TOKEN");
    app.add_option("--token-file", c.token_file, "Read the auth token from this file.")
        ->envname("DUEQ_TOKEN_FILE")
        ->type_name("FILE");
    add_tls_flags(app, c);
}

}  // namespace dueq::cmd
