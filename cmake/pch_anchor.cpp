// The one source of the targets that build the shared precompiled headers
// (cmake/precompiled_headers.cmake); it has nothing of its own to compile.
