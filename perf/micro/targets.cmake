# Each component appends its atlas_add_microbench(...) call here.
