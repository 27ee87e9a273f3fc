# Each component appends its atlas_add_fuzzer(...) call here.
# The options layer, compiled into the targets that parse options so libFuzzer instruments it.
set(ATLAS_OPTIONS_SOURCES ${PROJECT_SOURCE_DIR}/options/env.cc ${PROJECT_SOURCE_DIR}/options/help.cc
    ${PROJECT_SOURCE_DIR}/options/kinds.cc ${PROJECT_SOURCE_DIR}/options/value.cc)
# atlas-wanem frame parser + GSO splitter. The parser sources are atlas_wanem_packet_sources'
# list, given as SOURCES (not LIBS) so that replay builds take them from atlas_wanem_core instead.
atlas_add_fuzzer(fuzz_wanem_packet SOURCES ${PROJECT_SOURCE_DIR}/tests/wan/fuzz_wanem_packet.cc $<TARGET_PROPERTY:atlas_wanem_packet_sources,INTERFACE_SOURCES> LIBS atlas::common REPLAY_LIBS atlas_wanem_core)
target_include_directories(fuzz_wanem_packet PRIVATE ${PROJECT_SOURCE_DIR})
# bubbletea engine: safetensors header + config.json parsers, compiled in so libFuzzer instruments them
atlas_add_fuzzer(fuzz_safetensors SOURCES ${PROJECT_SOURCE_DIR}/tests/bubbletea/engine_fuzz_safetensors.cc ${PROJECT_SOURCE_DIR}/bubbletea/engine/safetensors.cc ${PROJECT_SOURCE_DIR}/bubbletea/engine/model_config.cc ${PROJECT_SOURCE_DIR}/bubbletea/engine/dtype.cc LIBS atlas::common nlohmann_json::nlohmann_json REPLAY_LIBS atlas::engine)
target_include_directories(fuzz_safetensors PRIVATE ${PROJECT_SOURCE_DIR})
atlas_add_fuzzer(fuzz_transport_wire SOURCES fuzz_transport_wire.cc LIBS atlas::transport)
# transport recovery: the confirmation frame (decoded and applied to a SendLedger) and the rejoin handshake
atlas_add_fuzzer(fuzz_transport_confirm SOURCES fuzz_transport_confirm.cc LIBS atlas::transport)
atlas_add_fuzzer(fuzz_transport_rejoin SOURCES fuzz_transport_rejoin.cc LIBS atlas::transport)
# bubble channel reader validation (segment images); reader sources compiled in so libFuzzer instruments them
atlas_add_fuzzer(fuzz_bubble_channel SOURCES ${PROJECT_SOURCE_DIR}/tests/channel/fuzz_bubble_channel.cc ${PROJECT_SOURCE_DIR}/channel/channel_reader.cc ${PROJECT_SOURCE_DIR}/channel/segment.cc ${PROJECT_SOURCE_DIR}/channel/channel_name.cc ${PROJECT_SOURCE_DIR}/channel/channel_types.cc LIBS atlas::common REPLAY_LIBS atlas::bubble_channel)
target_include_directories(fuzz_bubble_channel PRIVATE ${PROJECT_SOURCE_DIR})
# atlas-net-perf: bootstrap frames/plans from the peer and the CLI grammar (sources compiled in so libFuzzer instruments them)
atlas_add_fuzzer(fuzz_net_perf_parse SOURCES ${PROJECT_SOURCE_DIR}/tests/abi/fuzz_net_perf_parse.cc ${PROJECT_SOURCE_DIR}/perf/atlas-net-perf/options.cc ${PROJECT_SOURCE_DIR}/perf/atlas-net-perf/bootstrap.cc ${PROJECT_SOURCE_DIR}/plugin_host/plugin_host.cc ${PROJECT_SOURCE_DIR}/plugin_host/plugin_host_process.cc ${ATLAS_OPTIONS_SOURCES} LIBS atlas::common nlohmann_json::nlohmann_json ${CMAKE_DL_LIBS} REPLAY_LIBS atlas_net_perf_core atlas::plugin_host)
target_include_directories(fuzz_net_perf_parse PRIVATE ${PROJECT_SOURCE_DIR})
# plugin: ATLAS_* value parsers, ATLAS_SOCKET_IFNAME matcher, sysfs speed (sources compiled in so libFuzzer instruments them)
atlas_add_fuzzer(fuzz_plugin_params SOURCES ${PROJECT_SOURCE_DIR}/tests/unit/fuzz_plugin_params.cc ${PROJECT_SOURCE_DIR}/plugin/params.cc ${PROJECT_SOURCE_DIR}/plugin/devices.cc ${PROJECT_SOURCE_DIR}/transport/faults.cc ${ATLAS_OPTIONS_SOURCES} LIBS atlas::common REPLAY_LIBS atlas::plugin_internal)
target_include_directories(fuzz_plugin_params PRIVATE ${PROJECT_SOURCE_DIR})
# bubbletea daemon: HTTP requests through Beast's parser + /v1/completions validation, and the KV hand-off decoders (sources compiled in so libFuzzer instruments them)
atlas_add_fuzzer(fuzz_bubbletea_request SOURCES ${PROJECT_SOURCE_DIR}/tests/bubbletea/daemon_fuzz_request.cc ${PROJECT_SOURCE_DIR}/bubbletea/daemon/api.cc LIBS atlas::common atlas::tokenizer nlohmann_json::nlohmann_json Boost::boost REPLAY_LIBS atlas::bubbletea_core)
target_include_directories(fuzz_bubbletea_request PRIVATE ${PROJECT_SOURCE_DIR})
atlas_add_fuzzer(fuzz_bubbletea_kv SOURCES ${PROJECT_SOURCE_DIR}/tests/bubbletea/daemon_fuzz_kv.cc ${PROJECT_SOURCE_DIR}/bubbletea/daemon/kv_wire.cc LIBS atlas::common OpenSSL::Crypto REPLAY_LIBS atlas::bubbletea_core)
target_include_directories(fuzz_bubbletea_kv PRIVATE ${PROJECT_SOURCE_DIR})
# arbiter: the arbitration protocol decoder and the node-local segment validation (sources compiled in so libFuzzer instruments them)
atlas_add_fuzzer(fuzz_arbiter_protocol SOURCES ${PROJECT_SOURCE_DIR}/tests/arbiter/fuzz_arbiter_protocol.cc ${PROJECT_SOURCE_DIR}/arbiter/protocol.cc LIBS atlas::common OpenSSL::Crypto REPLAY_LIBS atlas::arbiter_protocol)
target_include_directories(fuzz_arbiter_protocol PRIVATE ${PROJECT_SOURCE_DIR})
atlas_add_fuzzer(fuzz_arbiter_shm SOURCES ${PROJECT_SOURCE_DIR}/tests/arbiter/fuzz_arbiter_shm.cc ${PROJECT_SOURCE_DIR}/plugin/wan/shm_layout.cc ${PROJECT_SOURCE_DIR}/scheduler/temporal_state.cc LIBS atlas::common REPLAY_LIBS atlas::plugin_internal)
target_include_directories(fuzz_arbiter_shm PRIVATE ${PROJECT_SOURCE_DIR})
# transport: the sealed-frame decoder (seal sources compiled in so libFuzzer instruments them)
atlas_add_fuzzer(fuzz_transport_seal SOURCES ${PROJECT_SOURCE_DIR}/tests/transport/fuzz_transport_seal.cc ${PROJECT_SOURCE_DIR}/transport/seal.cc ${PROJECT_SOURCE_DIR}/transport/seal_stream.cc ${PROJECT_SOURCE_DIR}/transport/wire.cc LIBS atlas::common OpenSSL::Crypto REPLAY_LIBS atlas::transport)
target_include_directories(fuzz_transport_seal PRIVATE ${PROJECT_SOURCE_DIR})
# stats segment reader (netstat/): header and record validation over arbitrary images (sources compiled in so libFuzzer instruments them)
atlas_add_fuzzer(fuzz_netstat_segment SOURCES ${PROJECT_SOURCE_DIR}/tests/netstat/fuzz_netstat_segment.cc ${PROJECT_SOURCE_DIR}/netstat/reader.cc ${PROJECT_SOURCE_DIR}/netstat/render.cc LIBS atlas::common REPLAY_LIBS atlas::netstat)
target_include_directories(fuzz_netstat_segment PRIVATE ${PROJECT_SOURCE_DIR})
# bubbletea tokenizer: tokenizer.json loading (hostile files) and encode/decode of arbitrary bytes (the library is instrumented through atlas_build_flags)
atlas_add_fuzzer(fuzz_tokenizer_load SOURCES ${PROJECT_SOURCE_DIR}/tests/bubbletea/tokenizer_fuzz_load.cc LIBS atlas::tokenizer)
target_include_directories(fuzz_tokenizer_load PRIVATE ${PROJECT_SOURCE_DIR})
atlas_add_fuzzer(fuzz_tokenizer_encode SOURCES ${PROJECT_SOURCE_DIR}/tests/bubbletea/tokenizer_fuzz_encode.cc LIBS atlas::tokenizer nlohmann_json::nlohmann_json)
target_include_directories(fuzz_tokenizer_encode PRIVATE ${PROJECT_SOURCE_DIR})
# options/: the command-line and environment readers over every kind, and atlas-arbiter's table
atlas_add_fuzzer(fuzz_options SOURCES fuzz_options.cc LIBS atlas::arbiter atlas::options)
