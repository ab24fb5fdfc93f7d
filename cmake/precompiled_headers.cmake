# One precompiled header of the third-party headers most files include (Boost.Asio,
# msgpack, spdlog, ...), shared by every C++ target of the build (REUSE_FROM), and a second
# one with Catch2 added for the targets under tests/. CI builds the code three times on a fresh
# machine (plain, sanitizers, fuzz); with these the sanitizer build took 8m51s, not 9m39s.
#
# Clang only: the sanitizer build. Clang accepts the header in a target that
# defines more or fewer macros than the header's own target, as long as the headers do not
# use them; gcc refuses it when they differ (SPDLOG_*, MSGPACK_*) and then parses the whole
# list in every file, which is slower than without. So the plain gcc build, which has no
# precompiled header, also catches a file that forgot a standard include.
#
# A file that must define a macro before it includes one of these headers (catch_main.cpp:
# CATCH_CONFIG_MAIN) sets SKIP_PRECOMPILE_HEADERS.
option(DUEQ_PCH "Precompile the common third-party headers (the clang sanitizer build)" ON)

set(dueq_pch_headers
  <algorithm> <chrono> <cstdint> <deque> <functional> <map> <memory> <optional> <set>
  <span> <string> <string_view> <unordered_map> <utility> <variant> <vector>
  <boost/asio.hpp> <msgpack.hpp> <spdlog/spdlog.h> <nlohmann/json.hpp> <CLI/CLI.hpp>)
# Not Boost.Asio's SSL nor RocksDB: a precompiled header emits some of their inline
# functions into every file, which then needs libssl (or librocksdb) to link.

function(dueq_pch_target name)
  add_library(${name} OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch_anchor.cpp)
  # For their include paths and the macros their headers need (SPDLOG_*, MSGPACK_*).
  target_link_libraries(${name} PRIVATE Boost::boost msgpackc-cxx spdlog::spdlog
                        nlohmann_json::nlohmann_json CLI11::CLI11 ${ARGN})
  target_precompile_headers(${name} PRIVATE ${dueq_pch_headers} ${dueq_pch_extra})
endfunction()

# Every C++ target defined under `dir` and the folders below it.
function(dueq_targets_under dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    dueq_targets_under(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Called at the end of the top-level CMakeLists.txt, once every target exists.
function(dueq_precompile_headers)
  # Not the fuzz build either: it compiles src/ only, once, optimised.
  if(NOT DUEQ_PCH OR NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang" OR DUEQ_FUZZ)
    return()
  endif()
  dueq_pch_target(dueq_pch)
  set(dueq_pch_extra <catch2/catch.hpp>)
  dueq_pch_target(dueq_pch_tests Catch2::Catch2)
  dueq_targets_under(${PROJECT_SOURCE_DIR} targets)
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|OBJECT_LIBRARY|SHARED_LIBRARY)$"
       OR t MATCHES "^dueq_pch")
      continue()
    endif()
    get_target_property(dir ${t} SOURCE_DIR)
    if(dir MATCHES "^${PROJECT_SOURCE_DIR}/tests(/|$)")
      target_precompile_headers(${t} REUSE_FROM dueq_pch_tests)
    else()
      target_precompile_headers(${t} REUSE_FROM dueq_pch)
    endif()
  endforeach()
endfunction()
