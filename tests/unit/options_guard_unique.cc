// The control case of options_guard_duplicate.cc: distinct names compile.
#define GUARD_SECOND_NAME "--b"
#include "options_guard_duplicate.cc"
