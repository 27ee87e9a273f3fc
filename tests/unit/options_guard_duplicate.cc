// Must NOT compile (ctest options_guard_duplicate_name has WILL_FAIL): a name declared twice
// in one options table. options_guard_unique.cc, the same table without the duplicate, must
// compile, so the failure is known to come from the guard.
#include "options/table.h"

struct Conf {
    uint64_t a = 0;
    uint64_t b = 0;
};
using namespace atlas::options::kinds;
#define GUARD_OPTIONS(X)                  \
    X("--a", Uint, a, 0, 9, "N", "first") \
    X(GUARD_SECOND_NAME, Uint, b, 0, 9, "N", "second")
#ifndef GUARD_SECOND_NAME
#define GUARD_SECOND_NAME "--a"
#endif
const auto& table() {
    static const auto t = ATLAS_OPTIONS_TABLE(Conf, GUARD_OPTIONS, ATLAS_OPTIONS_NO_ALIASES);
    return t;
}
