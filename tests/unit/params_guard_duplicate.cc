// Must NOT compile (ctest params_guard_duplicate_key has WILL_FAIL): a second declaration of
// a registered key, which is what a duplicate line in ATLAS_PARAM_LIST expands to.
#include "plugin/params.h"

namespace atlas::plugin::param_key_guards {
struct ATLAS_NSTREAMS {};
}  // namespace atlas::plugin::param_key_guards
