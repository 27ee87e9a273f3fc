# Build-flag and sanitizer INTERFACE targets, applied per target (never through global
# CMAKE_CXX_FLAGS), plus helpers to declare tests with ctest labels.

add_library(atlas_build_flags INTERFACE)
add_library(atlas::build_flags ALIAS atlas_build_flags)
target_compile_options(atlas_build_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wshadow -Wno-unused-parameter -Wnon-virtual-dtor>
    $<$<AND:$<BOOL:${ATLAS_WERROR}>,$<COMPILE_LANGUAGE:CXX,C>>:-Werror>)

# Sanitizers: one INTERFACE target that every Atlas target links, so third-party code and
# the host's flags stay untouched.
add_library(atlas_sanitizers INTERFACE)
add_library(atlas::sanitizers ALIAS atlas_sanitizers)
if(ATLAS_SANITIZE)
    if(ATLAS_SANITIZE MATCHES "thread" AND ATLAS_SANITIZE MATCHES "address")
        message(FATAL_ERROR "ATLAS_SANITIZE: thread and address cannot be combined")
    endif()
    set(_san -fsanitize=${ATLAS_SANITIZE} -fno-omit-frame-pointer)
    if(ATLAS_SANITIZE MATCHES "undefined")
        list(APPEND _san -fno-sanitize-recover=undefined)
    endif()
    target_compile_options(atlas_sanitizers INTERFACE $<$<COMPILE_LANGUAGE:CXX,C>:${_san}>)
    target_link_options(atlas_sanitizers INTERFACE ${_san})
    target_compile_definitions(atlas_sanitizers INTERFACE ATLAS_SANITIZED=1)
endif()
target_link_libraries(atlas_build_flags INTERFACE atlas_sanitizers)
# Fuzz builds: instrument all Atlas code for coverage so libFuzzer explores the libraries
# behind each target, not just the target's own file.
if(ATLAS_FUZZ)
    target_compile_options(atlas_build_flags INTERFACE
        $<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=fuzzer-no-link>)
endif()

# atlas_library(name [STATIC|INTERFACE] SOURCES ... LIBS ...): one library per folder,
# position-independent because the plugin .so is built from these archives.
function(atlas_library name)
    cmake_parse_arguments(A "INTERFACE" "" "SOURCES;LIBS;PUBLIC_LIBS" ${ARGN})
    if(A_INTERFACE)
        add_library(${name} INTERFACE)
        target_link_libraries(${name} INTERFACE ${A_PUBLIC_LIBS})
        return()
    endif()
    add_library(${name} STATIC ${A_SOURCES})
    set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON
                                             CXX_VISIBILITY_PRESET hidden
                                             VISIBILITY_INLINES_HIDDEN ON)
    target_link_libraries(${name} PUBLIC ${A_PUBLIC_LIBS} PRIVATE atlas::build_flags ${A_LIBS})
endfunction()

# atlas_executable(name SOURCES ... LIBS ...)
function(atlas_executable name)
    cmake_parse_arguments(A "" "" "SOURCES;LIBS" ${ARGN})
    add_executable(${name} ${A_SOURCES})
    target_link_libraries(${name} PRIVATE atlas::build_flags ${A_LIBS})
endfunction()

# atlas_add_test(name SOURCES ... LIBS ... LABELS ... [TIMEOUT s] [NO_GTEST_MAIN] [SERIAL])
# Labels: unit, loopback, abi, wan, channel, bubbletea, sim, tsan (also run under TSan), slow.
# One ctest entry per binary; the binary itself runs many gtest cases.
# SERIAL: ctest runs the binary with no other test beside it (RUN_SERIAL). For the few tests
# that assert a time or a rate the machine itself must deliver (an emulated RTT within 1 ms,
# TCP at a rate cap): on a 2-core runner a neighbouring test starves their endpoints, and the
# bound would then measure the neighbour, not the code under test.
function(atlas_add_test name)
    cmake_parse_arguments(T "NO_GTEST_MAIN;SERIAL" "TIMEOUT" "SOURCES;LIBS;LABELS;ARGS;ENV" ${ARGN})
    add_executable(${name} ${T_SOURCES})
    if(ATLAS_UNITY_TESTS)
        # One batch per suite; a file that cannot share a unit with the others sets
        # SKIP_UNITY_BUILD_INCLUSION on itself.
        set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0)
    endif()
    if(T_NO_GTEST_MAIN)
        target_link_libraries(${name} PRIVATE atlas::build_flags GTest::gtest ${T_LIBS})
    else()
        target_link_libraries(${name} PRIVATE atlas::build_flags GTest::gtest_main ${T_LIBS})
    endif()
    if(NOT T_TIMEOUT)
        set(T_TIMEOUT 300)
    endif()
    add_test(NAME ${name} COMMAND ${name} ${T_ARGS})
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
                         ENVIRONMENT "ATLAS_TEST_BINARY_DIR=${CMAKE_BINARY_DIR};${T_ENV}")
    if(T_SERIAL)
        set_tests_properties(${name} PROPERTIES RUN_SERIAL TRUE)
    endif()
    foreach(label IN LISTS T_LABELS)
        set_property(GLOBAL APPEND PROPERTY ATLAS_LABEL_TARGETS_${label} ${name})
        set_property(GLOBAL APPEND PROPERTY ATLAS_ALL_LABELS ${label})
    endforeach()
endfunction()

# Creates `tests-<label>` custom targets that build exactly the tests of one label, so the
# TSan job builds only what it runs.
function(atlas_finish_label_targets)
    get_property(labels GLOBAL PROPERTY ATLAS_ALL_LABELS)
    if(NOT labels)
        return()
    endif()
    list(REMOVE_DUPLICATES labels)
    foreach(label IN LISTS labels)
        get_property(targets GLOBAL PROPERTY ATLAS_LABEL_TARGETS_${label})
        add_custom_target(tests-${label} DEPENDS ${targets})
    endforeach()
endfunction()
