// checkLeaks(): under ASan, a recoverable LeakSanitizer check (every allocation freed or
// still reachable); nothing in other builds. Call it after finalize, with the plugin still
// loaded, so its globals still count as roots.
#pragma once

#include <gtest/gtest.h>

#if defined(__SANITIZE_ADDRESS__)
#define ATLAS_ABI_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATLAS_ABI_LSAN 1
#endif
#endif
#ifdef ATLAS_ABI_LSAN
#include <sanitizer/lsan_interface.h>
#endif

namespace atlas::abi {

inline void checkLeaks() {
#ifdef ATLAS_ABI_LSAN
    EXPECT_EQ(__lsan_do_recoverable_leak_check(), 0) << "LeakSanitizer reported leaks (above)";
#endif
}

}  // namespace atlas::abi
