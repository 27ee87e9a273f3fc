# Each component appends its atlas_add_fuzzer(...) call here.
atlas_add_fuzzer(fuzz_plugin_params SOURCES ${PROJECT_SOURCE_DIR}/tests/unit/fuzz_plugin_params.cc ${PROJECT_SOURCE_DIR}/plugin/params.cc ${PROJECT_SOURCE_DIR}/plugin/devices.cc LIBS atlas::common)
target_include_directories(fuzz_plugin_params PRIVATE ${PROJECT_SOURCE_DIR})
atlas_add_fuzzer(fuzz_wanem_packet SOURCES ${PROJECT_SOURCE_DIR}/tests/wan/fuzz_wanem_packet.cc LIBS atlas_wanem_packet_sources)  # atlas-wanem frame parser + GSO splitter
atlas_add_fuzzer(fuzz_safetensors SOURCES ${PROJECT_SOURCE_DIR}/tests/bubbletea/engine_fuzz_safetensors.cc ${PROJECT_SOURCE_DIR}/bubbletea/engine/safetensors.cc ${PROJECT_SOURCE_DIR}/bubbletea/engine/model_config.cc ${PROJECT_SOURCE_DIR}/bubbletea/engine/dtype.cc LIBS atlas::common nlohmann_json::nlohmann_json)
target_include_directories(fuzz_safetensors PRIVATE ${PROJECT_SOURCE_DIR})
