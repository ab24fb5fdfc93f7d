// Shared includes for the Raft unit tests.
#pragma once

#include <set>

#include "harness.h"
