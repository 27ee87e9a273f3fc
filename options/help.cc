#include "options/help.h"

#include <cstring>

namespace atlas::options {
namespace {

constexpr size_t kNameColumn = 28;
constexpr size_t kWidth = 100;

bool showsAccepted(const OptionInfo& o) {
    return o.takes_value && std::strcmp(o.type, "string") != 0 &&
           std::strcmp(o.type, "path") != 0 && std::strcmp(o.type, "secret") != 0;
}

// Appends `text` wrapped at kWidth, continuation lines indented to `indent`; `col` is the
// current column.
void wrapInto(std::string* out, const std::string& text, size_t indent, size_t col) {
    size_t pos = 0;
    bool first = true;
    while (pos < text.size()) {
        size_t sp = text.find(' ', pos);
        if (sp == std::string::npos) {
            sp = text.size();
        }
        const size_t len = sp - pos;
        if (!first && col + 1 + len > kWidth) {
            *out += "\n" + std::string(indent, ' ');
            col = indent;
        } else if (!first) {
            *out += ' ';
            ++col;
        }
        out->append(text, pos, len);
        col += len;
        first = false;
        pos = sp + 1;
    }
    *out += '\n';
}

// Whether alias `a` leads to `name`, directly or through other aliases.
bool leadsTo(const Alias& a, std::string_view name, const std::vector<Alias>& aliases) {
    std::string_view target = a.target;
    for (int hops = 0; hops < 4; ++hops) {
        if (target == name) {
            return true;
        }
        const Alias* next = nullptr;
        for (const Alias& b : aliases) {
            if (b.name == target) {
                next = &b;
            }
        }
        if (next == nullptr) {
            return false;
        }
        target = next->target;
    }
    return false;
}

std::vector<std::string_view> spellings(const OptionInfo& o, const std::vector<Alias>& aliases,
                                        bool env, bool deprecated) {
    std::vector<std::string_view> out;
    for (const Alias& a : aliases) {
        if (!a.renamed && leadsTo(a, o.name, aliases) && isEnvName(a.name) == env &&
            a.deprecated == deprecated) {
            out.push_back(a.name);
        }
    }
    return out;
}

std::string details(const OptionInfo& o, const std::vector<Alias>& aliases) {
    std::vector<std::string> parts;
    if (showsAccepted(o)) {
        parts.push_back(o.accepted);
    }
    if (!o.default_text.empty() && o.takes_value) {
        parts.push_back("default " + o.default_text);
    }
    for (std::string_view env : spellings(o, aliases, true, false)) {
        parts.push_back("env " + std::string(env));
    }
    std::string old;
    for (std::string_view a : spellings(o, aliases, false, true)) {
        old += (old.empty() ? "old spelling " : ", ") + std::string(a);
    }
    if (!old.empty()) {
        parts.push_back(old);
    }
    std::string renamed;
    for (const Alias& a : aliases) {
        if (a.renamed && a.target == o.name) {
            renamed += (renamed.empty() ? "renamed from " : ", ") + std::string(a.name);
        }
    }
    if (!renamed.empty()) {
        parts.push_back(renamed);
    }
    std::string s;
    for (const std::string& p : parts) {
        s += (s.empty() ? "" : "; ") + p;
    }
    return s.empty() ? s : " [" + s + "]";
}

std::string cell(std::string text) {
    std::string out;
    for (char c : text) {
        out += c == '|' ? std::string("\\|") : std::string(1, c);
    }
    return out;
}

}  // namespace

std::string formatFlagHelp(const std::vector<const OptionInfo*>& options,
                           const std::vector<Alias>& aliases) {
    std::string out;
    for (const OptionInfo* o : options) {
        if (isEnvName(o->name)) {
            continue;
        }
        std::string head = "  ";
        for (std::string_view s : spellings(*o, aliases, false, false)) {
            head += std::string(s) + ", ";
        }
        head += std::string(o->name);
        if (o->takes_value) {
            head += " " + std::string(o->metavar[0] != '\0' ? o->metavar : "VALUE");
        }
        out += head;
        size_t col = head.size();
        if (col + 2 > kNameColumn) {
            out += "\n" + std::string(kNameColumn, ' ');
        } else {
            out += std::string(kNameColumn - col, ' ');
        }
        wrapInto(&out, std::string(o->doc) + details(*o, aliases), kNameColumn, kNameColumn);
    }
    return out;
}

std::string formatEnvHelp(const std::vector<const OptionInfo*>& options,
                          const std::vector<Alias>& aliases) {
    std::string out;
    auto line = [&](std::string_view name, const std::string& text) {
        std::string head = "  " + std::string(name);
        out += head;
        if (head.size() + 2 > kNameColumn) {
            out += "\n" + std::string(kNameColumn, ' ');
        } else {
            out += std::string(kNameColumn - head.size(), ' ');
        }
        wrapInto(&out, text, kNameColumn, kNameColumn);
    };
    for (const OptionInfo* o : options) {
        if (isEnvName(o->name)) {
            line(o->name, std::string(o->doc) + details(*o, aliases));
        }
        for (const Alias& a : aliases) {
            if (a.target == o->name && isEnvName(a.name) && !isEnvName(o->name) && !a.deprecated &&
                !a.renamed) {
                line(a.name, "as " + std::string(o->name) + " when it is not given");
            }
        }
    }
    for (const Alias& a : aliases) {
        if (a.deprecated && isEnvName(a.name)) {
            line(a.name, "deprecated spelling of " + std::string(a.target) + " (warns)");
        }
    }
    return out;
}

std::string markdownTable(const std::vector<const OptionInfo*>& options,
                          const std::vector<Alias>& aliases, bool env_names) {
    std::string out = env_names ? "| Variable | Type | Default | Accepted | Meaning |\n"
                                  "|---|---|---|---|---|\n"
                                : "| Flag | Value | Default | Meaning |\n|---|---|---|---|\n";
    for (const OptionInfo* o : options) {
        if (env_names && !isEnvName(o->name)) {
            continue;
        }
        std::string names = "`" + std::string(o->name) + "`";
        for (std::string_view s : spellings(*o, aliases, env_names, false)) {
            names += ", `" + std::string(s) + "`";
        }
        std::string meaning = o->doc;
        for (std::string_view s : spellings(*o, aliases, true, false)) {
            if (!env_names) {
                meaning += "; env `" + std::string(s) + "`";
            }
        }
        for (bool env : {false, true}) {
            for (std::string_view s : spellings(*o, aliases, env, true)) {
                meaning += "; old spelling `" + std::string(s) + "` (warns)";
            }
        }
        for (const Alias& a : aliases) {
            if (a.renamed && a.target == o->name) {
                meaning += "; renamed from `" + std::string(a.name) + "` (refused)";
            }
        }
        const std::string def = !o->takes_value           ? "-"
                                : o->default_text.empty() ? (env_names ? "unset" : "-")
                                                          : "`" + o->default_text + "`";
        if (env_names) {
            out += "| " + names + " | " + o->type + " | " + cell(def) + " | " + cell(o->accepted) +
                   " | " + cell(meaning) + " |\n";
        } else {
            std::string value = "-";
            if (o->takes_value) {
                value = o->metavar[0] != '\0' ? "`" + std::string(o->metavar) + "`" : o->type;
                if (showsAccepted(*o)) {
                    value += ": " + o->accepted;
                }
            }
            out += "| " + names + " | " + cell(value) + " | " + cell(def) + " | " + cell(meaning) +
                   " |\n";
        }
    }
    return out;
}

}  // namespace atlas::options
