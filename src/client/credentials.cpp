#include "client/credentials.h"

#include <cctype>
#include <fstream>
#include <sstream>

namespace dueq::client {

std::string Credentials::apply(ClientOptions& o) const {
    if (!token.empty() && !token_file.empty()) return "give --token or --token-file, not both";
    if (!token_file.empty()) {
        std::ifstream in(token_file);
        if (!in) return "cannot read the token file " + token_file;
        std::stringstream ss;
        ss << in.rdbuf();
        std::string t = ss.str();
        while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back())))
            t.pop_back();
        if (t.empty()) return "the token file " + token_file + " is empty";
        o.token = std::move(t);
    } else if (!token.empty()) {
        o.token = token;
    }
    if (cert_file.empty() != key_file.empty()) return "--cert and --key go together";
    if (!cert_file.empty() && ca_file.empty())
        return "--cert needs --cacert (the CA that signed the nodes' certificates)";
    if (!ca_file.empty()) o.tls = {true, ca_file, cert_file, key_file};
    return "";
}

}  // namespace dueq::client
