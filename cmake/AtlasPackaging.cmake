# Debian packages of the install components (cmake/AtlasInstall.cmake), one per component,
# built by CPack's DEB generator from a configured and built tree (scripts/package):
#   libnccl-net-atlas   the plugin in /usr/lib/<multiarch>/ (NCCL_NET_PLUGIN=atlas)
#   atlas-tools         atlas-netstat, atlas-bubbles, atlas-arbiter, atlas-wanem, atlas-tcp-cc
#                       in /usr/bin
#   atlas-bubbletea     bubbletea, bubbletea@.service, /etc/atlas/bubbletea.conf
# Dependencies come from dpkg-shlibdeps over the packaged ELF files; tests/package checks
# the result (contents, permissions, control fields, loading the plugin by name).

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME atlas)
set(CPACK_PACKAGE_VENDOR "Atlas")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "Atlas maintainers <maintainers@users.noreply.a-seed-7d03f41f.example>")
# No CPACK_PACKAGE_DESCRIPTION_SUMMARY: CPack would prepend it to every package's description;
# each component's first description line is its synopsis.
# Packages install under /usr; the install scripts see that prefix and DESTDIR = the staging
# root, which is what puts the unit and /etc files where they belong
# (cmake/AtlasInstallSystem.cmake).
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX "/usr")  # the prefix the install scripts see with CPACK_SET_DESTDIR
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_STRIP_FILES ON)
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
    OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL plugin tools bubbletea)
set(CPACK_COMPONENTS_GROUPING IGNORE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <name>_<version>-<release>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(_atlas_debian ${PROJECT_SOURCE_DIR}/packaging/debian)

set(CPACK_DEBIAN_PLUGIN_PACKAGE_NAME libnccl-net-atlas)
# Depends from dpkg-shlibdeps in cmake/AtlasCPackProject.cmake (why: there).
set(CPACK_DEBIAN_PLUGIN_PACKAGE_SHLIBDEPS OFF)
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_SOURCE_DIR}/cmake/AtlasCPackProject.cmake)
set(CPACK_ATLAS_PLUGIN_INFO ${CMAKE_BINARY_DIR}/packaging/plugin-file.cmake)
if(TARGET nccl-net-atlas)
    file(GENERATE OUTPUT ${CPACK_ATLAS_PLUGIN_INFO}
         CONTENT "set(ATLAS_PLUGIN_FILE \"$<TARGET_FILE:nccl-net-atlas>\")\n")
endif()
set(CPACK_DEBIAN_PLUGIN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PLUGIN_PACKAGE_ENHANCES "libnccl2")
# ldconfig runs once per dpkg run through its trigger, as for every library package.
set(CPACK_DEBIAN_PLUGIN_PACKAGE_CONTROL_EXTRA ${_atlas_debian}/triggers)
set(CPACK_COMPONENT_PLUGIN_DESCRIPTION
    "NCCL network plugin carrying NCCL traffic over many TCP streams
libnccl-net-atlas.so is an NCCL net plugin (ncclNet v8 to v12). Set NCCL_NET_PLUGIN=atlas
(and NCCL_NET=Atlas to fail instead of falling back) and NCCL carries each inter-node
connection over many TCP streams (io_uring, epoll fallback), with temporal link sharing
across a WAN, bubble prediction for the bubbletea sidecar and per-stream statistics that
atlas-netstat reads.")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME atlas-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION net)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SUGGESTS "libnccl-net-atlas, iproute2")
set(CPACK_COMPONENT_TOOLS_DESCRIPTION
    "Atlas tools: netstat, bubble viewer, WAN arbiter, WAN emulator
atlas-netstat shows every Atlas comm on the node with its TCP streams (also as Prometheus
metrics), atlas-bubbles watches, records and scores the bubble channels, atlas-arbiter
grants a datacenter's WAN link to flows in time slots, atlas-wanem emulates a WAN link
between network namespaces, and atlas-tcp-cc registers atlas_rate, the TCP congestion
control that sends a granted flow at the link's measured rate.")

set(CPACK_DEBIAN_BUBBLETEA_PACKAGE_NAME atlas-bubbletea)
set(CPACK_DEBIAN_BUBBLETEA_PACKAGE_SECTION net)
set(CPACK_DEBIAN_BUBBLETEA_PACKAGE_SUGGESTS "libnccl-net-atlas")
set(CPACK_DEBIAN_BUBBLETEA_PACKAGE_CONTROL_EXTRA ${_atlas_debian}/conffiles)
set(CPACK_COMPONENT_BUBBLETEA_DESCRIPTION
    "bubbletea: LLM prefill inside the GPU idle time of Atlas training
bubbletea runs one sidecar per GPU next to an Atlas training job. It reads the predicted
idle windows the plugin publishes, runs prefill requests (OpenAI-style HTTP) inside them
and hands the KV cache to a decode service. The systemd unit template bubbletea@.service
runs one instance per GPU (bubbletea@N, configured in /etc/atlas/bubbletea-N.conf).")

include(CPack)
