# Install rules, in three components (docs: README.md "Installing"):
#   plugin     libnccl-net-atlas.so in a library directory the dynamic loader searches, so that
#              NCCL_NET_PLUGIN=atlas finds it by name (NCCL dlopen()s "libnccl-net-atlas.so")
#   tools      atlas-netstat, atlas-bubbles, atlas-arbiter, atlas-wanem, atlas-tcp-cc in bin/
#   bubbletea  bubbletea in bin/, the systemd unit template bubbletea@.service (one unit per
#              GPU) and its shared environment file
# scripts/package turns each component into a Debian package (cmake/AtlasPackaging.cmake).
#
# Every rule lives here rather than in the folders, so the install layout is one definition
# and the folders' CMakeLists stay about building. Included after every target is defined.
#
# Prefix-dependent paths follow GNUInstallDirs' rule, applied when installing (so the same
# build tree installs to /usr for a package and to /usr/local or a scratch prefix by hand):
# prefix /usr puts the configuration in /etc and the unit in the distribution's systemd unit
# directory (/lib/systemd/system on Debian 12); any other prefix P uses P/etc and
# P/lib/systemd/system (systemd also searches /usr/local/lib/systemd/system).

include(GNUInstallDirs)

# The plugin's directory, relative to the prefix. Debian and Ubuntu search the multiarch
# directory (/usr/lib/x86_64-linux-gnu is a "system search path" of ld.so, and
# /usr/local/lib/x86_64-linux-gnu is in /etc/ld.so.conf.d); elsewhere GNUInstallDirs' libdir.
if(CMAKE_LIBRARY_ARCHITECTURE)
    set(_atlas_libdir "lib/${CMAKE_LIBRARY_ARCHITECTURE}")
else()
    set(_atlas_libdir "${CMAKE_INSTALL_LIBDIR}")
endif()
set(ATLAS_INSTALL_LIBDIR "${_atlas_libdir}" CACHE STRING
    "Directory of libnccl-net-atlas.so, relative to the install prefix")

# The systemd system unit directory a package uses (prefix /usr); pkg-config's answer when
# systemd.pc is there, else Debian 12's.
set(_atlas_unitdir "/lib/systemd/system")
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
    pkg_get_variable(_atlas_pc_unitdir systemd systemdsystemunitdir)
    if(_atlas_pc_unitdir)
        set(_atlas_unitdir "${_atlas_pc_unitdir}")
    endif()
endif()
set(ATLAS_SYSTEMD_UNITDIR "${_atlas_unitdir}" CACHE STRING
    "systemd system unit directory for installs with prefix /usr")

# The package names double as the doc directory names (share/doc/<package>/copyright).
set(ATLAS_PACKAGE_plugin libnccl-net-atlas)
set(ATLAS_PACKAGE_tools atlas-tools)
set(ATLAS_PACKAGE_bubbletea atlas-bubbletea)

set(ATLAS_INSTALLED_TOOLS "")
foreach(tool atlas-netstat atlas-bubbles atlas-arbiter atlas-wanem atlas-tcp-cc)
    if(TARGET ${tool})
        list(APPEND ATLAS_INSTALLED_TOOLS ${tool})
    else()
        message(STATUS "install: ${tool} is not built here; the tools component lacks it")
    endif()
endforeach()

# ---- plugin -----------------------------------------------------------------------------
if(TARGET nccl-net-atlas)
    # A MODULE has no soname of its own; give it its file name, so ldconfig indexes it under
    # the name NCCL opens and the package's ld.so.cache entry is unambiguous.
    target_link_options(nccl-net-atlas PRIVATE -Wl,-soname,libnccl-net-atlas.so)
    install(TARGETS nccl-net-atlas
            LIBRARY DESTINATION ${ATLAS_INSTALL_LIBDIR} COMPONENT plugin
                    PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endif()

# ---- tools ------------------------------------------------------------------------------
if(ATLAS_INSTALLED_TOOLS)
    install(TARGETS ${ATLAS_INSTALLED_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
            COMPONENT tools)
endif()

# ---- bubbletea --------------------------------------------------------------------------
if(TARGET bubbletea)
    install(TARGETS bubbletea RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT bubbletea)
    install(FILES ${PROJECT_SOURCE_DIR}/packaging/bubbletea-0.conf.example
            DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${ATLAS_PACKAGE_bubbletea}/examples
            RENAME bubbletea-0.conf COMPONENT bubbletea)
    # The unit names the installed binary and the configuration directory, both known only
    # at install time (see the prefix rule above): cmake/AtlasInstallSystem.cmake writes it.
    install(CODE "
        set(ATLAS_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
        set(ATLAS_SYSTEMD_UNITDIR \"${ATLAS_SYSTEMD_UNITDIR}\")
        set(ATLAS_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
        set(ATLAS_DOCDIR \"${CMAKE_INSTALL_DATADIR}/doc/${ATLAS_PACKAGE_bubbletea}\")
        set(ATLAS_STAGE_DIR \"${CMAKE_BINARY_DIR}/packaging\")
        include(\"${PROJECT_SOURCE_DIR}/cmake/AtlasInstallSystem.cmake\")"
        COMPONENT bubbletea)
endif()

# ---- every component: Debian's copyright file and the pages that document it -----------
set(ATLAS_DOCS_plugin nccl-abi.md env.md)
set(ATLAS_DOCS_tools netstat.md bubble-channel.md arbitration.md wan.md tcp-cc.md)
set(ATLAS_DOCS_bubbletea bubbletea.md)
foreach(component plugin tools bubbletea)
    set(_docs ${PROJECT_SOURCE_DIR}/packaging/copyright)
    foreach(page IN LISTS ATLAS_DOCS_${component})
        list(APPEND _docs ${PROJECT_SOURCE_DIR}/docs/${page})
    endforeach()
    install(FILES ${_docs} DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${ATLAS_PACKAGE_${component}}
            COMPONENT ${component})
endforeach()

# `cmake --build build --target atlas-installables` builds exactly what the components
# install (scripts/package uses it).
set(_atlas_installables ${ATLAS_INSTALLED_TOOLS})
foreach(t nccl-net-atlas bubbletea)
    if(TARGET ${t})
        list(APPEND _atlas_installables ${t})
    endif()
endforeach()
add_custom_target(atlas-installables DEPENDS ${_atlas_installables})
