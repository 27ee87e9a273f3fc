# Each component appends its atlas_add_microbench(...) call here.
atlas_add_microbench(engine_bench SOURCES engine_bench.cc LIBS atlas::engine)  # bubbletea CPU prefill engine
atlas_add_microbench(scheduler_bench SOURCES scheduler_bench.cc LIBS atlas::scheduler)  # link policy decisions, bubble predictor, period detector
