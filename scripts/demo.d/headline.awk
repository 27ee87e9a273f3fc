# The demo's headline: one table of every section's figure, from the results file the
# sections wrote (scripts/demo.d/lib.sh, `result`), and the same as JSON.
# SECONDS lines: key, seconds its part took. RESULTS lines: key, title, status
# (measured|skipped|failed), figure, value, unit, detail.
#   awk -F'\t' -v json=FILE -v wall_s=S -v build_s=S -v started=ISO8601 -v order=K1,K2,.. \
#       -f headline.awk SECONDS RESULTS
# Rows come in the order of `order` (keys not in it last, as recorded).
# Prints a markdown table on stdout; writes FILE (docs/demo.md describes both).

function jstr(s) {
    gsub(/\\/, "\\\\", s)
    gsub(/"/, "\\\"", s)
    return "\"" s "\""
}
function shown(i) {
    if (status[i] == "measured") return value[i] unit[i]
    return status[i] == "failed" ? "FAILED" : "skipped"
}
function pad(s, w) { return sprintf("%-" w "s", s) }

FILENAME == ARGV[1] { secs[$1] = $2; next }
NF == 7 {
    m++
    rk[m] = $1; rt[m] = $2; rs[m] = $3; rf[m] = $4; rv[m] = $5; ru[m] = $6; rd[m] = $7
    if ($3 == "failed") failed++
    if ($3 == "skipped") skipped++
}
NF != 7 && NF > 0 { printf "headline: malformed result line %d\n", NR > "/dev/stderr"; bad = 1 }

function take(r) {
    n++
    key[n] = rk[r]; title[n] = rt[r]; status[n] = rs[r]; figure[n] = rf[r]
    value[n] = rv[r]; unit[n] = ru[r]; detail[n] = rd[r]
    taken[r] = 1
}

END {
    k = split(order, ord, ",")
    for (o = 1; o <= k; o++)
        for (r = 1; r <= m; r++)
            if (!(r in taken) && rk[r] == ord[o]) take(r)
    for (r = 1; r <= m; r++)
        if (!(r in taken)) take(r)
    h[1] = "part"; h[2] = "figure"; h[3] = "result"; h[4] = "detail"; h[5] = "s"
    for (c = 1; c <= 5; c++) w[c] = length(h[c])
    for (i = 1; i <= n; i++) {
        cell[i, 1] = title[i]
        cell[i, 2] = status[i] == "measured" ? figure[i] : "-"
        cell[i, 3] = shown(i)
        cell[i, 4] = detail[i]
        cell[i, 5] = (key[i] in secs) ? secs[key[i]] : "-"
        for (c = 1; c <= 5; c++) if (length(cell[i, c]) > w[c]) w[c] = length(cell[i, c])
    }
    line = "|"
    sep = "|"
    for (c = 1; c <= 5; c++) {
        line = line " " pad(h[c], w[c]) " |"
        d = sprintf("%" (w[c] + 2) "s", "")
        gsub(/ /, "-", d)
        if (c == 3 || c == 5) d = substr(d, 1, length(d) - 1) ":"
        sep = sep d "|"
    }
    print line
    print sep
    for (i = 1; i <= n; i++) {
        line = "|"
        for (c = 1; c <= 5; c++) {
            v = cell[i, c]
            line = line " " (c == 3 || c == 5 ? sprintf("%" w[c] "s", v) : pad(v, w[c])) " |"
        }
        print line
    }

    printf "{\n  \"started\": %s,\n  \"wall_s\": %d,\n  \"build_s\": %d,\n", jstr(started), wall_s, build_s > json
    printf "  \"ok\": %s,\n  \"failed\": %d,\n  \"skipped\": %d,\n  \"sections\": [", ((failed || bad) ? "false" : "true"), failed, skipped > json
    for (i = 1; i <= n; i++) {
        printf "%s\n    {\"key\": %s, \"title\": %s, \"status\": %s, ", (i > 1 ? "," : ""), jstr(key[i]), jstr(title[i]), jstr(status[i]) > json
        if (key[i] in secs) printf "\"seconds\": %d, ", secs[key[i]] > json
        if (status[i] == "measured")
            printf "\"figure\": %s, \"value\": %s, \"unit\": %s, \"detail\": %s}", jstr(figure[i]), value[i] + 0, jstr(unit[i]), jstr(detail[i]) > json
        else
            printf "\"reason\": %s}", jstr(detail[i]) > json
    }
    printf "\n  ]\n}\n" > json
    exit bad
}
