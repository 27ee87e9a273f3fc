// Must compile: the control for params_guard_duplicate.cc, with a key nobody registered.
#include "plugin/params.h"

namespace atlas::plugin::param_key_guards {
struct ATLAS_NOT_A_REGISTERED_KEY {};
}  // namespace atlas::plugin::param_key_guards
