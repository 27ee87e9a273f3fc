# Flattens one JSON document into lines "path<TAB>value", one per scalar, so shell scripts can
# read atlas-net-perf and atlas-wanem output without jq or Python:
#   {"configs": [{"name": "a", "rows": [{"gbps": 0.9}]}]}  ->  configs.0.name<TAB>a
#                                                            configs.0.rows.0.gbps<TAB>0.9
# Object keys are joined with '.', array elements are numbered from 0. Strings are printed
# without their quotes; the escapes \" \\ \/ \n \t are decoded, others are kept as written.
# Literals (numbers, true, false, null) are printed as written. Empty objects and arrays print
# nothing. On malformed input it prints "json-flat: ..." to stderr and exits 1.
# Usage: awk -f scripts/bench/json-flat.awk FILE   (POSIX awk: mawk and gawk both work)

function fail(msg) {
    printf "json-flat: %s at offset %d of %s\n", msg, pos, FILENAME > "/dev/stderr"
    failed = 1
    exit 1
}

function skipSpace() {
    while (pos <= len && index(" \t\r\n", substr(text, pos, 1)) > 0) {
        pos++
    }
}

function parseString(    out, c, e) {
    if (substr(text, pos, 1) != "\"") {
        fail("expected a string")
    }
    pos++
    out = ""
    while (pos <= len) {
        c = substr(text, pos, 1)
        if (c == "\"") {
            pos++
            return out
        }
        if (c == "\\") {
            e = substr(text, pos + 1, 1)
            if (e == "n") {
                out = out "\n"
            } else if (e == "t") {
                out = out "\t"
            } else if (e == "\"" || e == "\\" || e == "/") {
                out = out e
            } else {
                out = out c e
            }
            pos += 2
            continue
        }
        out = out c
        pos++
    }
    fail("unterminated string")
}

function parseLiteral(    start, c) {
    start = pos
    while (pos <= len) {
        c = substr(text, pos, 1)
        if (index(",]} \t\r\n", c) > 0) {
            break
        }
        pos++
    }
    if (pos == start) {
        fail("expected a value")
    }
    return substr(text, start, pos - start)
}

function join(path, key) {
    return path == "" ? key : path "." key
}

function parseValue(path,    c) {
    skipSpace()
    if (pos > len) {
        fail("unexpected end of input")
    }
    c = substr(text, pos, 1)
    if (c == "{") {
        pos++
        parseObject(path)
    } else if (c == "[") {
        pos++
        parseArray(path)
    } else if (c == "\"") {
        print path "\t" parseString()
    } else {
        print path "\t" parseLiteral()
    }
}

function parseObject(path,    key, c) {
    skipSpace()
    if (substr(text, pos, 1) == "}") {
        pos++
        return
    }
    while (!failed) {
        skipSpace()
        key = parseString()
        skipSpace()
        if (substr(text, pos, 1) != ":") {
            fail("expected ':'")
        }
        pos++
        parseValue(join(path, key))
        skipSpace()
        c = substr(text, pos, 1)
        pos++
        if (c == "}") {
            return
        }
        if (c != ",") {
            fail("expected ',' or '}'")
        }
    }
}

function parseArray(path,    k, c) {
    skipSpace()
    if (substr(text, pos, 1) == "]") {
        pos++
        return
    }
    for (k = 0; !failed; k++) {
        parseValue(join(path, k))
        skipSpace()
        c = substr(text, pos, 1)
        pos++
        if (c == "]") {
            return
        }
        if (c != ",") {
            fail("expected ',' or ']'")
        }
    }
}

{ text = text $0 "\n" }

END {
    if (failed) {
        exit 1
    }
    len = length(text)
    pos = 1
    parseValue("")
    skipSpace()
    if (!failed && pos <= len) {
        fail("trailing characters")
    }
}
