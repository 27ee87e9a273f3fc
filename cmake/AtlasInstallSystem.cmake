# Runs at install time (install(CODE) of cmake/AtlasInstall.cmake, component bubbletea), where
# CMAKE_INSTALL_PREFIX is the real prefix: writes the files whose place or content depends on
# it. Inputs: ATLAS_SOURCE_DIR, ATLAS_STAGE_DIR (scratch in the build tree),
# ATLAS_SYSTEMD_UNITDIR, ATLAS_BINDIR and ATLAS_DOCDIR (relative to the prefix unless
# absolute). DESTDIR is honoured (file(INSTALL) prepends it), which is how
# CPack stages a package (CPACK_SET_DESTDIR).
#
# The rule (GNUInstallDirs' for sysconfdir, extended to the unit directory): prefix /usr ->
# /etc/atlas and the distribution's unit directory; prefix P -> P/etc/atlas and
# P/lib/systemd/system.

function(_atlas_under_prefix out dir)
    if(IS_ABSOLUTE "${dir}")
        set(${out} "${dir}" PARENT_SCOPE)
    else()
        set(${out} "${CMAKE_INSTALL_PREFIX}/${dir}" PARENT_SCOPE)
    endif()
endfunction()

if(CMAKE_INSTALL_PREFIX MATCHES "^/usr/?$")
    set(_confdir "/etc/atlas")
    set(_unitdir "${ATLAS_SYSTEMD_UNITDIR}")
else()
    set(_confdir "${CMAKE_INSTALL_PREFIX}/etc/atlas")
    set(_unitdir "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
endif()
_atlas_under_prefix(_bindir "${ATLAS_BINDIR}")
_atlas_under_prefix(_docdir "${ATLAS_DOCDIR}")

# The unit, with the absolute paths it must name.
set(ATLAS_BUBBLETEA "${_bindir}/bubbletea")
set(ATLAS_CONFDIR "${_confdir}")
set(ATLAS_DOCDIR "${_docdir}")
# One scratch directory per destination, so concurrent installs (a package build next to a
# test's) do not share the configured file.
string(MD5 _dest "$ENV{DESTDIR}|${CMAKE_INSTALL_PREFIX}")
set(_stage "${ATLAS_STAGE_DIR}/${_dest}")
configure_file("${ATLAS_SOURCE_DIR}/packaging/bubbletea@.service.in"
               "${_stage}/bubbletea@.service" @ONLY)
file(INSTALL DESTINATION "${_unitdir}" TYPE FILE
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
     FILES "${_stage}/bubbletea@.service")

# The shared environment file. A package marks it a conffile (dpkg keeps local edits); a
# plain install never overwrites one that is already there.
if(EXISTS "$ENV{DESTDIR}${_confdir}/bubbletea.conf")
    message(STATUS "Keeping: $ENV{DESTDIR}${_confdir}/bubbletea.conf")
else()
    file(INSTALL DESTINATION "${_confdir}" TYPE FILE
         PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
         FILES "${ATLAS_SOURCE_DIR}/packaging/bubbletea.conf")
endif()
