#include "bubbletea/tokenizer/bpe.h"

#include <algorithm>
#include <queue>

namespace atlas::bubbletea::tok {
namespace {

uint64_t pairKey(int32_t left, int32_t right) {
    return ((static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
            static_cast<uint32_t>(right)) +
           1;
}

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

}  // namespace

Result<BpeModel> BpeModel::build(TokenMap vocab,
                                 const std::vector<std::pair<std::string, std::string>>& merges,
                                 const BpeOptions& options) {
    BpeModel m;
    m.options_ = options;
    size_t cap = 16;
    while (cap < merges.size() * 2 + 2) {
        cap <<= 1;
    }
    m.table_.assign(cap, Merge{});
    std::string joined;
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const auto& [a, b] = merges[rank];
        const auto ia = vocab.find(a);
        const auto ib = vocab.find(b);
        joined.assign(a).append(b);
        const auto ij = vocab.find(joined);
        if (ia == vocab.end() || ib == vocab.end() || ij == vocab.end()) {
            const std::string which = ia == vocab.end()   ? "its left token"
                                      : ib == vocab.end() ? "its right token"
                                                          : "the merged token";
            return Status{Code::kInvalidArgument, "model.merges[" + std::to_string(rank) +
                                                      "]: " + which + " is not in the vocabulary"};
        }
        const uint64_t key = pairKey(ia->second, ib->second);
        size_t index = mix(key) & (cap - 1);
        while (m.table_[index].key != 0 && m.table_[index].key != key) {
            index = (index + 1) & (cap - 1);
        }
        if (m.table_[index].key == 0) {
            ++m.merge_count_;
        }
        m.table_[index] = Merge{key, static_cast<int32_t>(rank), ij->second};
    }
    for (int b = 0; b < 256; ++b) {
        const std::string one(1, static_cast<char>(b));
        const auto it = vocab.find(one);
        m.byte_ids_[b] = it == vocab.end() ? -1 : it->second;
    }
    m.vocab_ = std::move(vocab);
    return m;
}

const BpeModel::Merge* BpeModel::findMerge(int32_t left, int32_t right) const {
    const uint64_t key = pairKey(left, right);
    const size_t mask = table_.size() - 1;
    size_t index = mix(key) & mask;
    while (true) {
        const Merge& e = table_[index];
        if (e.key == key) {
            return &e;
        }
        if (e.key == 0) {
            return nullptr;
        }
        index = (index + 1) & mask;
    }
}

void BpeModel::initialSymbols(std::string_view word, std::vector<int32_t>* symbols) const {
    bool last_unk = false;
    auto push_unk = [&] {
        if (options_.unk_id < 0) {
            return;  // no unknown token: the symbol is dropped (tokenizers' behaviour)
        }
        if (!(options_.fuse_unk && last_unk)) {
            symbols->push_back(options_.unk_id);
        }
        last_unk = true;
    };
    for (char c : word) {
        const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
        if (id >= 0) {
            symbols->push_back(id);
            last_unk = false;
        } else {
            push_unk();
        }
    }
}

void BpeModel::encodeWord(std::string_view word, std::vector<int32_t>* out) const {
    if (options_.ignore_merges) {
        if (const auto it = vocab_.find(word); it != vocab_.end()) {
            out->push_back(it->second);
            return;
        }
    }
    // Symbols as a doubly linked list over a vector; a merged-away symbol is not alive.
    struct Sym {
        int32_t id;
        int32_t prev;
        int32_t next;
        bool alive;
    };
    thread_local std::vector<int32_t> ids;
    thread_local std::vector<Sym> syms;
    ids.clear();
    initialSymbols(word, &ids);
    const int32_t n = static_cast<int32_t>(ids.size());
    if (n <= 1) {
        out->insert(out->end(), ids.begin(), ids.end());
        return;
    }
    syms.resize(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
        syms[i] = Sym{ids[i], i - 1, i + 1 < n ? i + 1 : -1, true};
    }
    // Candidate merges ordered by (rank, position): the lowest rank first, the leftmost on
    // ties. Entries go stale when a neighbour merges; they are re-checked when popped.
    struct Cand {
        int32_t rank;
        int32_t pos;
        int32_t new_id;
        bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    thread_local std::vector<Cand> heap;
    heap.clear();
    const auto push = [&](int32_t pos) {
        const int32_t next = syms[pos].next;
        if (next < 0) {
            return;
        }
        if (const Merge* m = findMerge(syms[pos].id, syms[next].id)) {
            heap.push_back(Cand{m->rank, pos, m->new_id});
            std::push_heap(heap.begin(), heap.end(), std::greater<>());
        }
    };
    for (int32_t i = 0; i + 1 < n; ++i) {
        push(i);
    }
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), std::greater<>());
        const Cand top = heap.back();
        heap.pop_back();
        Sym& left = syms[top.pos];
        if (!left.alive || left.next < 0) {
            continue;
        }
        Sym& right = syms[left.next];
        const Merge* m = findMerge(left.id, right.id);
        if (m == nullptr || m->new_id != top.new_id) {
            continue;  // stale: the pair at this position changed since it was queued
        }
        left.id = top.new_id;
        right.alive = false;
        left.next = right.next;
        if (left.next >= 0) {
            syms[left.next].prev = top.pos;
        }
        if (left.prev >= 0) {
            push(left.prev);
        }
        push(top.pos);
    }
    for (int32_t i = 0; i >= 0; i = syms[i].next) {
        out->push_back(syms[i].id);
    }
}

}  // namespace atlas::bubbletea::tok
