# CPACK_PROJECT_CONFIG_FILE: runs inside cpack, per generator, before any package is made.
#
# The plugin package's Depends come from dpkg-shlibdeps here instead of through CPack's
# CPACK_DEBIAN_PACKAGE_SHLIBDEPS, because with that option CPack also writes a postinst and a
# postrm that call ldconfig for a library in /usr/lib (CMake issue 21834), which Debian
# replaced by the ldconfig trigger the package carries (packaging/debian/triggers; lintian:
# maintscript-calls-ldconfig). The other packages have no library and use CPack's option.

if(NOT CPACK_GENERATOR STREQUAL "DEB")
    return()
endif()
include("${CPACK_ATLAS_PLUGIN_INFO}" OPTIONAL RESULT_VARIABLE _atlas_info)
if(NOT _atlas_info OR NOT EXISTS "${ATLAS_PLUGIN_FILE}")
    message(FATAL_ERROR "atlas: the plugin is not built (${ATLAS_PLUGIN_FILE}); "
                        "build the atlas-installables target first (scripts/package does)")
endif()
find_program(_atlas_shlibdeps dpkg-shlibdeps)
if(NOT _atlas_shlibdeps)
    message(FATAL_ERROR "atlas: dpkg-shlibdeps not found (Debian package dpkg-dev)")
endif()
# dpkg-shlibdeps wants a source package around it: an empty debian/control will do.
set(_atlas_dir "${CPACK_PACKAGE_DIRECTORY}/_CPack_Packages/atlas-shlibdeps")
file(MAKE_DIRECTORY "${_atlas_dir}/debian")
file(WRITE "${_atlas_dir}/debian/control" "")
execute_process(COMMAND "${_atlas_shlibdeps}" --ignore-missing-info -O "${ATLAS_PLUGIN_FILE}"
                WORKING_DIRECTORY "${_atlas_dir}"
                RESULT_VARIABLE _atlas_rc OUTPUT_VARIABLE _atlas_out ERROR_VARIABLE _atlas_err)
if(NOT _atlas_rc EQUAL 0 OR NOT _atlas_out MATCHES "shlibs:Depends=([^\n]+)")
    message(FATAL_ERROR "atlas: dpkg-shlibdeps ${ATLAS_PLUGIN_FILE} failed: ${_atlas_err}")
endif()
set(CPACK_DEBIAN_PLUGIN_PACKAGE_DEPENDS "${CMAKE_MATCH_1}")
