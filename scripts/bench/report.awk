# Turns bench-wan's raw results into the table, the JSON document or a gnuplot script.
#   awk -F'\t' -v mode=table|json|plot [-v meta="k=v ..."] [-v dir=PLOTDIR] \
#       -f scripts/bench/report.awk scenarios.tsv results.tsv
# scenarios.tsv: name, description, rtt_ms, link_mbit, cc, ping_ms, loadavg, atlas_streams,
#                emulator args (one line per scenario, in run order).
# results.tsv:   header line, then one line per measurement (columns named in the header).
# Ratios: x link = Gbit/s / link rate; x (a) = Gbit/s / (a) one stream at the same size.
# Targets (docs/bench-wan.md) are evaluated at the largest message size measured.

function num(x) { return (x == "-" || x == "") ? -1 : x + 0 }
function ratio(a, b) { return (a < 0 || b <= 0) ? -1 : a / b }
function fmt(x, f) { return x < 0 ? "-" : sprintf(f, x) }
function jnum(x, f) { return x < 0 ? "null" : sprintf(f, x) }
function jstr(s) {
    gsub(/\\/, "\\\\", s)
    gsub(/"/, "\\\"", s)
    gsub(/\t/, " ", s)
    return "\"" s "\""
}
# "0.9/-/1.2" -> "0.9, null, 1.2"
function jlist(s,    n, a, i, o) {
    n = split(s, a, "/")
    o = ""
    for (i = 1; i <= n; i++) o = o (i > 1 ? ", " : "") (a[i] ~ /^[0-9.]+$/ ? a[i] : "null")
    return o
}
function human(b) {
    if (b >= 1073741824 && b % 1073741824 == 0) return (b / 1073741824) "G"
    if (b >= 1048576 && b % 1048576 == 0) return (b / 1048576) "M"
    if (b >= 1024 && b % 1024 == 0) return (b / 1024) "K"
    return b
}

# Gbit/s of (scenario, config) at a size; -1 when missing or failed.
function g(sc, cfg, size,    k) {
    k = sc SUBSEP cfg SUBSEP size
    return (k in gbps) ? gbps[k] : -1
}

# Target checks: appends to tgt_* arrays.
function target(name, sc, metric, value, threshold) {
    nt++
    t_name[nt] = name; t_sc[nt] = sc; t_metric[nt] = metric
    t_value[nt] = value; t_thr[nt] = threshold
    t_state[nt] = value < 0 ? "n/a" : (value >= threshold ? "MET" : "MISSED")
}

function evaluateTargets(    big) {
    big = maxsize
    if ("rtt100" in have) {
        target("100 ms, 1 Gbit/s: Atlas / link rate", "rtt100", "atlas_x_link",
               ratio(g("rtt100", "atlas", big), link["rtt100"] / 1000), 0.90)
        target("100 ms, 1 Gbit/s: Atlas / one stream", "rtt100", "atlas_x_one_stream",
               ratio(g("rtt100", "atlas", big), g("rtt100", "one-stream", big)), 3)
    }
    if ("top" in have) {
        target("50 ms, top rate: Atlas / iperf3 -P N", "top", "atlas_x_iperf3",
               ratio(g("top", "atlas", big), g("top", "iperf3", 0)), 0.85)
    }
    if ("hetero" in have) {
        target("heterogeneous: load-aware / even split (16 streams)", "hetero",
               "load16_x_even16", ratio(g("hetero", "load16", big), g("hetero", "even16", big)),
               1.5)
    }
    if ("loss1" in have) {
        target("50 ms, 1 % loss: Atlas / one stream", "loss1", "atlas_x_one_stream",
               ratio(g("loss1", "atlas", big), g("loss1", "one-stream", big)), 5)
    }
}

FNR == 1 { file++ }

file == 1 {
    ns++
    order[ns] = $1; have[$1] = 1
    desc[$1] = $2; rtt[$1] = $3; link[$1] = $4; cc[$1] = $5; ping[$1] = $6; load[$1] = $7
    nstreams[$1] = $8; args[$1] = $9; reps[$1] = $10 + 0
    next
}

file == 2 && FNR == 1 {
    for (i = 1; i <= NF; i++) col[$i] = i
    next
}

file == 2 {
    nr++
    for (c in col) r[nr, c] = $(col[c])
    sc = $(col["scenario"]); cfg = $(col["config"]); size = $(col["size"]) + 0
    if ($(col["status"]) == "ok") gbps[sc, cfg, size] = num($(col["gbps"]))
    if (size > maxsize) maxsize = size
    if (!((sc, cfg) in seen_cfg)) {
        seen_cfg[sc, cfg] = 1
        ncfg[sc]++
        cfgs[sc, ncfg[sc]] = cfg
        label[sc, cfg] = $(col["label"])
    }
    if (!((sc, size) in seen_size) && size > 0) {
        seen_size[sc, size] = 1
        nsize[sc]++
        sizes[sc, nsize[sc]] = size
    }
    if ($(col["path_share_pct"]) != "-") paths_col[sc] = 1
}

END {
    evaluateTargets()
    if (mode == "table") table()
    else if (mode == "json") json()
    else if (mode == "plot") plot()
}

function table(    i, sc, j, k, gb, a, lr, hdr, line) {
    printf "\nbench-wan results (%s)\n", meta
    print "Gbit/s = message bytes x 8 / time per message (atlas-net-perf algbw x 8; window 8);"
    print "x link = Gbit/s / link rate (TCP goodput tops out at ~0.965: the cap counts IP headers);"
    print "x (a) = Gbit/s / (a) one stream at the same size; drops % = segments dropped by the"
    print "emulator (loss + full buffer) / segments sent, data direction; cpu % = whole machine."
    for (i = 1; i <= ns; i++) {
        sc = order[i]
        printf "\n== %s: %s; link %s Mbit/s; cc %s; ping %s ms; load %s; Atlas: %s stream(s)\n",
               sc, desc[sc], link[sc], cc[sc], ping[sc], load[sc], nstreams[sc]
        if (desc[sc] != "" && ncfg[sc] == 0) { print "   (no results)"; continue }
        hdr = sprintf("  %6s  %-17s %8s %7s %7s %7s %8s %5s %6s", "size", "config", "Gbit/s",
                      "x link", "x (a)", "streams", "drops %", "cpu %", "emu")
        if (paths_col[sc]) hdr = hdr "  path bytes %"
        if (reps[sc] > 1) hdr = hdr "  runs (Gbit/s; median shown)"
        print hdr
        for (k = 1; k <= nr; k++) {
            if (r[k, "scenario"] != sc) continue
            gb = (r[k, "status"] == "ok") ? num(r[k, "gbps"]) : -1
            lr = ratio(gb, link[sc] / 1000)
            a = (r[k, "config"] == "iperf3") ? -1 : ratio(gb, g(sc, "one-stream", r[k, "size"] + 0))
            line = sprintf("  %6s  %-17s %8s %7s %7s %7s %8s %5s %6s",
                           r[k, "size"] + 0 ? human(r[k, "size"] + 0) : "-", r[k, "label"],
                           r[k, "status"] == "ok" ? fmt(gb, "%.3f") : "FAILED", fmt(lr, "%.2f"),
                           fmt(a, "%.2f"), r[k, "streams"], r[k, "drop_pct"], r[k, "cpu_busy_pct"],
                           r[k, "emu_cores"])
            if (paths_col[sc]) line = line sprintf("  %-12s", r[k, "path_share_pct"])
            if (reps[sc] > 1) line = line "  " r[k, "reps_gbps"]
            print line
        }
        gb = g(sc, "iperf3", 0)
        if (gb > 0 && g(sc, "atlas", maxsize) > 0) {
            printf "   Atlas at %s / iperf3 -P %s = %.2f\n", human(maxsize), nstreams[sc],
                   g(sc, "atlas", maxsize) / gb
        }
    }
    if (nt > 0) {
        printf "\nTargets (at %s messages):\n", human(maxsize)
        for (k = 1; k <= nt; k++) {
            printf "  %-7s %-52s %6s  (need >= %s)\n", t_state[k], t_name[k],
                   fmt(t_value[k], "%.2f"), t_thr[k]
        }
    }
}

function json(    n, kv, i, sc, k, gb, first, sep) {
    print "{"
    print "  \"tool\": \"bench-wan\","
    print "  \"format_version\": 1,"
    n = split(meta, kv, " ")
    for (i = 1; i <= n; i++) {
        split(kv[i], p, "=")
        printf "  %s: %s,\n", jstr(p[1]), (p[2] ~ /^-?[0-9]+(\.[0-9]+)?$/) ? p[2] : jstr(p[2])
    }
    print "  \"sizes\": ["
    for (i = 1; i <= nsize[order[1]]; i++) {
        printf "    %d%s\n", sizes[order[1], i], i < nsize[order[1]] ? "," : ""
    }
    print "  ],"
    print "  \"scenarios\": ["
    for (i = 1; i <= ns; i++) {
        sc = order[i]
        print "    {"
        printf "      \"name\": %s, \"description\": %s,\n", jstr(sc), jstr(desc[sc])
        printf "      \"rtt_ms\": %s, \"link_mbit\": %s, \"cc\": %s, \"ping_ms\": %s,\n",
               rtt[sc] + 0, link[sc] + 0, jstr(cc[sc]),
               ping[sc] ~ /^[0-9.]+$/ ? ping[sc] : "null"
        printf "      \"loadavg\": %s, \"atlas_streams\": %s, \"runs_per_point\": %d,\n",
               jstr(load[sc]), nstreams[sc] ~ /^[0-9]+$/ ? nstreams[sc] : "null", reps[sc]
        printf "      \"emulator_args\": %s,\n", jstr(args[sc])
        print "      \"results\": ["
        first = 1
        for (k = 1; k <= nr; k++) {
            if (r[k, "scenario"] != sc) continue
            gb = (r[k, "status"] == "ok") ? num(r[k, "gbps"]) : -1
            if (!first) print ","
            first = 0
            printf "        {\"config\": %s, \"label\": %s, \"size\": %d, \"iters\": %s, " \
                   "\"warmup\": %s, \"ok\": %s, \"gbps\": %s, \"x_link\": %s, " \
                   "\"x_one_stream\": %s, \"streams\": %s, \"drop_pct\": %s, " \
                   "\"loss_drops\": %s, \"queue_drops\": %s, \"path_share_pct\": %s, " \
                   "\"cpu_busy_pct\": %s, \"emulator_cores\": %s, \"seconds\": %s, " \
                   "\"runs_gbps\": [%s]}",
                   jstr(r[k, "config"]), jstr(r[k, "label"]), r[k, "size"], r[k, "iters"] + 0,
                   r[k, "warmup"] + 0, r[k, "status"] == "ok" ? "true" : "false",
                   jnum(gb, "%.4f"), jnum(ratio(gb, link[sc] / 1000), "%.4f"),
                   r[k, "config"] == "iperf3" ? "null" : \
                       jnum(ratio(gb, g(sc, "one-stream", r[k, "size"] + 0)), "%.4f"),
                   r[k, "streams"] ~ /^[0-9]+$/ ? r[k, "streams"] : "null",
                   r[k, "drop_pct"] ~ /^[0-9.]+$/ ? r[k, "drop_pct"] : "null",
                   r[k, "loss_drops"] ~ /^[0-9]+$/ ? r[k, "loss_drops"] : "null",
                   r[k, "queue_drops"] ~ /^[0-9]+$/ ? r[k, "queue_drops"] : "null",
                   r[k, "path_share_pct"] == "-" ? "null" : "[" r[k, "path_share_pct"] "]",
                   r[k, "cpu_busy_pct"] ~ /^[0-9.]+$/ ? r[k, "cpu_busy_pct"] : "null",
                   r[k, "emu_cores"] ~ /^[0-9.]+$/ ? r[k, "emu_cores"] : "null",
                   r[k, "seconds"] ~ /^[0-9.]+$/ ? r[k, "seconds"] : "null",
                   jlist(r[k, "reps_gbps"])
        }
        print ""
        print "      ]"
        printf "    }%s\n", i < ns ? "," : ""
    }
    print "  ],"
    printf "  \"targets_at_size\": %d,\n", maxsize
    print "  \"targets\": ["
    for (k = 1; k <= nt; k++) {
        printf "    {\"name\": %s, \"scenario\": %s, \"metric\": %s, \"value\": %s, " \
               "\"threshold\": %s, \"state\": %s}%s\n", jstr(t_name[k]), jstr(t_sc[k]),
               jstr(t_metric[k]), jnum(t_value[k], "%.4f"), t_thr[k], jstr(t_state[k]),
               k < nt ? "," : ""
    }
    print "  ]"
    print "}"
}

# One PNG per scenario (throughput vs message size, a line per configuration, the link rate
# and iperf3 as horizontal lines) and an overview with every scenario.
function plotScenario(sc, idx,    j, cfg, k, sep, cmd, ib, lr) {
    printf "set title %s\n", jstr(sc ": " desc[sc] " (cc " cc[sc] ")")
    cmd = ""
    sep = ""
    for (j = 1; j <= ncfg[sc]; j++) {
        cfg = cfgs[sc, j]
        if (cfg == "iperf3") continue
        printf "$d%d_%d << EOD\n", idx, j
        for (k = 1; k <= nsize[sc]; k++) {
            if (g(sc, cfg, sizes[sc, k]) >= 0) {
                printf "%.6f %.4f\n", sizes[sc, k] / 1048576, g(sc, cfg, sizes[sc, k])
            }
        }
        print "EOD"
        cmd = cmd sep sprintf("$d%d_%d using 1:2 with linespoints lw 2 pt 7 title %s", idx, j,
                              jstr(label[sc, cfg]))
        sep = ", "
    }
    lr = link[sc] / 1000
    cmd = cmd sep sprintf("%.4f with lines dt 2 lc rgb 'black' title 'link rate (%g Gbit/s)'",
                          lr, lr)
    ib = g(sc, "iperf3", 0)
    if (ib > 0) {
        cmd = cmd sprintf(", %.4f with lines dt 3 lw 2 lc rgb 'dark-red' title " \
                          "'(d) iperf3 -P %s (%.2f)'", ib, nstreams[sc], ib)
    }
    print "plot " cmd
}

function plot(    i, sc, k, xt, sep) {
    print "set encoding utf8"
    print "set logscale x 2"
    print "set grid"
    print "set key outside right top"
    print "set xlabel 'message size (MiB)'"
    print "set ylabel 'Gbit/s'"
    print "set yrange [0:*]"
    print "set offsets graph 0.05, graph 0.05, graph 0.12, 0"
    xt = ""
    sep = ""
    for (k = 1; k <= nsize[order[1]]; k++) {
        xt = xt sep sprintf("\"%s\" %.6f", human(sizes[order[1], k]),
                            sizes[order[1], k] / 1048576)
        sep = ", "
    }
    if (xt != "") print "set xtics (" xt ")"
    for (i = 1; i <= ns; i++) {
        sc = order[i]
        if (ncfg[sc] == 0) continue
        print "set terminal pngcairo size 960,600 noenhanced font ',11'"
        printf "set output '%s/%s.png'\n", dir, sc
        plotScenario(sc, i)
        print "unset output"
    }
    print "set terminal pngcairo size 1800,900 noenhanced font ',9'"
    printf "set output '%s/overview.png'\n", dir
    printf "set multiplot layout 2,%d title 'bench-wan: Gbit/s vs message size'\n",
           int((ns + 1) / 2)
    print "unset xlabel"
    print "set key below horizontal maxrows 3 font ',8'"
    for (i = 1; i <= ns; i++) {
        sc = order[i]
        if (ncfg[sc] == 0) continue
        plotScenario(sc, i)
    }
    print "unset multiplot"
    print "unset output"
}
