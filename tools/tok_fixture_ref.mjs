// tok_fixture_ref.mjs — what Hugging Face `tokenizers` answers for the cases
// of tests/test_tokenizer.c on the fixtures of tests/data/tok/ (the expected
// values there come from this):
//   NODE_PATH=build/tok-conf/node_modules node tools/tok_fixture_ref.mjs
// (make tok-conformance installs the packages).
import fs from "node:fs";
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const { Tokenizer } = require("tokenizers");

const D = "tests/data/tok/";
function variant(file, edit) {
  const j = JSON.parse(fs.readFileSync(D + file, "utf8"));
  edit(j);
  return Tokenizer.fromString(JSON.stringify(j));
}
const cases = [
  ["merges.json", null, ["abc", "ab", "abd", "dddd", "xax", "a b  c", "bca", "[X]abc[X]", ""]],
  ["sp.json", null, ["hi", "hi é", "<s>hi", "hi!", " hi", "日", "h</s>i", "x", ""]],
  ["metaspace.json", null, ["a b", " a", "<s>a b", "ab  b", "<s>", " <s>a", "a<s>"]],
  ["metaspace.json", (j) => { j.pre_tokenizer.prepend_scheme = "always"; j.decoder.prepend_scheme = "always"; },
    ["a b", " a", "<s>a b"]],
  ["metaspace.json", (j) => { j.pre_tokenizer.prepend_scheme = "never"; j.decoder.prepend_scheme = "never"; j.pre_tokenizer.split = false; },
    ["a b", "<s>a b"]],
  ["split.json", null, ["a-b", "a--b"]],
  ["split.json", (j) => { j.pre_tokenizer.behavior = "Removed"; }, ["a-b", "a--b"]],
  ["split.json", (j) => { j.pre_tokenizer.behavior = "MergedWithPrevious"; }, ["a-b", "a--b"]],
  ["split.json", (j) => { j.pre_tokenizer.behavior = "MergedWithNext"; }, ["a-b", "a--b"]],
  ["split.json", (j) => { j.pre_tokenizer.behavior = "Contiguous"; }, ["a-b", "a--b"]],
  ["split.json", (j) => { j.pre_tokenizer.behavior = "Removed"; j.pre_tokenizer.invert = true; }, ["a-b", "a--b"]],
  ["bytelevel.json", null, ["fi fi", " fi", "\ufb01", "\u00e9", "fi<|endoftext|>fi"]],
];
for (const [file, edit, texts] of cases) {
  const t = edit ? variant(file, edit) : Tokenizer.fromFile(D + file);
  for (const s of texts) {
    const ids = (await t.encode(s, null, { addSpecialTokens: false })).getIds();
    const sp = (await t.encode(s, null, { addSpecialTokens: true })).getIds();
    console.log(`${file}${edit ? " (" + edit.toString().slice(8, 80) + ")" : ""} ${JSON.stringify(s)} -> [${ids}] special [${sp}] decode ${JSON.stringify(await t.decode(ids, false))} skip ${JSON.stringify(await t.decode(sp, true))}`);
  }
}
{ // test_strip_stream: Strip with stop 1
  const t = variant("sp.json", (j) => { j.decoder.decoders[3].stop = 1; });
  for (const ids of [[3, 7, 3], [8, 9, 3], [3, 7, 3, 6, 3]])
    console.log(`sp.json (Strip stop 1) decode [${ids}] -> ${JSON.stringify(await t.decode(ids, false))}`);
}
{ // test_affixes: continuing_subword_prefix "##", end_of_word_suffix "</w>"
  const t = Tokenizer.fromFile(D + "affixes.json");
  for (const s of ["a", "ab", "abc", "abb", "b", "ba", "a b  abc", "axb"])
    console.log(`affixes.json ${JSON.stringify(s)} -> [${(await t.encode(s, null, { addSpecialTokens: false })).getIds()}]`);
}
{ // test_bytelevel_nfkc: ignore_merges (Llama 3) takes a word that is a token whole
  const t = variant("bytelevel.json", (j) => { j.model.ignore_merges = true; });
  for (const s of ["fi fi", " f"])
    console.log(`bytelevel.json (ignore_merges) ${JSON.stringify(s)} -> [${(await t.encode(s, null, { addSpecialTokens: false })).getIds()}]`);
}
