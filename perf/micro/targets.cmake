# Each component appends its atlas_add_microbench(...) call here.
atlas_add_microbench(engine_bench SOURCES engine_bench.cc LIBS atlas::engine atlas::options)  # bubbletea CPU prefill engine
atlas_add_microbench(striper_bench SOURCES striper_bench.cc LIBS atlas::transport)
atlas_add_microbench(bench_bubble_channel SOURCES ${PROJECT_SOURCE_DIR}/channel/bench/bubble_channel_bench.cc LIBS atlas::bubble_channel)  # bubble channel writer/reader hot paths
atlas_add_microbench(scheduler_bench SOURCES scheduler_bench.cc LIBS atlas::scheduler)  # link policy decisions, bubble predictor, period detector
atlas_add_microbench(bubbles_bench SOURCES bubbles_bench.cc LIBS atlas::plugin_internal)  # plugin bubble measurement per receive
atlas_add_microbench(seal_bench SOURCES seal_bench.cc LIBS atlas::transport OpenSSL::Crypto)  # frame sealing vs bare EVP AES-256-GCM, per core
atlas_add_microbench(tokenizer_bench SOURCES tokenizer_bench.cc LIBS atlas::tokenizer atlas::engine atlas::options nlohmann_json::nlohmann_json)  # bubbletea tokenizer: encode/decode MB/s, share of a 2k-token TTFT
target_compile_definitions(tokenizer_bench PRIVATE ATLAS_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
target_include_directories(tokenizer_bench PRIVATE ${PROJECT_SOURCE_DIR})
atlas_add_microbench(netstat_bench SOURCES netstat_bench.cc LIBS atlas::plugin_internal)  # stats segment hooks per message and per sample (docs/netstat.md)
atlas_add_microbench(handles_bench SOURCES handles_bench.cc LIBS atlas::plugin_internal)  # handle-table lookups against the isend/irecv/test calls they guard (docs/nccl-abi.md 7.3)
