// The dashboard page served at / (src/admin/dashboard.html, built into the binary: one
// self-contained file, no CDN, no build step besides CMake copying it in).
#pragma once

#include <string_view>

namespace dueq::admin {

std::string_view dashboard_html();

}  // namespace dueq::admin
