# atlas_abi_harness: drives libnccl-net-atlas.so through dlopen like NCCL does (tests/abi/
# harness.h). Shared by the ABI tests and perf/atlas-net-perf; defined once, by whichever
# of the two folders is configured first.
include_guard(GLOBAL)

add_library(atlas_abi_harness STATIC ${CMAKE_CURRENT_LIST_DIR}/harness.cc
                                     ${CMAKE_CURRENT_LIST_DIR}/harness_data.cc
                                     ${CMAKE_CURRENT_LIST_DIR}/harness_process.cc)
target_include_directories(atlas_abi_harness PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(atlas_abi_harness PUBLIC atlas::common ${CMAKE_DL_LIBS}
                                        PRIVATE atlas::build_flags)
