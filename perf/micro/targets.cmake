# Each component appends its atlas_add_microbench(...) call here.
atlas_add_microbench(engine_bench SOURCES engine_bench.cc LIBS atlas::engine)  # bubbletea CPU prefill engine
