# Each component appends its atlas_add_fuzzer(...) call here.
