// The handle table behind every handle NCCL holds (plugin/handle_table.h) and the request
// tokens that name a comm's entry (plugin/requests.h): a token is recognised from the table
// alone, so a stale, foreign or wrong-kind value is refused without touching its memory.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "plugin/handle_table.h"
#include "plugin/requests.h"

namespace atlas::plugin {
namespace {

uint64_t bits(const void* p) {
    return reinterpret_cast<uint64_t>(p);
}

TEST(HandleTable, TokensAreRecognisedByKindAndNeverLookLikePointers) {
    HandleTable t;
    int a = 0, b = 0;
    void* ta = t.add(HandleKind::kSend, &a).value();
    void* tb = t.add(HandleKind::kRecv, &b).value();
    EXPECT_EQ(t.find(HandleKind::kSend, ta), &a);
    EXPECT_EQ(t.find(HandleKind::kRecv, tb), &b);
    EXPECT_EQ(t.find(HandleKind::kRecv, ta), nullptr) << "wrong kind";
    EXPECT_EQ(t.find(HandleKind::kSend, tb), nullptr) << "wrong kind";
    for (void* tok : {ta, tb}) {
        EXPECT_NE(bits(tok) >> 63, 0u) << "never a user-space address";
        EXPECT_NE(tok, reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION));
    }
    EXPECT_EQ(HandleTable::kindOf(bits(ta)), HandleKind::kSend);
    EXPECT_EQ(t.live(), 2u);
    int on_stack = 0;
    for (const void* foreign :
         {static_cast<const void*>(nullptr), static_cast<const void*>(&a),
          static_cast<const void*>(&on_stack), reinterpret_cast<const void*>(1),
          reinterpret_cast<const void*>(~0ull),
          reinterpret_cast<const void*>(bits(ta) ^ (1ull << 30))}) {
        EXPECT_EQ(t.find(HandleKind::kSend, foreign), nullptr) << foreign;
        EXPECT_EQ(t.remove(HandleKind::kSend, foreign), nullptr) << foreign;
    }
    EXPECT_EQ(t.remove(HandleKind::kSend, ta), &a);
    EXPECT_EQ(t.remove(HandleKind::kSend, ta), nullptr) << "removed twice";
    EXPECT_EQ(t.find(HandleKind::kSend, ta), nullptr) << "stale";
    EXPECT_EQ(t.remove(HandleKind::kRecv, tb), &b);
    EXPECT_EQ(t.live(), 0u);
    EXPECT_TRUE(t.releaseStorage());
}

TEST(HandleTable, AReusedEntryGetsANewTokenAndTheOldOneStaysDead) {
    HandleTable t;
    int a = 0, b = 0;
    void* ta = t.add(HandleKind::kListen, &a).value();
    ASSERT_EQ(t.remove(HandleKind::kListen, ta), &a);
    void* tb = t.add(HandleKind::kListen, &b).value();
    EXPECT_EQ(HandleTable::indexOf(bits(ta)), HandleTable::indexOf(bits(tb))) << "entry reused";
    EXPECT_NE(ta, tb);
    EXPECT_EQ(t.find(HandleKind::kListen, ta), nullptr);
    EXPECT_EQ(t.find(HandleKind::kListen, tb), &b);
    HandleKind kind{};
    EXPECT_EQ(t.findAt(HandleTable::indexOf(bits(tb)), &kind), &b);
    EXPECT_EQ(kind, HandleKind::kListen);
    EXPECT_EQ(t.findAt(HandleTable::kCapacity, &kind), nullptr);
    EXPECT_EQ(t.findAt(12345, &kind), nullptr) << "never used";
    EXPECT_FALSE(t.releaseStorage()) << "a token is live";
    EXPECT_EQ(t.remove(HandleKind::kListen, tb), &b);
    EXPECT_TRUE(t.releaseStorage());
    EXPECT_EQ(t.find(HandleKind::kListen, tb), nullptr) << "after the storage is gone";
}

TEST(HandleTable, RemoveAllTakesOneKindOnly) {
    HandleTable t;
    std::vector<int> objs(10);
    std::vector<void*> tokens;
    for (size_t i = 0; i < objs.size(); ++i) {
        tokens.push_back(t.add(i % 2 == 0 ? HandleKind::kMr : HandleKind::kCtx, &objs[i]).value());
    }
    std::set<void*> removed;
    t.removeAll(HandleKind::kMr, [&](void* obj) { removed.insert(obj); });
    EXPECT_EQ(removed.size(), 5u);
    for (size_t i = 0; i < objs.size(); ++i) {
        const bool mr = i % 2 == 0;
        EXPECT_EQ(removed.count(&objs[i]), mr ? 1u : 0u);
        EXPECT_EQ(t.find(mr ? HandleKind::kMr : HandleKind::kCtx, tokens[i]),
                  mr ? nullptr : &objs[i]);
    }
    t.removeAll(HandleKind::kCtx, [](void*) {});
    EXPECT_EQ(t.live(), 0u);
    EXPECT_TRUE(t.releaseStorage());
}

TEST(HandleTable, FullTableIsAnErrorAndRecovers) {
    auto t = std::make_unique<HandleTable>();
    int obj = 0;
    std::vector<void*> tokens;
    tokens.reserve(HandleTable::kCapacity);
    for (uint32_t i = 0; i < HandleTable::kCapacity; ++i) {
        auto tok = t->add(HandleKind::kMr, &obj);
        ASSERT_TRUE(tok.isOk()) << i;
        tokens.push_back(tok.value());
    }
    std::set<void*> distinct(tokens.begin(), tokens.end());
    EXPECT_EQ(distinct.size(), tokens.size());
    auto full = t->add(HandleKind::kMr, &obj);
    ASSERT_FALSE(full.isOk());
    EXPECT_EQ(full.status().code(), Code::kSystem);
    EXPECT_NE(full.status().message().find("handle table full"), std::string::npos);
    ASSERT_EQ(t->remove(HandleKind::kMr, tokens[777]), &obj);
    ASSERT_TRUE(t->add(HandleKind::kMr, &obj).isOk());
    t->removeAll(HandleKind::kMr, [](void*) {});
    EXPECT_TRUE(t->releaseStorage());
}

TEST(RequestTokens, NameTheCommEntryAndDieWhenDone) {
    HandleTable t;
    int comm = 0;
    void* comm_token = t.add(HandleKind::kRecv, &comm).value();
    RequestPool pool(RequestOp::kRecv, 0, 4, 4096);
    pool.bindHandles(comm_token);
    auto* inner = reinterpret_cast<transport::Request*>(0x1000);  // never dereferenced
    PluginRequest* r = pool.reserve();
    ASSERT_NE(r, nullptr);
    pool.posted(r, inner, 64, nullptr);
    void* h = RequestPool::handleOf(r);
    EXPECT_EQ(HandleTable::kindOf(bits(h)), HandleKind::kRequest);
    EXPECT_EQ(t.find(HandleKind::kRecv, h), nullptr) << "a request is not a comm";
    uint32_t owner = 0;
    ASSERT_TRUE(RequestPool::ownerIndex(h, &owner));
    EXPECT_EQ(owner, HandleTable::indexOf(bits(comm_token)));
    EXPECT_EQ(pool.find(h), r);
    EXPECT_FALSE(RequestPool::ownerIndex(comm_token, &owner)) << "a comm is not a request";
    EXPECT_FALSE(RequestPool::ownerIndex(r, &owner)) << "the entry's address is not a handle";
    EXPECT_FALSE(RequestPool::ownerIndex(nullptr, &owner));

    pool.completed(r, 64);
    EXPECT_EQ(pool.find(h), nullptr) << "reported done";
    // Every entry reused many times: an old token never names the new request of its entry.
    std::set<void*> seen{h};
    for (int i = 0; i < 200; ++i) {
        PluginRequest* q = pool.reserve();
        ASSERT_NE(q, nullptr);
        pool.posted(q, inner, 8, nullptr);
        void* hq = RequestPool::handleOf(q);
        EXPECT_TRUE(seen.insert(hq).second) << "token reused at post " << i;
        EXPECT_EQ(pool.find(h), nullptr);
        pool.completed(q, 8);
    }

    // A later comm in the same table entry: the old comm's request tokens name nothing in it.
    ASSERT_EQ(t.remove(HandleKind::kRecv, comm_token), &comm);
    void* comm2_token = t.add(HandleKind::kRecv, &comm).value();
    ASSERT_EQ(HandleTable::indexOf(bits(comm2_token)), owner);
    RequestPool pool2(RequestOp::kRecv, 0, 4, 4096);
    pool2.bindHandles(comm2_token);
    std::vector<PluginRequest*> live;
    for (int i = 0; i < RequestPool::kEntries; ++i) {
        PluginRequest* q = pool2.reserve();
        pool2.posted(q, inner, 8, nullptr);
        live.push_back(q);
    }
    for (void* old : seen) {
        EXPECT_EQ(pool2.find(old), nullptr);
    }
    for (PluginRequest* q : live) {
        pool2.completed(q, 8);
    }
    ASSERT_EQ(t.remove(HandleKind::kRecv, comm2_token), &comm);
    EXPECT_TRUE(t.releaseStorage());
}

}  // namespace
}  // namespace atlas::plugin
