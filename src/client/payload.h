// Payloads are opaque msgpack values on the wire; these helpers translate JSON for the
// people and scripts on either side of dueqctl.
#pragma once

#include <string>
#include <string_view>

#include "client/status.h"

namespace dueq::client {

// JSON text -> one msgpack value. Error: bad_request carrying the parser's complaint.
Result<std::string> payload_from_json(std::string_view json);

// One msgpack value -> JSON text (compact when indent < 0). Things JSON lacks are spelled
// out: bin as {"$bin": "<base64>"}, ext as {"$ext": type, "data": "<base64>"}, a map key
// that is not a string as its JSON text, str that is not UTF-8 with U+FFFD replacements.
// Error: bad_request when `msgpack` is not exactly one well-formed value.
Result<std::string> payload_to_json(std::string_view msgpack, int indent = -1);

}  // namespace dueq::client
